--@block overloads
-- ---- overloads a role that may create in a schema cannot plant (1.3) ----
-- A call resolves to an overload of the exact argument types before one it
-- reaches through an implicit cast, whatever schema of the search path
-- holds it.  Without these, snowseq_gene_next(uid) on an integer column
-- would run a snowseq_gene_next(integer) the database owner created in
-- public (PostgreSQL 15 and later: it owns public), as the caller, a
-- superuser too.  Each mirrors the function of its key cast to bigint or
-- text: same result, markings, comment and (PUBLIC's) rights; a role
-- cannot create a function of the same name and arguments in the schema
-- that holds it.  docs/security.md says what they cover and what not.
CREATE FUNCTION @extschema@.snowseq_gene(key integer) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_int4'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene(integer) IS 'gene (0..32767) of an integer key, as snowseq_gene(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_gene_next(key integer) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_int4'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_next(integer) IS 'next gene ID of an integer key, as snowseq_gene_next(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_gene_uuid(key integer) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_int4'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(integer) IS 'next 128-bit gene ID of an integer key, as snowseq_gene_uuid(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_key_range(key integer) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_key_range(integer) IS 'the IDs of the gene of an integer key, as snowseq_key_range(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_route_key(key integer) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_route_key(integer) IS 'shard that holds the rows of an integer key, as snowseq_route_key(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_gene(key smallint) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_int2'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene(smallint) IS 'gene (0..32767) of a smallint key, as snowseq_gene(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_gene_next(key smallint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_int2'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_next(smallint) IS 'next gene ID of a smallint key, as snowseq_gene_next(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_gene_uuid(key smallint) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_int2'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(smallint) IS 'next 128-bit gene ID of a smallint key, as snowseq_gene_uuid(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_key_range(key smallint) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_key_range(smallint) IS 'the IDs of the gene of a smallint key, as snowseq_key_range(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_route_key(key smallint) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_route_key(smallint) IS 'shard that holds the rows of a smallint key, as snowseq_route_key(key::bigint)';
CREATE FUNCTION @extschema@.snowseq_gene(key varchar) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_varchar'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene(varchar) IS 'gene (0..32767) of a varchar key, as snowseq_gene(key::text)';
CREATE FUNCTION @extschema@.snowseq_gene_next(key varchar) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_varchar'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_next(varchar) IS 'next gene ID of a varchar key, as snowseq_gene_next(key::text)';
CREATE FUNCTION @extschema@.snowseq_gene_uuid(key varchar) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_varchar'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(varchar) IS 'next 128-bit gene ID of a varchar key, as snowseq_gene_uuid(key::text)';
CREATE FUNCTION @extschema@.snowseq_key_range(key varchar) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_key_range(varchar) IS 'the IDs of the gene of a varchar key, as snowseq_key_range(key::text)';
CREATE FUNCTION @extschema@.snowseq_route_key(key varchar) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_route_key(varchar) IS 'shard that holds the rows of a varchar key, as snowseq_route_key(key::text)';
CREATE FUNCTION @extschema@.snowseq_gene(key bpchar) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_bpchar'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene(bpchar) IS 'gene (0..32767) of a char(n) key, as snowseq_gene(key::text)';
CREATE FUNCTION @extschema@.snowseq_gene_next(key bpchar) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_bpchar'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_next(bpchar) IS 'next gene ID of a char(n) key, as snowseq_gene_next(key::text)';
CREATE FUNCTION @extschema@.snowseq_gene_uuid(key bpchar) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_bpchar'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(bpchar) IS 'next 128-bit gene ID of a char(n) key, as snowseq_gene_uuid(key::text)';
CREATE FUNCTION @extschema@.snowseq_key_range(key bpchar) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_key_range(bpchar) IS 'the IDs of the gene of a char(n) key, as snowseq_key_range(key::text)';
CREATE FUNCTION @extschema@.snowseq_route_key(key bpchar) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_route_key(bpchar) IS 'shard that holds the rows of a char(n) key, as snowseq_route_key(key::text)';
CREATE FUNCTION @extschema@.snowseq_gene(key name) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_name'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene(name) IS 'gene (0..32767) of a name key, as snowseq_gene(key::text)';
CREATE FUNCTION @extschema@.snowseq_gene_next(key name) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_name'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_next(name) IS 'next gene ID of a name key, as snowseq_gene_next(key::text)';
CREATE FUNCTION @extschema@.snowseq_gene_uuid(key name) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_name'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(name) IS 'next 128-bit gene ID of a name key, as snowseq_gene_uuid(key::text)';
CREATE FUNCTION @extschema@.snowseq_key_range(key name) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_key_range(name) IS 'the IDs of the gene of a name key, as snowseq_key_range(key::text)';
CREATE FUNCTION @extschema@.snowseq_route_key(key name) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_route_key(name) IS 'shard that holds the rows of a name key, as snowseq_route_key(key::text)';

-- A role that is not a superuser and may create in snowseq's schema can
-- still plant overloads of argument types no function above takes (a
-- string literal for a regclass, a numeric key), and where that schema
-- is public on PostgreSQL 15 and later its owner, the database owner, can
-- drop the schema and snowseq with it.  A WARNING, not a refusal: a
-- database whose owner is its trusted administrator is common, and an
-- installation in public could not be updated at all (snowseq is not
-- relocatable).  Each update script ends with this check too.  Predefined
-- roles are left out: pg_database_owner stands for the database owner,
-- checked as itself, and the others may create only as any role may.
DO $snowseq_schema_check$
DECLARE
	creators text;
BEGIN
	SELECT pg_catalog.string_agg(c.who, ', ' ORDER BY c.who)
	  INTO creators
	  FROM (SELECT pg_catalog.quote_ident(r.rolname::pg_catalog.text) AS who
			  FROM pg_catalog.pg_roles r
			 WHERE NOT r.rolsuper
			   AND NOT pg_catalog.starts_with(r.rolname::pg_catalog.text, 'pg_')
			   AND pg_catalog.has_schema_privilege(r.oid, '@extschema@'::pg_catalog.regnamespace::pg_catalog.oid, 'CREATE')
			UNION ALL
			SELECT 'PUBLIC'
			  FROM pg_catalog.pg_namespace n,
				   pg_catalog.aclexplode(n.nspacl) a
			 WHERE n.oid OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
			   AND a.grantee OPERATOR(pg_catalog.=) 0
			   AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE') c;
	IF creators IS NOT NULL THEN
		RAISE WARNING 'schema % of extension snowseq lets roles that are not superusers create objects in it: %',
			'@extschema@', creators
			USING DETAIL = 'Such a role can create functions that overload snowseq''s with argument types snowseq has no function for; a superuser''s unqualified call that resolves to one runs it with the superuser''s rights.',
				  HINT = 'Install snowseq into a schema only superusers can create in (CREATE SCHEMA snowseq; CREATE EXTENSION snowseq SCHEMA snowseq), and call it qualified (snowseq.snowseq_gene_next(...)) or with no schema others can create in on the search path.';
	END IF;
END
$snowseq_schema_check$;
-- ---- end of overloads and schema check (1.3) ----
--@end
