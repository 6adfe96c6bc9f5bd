/* snowseq--1.2--1.3.sql: upgrade of the snowseq extension from 1.2 to 1.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.3'" to load this file. \quit

-- Each change of 1.3 is a section of its own, marked
-- "-- ---- <part>: <what> (1.3) ----", in the same order as in
-- snowseq--1.3.sql.

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
ALTER TABLE @extschema@.snowseq_counters ADD COLUMN maximum bigint;
COMMENT ON COLUMN @extschema@.snowseq_counters.maximum IS
	'a counter''s largest value; NULL: the largest bigint (a serial''s numbers are bounded by its digits)';
-- Each counter's record and rights move onto its floor in snowseq_state:
-- the floor covers the highest of its floor in this schema, and what this
-- cluster's reservation allowed; the row's owner and grants become
-- grants on the floor; the old floor is dropped.
CREATE FUNCTION @extschema@.snowseq_counters_to_1_3() RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_counters_to_1_3'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
SELECT @extschema@.snowseq_counters_to_1_3();
DROP FUNCTION @extschema@.snowseq_counters_to_1_3();
DROP VIEW @extschema@.snowseq_counter_status;
ALTER TABLE @extschema@.snowseq_counters DROP COLUMN owner, DROP COLUMN acl;
REVOKE ALL ON TABLE @extschema@.snowseq_counters FROM PUBLIC;
COMMENT ON TABLE @extschema@.snowseq_counters IS
	'named counters and serials: their definitions, written by snowseq''s functions alone (values: shared memory and the state file; records and rights: the floors in schema snowseq_state)';

-- Not STRICT: a NULL argument is an ERROR naming it (maximum: none).
DROP FUNCTION @extschema@.snowseq_create_counter(text, bigint, integer, boolean);
CREATE FUNCTION @extschema@.snowseq_create_counter(name text, start bigint DEFAULT 1,
	nodes integer DEFAULT 1, restart boolean DEFAULT false, maximum bigint DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_create_counter_1_3'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_create_counter(text, bigint, integer, boolean, bigint) IS
	'a named counter owned by the calling role: values start, start + nodes, ... up to maximum on node 0, offset by node_id % nodes elsewhere; its owner may continue a dropped one (restart => true starts it over)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_create_counter(text, bigint, integer, boolean, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.snowseq_create_serial(text, text, text, bigint, integer) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.snowseq_create_serial(text, text, text, bigint, integer) IS
	'a formatted serial such as ''INV-YYYYMMDD-######'' owned by the calling role: its number starts again at start in each day, month or year of the format, in time_zone';
COMMENT ON FUNCTION @extschema@.snowseq_drop_counter(text) IS
	'no more values from a counter or serial (its owner only); created again by its owner with the same definition it continues';
COMMENT ON FUNCTION @extschema@.snowseq_counter_raise(text, bigint) IS
	'make the next value of a counter greater than above (a serial: the next number of its period); after a restore without its record, or taking over from a sequence; never lowers; returns that next value';
COMMENT ON FUNCTION @extschema@.snowseq_grant_counter(text, text) IS
	'lets a role (or public) draw from a counter or serial, raise it and see its state: GRANT USAGE on its floor, by its owner';
COMMENT ON FUNCTION @extschema@.snowseq_revoke_counter(text, text) IS
	'takes back a grant of snowseq_grant_counter (REVOKE USAGE on its floor); it holds from the next call of every session';

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

-- A role that could create counters in 1.2 (INSERT on the table) keeps
-- that right as EXECUTE on the create functions; no role but the table's
-- owner keeps any right on the table itself.
DO $$
DECLARE
	g record;
BEGIN
	FOR g IN
		SELECT DISTINCT a.grantee, a.privilege_type
		FROM pg_catalog.pg_class t, pg_catalog.aclexplode(t.relacl) a
		WHERE t.oid OPERATOR(pg_catalog.=) CAST('@extschema@.snowseq_counters' AS pg_catalog.regclass)
			AND a.grantee OPERATOR(pg_catalog.<>) t.relowner
	LOOP
		IF g.privilege_type OPERATOR(pg_catalog.=) 'INSERT' AND g.grantee OPERATOR(pg_catalog.<>) 0 THEN
			EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.snowseq_create_counter(text, bigint, integer, boolean, bigint), @extschema@.snowseq_create_serial(text, text, text, bigint, integer) TO %s',
									  CAST(g.grantee AS pg_catalog.regrole));
		END IF;
		IF g.grantee OPERATOR(pg_catalog.<>) 0 THEN
			EXECUTE pg_catalog.format('REVOKE ALL ON TABLE @extschema@.snowseq_counters FROM %s CASCADE',
									  CAST(g.grantee AS pg_catalog.regrole));
		END IF;
	END LOOP;
END
$$;
-- ---- end of counters: one authority (1.3) ----

-- ---- status: who may read it (1.3) ----
-- The generator's state and the reservations are for monitoring: the
-- predefined role pg_monitor (and superusers) may read them, PUBLIC not.
-- A named counter's reservation shows to roles with the privileges of
-- pg_read_all_stats in every database (as pg_stat_statements shows them
-- every query), to others only in its database and if they may use it;
-- with its database (one name in two databases is two counters).
DROP VIEW @extschema@.snowseq_reservations;
DROP FUNCTION @extschema@.snowseq_reservations();
CREATE FUNCTION @extschema@.snowseq_reservations(
	OUT kind text, OUT counter bigint, OUT bound bigint, OUT low_water bigint,
	OUT block bigint, OUT advances bigint, OUT waits bigint,
	OUT last_advance timestamptz, OUT database name)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_reservations_1_3'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE VIEW @extschema@.snowseq_reservations AS SELECT * FROM @extschema@.snowseq_reservations();
COMMENT ON VIEW @extschema@.snowseq_reservations IS 'snowseq durable reservations';
REVOKE ALL ON FUNCTION @extschema@.snowseq_status() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.snowseq_reservations() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_status() TO pg_monitor;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_reservations() TO pg_monitor;
GRANT SELECT ON @extschema@.snowseq_status TO pg_monitor;
GRANT SELECT ON @extschema@.snowseq_reservations TO pg_monitor;
COMMENT ON FUNCTION @extschema@.snowseq_reservations() IS
	'durable reservations: the fixed ones, and the named counters the caller may see (pg_read_all_stats: every database''s; else its own database''s that it may use), with their database';
COMMENT ON FUNCTION @extschema@.snowseq_import_wrap_keys(text) IS
	'add the wrap keys and the key version mark of a copy of another cluster''s keyring file (all or none); a regular file only; needs pg_read_server_files too; returns how many wrap keys were new';
-- ---- end of status: who may read it (1.3) ----

-- ---- authority: tables snowseq alone writes (1.3) ----
-- The counter definitions and the keys are written by snowseq's functions
-- (as the tables' owner) and by roles with the owner's privileges (a
-- restore): a grant on them, which no role has, would let no role around
-- the functions' checks either.  ALWAYS: also under replication.
CREATE FUNCTION @extschema@.snowseq_guard() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_guard'
	LANGUAGE C;
COMMENT ON FUNCTION @extschema@.snowseq_guard() IS
	'trigger: refuses changes of a table snowseq alone writes by roles without its owner''s privileges';
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_counters
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_counters ENABLE ALWAYS TRIGGER snowseq_guard;
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_key_store
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_key_store ENABLE ALWAYS TRIGGER snowseq_guard;
-- ---- end of authority: tables snowseq alone writes (1.3) ----

-- ---- capacity: what is left of each bounded space (1.3) ----
-- Every bounded space, and how much of it is used: the time field, the
-- gene segment counters, the backfill spaces (the fullest time unit), the
-- key versions, and each named counter (a serial: its current period) of
-- this database that the caller may see.  For monitoring: pg_monitor.
CREATE FUNCTION @extschema@.snowseq_capacity_fixed(OUT kind text, OUT name text,
	OUT capacity numeric, OUT used numeric)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_capacity_fixed'
	LANGUAGE C VOLATILE PARALLEL SAFE ROWS 6;
COMMENT ON FUNCTION @extschema@.snowseq_capacity_fixed() IS
	'the bounded spaces of the cluster: what each holds and how much of it is used';
REVOKE ALL ON FUNCTION @extschema@.snowseq_capacity_fixed() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_capacity_fixed() TO pg_monitor;
CREATE VIEW @extschema@.snowseq_capacity AS
	SELECT f.kind, CAST(NULL AS pg_catalog.name) AS database, f.name, f.capacity, f.used,
		f.capacity OPERATOR(pg_catalog.-) f.used AS remaining,
		CAST((f.capacity OPERATOR(pg_catalog.-) f.used) OPERATOR(pg_catalog./) f.capacity
			 AS double precision) AS remaining_ratio
	FROM @extschema@.snowseq_capacity_fixed() f
	UNION ALL
	SELECT c.kind, pg_catalog.current_database(), c.name,
		CAST(c.capacity AS pg_catalog.numeric), CAST(c.used AS pg_catalog.numeric),
		CAST(c.remaining AS pg_catalog.numeric),
		CAST(c.remaining AS double precision) OPERATOR(pg_catalog./) CAST(c.capacity AS double precision)
	FROM @extschema@.snowseq_counter_status c
	WHERE NOT c.dropped AND c.capacity OPERATOR(pg_catalog.>) 0;
COMMENT ON VIEW @extschema@.snowseq_capacity IS
	'what is left of each bounded space: the cluster''s (database NULL) and this database''s counters and serials (a serial''s: in its current period)';
GRANT SELECT ON @extschema@.snowseq_capacity TO pg_monitor;
-- ---- end of capacity (1.3) ----

-- ---- moves: transient replication errors, own locks, revert (1.3) ----
-- On a destination: the last error of a subscription's workers, which
-- PostgreSQL writes to the server log only.  A move rides out the errors
-- PostgreSQL's restart of a worker heals and fails on one that persists,
-- with its text, read from here.  Not for PUBLIC: an error's text can show
-- the data it failed on.
CREATE FUNCTION @extschema@.snowseq_subscription_error(subscription oid,
	OUT sqlstate text, OUT message text, OUT errors bigint, OUT at timestamptz)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_subscription_error'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_subscription_error(oid) IS
	'the last error the workers of a subscription of this database reported since the server started: SQLSTATE, message, how many, when';
REVOKE ALL ON FUNCTION @extschema@.snowseq_subscription_error(oid) FROM PUBLIC;

-- On a source: the mover's session holds the fence of a move on lock tags
-- no SQL role can take (pg_advisory_lock cannot name them), so nobody else
-- can make a fence act, hold its writers back, or keep a dead move alive.
CREATE FUNCTION @extschema@.snowseq_fence_hold(fence_id integer) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_fence_hold'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_fence_hold(integer) IS
	'the calling session holds a fence: its block and reject states act while the session lives, and writers of its IDs wait while it is at block';
REVOKE ALL ON FUNCTION @extschema@.snowseq_fence_hold(integer) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_fence_let_go(fence_id integer) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_fence_let_go'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_fence_let_go(integer) IS
	'writers waiting on a fence the calling session holds go on; false if it did not hold it';
REVOKE ALL ON FUNCTION @extschema@.snowseq_fence_let_go(integer) FROM PUBLIC;
-- Revert after the switch.
-- With snowseq.move_revert_window set, a move keeps its source current
-- after the switch (replication from the destination back to the source)
-- until snowseq_move_finalize or the end of the window: it is revertable,
-- and snowseq_move_revert switches back with the same short pause.  A
-- revert is a move of its own (its record names the move it reverts).
ALTER TABLE @extschema@.snowseq_moves
	ADD COLUMN revert_window interval,
	ADD COLUMN revertable_until timestamptz,
	ADD COLUMN reverts bigint,
	ADD COLUMN back_lsn pg_lsn;
COMMENT ON COLUMN @extschema@.snowseq_moves.revert_window IS
	'how long the move keeps its source current after the switch (snowseq.move_revert_window when it ran); NULL: it finishes at once';
COMMENT ON COLUMN @extschema@.snowseq_moves.revertable_until IS
	'while the move is revertable: when it is finalized unless snowseq_move_revert or snowseq_move_finalize comes first';
COMMENT ON COLUMN @extschema@.snowseq_moves.reverts IS
	'a revert: the move it reverts';
COMMENT ON COLUMN @extschema@.snowseq_moves.back_lsn IS
	'the destination''s WAL position when the move stopped replicating to it: replication back to the source starts there';
ALTER TABLE @extschema@.snowseq_moves
	DROP CONSTRAINT snowseq_moves_state_check,
	ADD CONSTRAINT snowseq_moves_state_check
		CHECK (state OPERATOR(pg_catalog.=) ANY (ARRAY['prepare', 'copy', 'block', 'switch',
				'switched', 'done', 'failed', 'rollback', 'revertable', 'reverted']::pg_catalog.text[]));
COMMENT ON COLUMN @extschema@.snowseq_moves.state IS
	'prepare, copy, block, switch, switched: in progress (or interrupted); revertable: switched, the source kept current; done, failed, reverted: over; rollback: leftovers remain';

-- What moves create on other servers beyond their first objects, recorded
-- before each is made and removed once it is dropped, so that cleanup
-- reads the records rather than names.
CREATE TYPE @extschema@.snowseq_move_object_kind AS ENUM
	('publication', 'replication slot', 'subscription', 'table', 'fence');
CREATE TABLE @extschema@.snowseq_move_objects (
	move_id bigint NOT NULL,
	server name NOT NULL,
	kind @extschema@.snowseq_move_object_kind NOT NULL,
	name text NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	PRIMARY KEY (server, kind, name)
);
CREATE INDEX snowseq_move_objects_move ON @extschema@.snowseq_move_objects (move_id);
COMMENT ON TABLE @extschema@.snowseq_move_objects IS
	'objects a move made (or is about to make) on a server, recorded before they are made: cleanup drops those of moves that are over';

CREATE OR REPLACE VIEW @extschema@.snowseq_move_progress AS
SELECT m.move_id, m.parent, m.first_gene, m.last_gene, m.source_server, m.dest_server,
	m.state AS phase, m.rows_copied, m.rows_total,
	CASE WHEN m.rows_total OPERATOR(pg_catalog.>) 0
		THEN pg_catalog.round(100.0 OPERATOR(pg_catalog.*) LEAST(m.rows_copied, m.rows_total)
			OPERATOR(pg_catalog./) m.rows_total, 1) END AS percent,
	m.bytes_copied, m.lag_bytes,
	pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) m.started_at AS elapsed,
	CASE WHEN m.state OPERATOR(pg_catalog.=) 'copy' AND m.rows_copied OPERATOR(pg_catalog.>) 0
		AND m.rows_total OPERATOR(pg_catalog.>=) m.rows_copied
		THEN (m.progress_at OPERATOR(pg_catalog.-) m.copy_started_at) OPERATOR(pg_catalog.*)
			((m.rows_total OPERATOR(pg_catalog.-) m.rows_copied)::pg_catalog.float8
			 OPERATOR(pg_catalog./) m.rows_copied::pg_catalog.float8) END AS time_left,
	m.progress_at AS updated_at,
	ARRAY(SELECT g.parent FROM @extschema@.snowseq_moves g
		WHERE g.move_id OPERATOR(pg_catalog.=) m.move_id OR g.group_move OPERATOR(pg_catalog.=) m.move_id
		ORDER BY g.move_id) AS tables,
	m.revertable_until, m.reverts
FROM @extschema@.snowseq_moves m
WHERE m.state OPERATOR(pg_catalog.<>) ALL (ARRAY['done', 'failed', 'rollback', 'reverted']::pg_catalog.text[])
	AND m.group_move IS NULL;

CREATE PROCEDURE @extschema@.snowseq_move_revert(move bigint)
	AS 'MODULE_PATHNAME', 'snowseq_move_revert'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_move_revert(bigint) IS
	'switch a revertable move back: its genes are on the source again, with every write made on the destination meanwhile';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_move_revert(bigint) FROM PUBLIC;

CREATE PROCEDURE @extschema@.snowseq_move_finalize(move bigint)
	AS 'MODULE_PATHNAME', 'snowseq_move_finalize'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_move_finalize(bigint) IS
	'end the replication back to the source of a revertable move and remove the moved rows there: the move can no longer be reverted';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_move_finalize(bigint) FROM PUBLIC;
-- ---- end of moves: transient replication errors, own locks, revert (1.3) ----

-- ---- authority: move records and fences (1.3) ----
-- The resolver and cleanup act on a move's record (as the role that ran the
-- move, with the replication objects it names) and the fence trigger on a
-- fence's row: a grant on these tables would let a role steer them, so the
-- guard refuses changes by roles without the owner's privileges here too.
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_moves
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_moves ENABLE ALWAYS TRIGGER snowseq_guard;
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_fence
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_fence ENABLE ALWAYS TRIGGER snowseq_guard;
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_move_objects
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_move_objects ENABLE ALWAYS TRIGGER snowseq_guard;
-- ---- end of authority: move records and fences (1.3) ----

-- ---- monitoring: what the Prometheus exporter reads, for pg_monitor (1.3) ----
-- The exporter's queries (monitoring/queries.yaml) run as a role granted
-- pg_monitor and nothing else.  Besides the status functions, they read
-- the highest key version of public IDs (not the keys, nor their states or
-- dates) and the moves not over with the instants their phases began (not
-- their tokens, objects or errors).
GRANT SELECT (version) ON @extschema@.snowseq_keys TO pg_monitor;
GRANT SELECT ON @extschema@.snowseq_move_progress TO pg_monitor;
GRANT SELECT (move_id, state, started_at, copy_started_at, blocked_at, switched_at)
	ON @extschema@.snowseq_moves TO pg_monitor;
-- ---- end of monitoring (1.3) ----
