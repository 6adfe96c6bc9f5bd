-- A hostile role with CREATE on the schema snowseq is installed into
-- plants look-alikes of the functions and operators the install script
-- uses.  None of them may ever run: every reference in the script is
-- qualified.
CREATE DATABASE snowseq_security TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
\c snowseq_security
SET client_min_messages = notice;
CREATE ROLE regress_hijacker;
GRANT CREATE ON SCHEMA public TO regress_hijacker;
SET ROLE regress_hijacker;
CREATE TABLE public.hijack_log (what text);
GRANT INSERT ON public.hijack_log TO PUBLIC;
CREATE FUNCTION public.isempty(int8range) RETURNS boolean LANGUAGE plpgsql AS
	$$BEGIN INSERT INTO public.hijack_log VALUES ('isempty'); RETURN pg_catalog.isempty($1); END$$;
CREATE FUNCTION public.lower(int8range) RETURNS bigint LANGUAGE plpgsql AS
	$$BEGIN INSERT INTO public.hijack_log VALUES ('lower'); RETURN pg_catalog.lower($1); END$$;
CREATE FUNCTION public.upper(int8range) RETURNS bigint LANGUAGE plpgsql AS
	$$BEGIN INSERT INTO public.hijack_log VALUES ('upper'); RETURN pg_catalog.upper($1); END$$;
CREATE FUNCTION public.int8range(bigint, bigint) RETURNS int8range LANGUAGE plpgsql AS
	$$BEGIN INSERT INTO public.hijack_log VALUES ('int8range'); RETURN pg_catalog.int8range($1, $2); END$$;
CREATE FUNCTION public.hijack_ge(bigint, integer) RETURNS boolean LANGUAGE plpgsql AS
	$$BEGIN INSERT INTO public.hijack_log VALUES ('>='); RETURN $1 OPERATOR(pg_catalog.>=) $2; END$$;
CREATE OPERATOR public.>= (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.hijack_ge);
CREATE FUNCTION public.hijack_minus(bigint, integer) RETURNS bigint LANGUAGE plpgsql AS
	$$BEGIN INSERT INTO public.hijack_log VALUES ('-'); RETURN $1 OPERATOR(pg_catalog.-) $2; END$$;
CREATE OPERATOR public.- (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.hijack_minus);
RESET ROLE;

-- the superuser installs snowseq into public and uses it
CREATE EXTENSION snowseq;
SELECT 5::bigint <@ int8range(1, 10) AS contained, int8range(1, 10) @> 12::bigint AS commuted,
	snowseq_key_range('k') @> (snowseq_gene('k')::bigint << 48) AS key_range,
	snowseq_gene_range(3) = int8range(3::bigint << 48, 4::bigint << 48) AS gene_range;
SELECT count(*) FROM snowseq_status;
SELECT count(*) AS hijacked_calls FROM public.hijack_log;

-- no object of the extension depends on an object outside pg_catalog and
-- the extension itself
SELECT DISTINCT pg_describe_object(d.refclassid, d.refobjid, 0) AS foreign_reference
FROM pg_depend d
JOIN pg_depend e ON e.classid = d.classid AND e.objid = d.objid AND e.deptype = 'e'
JOIN pg_extension x ON x.oid = e.refobjid AND x.extname = 'snowseq'
WHERE d.deptype = 'n'
  AND d.refclassid IN ('pg_proc'::regclass, 'pg_operator'::regclass)
  AND NOT EXISTS (SELECT 1 FROM pg_depend e2
                  WHERE e2.classid = d.refclassid AND e2.objid = d.refobjid
                    AND e2.deptype = 'e' AND e2.refobjid = x.oid)
  AND COALESCE((SELECT pronamespace FROM pg_proc WHERE oid = d.refobjid AND d.refclassid = 'pg_proc'::regclass),
               (SELECT oprnamespace FROM pg_operator WHERE oid = d.refobjid AND d.refclassid = 'pg_operator'::regclass))
      <> 'pg_catalog'::regnamespace
ORDER BY 1;

-- the same for an update from 1.0: its script and the upgrade script
-- reach only what they mean to
DROP EXTENSION snowseq;
CREATE EXTENSION snowseq VERSION '1.0';
ALTER EXTENSION snowseq UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'snowseq';
SELECT 5::bigint <@ int8range(1, 10) AS contained, 5::bigint <@ int8range(NULL, '-9223372036854775808') AS before_min;
SELECT count(*) AS hijacked_calls FROM public.hijack_log;

\c contrib_regression
DROP DATABASE snowseq_security;
DROP ROLE regress_hijacker;
