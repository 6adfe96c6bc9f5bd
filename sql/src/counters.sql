------------------------------------------------------------------------
-- Named counters and formatted serials
------------------------------------------------------------------------

-- (OPERATOR() has the precedence of any other operator, hence the
-- parentheses below.)
-- The definitions; pg_dump keeps them.  The values live in shared memory,
-- made durable by the same reservations as the clock.  Everyone may read
-- the definitions; creating and dropping needs INSERT and UPDATE on it.
CREATE TABLE @extschema@.snowseq_counters (
	name text PRIMARY KEY
		CHECK (pg_catalog.octet_length(name) OPERATOR(pg_catalog.>=) 1
			   AND pg_catalog.octet_length(name) OPERATOR(pg_catalog.<=) 63),
	kind text NOT NULL
		CHECK (kind OPERATOR(pg_catalog.=) 'counter' OR kind OPERATOR(pg_catalog.=) 'serial'),
	start bigint NOT NULL CHECK (start OPERATOR(pg_catalog.>=) 0),
	nodes integer NOT NULL CHECK (nodes OPERATOR(pg_catalog.>=) 1),
	format text,
	time_zone text,
	restart_base bigint NOT NULL DEFAULT 0,
	dropped boolean NOT NULL DEFAULT false,
	created timestamptz NOT NULL DEFAULT pg_catalog.now(),
	maximum bigint
);
COMMENT ON TABLE @extschema@.snowseq_counters IS
	'named counters and serials: their definitions, written by snowseq''s functions alone (values: shared memory and the state file; records and rights: the floors in schema snowseq_state)';
COMMENT ON COLUMN @extschema@.snowseq_counters.maximum IS
	'a counter''s largest value; NULL: the largest bigint (a serial''s numbers are bounded by its digits)';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.snowseq_counters', '');
REVOKE ALL ON TABLE @extschema@.snowseq_counters FROM PUBLIC;

-- every change of a definition, however applied, reaches the backends'
-- copies
CREATE FUNCTION @extschema@.snowseq_counters_changed() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_counters_changed'
	LANGUAGE C;
CREATE TRIGGER snowseq_counters_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_counters
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_counters_changed();
CREATE TRIGGER snowseq_counters_row_changed
	AFTER INSERT OR UPDATE OR DELETE ON @extschema@.snowseq_counters
	FOR EACH ROW EXECUTE FUNCTION @extschema@.snowseq_counters_changed();
ALTER TABLE @extschema@.snowseq_counters ENABLE ALWAYS TRIGGER snowseq_counters_changed;
ALTER TABLE @extschema@.snowseq_counters ENABLE ALWAYS TRIGGER snowseq_counters_row_changed;

-- Not STRICT: a NULL argument is an ERROR naming it (maximum: none).
--@block create_counter
CREATE FUNCTION @extschema@.snowseq_create_counter(name text, start bigint DEFAULT 1,
	nodes integer DEFAULT 1, restart boolean DEFAULT false, maximum bigint DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_create_counter_1_3'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_create_counter(text, bigint, integer, boolean, bigint) IS
	'a named counter owned by the calling role: values start, start + nodes, ... up to maximum on node 0, offset by node_id % nodes elsewhere; its owner may continue a dropped one (restart => true starts it over)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_create_counter(text, bigint, integer, boolean, bigint) FROM PUBLIC;
--@end

CREATE FUNCTION @extschema@.snowseq_create_serial(name text, format text, time_zone text DEFAULT 'UTC',
	start bigint DEFAULT 1, nodes integer DEFAULT 1) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_create_serial'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_create_serial(text, text, text, bigint, integer) IS
	'a formatted serial such as ''INV-YYYYMMDD-######'' owned by the calling role: its number starts again at start in each day, month or year of the format, in time_zone';
REVOKE ALL ON FUNCTION @extschema@.snowseq_create_serial(text, text, text, bigint, integer) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_drop_counter(name text) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_drop_counter'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_drop_counter(text) IS
	'no more values from a counter or serial (its owner only); created again by its owner with the same definition it continues';

-- VOLATILE; PARALLEL UNSAFE, as nextval() is: taking one may record the
-- counter's floor (a sequence).  Not for PUBLIC: a role could burn
-- another's numbers.
CREATE FUNCTION @extschema@.snowseq_counter_next(name text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_counter_next'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_counter_next(text) IS
	'next value of a named counter (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_counter_next(text) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_serial(name text) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_serial'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_serial(text) IS
	'next formatted serial number (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_serial(text) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_counter_raise(name text, above bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_counter_raise'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_counter_raise(text, bigint) IS
	'make the next value of a counter greater than above (a serial: the next number of its period); after a restore without its record, or taking over from a sequence; never lowers; returns that next value';
REVOKE ALL ON FUNCTION @extschema@.snowseq_counter_raise(text, bigint) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_counter_state(name text, OUT issued bigint, OUT reserved bigint)
	AS 'MODULE_PATHNAME', 'snowseq_counter_state'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_counter_state(text) IS
	'raw reservation of a counter of this database: last value taken and durable bound (for the snowseq_counter_status view)';


-- ---- counters: owners and grants (1.2) ----
-- A counter or serial has an owner (the role that created it) and USAGE
-- grants, as a sequence has: only roles with the owner's privileges, or
-- with USAGE granted to them, to a role they are members of, or to PUBLIC,
-- draw values, raise it or see its state.  EXECUTE on the functions is
-- still needed as well.  Since 1.3 both are privileges on the counter's
-- floor (see "one authority" below).

-- Only a role with the counter owner's privileges may grant and revoke:
-- the functions check it, EXECUTE is everyone's.  role is a role name as
-- pg_roles has it, or 'public'.
CREATE FUNCTION @extschema@.snowseq_grant_counter(name text, role text) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_grant_counter'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_grant_counter(text, text) IS
	'lets a role (or public) draw from a counter or serial, raise it and see its state: GRANT USAGE on its floor, by its owner';
CREATE FUNCTION @extschema@.snowseq_revoke_counter(name text, role text) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_revoke_counter'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_revoke_counter(text, text) IS
	'takes back a grant of snowseq_grant_counter (REVOKE USAGE on its floor); it holds from the next call of every session';

-- ---- end counters: owners and grants ----

-- ---- counters: one authority (1.3) ----
-- What a counter issued is recorded where only snowseq writes: its floor,
-- a sequence in the schema snowseq_state, which snowseq makes on first need
-- in every database (owned by the bootstrap superuser, no CREATE for any
-- other role), whatever schema the extension is in, and which DROP
-- EXTENSION leaves.  A definition that arrives without its floor's value
-- (pg_dump --table, --data-only, --exclude-schema) is refused until the
-- value arrives or snowseq_counter_raise() says where the counter stands.
-- The definitions are written by snowseq's functions alone, as the table's
-- owner, and shown through snowseq_counter_status, counter by counter to
-- the roles that may use them.  A counter's rights are USAGE grants on its
-- floor, its owner the role holding USAGE WITH GRANT OPTION: PostgreSQL's
-- own privileges, dumped by role name, kept by DROP ROLE, taken back by
-- DROP OWNED.  Creating a counter is EXECUTE on the create functions.


--@block counter_status
-- No row for a counter the caller may not use: the view shows each role
-- its own counters.
CREATE FUNCTION @extschema@.snowseq_counter_state_1_3(name text,
	OUT issued bigint, OUT reserved bigint, OUT last_value bigint, OUT owner regrole,
	OUT recorded boolean, OUT capacity bigint, OUT used bigint, OUT remaining bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_counter_state_1_3'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE ROWS 1;
COMMENT ON FUNCTION @extschema@.snowseq_counter_state_1_3(text) IS
	'a counter of this database the caller may use: raw reservation, last value, owner, whether its floor holds its record, and what is left of its space (no row otherwise)';
CREATE VIEW @extschema@.snowseq_counter_status AS
	SELECT c.name, c.kind, c.start, c.nodes, c.maximum, c.format, c.time_zone, c.dropped,
		s.last_value, s.issued, s.reserved, s.owner, s.recorded, s.capacity, s.used, s.remaining
	FROM @extschema@.snowseq_counters c
	CROSS JOIN LATERAL @extschema@.snowseq_counter_state_1_3(c.name) s;
COMMENT ON VIEW @extschema@.snowseq_counter_status IS
	'named counters and serials of this database that the caller may use: definition, last value this node issued (serials: in their period), raw reservation, owner, whether the record is there, and what is left (serials: of the current period)';
GRANT SELECT ON @extschema@.snowseq_counter_status TO PUBLIC;
--@end
-- ---- end of counters: one authority (1.3) ----
