-- Who may draw from which counter: a counter or serial has an owner (the
-- role that created it) and USAGE grants: PostgreSQL privileges on its
-- floor sequence in schema snowseq_state.  EXECUTE on the functions is
-- needed as well, as before; creating a counter is EXECUTE on the create
-- functions.
SET timezone = 'UTC';
CREATE ROLE regress_counter_owner;
CREATE ROLE regress_counter_user;
CREATE ROLE regress_counter_other;
CREATE ROLE regress_counter_group;
GRANT EXECUTE ON FUNCTION snowseq_counter_next(text), snowseq_serial(text),
	snowseq_counter_raise(text, bigint)
	TO regress_counter_owner, regress_counter_user, regress_counter_other;
GRANT EXECUTE ON FUNCTION snowseq_create_counter(text, bigint, integer, boolean, bigint),
	snowseq_create_serial(text, text, text, bigint, integer) TO regress_counter_owner;
-- the grants on a counter's floor, without the bootstrap superuser's name
CREATE VIEW rights_grants AS
	SELECT s.name, a.grantee::regrole AS grantee, a.privilege_type,
		a.is_grantable, a.grantor = c.relowner AS by_snowseq
	FROM snowseq_counter_status s, pg_class c, aclexplode(c.relacl) a
	WHERE c.relnamespace = 'snowseq_state'::regnamespace
		AND obj_description(c.oid, 'pg_class') LIKE '%"' || s.name || '"%'
		AND a.grantee <> c.relowner AND s.name LIKE 'rights_%';

-- the creating role owns the counter; nobody else may use it yet
SET ROLE regress_counter_owner;
SELECT snowseq_create_counter('rights_c');
SELECT snowseq_create_serial('rights_s', 'R-######');
SELECT snowseq_counter_next('rights_c') AS owner_draws;
SELECT snowseq_serial('rights_s') AS owner_serial;
RESET ROLE;
SELECT name, owner FROM snowseq_counter_status WHERE name LIKE 'rights_%' ORDER BY name;
SELECT * FROM rights_grants ORDER BY 1, 2;

-- an ordinary role with EXECUTE but no grant: refused for every use
SET ROLE regress_counter_user;
SELECT snowseq_counter_next('rights_c');
SELECT snowseq_serial('rights_s');
SELECT snowseq_counter_raise('rights_c', 100);
SELECT * FROM snowseq_counter_state('rights_c');
SELECT count(*) AS sees_in_view FROM snowseq_counter_status WHERE name LIKE 'rights_%';
DO $$
BEGIN
	PERFORM snowseq_counter_next('rights_c');
EXCEPTION WHEN insufficient_privilege THEN
	RAISE NOTICE 'SQLSTATE %: %', SQLSTATE, SQLERRM;
END$$;
SET ROLE regress_counter_other;
SELECT count(*) AS sees_in_view FROM snowseq_counter_status WHERE name LIKE 'rights_%';
SET ROLE regress_counter_user;
-- and it may not grant itself
SELECT snowseq_grant_counter('rights_c', 'regress_counter_user');
RESET ROLE;

-- the owner grants: the grantee draws, raises and sees the state
SET ROLE regress_counter_owner;
SELECT snowseq_grant_counter('rights_c', 'regress_counter_user');
SELECT snowseq_grant_counter('rights_s', 'regress_counter_user');
SELECT snowseq_grant_counter('rights_c', 'regress_counter_user');
RESET ROLE;
SELECT * FROM rights_grants ORDER BY 1, 2;
SET ROLE regress_counter_user;
SELECT snowseq_counter_next('rights_c') AS granted;
SELECT snowseq_serial('rights_s') AS granted_serial;
SELECT snowseq_counter_raise('rights_c', 100) AS raised;
SELECT issued > 0 AS sees_state FROM snowseq_counter_state('rights_c');
SELECT name, owner FROM snowseq_counter_status WHERE name LIKE 'rights_%' ORDER BY name;
-- a grantee cannot pass the counter on, nor take it from another
SELECT snowseq_grant_counter('rights_c', 'regress_counter_other');
SELECT snowseq_revoke_counter('rights_c', 'regress_counter_user');
RESET ROLE;

-- SET ROLE switches in the same session: the decision is per user
SET ROLE regress_counter_other;
SELECT snowseq_counter_next('rights_c');
SET ROLE regress_counter_user;
SELECT snowseq_counter_next('rights_c') AS user_again;
SET ROLE regress_counter_other;
SELECT snowseq_counter_next('rights_c');
RESET ROLE;

-- revoke: refused at the next call of a session that drew before
SET ROLE regress_counter_user;
SELECT snowseq_counter_next('rights_c') AS before_revoke;
SET ROLE regress_counter_owner;
SELECT snowseq_revoke_counter('rights_c', 'regress_counter_user');
SET ROLE regress_counter_user;
SELECT snowseq_counter_next('rights_c');
SELECT snowseq_counter_raise('rights_c', 1000);
SELECT * FROM snowseq_counter_state('rights_c');
SELECT snowseq_serial('rights_s') AS serial_still_granted;
RESET ROLE;

-- a revoke rolled back takes nothing back
SET ROLE regress_counter_owner;
BEGIN;
SELECT snowseq_revoke_counter('rights_s', 'regress_counter_user');
ROLLBACK;
SET ROLE regress_counter_user;
SELECT snowseq_serial('rights_s') AS after_rollback;
RESET ROLE;

-- a grant to a role reaches its members, and leaves with the membership
SET ROLE regress_counter_owner;
SELECT snowseq_grant_counter('rights_c', 'regress_counter_group');
RESET ROLE;
GRANT regress_counter_group TO regress_counter_other;
SET ROLE regress_counter_other;
SELECT snowseq_counter_next('rights_c') AS via_group;
RESET ROLE;
REVOKE regress_counter_group FROM regress_counter_other;
SET ROLE regress_counter_other;
SELECT snowseq_counter_next('rights_c');
RESET ROLE;

-- a grant to public: every role with EXECUTE
SET ROLE regress_counter_owner;
SELECT snowseq_grant_counter('rights_c', 'PUBLIC');
SET ROLE regress_counter_other;
SELECT snowseq_counter_next('rights_c') AS via_public;
SET ROLE regress_counter_owner;
SELECT snowseq_revoke_counter('rights_c', 'public');
SET ROLE regress_counter_other;
SELECT snowseq_counter_next('rights_c');
RESET ROLE;

-- a member of the owner's role may use and grant it; a security definer
-- function draws with its owner's rights
GRANT regress_counter_owner TO regress_counter_other;
SET ROLE regress_counter_other;
SELECT snowseq_counter_next('rights_c') AS owner_member;
SELECT snowseq_grant_counter('rights_c', 'regress_counter_user');
RESET ROLE;
REVOKE regress_counter_owner FROM regress_counter_other;
CREATE FUNCTION rights_definer() RETURNS bigint LANGUAGE sql SECURITY DEFINER
	AS $$SELECT snowseq_counter_next('rights_c')$$;
ALTER FUNCTION rights_definer() OWNER TO regress_counter_owner;
SET ROLE regress_counter_other;
SELECT snowseq_counter_next('rights_c');
SELECT rights_definer() AS as_definer;
RESET ROLE;
-- a superuser may use every counter
SELECT snowseq_counter_next('rights_c') AS superuser;

-- bad input
SET ROLE regress_counter_owner;
SELECT snowseq_grant_counter('rights_c', 'regress_no_such_role');
SELECT snowseq_grant_counter('no_such_counter', 'regress_counter_user');
SELECT snowseq_grant_counter('rights_c', NULL);
SELECT snowseq_revoke_counter(NULL, 'regress_counter_user');
SELECT snowseq_grant_counter('rights_c', '"regress_counter_user"');
RESET ROLE;

-- the owner may drop its counter, nobody else
SET ROLE regress_counter_user;
SELECT snowseq_drop_counter('rights_c');
SET ROLE regress_counter_owner;
SELECT snowseq_drop_counter('rights_c');
RESET ROLE;
-- the table of definitions is snowseq's: no role may write it, even with
-- the rights 1.2 asked for
SET ROLE regress_counter_owner;
UPDATE snowseq_counters SET dropped = false WHERE name = 'rights_c';
SELECT count(*) FROM snowseq_counters;
RESET ROLE;
-- a role that holds a grant on a counter cannot be dropped
DROP ROLE regress_counter_user;

-- clean up
DROP FUNCTION rights_definer();
DROP VIEW rights_grants;
SELECT snowseq_drop_counter('rights_s');
DELETE FROM snowseq_counters WHERE name LIKE 'rights_%';
DROP OWNED BY regress_counter_owner, regress_counter_user, regress_counter_other, regress_counter_group;
DROP ROLE regress_counter_owner, regress_counter_user, regress_counter_other, regress_counter_group;

-- counters made by 1.1 have no owner: after the update they belong to the
-- owner of snowseq_counters and are granted to PUBLIC, so every role with
-- EXECUTE keeps drawing from them; counters made after it are owner-only
CREATE DATABASE snowseq_rights_upgrade TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
\c snowseq_rights_upgrade
CREATE EXTENSION snowseq VERSION '1.1';
CREATE ROLE regress_counter_old;
GRANT EXECUTE ON FUNCTION snowseq_counter_next(text) TO regress_counter_old;
SELECT snowseq_create_counter('old');
SET ROLE regress_counter_old;
SELECT snowseq_counter_next('old') AS under_1_1;
RESET ROLE;
ALTER EXTENSION snowseq UPDATE TO '1.2';
SELECT name, owner = (SELECT relowner FROM pg_class WHERE oid = 'snowseq_counters'::regclass)::regrole
	AS owned_by_table_owner, acl::text LIKE '{=U/%}' AS granted_to_public
FROM snowseq_counters;
SET ROLE regress_counter_old;
SELECT snowseq_counter_next('old') AS after_update;
SELECT name, last_value FROM snowseq_counter_status;
RESET ROLE;
SELECT snowseq_create_counter('new');
SET ROLE regress_counter_old;
SELECT snowseq_counter_next('new');
RESET ROLE;
-- a floor where 1.2 kept it, in the extension's schema, ahead of this
-- cluster's reservation (as a restore into this cluster leaves it)
SELECT format('CREATE SEQUENCE public.%I AS bigint MINVALUE -1 START -1',
	'snowseq_floor_' || left(encode(sha256(convert_to('old', 'UTF8')), 'hex'), 32)) \gexec
SELECT setval(c.oid, 500) AS old_floor FROM pg_class c
WHERE c.relname = 'snowseq_floor_' || left(encode(sha256(convert_to('old', 'UTF8')), 'hex'), 32);
-- the update to 1.3 moves records, owners and grants onto the floors in
-- snowseq_state: the counter continues above the old floor, the role
-- granted by 1.2 draws as before, the ungranted one is still refused
ALTER EXTENSION snowseq UPDATE TO '1.3';
SELECT count(*) AS columns_left FROM pg_attribute
WHERE attrelid = 'snowseq_counters'::regclass AND attname IN ('owner', 'acl') AND NOT attisdropped;
SET ROLE regress_counter_old;
SELECT snowseq_counter_next('old') > 500 AS above_old_floor;
SELECT snowseq_counter_next('new');
SELECT name, last_value FROM snowseq_counter_status;
RESET ROLE;
SELECT count(*) AS old_floors_left FROM pg_class
WHERE relname LIKE 'snowseq_floor_%' AND relnamespace = 'public'::regnamespace;
\c contrib_regression
DROP DATABASE snowseq_rights_upgrade;
DROP ROLE regress_counter_old;
