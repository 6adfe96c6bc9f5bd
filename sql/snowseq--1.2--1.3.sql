/* snowseq--1.2--1.3.sql: upgrade of the snowseq extension from 1.2 to 1.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.3'" to load this file. \quit

-- Made by sql/build.pl (make) from sql/src/update--1.2--1.3.sql and the
-- areas of sql/src/: edit those.  Each change of 1.3 is a
-- section of its own, marked "-- ---- <part>: <what> (1.3) ----"; what is
-- new or replaced comes from the areas' blocks (--@include), as the
-- install script has it.

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
COMMENT ON FUNCTION @extschema@.snowseq_reservations() IS
	'durable reservations: the fixed ones, and the named counters the caller may see (pg_read_all_stats: every database''s; else its own database''s that it may use), with their database';
CREATE VIEW @extschema@.snowseq_reservations AS SELECT * FROM @extschema@.snowseq_reservations();
COMMENT ON VIEW @extschema@.snowseq_reservations IS 'snowseq durable reservations';
REVOKE ALL ON FUNCTION @extschema@.snowseq_status() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.snowseq_reservations() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_status() TO pg_monitor;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_reservations() TO pg_monitor;
GRANT SELECT ON @extschema@.snowseq_status TO pg_monitor;
GRANT SELECT ON @extschema@.snowseq_reservations TO pg_monitor;
COMMENT ON FUNCTION @extschema@.snowseq_import_wrap_keys(text) IS
	'add the wrap keys and the key version mark of a copy of another cluster''s keyring file (all or none); a regular file only; needs pg_read_server_files too; returns how many wrap keys were new';
-- ---- end of status: who may read it (1.3) ----

-- ---- keyring: dropping imported wrap keys (1.3) ----
-- An import that filled the keyring, or brought the wrong cluster's keys,
-- is undone by dropping the wrap keys no key row of this database uses;
-- granted like the import.
CREATE FUNCTION @extschema@.snowseq_drop_wrap_keys() RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_drop_wrap_keys'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_drop_wrap_keys() IS
	'drop from the keyring every wrap key but the cluster''s own that no row of this database''s key table uses; returns how many were dropped';
REVOKE ALL ON FUNCTION @extschema@.snowseq_drop_wrap_keys() FROM PUBLIC;
-- ---- end keyring: dropping imported wrap keys (1.3) ----

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
-- A move's state becomes its enum type; the view that reads the column
-- and the index on it are made again.
-- The states of a move, as MoveStateNames (src/shards/records/move_common.c) names
-- them, in its order: the one list of them in SQL.  snowseq writes a state
-- as its name (text, assigned: the cast below), and reads it as text, from
-- a catalog of this version or (cleanup before ALTER EXTENSION UPDATE) of
-- an older one, where the column is text.
CREATE TYPE @extschema@.snowseq_move_state AS ENUM
	('prepare', 'copy', 'block', 'switch', 'switched', 'done', 'failed', 'rollback',
	 'revertable', 'reverted');
COMMENT ON TYPE @extschema@.snowseq_move_state IS
	'the states of a move (snowseq_moves.state)';
CREATE CAST (pg_catalog.text AS @extschema@.snowseq_move_state) WITH INOUT AS ASSIGNMENT;
-- What a state is, derived from the move's machine (src/shards/records/move_states.c):
-- no statement names a state, it asks one of these.
CREATE FUNCTION @extschema@.snowseq_move_is_over(state @extschema@.snowseq_move_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_move_is_over'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_move_is_over(@extschema@.snowseq_move_state) IS
	'whether a move in this state is over: nothing of it runs or is left (done, failed or reverted)';
CREATE FUNCTION @extschema@.snowseq_move_is_copying(state @extschema@.snowseq_move_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_move_is_copying'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_move_is_copying(@extschema@.snowseq_move_state) IS
	'whether a move in this state copies rows';
CREATE FUNCTION @extschema@.snowseq_move_is_undone(state @extschema@.snowseq_move_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_move_is_undone'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_move_is_undone(@extschema@.snowseq_move_state) IS
	'whether a move in this state was undone before its switch, nothing left';
CREATE FUNCTION @extschema@.snowseq_move_has_leftovers(state @extschema@.snowseq_move_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_move_has_leftovers'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_move_has_leftovers(@extschema@.snowseq_move_state) IS
	'whether a move in this state was undone with objects left for snowseq_move_cleanup()';
CREATE FUNCTION @extschema@.snowseq_move_is_revertable(state @extschema@.snowseq_move_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_move_is_revertable'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_move_is_revertable(@extschema@.snowseq_move_state) IS
	'whether a move in this state is switched with its source kept current for a revert';
CREATE FUNCTION @extschema@.snowseq_move_is_done(state @extschema@.snowseq_move_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_move_is_done'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_move_is_done(@extschema@.snowseq_move_state) IS
	'whether a move in this state is finished';
DROP VIEW @extschema@.snowseq_move_progress;
ALTER TABLE @extschema@.snowseq_moves DROP CONSTRAINT snowseq_moves_state_check;
ALTER TABLE @extschema@.snowseq_moves DROP CONSTRAINT snowseq_moves_token_key;
ALTER TABLE @extschema@.snowseq_moves
	ALTER COLUMN state TYPE @extschema@.snowseq_move_state USING state::@extschema@.snowseq_move_state;
COMMENT ON COLUMN @extschema@.snowseq_moves.state IS
	'prepare, copy, block, switch, switched: in progress (or interrupted); revertable: switched, the source kept current; done, failed, reverted: over; rollback: leftovers remain';
-- A revert is named after the move it reverts (the way back's name), and
-- a revert that failed (over: its undo left nothing) leaves that name to
-- the next revert of the move: unique among the moves not failed.
CREATE UNIQUE INDEX snowseq_moves_token_key ON @extschema@.snowseq_moves (token)
	WHERE NOT @extschema@.snowseq_move_is_undone(state);

-- What moves and merges create on any server, recorded in a router
-- transaction that commits before each is made and removed once it is
-- dropped (or stays for good), so that cleanup reads the records rather
-- than names.  A record belongs to one operation: a move (move_id) or a
-- merge (merge_id).  Its policy says when cleanup removes the object once
-- the operation is over: always, only if it ended undone (on_failure), or
-- only if it ended done (on_success); otherwise the record is forgotten
-- and the object stays.  The labels of the kinds are MoveObjectNames
-- (src/shards/records/move_common.c), in its order; those of the policies
-- MoveCleanupPolicyNames, in its order.
CREATE TYPE @extschema@.snowseq_move_object_kind AS ENUM
	('publication', 'replication slot', 'subscription', 'table', 'fence',
	 'prepared transaction', 'view', 'half copy', 'merged table', 'merge trigger');
CREATE TYPE @extschema@.snowseq_cleanup_policy AS ENUM
	('always', 'on_failure', 'on_success');
COMMENT ON TYPE @extschema@.snowseq_cleanup_policy IS
	'when cleanup removes a recorded object once its move or merge is over: always, only if it was undone, only if it was done';
CREATE TABLE @extschema@.snowseq_move_objects (
	move_id bigint,
	server name NOT NULL,
	kind @extschema@.snowseq_move_object_kind NOT NULL,
	name text NOT NULL,
	merge_id bigint,
	policy @extschema@.snowseq_cleanup_policy NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	PRIMARY KEY (server, kind, name),
	CONSTRAINT snowseq_move_objects_one_operation
		CHECK (pg_catalog.num_nonnulls(move_id, merge_id) OPERATOR(pg_catalog.=) 1)
);
CREATE INDEX snowseq_move_objects_move ON @extschema@.snowseq_move_objects (move_id);
CREATE INDEX snowseq_move_objects_merge ON @extschema@.snowseq_move_objects (merge_id);
COMMENT ON TABLE @extschema@.snowseq_move_objects IS
	'objects a move or a merge made (or is about to make) on a server, recorded before they are made: cleanup removes those of operations that are over, as their policy says';
COMMENT ON COLUMN @extschema@.snowseq_move_objects.policy IS
	'always: removed once the operation is over; on_failure: only if it was undone; on_success: only if it was done (otherwise the object stays and the record goes)';

-- A move that began under 1.2 recorded nothing: the records it needs are
-- written now from its record, so that cleanup, which reads records alone,
-- still finds what it made.  Those of a move not over: the lead's
-- publication, slot, subscription and prepared transaction, each table's
-- fence, the copy it created and a split's keep view; of a split that is
-- done, its keep view (dropped after the move finished, it may be left).
-- An object never made, or already gone, is taken as dropped.  The
-- table-sync slots are recorded when the subscription is dropped.
INSERT INTO @extschema@.snowseq_move_objects (move_id, server, kind, name, policy)
SELECT m.move_id, x.server, x.kind::@extschema@.snowseq_move_object_kind, x.name,
	CASE WHEN x.kind OPERATOR(pg_catalog.=) 'half copy' THEN 'on_failure' ELSE 'always'
	END::@extschema@.snowseq_cleanup_policy
FROM @extschema@.snowseq_moves m
JOIN @extschema@.snowseq_moves lead ON lead.move_id OPERATOR(pg_catalog.=) COALESCE(m.group_move, m.move_id)
CROSS JOIN LATERAL (VALUES
	(m.group_move IS NULL, m.source_server, 'publication', m.token),
	(m.group_move IS NULL, m.source_server, 'replication slot', m.token),
	(m.group_move IS NULL, m.dest_server, 'subscription', m.token),
	(m.group_move IS NULL, m.source_server, 'prepared transaction', m.token),
	(true, m.source_server, 'fence', m.token),
	(COALESCE(m.dest_created, false), m.dest_server, 'half copy', m.source_table),
	(m.kind OPERATOR(pg_catalog.<>) 'whole' AND m.fence_id IS NOT NULL, m.source_server, 'view',
	 pg_catalog.quote_ident((pg_catalog.parse_ident(m.dest_table))[1]) OPERATOR(pg_catalog.||) '.'
	 OPERATOR(pg_catalog.||) pg_catalog.quote_ident(lead.token OPERATOR(pg_catalog.||) '_keep_'
	 OPERATOR(pg_catalog.||) m.fence_id::pg_catalog.text))
) x(wanted, server, kind, name)
WHERE x.wanted
	AND (NOT @extschema@.snowseq_move_is_over(lead.state)
		OR (@extschema@.snowseq_move_is_done(lead.state) AND x.kind OPERATOR(pg_catalog.=) 'view'))
ON CONFLICT DO NOTHING;

CREATE VIEW @extschema@.snowseq_move_progress AS
SELECT m.move_id, m.parent, m.first_gene, m.last_gene, m.source_server, m.dest_server,
	m.state AS phase, m.rows_copied, m.rows_total,
	CASE WHEN m.rows_total OPERATOR(pg_catalog.>) 0
		THEN pg_catalog.round(100.0 OPERATOR(pg_catalog.*) LEAST(m.rows_copied, m.rows_total)
			OPERATOR(pg_catalog./) m.rows_total, 1) END AS percent,
	m.bytes_copied, m.lag_bytes,
	pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) m.started_at AS elapsed,
	CASE WHEN @extschema@.snowseq_move_is_copying(m.state) AND m.rows_copied OPERATOR(pg_catalog.>) 0
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
WHERE NOT @extschema@.snowseq_move_is_over(m.state) AND NOT @extschema@.snowseq_move_has_leftovers(m.state)
	AND m.group_move IS NULL;
COMMENT ON VIEW @extschema@.snowseq_move_progress IS
	'moves under way (or interrupted): phase, rows copied of the total, bytes, lag and estimated time left';

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

-- snowseq_shard_stats gains the writes and reads of each partition's table
-- from its server's cumulative statistics: a new C symbol, so the 1.2
-- definition never meets the wider row
DROP FUNCTION @extschema@.snowseq_shard_stats(regclass);
-- elastic shards read the map as the routing functions do, through their
-- cache (snowseq_route_ranges)
-- The map as the routing functions read it (their cache): what elastic
-- shards read it through.
CREATE FUNCTION @extschema@.snowseq_route_ranges(OUT first_gene integer, OUT last_gene integer, OUT shard text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_route_ranges'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_route_ranges() IS
	'the servers of snowseq_shard_map and the genes each holds (first to last), as snowseq_route routes them (1.3)';
CREATE FUNCTION @extschema@.snowseq_shard_stats(parent regclass,
	OUT first_gene integer, OUT last_gene integer, OUT shard text,
	OUT partition regclass, OUT rows bigint, OUT bytes bigint,
	OUT writes bigint, OUT reads bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_shard_stats_1_3'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_shard_stats(regclass) IS
	'one row per routing-map entry and partition of a sharded table: genes, server, rows and row bytes, counted where they live; rows written (inserted, updated, deleted) and read (by sequential scans, fetched by index scans) in the partition''s table there since it was created or its statistics reset, shared out over its pieces by rows';
REVOKE ALL ON FUNCTION @extschema@.snowseq_shard_stats(regclass) FROM PUBLIC;

-- The rebalancer's first reading of strategy writes: no row counted, and
-- no lock on the table kept through the sample that follows.
CREATE FUNCTION @extschema@.snowseq_shard_counters(parent regclass,
	OUT partition regclass, OUT writes bigint, OUT reads bigint, OUT next_xid bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_shard_counters'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_shard_counters(regclass) IS
	'one row per partition of a sharded table: the rows written and read in its table on its server, as snowseq_shard_stats reads them, without counting rows, and that server''s pg_snapshot_xmax(pg_current_snapshot()) at the reading (xid8: one past the latest transaction completed then); keeps no lock on the table';
REVOKE ALL ON FUNCTION @extschema@.snowseq_shard_counters(regclass) FROM PUBLIC;

-- The rebalancer's histogram of a partition over its genes, counted where
-- it lives: its rows, and of them those written (inserted or updated)
-- since a reading of snowseq_shard_counters (xmin at or after next_xid).
CREATE FUNCTION @extschema@.snowseq_shard_histogram(part regclass, key name, first_gene integer,
	last_gene integer, width integer, since bigint,
	OUT bucket integer, OUT rows bigint, OUT written bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_shard_histogram'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_shard_histogram(regclass, name, integer, integer, integer, bigint) IS
	'the rows of a partition of a gene-sharded table in genes first_gene to last_gene, counted where they live, in buckets of width genes from first_gene (bucket 0), and of them the rows whose version was written by transaction since (a next_xid of snowseq_shard_counters) of its server or a later one (since NULL: every row); needs SELECT on the partition';
REVOKE ALL ON FUNCTION @extschema@.snowseq_shard_histogram(regclass, name, integer, integer, integer, bigint) FROM PUBLIC;

-- The tables that move with a table (a placement group): what the
-- rebalancer counts as the load of its partitions.
CREATE FUNCTION @extschema@.snowseq_placement_group(parent regclass)
	RETURNS TABLE (member regclass)
	AS 'MODULE_PATHNAME', 'snowseq_placement_group'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_placement_group(regclass) IS
	'the tables that move with the table (a move of its genes takes those of them that hold the genes on another server than the destination), the table first: every gene-sharded table (partitioned by range on one bigint column into foreign tables on the servers snowseq_shard_map names) if it is one, else the table alone';
REVOKE ALL ON FUNCTION @extschema@.snowseq_placement_group(regclass) FROM PUBLIC;

-- ---- rebalance: plans and runs of moves that even out the servers (1.3) ----
-- A rebalance plans moves from the servers of the map above threshold x the
-- mean load to the least loaded ones (and everything off drained servers),
-- writes the plan, and runs it move by move with snowseq_move_genes,
-- committing between moves: resumable after a crash, stoppable between
-- moves.  Its runs and steps are written by the procedure alone (the guard).
-- The states of a run and of a step: the one list of each in SQL.
CREATE TYPE @extschema@.snowseq_rebalance_state AS ENUM
	('running', 'stopped', 'done', 'abandoned');
COMMENT ON TYPE @extschema@.snowseq_rebalance_state IS
	'the states of a rebalance (snowseq_rebalance_runs.state): running, stopped (resumable), done, abandoned (over)';
CREATE TYPE @extschema@.snowseq_rebalance_step_state AS ENUM
	('planned', 'running', 'failed', 'done');
COMMENT ON TYPE @extschema@.snowseq_rebalance_step_state IS
	'the states of a step of a rebalance (snowseq_rebalance_steps.state)';
-- What a state is, derived from the machines (src/shards/rebalance/rebalance_state.c).
CREATE FUNCTION @extschema@.snowseq_rebalance_is_over(state @extschema@.snowseq_rebalance_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_state_is_over'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_is_over(@extschema@.snowseq_rebalance_state) IS
	'whether a rebalance in this state is over: neither running nor resumable (done or abandoned)';
CREATE FUNCTION @extschema@.snowseq_rebalance_step_is_over(state @extschema@.snowseq_rebalance_step_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_state_is_over'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_step_is_over(@extschema@.snowseq_rebalance_step_state) IS
	'whether a step of a rebalance in this state is over (done; a failed one is tried again)';
CREATE FUNCTION @extschema@.snowseq_rebalance_is_running(state anyenum)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_is_running'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_is_running(anyenum) IS
	'whether a rebalance run or step in this state runs (the state its step begin leads to)';
CREATE FUNCTION @extschema@.snowseq_rebalance_step_is_planned(state @extschema@.snowseq_rebalance_step_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_step_is_planned'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_step_is_planned(@extschema@.snowseq_rebalance_step_state) IS
	'whether a step of a rebalance in this state is planned, not begun';
-- The state machines of a run and of a step (src/shards/rebalance/rebalance_state.c):
-- the state a step takes one to; every state the SQL sources store comes
-- from here, and a step the state does not allow is an ERROR.
CREATE FUNCTION @extschema@.snowseq_rebalance_next(state anyenum, step text)
	RETURNS anyenum
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_next'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_next(anyenum, text) IS
	'the state (snowseq_rebalance_state or snowseq_rebalance_step_state) that a step takes a rebalance run (begin, take, stop, abandon, fail, finish) or one of its steps (plan, begin, succeed, fail) to from state (NULL: not recorded yet); an ERROR for a step the state does not allow';
-- What the record functions store a state with: the new state if a step
-- leads there from the committed one (or it is that one), else an ERROR.
CREATE FUNCTION @extschema@.snowseq_rebalance_to(state anyenum, new_state anyenum)
	RETURNS anyenum
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_to'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_to(anyenum, anyenum) IS
	'new_state, if a step of the state machine of a rebalance run or step leads there from state (NULL: not recorded yet), or it is state; an ERROR otherwise: the check of the record functions against the committed state';
CREATE TABLE @extschema@.snowseq_rebalance_runs (
	run_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	parent regclass NOT NULL,
	strategy text NOT NULL,
	threshold double precision NOT NULL,
	drain name[] NOT NULL,
	fill name[] NOT NULL DEFAULT '{}',
	sample interval NOT NULL DEFAULT '10 s',
	merge_below double precision NOT NULL DEFAULT 0,
	state @extschema@.snowseq_rebalance_state NOT NULL,
	stop text
		CHECK (stop OPERATOR(pg_catalog.=) ANY (ARRAY['stop', 'abandon']::pg_catalog.text[])),
	rounds integer NOT NULL DEFAULT 1,
	runner_pid integer,
	runner_start timestamptz,
	started_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	finished_at timestamptz,
	-- of background rebalances (the block of that name below)
	job_role regrole,
	max_rows_per_second double precision
		CHECK (max_rows_per_second OPERATOR(pg_catalog.>) 0),
	max_lag_bytes bigint
		CHECK (max_lag_bytes OPERATOR(pg_catalog.>) 0),
	throttled_until timestamptz,
	throttled_by text,
	error text
);
CREATE UNIQUE INDEX snowseq_rebalance_runs_open ON @extschema@.snowseq_rebalance_runs (parent)
	WHERE NOT @extschema@.snowseq_rebalance_is_over(state);
COMMENT ON TABLE @extschema@.snowseq_rebalance_runs IS
	'rebalances run on this router: table, strategy, threshold, drained servers, servers to fill, the sample of strategy writes, the load below which neighbouring partitions merge, state (running, stopped: resumable; done, abandoned: over), stop requested, rounds of planning';
CREATE TABLE @extschema@.snowseq_rebalance_steps (
	run_id bigint NOT NULL REFERENCES @extschema@.snowseq_rebalance_runs ON DELETE CASCADE,
	step integer NOT NULL,
	first_gene integer NOT NULL,
	last_gene integer NOT NULL,
	from_server name NOT NULL,
	to_server name NOT NULL,
	rows bigint,
	bytes bigint,
	state @extschema@.snowseq_rebalance_step_state NOT NULL,
	move_id bigint,
	rows_copied bigint,
	error text,
	started_at timestamptz,
	finished_at timestamptz,
	PRIMARY KEY (run_id, step)
);
COMMENT ON TABLE @extschema@.snowseq_rebalance_steps IS
	'the steps of each rebalance (a move, or a merge where from_server and to_server are one server): genes, servers, planned rows and bytes, state (planned, running, failed, done), the move that ran it, rows it copied, timings';
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_rebalance_runs
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_rebalance_runs ENABLE ALWAYS TRIGGER snowseq_guard;
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_rebalance_steps
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_rebalance_steps ENABLE ALWAYS TRIGGER snowseq_guard;
REVOKE ALL ON TABLE @extschema@.snowseq_rebalance_runs, @extschema@.snowseq_rebalance_steps FROM PUBLIC;

-- The planner itself (src/shards/rebalance/rebalance_plan.c): from the loads, one
-- jsonb document (docs/elastic-shards.md, "The planner"), the plan's rows.
-- snowseq_rebalance_plan_json reads nothing but its argument (a cut sized
-- by a histogram takes it from the loads): PUBLIC may run it, as any
-- function of its argument alone.  snowseq_rebalance_plan_counted is the
-- same planner where a partition a step cuts that names its oid and key
-- and brings no histogram has it counted where its rows live, by
-- snowseq_shard_histogram as the caller: PUBLIC may run it too, since
-- what it reads needs the caller's EXECUTE on that function and SELECT on
-- the partition.
CREATE FUNCTION @extschema@.snowseq_rebalance_plan_json(loads jsonb)
	RETURNS TABLE (step integer, first_gene integer, last_gene integer, from_server name,
		to_server name, rows bigint, bytes bigint)
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_plan_json'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan_json(jsonb) IS
	'the rebalance plan from loads given as jsonb (strategy, threshold, servers, drain, partitions of the table and of its placement group, revertable moves, merge_below, keep; histograms as rows per gene): the planner of snowseq_rebalance_plan without the servers; reads nothing else, so PUBLIC may run it';
CREATE FUNCTION @extschema@.snowseq_rebalance_plan_counted(loads jsonb)
	RETURNS TABLE (step integer, first_gene integer, last_gene integer, from_server name,
		to_server name, rows bigint, bytes bigint)
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_plan_counted'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan_counted(jsonb) IS
	'the rebalance plan from loads as for snowseq_rebalance_plan_json, the histogram of a partition a step cuts counted where its rows live (snowseq_shard_histogram, as the caller: its EXECUTE and SELECT on the partition needed) unless the loads give it; what snowseq_rebalance_plan_from runs; PUBLIC may run it, as it reads only with the caller''s rights';

-- The plan: the load of each partition (rows or row bytes, counted where
-- they live, by snowseq_shard_stats; or writes per second: the writes
-- snowseq_shard_stats reads from the servers' cumulative statistics,
-- sampled twice, sample apart), summed per server of the map.  While
-- a server is above threshold x the mean of the servers not drained (or
-- any partition is on a drained server), the most loaded one gives the
-- least loaded one a whole partition, or the first or last genes of one
-- (what a move accepts), sized for rows and bytes by a histogram of the
-- partition's rows over 64 buckets of its genes, for writes by a
-- histogram of the rows written since the first reading (their xmin;
-- without first_xids, on the assumption that its writes are spread
-- evenly over its genes).
-- Strategy writes: the first reading is first_parts, first_writes and
-- first_xids (snowseq_shard_counters at first_at), taken by the caller; first_at
-- NULL: taken here, and the sample slept here, in the caller's statement
-- (its snapshot held, but no lock on the table).  only_check: the
-- arguments checked, nothing read, nothing planned.
-- The loads are collected here and planned in C by
-- snowseq_rebalance_plan_counted; floats go into them exactly
-- (extra_float_digits), so the planner compares the numbers read.
CREATE FUNCTION @extschema@.snowseq_rebalance_plan_from(parent regclass, strategy text,
	threshold double precision, drain name[], fill name[], sample interval,
	first_parts oid[], first_writes bigint[], first_xids bigint[], first_at timestamptz, only_check boolean,
	merge_below double precision DEFAULT 0)
	RETURNS TABLE (step integer, first_gene integer, last_gene integer, from_server name,
		to_server name, rows bigint, bytes bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET extra_float_digits = 3
	AS $plan$
DECLARE
	sv pg_catalog.name[];		-- servers of the map, then those to fill
	kept integer;
	t0 pg_catalog.timestamptz := first_at;
	w0p pg_catalog.oid[] := first_parts;	-- strategy writes: the first reading
	w0 bigint[] := first_writes;
	w0x bigint[] := first_xids;
	by_writes boolean := strategy OPERATOR(pg_catalog.=) 'writes';
	secs double precision;
	r record;
	i integer;
	part jsonb;
	parts jsonb := '[]';
	grp jsonb := '[]';
BEGIN
	IF parent IS NULL THEN
		RAISE EXCEPTION 'the table of a rebalance must not be NULL';
	END IF;
	IF strategy IS NULL OR strategy OPERATOR(pg_catalog.<>) ALL (ARRAY['rows', 'bytes', 'writes']) THEN
		RAISE EXCEPTION 'unknown rebalance strategy %', pg_catalog.quote_nullable(strategy)
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Use ''rows'' (rows per server), ''bytes'' (row bytes per server) or ''writes'' (rows written per second per server, sampled).';
	END IF;
	-- a busy session reports its counts to the statistics at most once a
	-- second: a shorter sample measures little; one over an hour is a slip
	IF sample IS NULL OR sample OPERATOR(pg_catalog.<) CAST('1 s' AS pg_catalog.interval)
		OR sample OPERATOR(pg_catalog.>) CAST('1 h' AS pg_catalog.interval) THEN
		RAISE EXCEPTION 'rebalance sample % is not between 1 second and 1 hour', pg_catalog.quote_nullable(sample)
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'The sample is how long strategy ''writes'' waits between its two readings of the servers'' write counters: such as ''10 s'' (the longer, the steadier the rates).';
	END IF;
	IF threshold IS NULL OR threshold OPERATOR(pg_catalog.<) 1 OR threshold OPERATOR(pg_catalog.=) 'NaN' THEN
		RAISE EXCEPTION 'rebalance threshold % is below 1', pg_catalog.quote_nullable(threshold)
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'The threshold is the most load a server may hold, as a multiple of the mean: 1 or more, such as 1.25.';
	END IF;
	IF drain IS NULL OR pg_catalog.array_position(drain, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'the servers to drain must not be NULL'
			USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass ''{}'' to drain none.';
	END IF;
	IF fill IS NULL OR pg_catalog.array_position(fill, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'the servers to fill must not be NULL'
			USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass ''{}'' to fill none.';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_partitioned_table t JOIN pg_catalog.pg_inherits h
			ON h.inhparent OPERATOR(pg_catalog.=) t.partrelid JOIN pg_catalog.pg_foreign_table ft
			ON ft.ftrelid OPERATOR(pg_catalog.=) h.inhrelid
			WHERE t.partrelid OPERATOR(pg_catalog.=) parent) THEN
		RAISE EXCEPTION 'table % is not gene-sharded', parent
			USING ERRCODE = 'wrong_object_type',
				HINT = 'A rebalance moves genes of a table partitioned by range on its bigint ID, whose partitions are foreign tables on the servers of snowseq_shard_map.';
	END IF;

	-- the map's servers as routing reads them (route.c's cache)
	sv := ARRAY(SELECT CAST(s.shard AS pg_catalog.name) FROM @extschema@.snowseq_route_ranges() s
		GROUP BY s.shard ORDER BY s.shard);
	FOR i IN 1 .. COALESCE(pg_catalog.array_length(drain, 1), 0) LOOP
		IF pg_catalog.array_position(sv, drain[i]) IS NULL THEN
			RAISE EXCEPTION 'server "%" to drain is not in snowseq_shard_map', drain[i]
				USING ERRCODE = 'invalid_parameter_value',
					HINT = 'Drain servers the map names: SELECT DISTINCT shard FROM snowseq_shard_map.';
		END IF;
	END LOOP;
	-- servers not in the map yet that are to receive genes
	FOR i IN 1 .. COALESCE(pg_catalog.array_length(fill, 1), 0) LOOP
		IF fill[i] OPERATOR(pg_catalog.=) ANY (drain) THEN
			RAISE EXCEPTION 'server "%" is both to drain and to fill', fill[i]
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_foreign_server fs JOIN pg_catalog.pg_foreign_data_wrapper w
				ON w.oid OPERATOR(pg_catalog.=) fs.srvfdw
				WHERE fs.srvname OPERATOR(pg_catalog.=) fill[i] AND w.fdwname OPERATOR(pg_catalog.=) 'postgres_fdw') THEN
			RAISE EXCEPTION 'server "%" to fill is not a postgres_fdw server', fill[i]
				USING ERRCODE = 'undefined_object',
					HINT = 'Create it with CREATE SERVER ... FOREIGN DATA WRAPPER postgres_fdw, and a user mapping for it.';
		END IF;
		IF pg_catalog.array_position(sv, fill[i]) IS NULL THEN
			sv := sv OPERATOR(pg_catalog.||) fill[i];
		END IF;
	END LOOP;
	kept := COALESCE(pg_catalog.array_length(sv, 1), 0) OPERATOR(pg_catalog.-)
		(SELECT pg_catalog.count(DISTINCT d) FROM pg_catalog.unnest(drain) d);
	IF kept OPERATOR(pg_catalog.<) 1 THEN
		RAISE EXCEPTION 'a rebalance that drains every server of snowseq_shard_map has nowhere to move genes'
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Name servers to fill, or drain fewer servers.';
	END IF;
	IF merge_below IS NULL OR merge_below OPERATOR(pg_catalog.<) 0 OR merge_below OPERATOR(pg_catalog.>) 1
		OR merge_below OPERATOR(pg_catalog.=) 'NaN' THEN
		RAISE EXCEPTION 'rebalance merge_below % is not between 0 and 1', pg_catalog.quote_nullable(merge_below)
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Neighbouring partitions of one server merge when their load together is at most merge_below x the mean load of a partition: such as 0.25; 0 merges none.';
	END IF;
	IF only_check THEN
		RETURN;
	END IF;

	-- strategy writes: the write counters then (first_at; NULL: now, and
	-- the sample slept), and again now; counters start at 0 with a table
	-- (a moved partition) and at a reset
	IF by_writes THEN
		IF t0 IS NULL THEN
			t0 := pg_catalog.clock_timestamp();
			SELECT pg_catalog.array_agg(CAST(sc.partition AS pg_catalog.oid)), pg_catalog.array_agg(sc.writes),
					pg_catalog.array_agg(sc.next_xid) INTO w0p, w0, w0x
				FROM @extschema@.snowseq_placement_group(parent) pg,
					LATERAL @extschema@.snowseq_shard_counters(pg.member) sc;
			PERFORM pg_catalog.pg_sleep_for(sample);
		END IF;
		secs := pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0);
	END IF;

	-- the partitions of the table (named) and of the other tables of its
	-- group, their genes, server, counts and the remote table they read; a
	-- map entry a table has no partition for has no row here
	FOR r IN SELECT m.member OPERATOR(pg_catalog.=) parent AS named, s.partition,
			pg_catalog.min(s.first_gene) AS f, pg_catalog.max(s.last_gene) AS l,
			pg_catalog.min(s.shard) AS shard, pg_catalog.count(DISTINCT s.shard) AS shards,
			pg_catalog.sum(s.rows) AS rows, pg_catalog.sum(s.bytes) AS bytes, pg_catalog.sum(s.writes) AS writes,
			(SELECT pg_catalog.quote_ident(COALESCE((SELECT o.option_value FROM pg_catalog.pg_options_to_table(x.ftoptions) o
					WHERE o.option_name OPERATOR(pg_catalog.=) 'schema_name'), n.nspname::pg_catalog.text))
				OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||)
				pg_catalog.quote_ident(COALESCE((SELECT o.option_value FROM pg_catalog.pg_options_to_table(x.ftoptions) o
					WHERE o.option_name OPERATOR(pg_catalog.=) 'table_name'), pc.relname::pg_catalog.text))
				FROM pg_catalog.pg_foreign_table x JOIN pg_catalog.pg_class pc ON pc.oid OPERATOR(pg_catalog.=) x.ftrelid
				JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) pc.relnamespace
				WHERE x.ftrelid OPERATOR(pg_catalog.=) s.partition) AS remote,
			(SELECT a.attname FROM pg_catalog.pg_partitioned_table t
				JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) t.partrelid
					AND a.attnum OPERATOR(pg_catalog.=) t.partattrs[0]
				WHERE t.partrelid OPERATOR(pg_catalog.=) m.member) AS key
			FROM @extschema@.snowseq_placement_group(parent) m,
				LATERAL @extschema@.snowseq_shard_stats(m.member) s
			JOIN pg_catalog.pg_foreign_table ft ON ft.ftrelid OPERATOR(pg_catalog.=) s.partition
			GROUP BY m.member, s.partition ORDER BY 1, 3 LOOP
		IF r.shards OPERATOR(pg_catalog.>) 1 THEN
			RAISE EXCEPTION 'snowseq_shard_map names more than one server for genes % to % of partition %',
				r.f, r.l, r.partition
				USING ERRCODE = 'object_not_in_prerequisite_state',
					HINT = 'Make the map name the foreign server of each partition before rebalancing.';
		END IF;
		-- writes in the sample: a partition new since the first reading, or
		-- whose counters went back (a table created again, a reset), counts from 0
		i := pg_catalog.array_position(w0p, CAST(r.partition AS pg_catalog.oid));
		part := pg_catalog.jsonb_build_object('first', r.f, 'last', r.l, 'server', r.shard,
			'rows', r.rows, 'bytes', r.bytes, 'table', r.remote, 'key', r.key,
			'oid', CAST(CAST(r.partition AS pg_catalog.oid) AS bigint), 'name', CAST(r.partition AS pg_catalog.text),
			'writes', CASE WHEN i IS NULL OR w0[i] OPERATOR(pg_catalog.>) r.writes THEN r.writes
				ELSE r.writes OPERATOR(pg_catalog.-) w0[i] END,
			'since', CASE WHEN by_writes AND i IS NOT NULL THEN w0x[i] END);
		IF r.named THEN
			parts := parts OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(part);
		ELSE
			grp := grp OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(part);
		END IF;
	END LOOP;

	RETURN QUERY SELECT * FROM @extschema@.snowseq_rebalance_plan_counted(pg_catalog.jsonb_build_object(
		'strategy', strategy, 'threshold', threshold, 'merge_below', merge_below, 'seconds', secs,
		'table', CAST(parent AS pg_catalog.text), 'sample', CAST(sample AS pg_catalog.text),
		'servers', pg_catalog.to_jsonb(sv), 'drain', pg_catalog.to_jsonb(drain),
		'partitions', parts, 'group', grp,
		-- moves kept revertable (snowseq.move_revert_window): what a revertable
		-- move touched is not moved again until it is finalized or reverted
		'keep', CAST(COALESCE(pg_catalog.current_setting('snowseq.move_revert_window', true), '0') AS pg_catalog.interval)
			OPERATOR(pg_catalog.>) CAST('0' AS pg_catalog.interval),
		'revertable_moves', COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('move', COALESCE(mv.group_move, mv.move_id),
				'first', mv.first_gene, 'last', mv.last_gene, 'source', mv.source_server, 'dest', mv.dest_server,
				'table', mv.source_table, 'oid', CAST(CAST(pg_catalog.to_regclass(mv.part_name) AS pg_catalog.oid) AS bigint))
				ORDER BY mv.move_id)
			FROM @extschema@.snowseq_moves mv
			WHERE @extschema@.snowseq_move_is_revertable(mv.state) AND mv.parent OPERATOR(pg_catalog.=) ANY
				(ARRAY(SELECT m.member FROM @extschema@.snowseq_placement_group(snowseq_rebalance_plan_from.parent) m))), '[]'),
		-- a cut by writes is sized by the rows written since the first reading
		-- (their xmin): without its transaction ids, as even over its genes
		'histograms', NOT by_writes OR (w0x IS NOT NULL
			AND pg_catalog.cardinality(w0x) OPERATOR(pg_catalog.=) pg_catalog.cardinality(w0p))));
END
$plan$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan_from(regclass, text, double precision, name[], name[], interval, oid[], bigint[], bigint[], timestamptz, boolean, double precision) IS
	'the plan of snowseq_rebalance_plan, strategy writes from a first reading of snowseq_shard_counters taken at first_at (partitions, writes and next transaction ids; NULL: taken here, and sample slept); only_check: check the arguments alone';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_plan_from(regclass, text, double precision, name[], name[], interval, oid[], bigint[], bigint[], timestamptz, boolean, double precision) FROM PUBLIC;

-- The plan, one statement: strategy writes sleeps the sample in it, with
-- no lock on the table (snowseq_shard_counters) but its snapshot.
CREATE FUNCTION @extschema@.snowseq_rebalance_plan(parent regclass, strategy text DEFAULT 'rows',
	threshold double precision DEFAULT 1.25, drain name[] DEFAULT '{}', fill name[] DEFAULT '{}',
	sample interval DEFAULT '10 s', merge_below double precision DEFAULT 0)
	RETURNS TABLE (step integer, first_gene integer, last_gene integer, from_server name,
		to_server name, rows bigint, bytes bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $plan$
BEGIN
	RETURN QUERY SELECT * FROM @extschema@.snowseq_rebalance_plan_from(parent, strategy, threshold, drain, fill, sample,
		CAST(NULL AS pg_catalog.oid[]), CAST(NULL AS bigint[]), CAST(NULL AS bigint[]), CAST(NULL AS pg_catalog.timestamptz), false,
		merge_below);
END
$plan$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan(regclass, text, double precision, name[], name[], interval, double precision) IS
	'the moves that bring every server of the map (and the servers in fill) to at most threshold x the mean rows (strategy rows), row bytes (bytes) or rows written per second over sample (writes) of a gene-sharded table, and everything off the servers in drain: whole partitions, or the last genes of one sized by a histogram of its rows over its genes (rows, bytes) or of its rows written during the sample (writes); then, with merge_below above 0, merges (from_server = to_server) of neighbouring partitions of one server whose load together is at most merge_below x the mean load of a partition; counts from snowseq_shard_stats, the first reading of writes from snowseq_shard_counters, no lock on the table held through the sample';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_plan(regclass, text, double precision, name[], name[], interval, double precision) FROM PUBLIC;

-- Whether the session that runs a rebalance is still there.
CREATE FUNCTION @extschema@.snowseq_rebalance_runner_alive(pid integer, started timestamptz)
	RETURNS boolean
	LANGUAGE sql STABLE PARALLEL SAFE
	RETURN EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
		WHERE a.pid OPERATOR(pg_catalog.=) $1
			AND (a.backend_start IS NULL OR $2 IS NULL OR a.backend_start OPERATOR(pg_catalog.=) $2));
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_runner_alive(integer, timestamptz) IS
	'whether the session that started at started (NULL: at any time) with process id pid is there (it runs a rebalance)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_runner_alive(integer, timestamptz) FROM PUBLIC;
-- Whether a live process drives a run now.
CREATE FUNCTION @extschema@.snowseq_rebalance_driven(run @extschema@.snowseq_rebalance_runs)
	RETURNS boolean
	LANGUAGE sql STABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_rebalance_is_running($1.state)
		AND @extschema@.snowseq_rebalance_runner_alive($1.runner_pid, $1.runner_start);
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_driven(@extschema@.snowseq_rebalance_runs) IS
	'whether the run is running in a process that is there';

-- The records of a run are written as the tables' owner (the guard refuses
-- every other role), by these functions for the procedure: a role granted
-- them (a router administrator, with the procedure) runs rebalances
-- without any right on the tables but SELECT.  Each is two functions: the
-- one granted, in C (snowseq_rebalance_as_caller, src/shards/
-- rebalance_rights.c), notes the role that calls it (the current user,
-- inside whatever SECURITY DEFINER function calls it) and runs the other,
-- its body <name>_impl, SECURITY DEFINER (the search path pg_catalog and
-- pg_temp only, every name qualified) and granted to no one.  Each records
-- runs of the tables whose owner's privileges that caller has
-- (snowseq_caller_owns), and no other: a role granted them plants no run
-- for a table of another role that its owner would then run, and the code
-- of a SECURITY DEFINER function that an owner calls acts with its own
-- role's rights, not the owner's.
CREATE FUNCTION @extschema@.snowseq_caller_owns(rel regclass)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_caller_owns'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_caller_owns(regclass) IS
	'whether the role that called the rebalance''s record function running now (outside one: the current user) has the privileges of the owner of rel: the check of those functions';
REVOKE ALL ON FUNCTION @extschema@.snowseq_caller_owns(regclass) FROM PUBLIC;
-- The run of a table not finished, locked until the transaction ends (a
-- second CALL waits for the first to decide), or no row.
CREATE FUNCTION @extschema@.snowseq_rebalance_open_run_impl(parent regclass)
	RETURNS SETOF @extschema@.snowseq_rebalance_runs
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $open$
BEGIN
	IF NOT @extschema@.snowseq_caller_owns(parent) THEN
		RAISE EXCEPTION 'must be owner of table % to rebalance it', parent
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	RETURN QUERY SELECT r.* FROM @extschema@.snowseq_rebalance_runs r
		WHERE r.parent OPERATOR(pg_catalog.=) snowseq_rebalance_open_run_impl.parent
			AND NOT @extschema@.snowseq_rebalance_is_over(r.state)
		FOR UPDATE;
END
$open$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_open_run_impl(regclass) IS
	'the body of snowseq_rebalance_open_run, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_open_run_impl(regclass) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_open_run(parent regclass)
	RETURNS SETOF @extschema@.snowseq_rebalance_runs
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_open_run(regclass) IS
	'the rebalance of a table not finished (running or stopped), locked for the transaction: for snowseq_rebalance';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_open_run(regclass) FROM PUBLIC;
-- A new run (run_id NULL: its table, strategy, threshold, drain, fill,
-- sample and state), or the state, rounds, runner and end of one; its stop
-- (set by snowseq_rebalance_stop at any time) is cleared only when asked,
-- as a session takes the run on.
CREATE FUNCTION @extschema@.snowseq_rebalance_save_run_impl(run @extschema@.snowseq_rebalance_runs,
	clear_stop boolean DEFAULT false)
	RETURNS @extschema@.snowseq_rebalance_runs
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $save$
DECLARE
	saved @extschema@.snowseq_rebalance_runs;
	tbl pg_catalog.regclass;
BEGIN
	tbl := run.parent;
	IF run.run_id IS NOT NULL THEN
		SELECT r.parent INTO tbl FROM @extschema@.snowseq_rebalance_runs r
			WHERE r.run_id OPERATOR(pg_catalog.=) run.run_id;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'rebalance run % does not exist', run.run_id
				USING ERRCODE = 'undefined_object',
				HINT = 'Pass a run_id of snowseq_rebalance_runs, or a NULL run_id to record a new run.';
		END IF;
	END IF;
	IF tbl IS NULL OR NOT @extschema@.snowseq_caller_owns(tbl) THEN
		RAISE EXCEPTION 'must be owner of table % to record its rebalance', COALESCE(tbl::pg_catalog.text, 'NULL')
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	IF run.run_id IS NULL THEN
		INSERT INTO @extschema@.snowseq_rebalance_runs (parent, strategy, threshold, drain, fill, sample, merge_below, state)
			VALUES (run.parent, run.strategy, run.threshold, run.drain, run.fill, run.sample, run.merge_below,
				@extschema@.snowseq_rebalance_next(CAST(NULL AS @extschema@.snowseq_rebalance_state), 'begin'))
			RETURNING * INTO saved;
	ELSE
		UPDATE @extschema@.snowseq_rebalance_runs r
			SET state = @extschema@.snowseq_rebalance_to(r.state, run.state), stop = CASE WHEN clear_stop THEN NULL ELSE r.stop END, rounds = run.rounds, runner_pid = run.runner_pid,
				runner_start = run.runner_start, finished_at = run.finished_at
			WHERE r.run_id OPERATOR(pg_catalog.=) run.run_id
			RETURNING * INTO saved;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'rebalance % does not exist', run.run_id
				USING ERRCODE = 'undefined_object';
		END IF;
	END IF;
	RETURN saved;
END
$save$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_save_run_impl(@extschema@.snowseq_rebalance_runs, boolean) IS
	'the body of snowseq_rebalance_save_run, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_save_run_impl(@extschema@.snowseq_rebalance_runs, boolean) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_save_run(run @extschema@.snowseq_rebalance_runs,
	clear_stop boolean DEFAULT false)
	RETURNS @extschema@.snowseq_rebalance_runs
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_save_run(@extschema@.snowseq_rebalance_runs, boolean) IS
	'record a new rebalance, or the state, rounds, runner and end of one (clear_stop: and clear its stop): for snowseq_rebalance';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_save_run(@extschema@.snowseq_rebalance_runs, boolean) FROM PUBLIC;
-- Steps of a run: new ones, or the state, move, rows copied, error and
-- times of planned ones.
CREATE FUNCTION @extschema@.snowseq_rebalance_save_steps_impl(steps @extschema@.snowseq_rebalance_steps[])
	RETURNS void
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $steps$
DECLARE
	tbl pg_catalog.regclass;
	missing bigint;
BEGIN
	SELECT s.run_id INTO missing FROM pg_catalog.unnest(steps) s
		WHERE NOT EXISTS (SELECT 1 FROM @extschema@.snowseq_rebalance_runs r
			WHERE r.run_id OPERATOR(pg_catalog.=) s.run_id)
		LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'rebalance run % does not exist', COALESCE(missing::pg_catalog.text, 'NULL')
			USING ERRCODE = 'undefined_object',
			HINT = 'Record the run first (snowseq_rebalance_save_run), and pass its run_id in every step.';
	END IF;
	SELECT r.parent INTO tbl FROM pg_catalog.unnest(steps) s
		LEFT JOIN @extschema@.snowseq_rebalance_runs r ON r.run_id OPERATOR(pg_catalog.=) s.run_id
		WHERE r.run_id IS NULL OR NOT @extschema@.snowseq_caller_owns(r.parent)
		LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'must be owner of table % to record its rebalance', COALESCE(tbl::pg_catalog.text, '(no such run)')
			USING ERRCODE = 'insufficient_privilege';
	END IF;
		INSERT INTO @extschema@.snowseq_rebalance_steps AS st (run_id, step, first_gene, last_gene, from_server,
				to_server, rows, bytes, state, move_id, rows_copied, error, started_at, finished_at)
			SELECT s.run_id, s.step, s.first_gene, s.last_gene, s.from_server, s.to_server, s.rows, s.bytes,
				-- a new step is planned; a recorded one goes where a step leads
				CASE WHEN EXISTS (SELECT FROM @extschema@.snowseq_rebalance_steps o
						WHERE o.run_id OPERATOR(pg_catalog.=) s.run_id AND o.step OPERATOR(pg_catalog.=) s.step) THEN s.state
					ELSE @extschema@.snowseq_rebalance_to(CAST(NULL AS @extschema@.snowseq_rebalance_step_state),
						COALESCE(s.state, @extschema@.snowseq_rebalance_next(CAST(NULL AS @extschema@.snowseq_rebalance_step_state), 'plan'))) END,
				s.move_id, s.rows_copied, s.error, s.started_at, s.finished_at
			FROM pg_catalog.unnest(steps) s
			ON CONFLICT (run_id, step) DO UPDATE
				SET state = @extschema@.snowseq_rebalance_to(st.state, excluded.state), move_id = excluded.move_id, rows_copied = excluded.rows_copied,
					error = excluded.error, started_at = excluded.started_at, finished_at = excluded.finished_at;
END
$steps$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_save_steps_impl(@extschema@.snowseq_rebalance_steps[]) IS
	'the body of snowseq_rebalance_save_steps, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_save_steps_impl(@extschema@.snowseq_rebalance_steps[]) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_save_steps(steps @extschema@.snowseq_rebalance_steps[])
	RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_save_steps(@extschema@.snowseq_rebalance_steps[]) IS
	'record new steps of a rebalance, or the state, move, rows copied, error and times of its steps: for snowseq_rebalance';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_save_steps(@extschema@.snowseq_rebalance_steps[]) FROM PUBLIC;
-- The first reading of strategy writes (parts, writes, xids at taken_at) and
-- its sample, for snowseq_rebalance: committed, then slept a second at a
-- time, each committed, so that the run holds no lock and no snapshot
-- older than a second through the sample.
CREATE PROCEDURE @extschema@.snowseq_rebalance_sample(parent regclass, sample interval,
	INOUT parts oid[], INOUT writes bigint[], INOUT xids bigint[], INOUT taken_at timestamptz)
	LANGUAGE plpgsql
	AS $sample$
DECLARE
	remaining pg_catalog.interval;
BEGIN
	taken_at := pg_catalog.clock_timestamp();
	SELECT pg_catalog.array_agg(CAST(sc.partition AS pg_catalog.oid)), pg_catalog.array_agg(sc.writes),
			pg_catalog.array_agg(sc.next_xid) INTO parts, writes, xids
		FROM @extschema@.snowseq_placement_group(parent) pg,
			LATERAL @extschema@.snowseq_shard_counters(pg.member) sc;
	COMMIT;
	LOOP
		remaining := taken_at OPERATOR(pg_catalog.+) sample OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp();
		-- no sample (NULL) ends it as an elapsed one does
		EXIT WHEN remaining IS NULL OR remaining OPERATOR(pg_catalog.<=) CAST('0' AS pg_catalog.interval);
		PERFORM pg_catalog.pg_sleep_for(LEAST(remaining, CAST('1 s' AS pg_catalog.interval)));
		COMMIT;
	END LOOP;
END
$sample$;
COMMENT ON PROCEDURE @extschema@.snowseq_rebalance_sample(regclass, interval, oid[], bigint[], bigint[], timestamptz) IS
	'for snowseq_rebalance: the write counters of each partition of the table and of the other tables of its placement group and their servers'' next transaction ids (snowseq_shard_counters) and when they were read, committed, then sample slept a second at a time, each committed';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_rebalance_sample(regclass, interval, oid[], bigint[], bigint[], timestamptz) FROM PUBLIC;

-- Stop: writes the runs as their owner, for the roles granted it
-- (SECURITY DEFINER: the search path is pg_catalog and pg_temp only).
CREATE FUNCTION @extschema@.snowseq_rebalance_stop_impl(parent regclass DEFAULT NULL, abandon boolean DEFAULT false)
	RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $stop$
DECLARE
	n integer;
BEGIN
	IF abandon IS NULL THEN
		RAISE EXCEPTION 'abandon must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- a run its session is running stops before its next move; one no
	-- session runs stops (or is given up) now
	UPDATE @extschema@.snowseq_rebalance_runs r
		SET stop = CASE WHEN abandon THEN 'abandon' ELSE 'stop' END,
			state = CASE WHEN @extschema@.snowseq_rebalance_driven(r) THEN r.state
				ELSE @extschema@.snowseq_rebalance_next(r.state, CASE WHEN abandon THEN 'abandon' ELSE 'stop' END) END,
			finished_at = CASE WHEN abandon AND NOT @extschema@.snowseq_rebalance_driven(r)
				THEN pg_catalog.clock_timestamp() END
		WHERE NOT @extschema@.snowseq_rebalance_is_over(r.state)
			AND (snowseq_rebalance_stop_impl.parent IS NULL OR r.parent OPERATOR(pg_catalog.=) snowseq_rebalance_stop_impl.parent)
			-- the runs of the caller's own tables alone
			AND @extschema@.snowseq_caller_owns(r.parent);
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$stop$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_stop_impl(regclass, boolean) IS
	'the body of snowseq_rebalance_stop, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_stop_impl(regclass, boolean) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_stop(parent regclass DEFAULT NULL, abandon boolean DEFAULT false)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_stop(regclass, boolean) IS
	'stop the rebalances of a table (NULL: of every table) before their next move, resumable by CALL snowseq_rebalance; abandon => true gives them up (the next CALL plans anew); returns how many runs it marked';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_stop(regclass, boolean) FROM PUBLIC;
-- ---- end of rebalance (1.3) ----

-- ---- background rebalances (1.3) ----
-- A rebalance run by a background worker (src/shards/rebalance/rebalance_job.c):
-- snowseq_rebalance_start records the run and starts a worker in this
-- database as the caller's role, which CALLs snowseq_rebalance as that
-- role's session would, and returns the run's id (the job) at once.  The
-- move resolver starts a worker again, at the router's start, for each
-- background run still running.  A run's job_role is the role of its
-- worker (NULL: a run of CALL snowseq_rebalance); max_rows_per_second and
-- max_lag_bytes its throttles; throttled_until and throttled_by the end
-- and the cause of the sleep it is in for them; error
-- the error that ended its worker (columns of snowseq_rebalance_runs, in
-- its definition: an install script alters nothing it creates).
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.job_role IS
	'the role whose background worker runs the rebalance (snowseq_rebalance_start), by its OID (a rename keeps it); NULL: a run of CALL snowseq_rebalance';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.max_rows_per_second IS
	'the throttle: before each step, the run sleeps until the rows its steps copied over the time since its first step began are at most this many per second';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.max_lag_bytes IS
	'the throttle: before each step, the run waits until no standby of its servers has more than this many bytes of WAL to replay (snowseq_shard_standby_lag)';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.throttled_until IS
	'while the run sleeps for max_rows_per_second: until when';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.throttled_by IS
	'while the run sleeps for a throttle: which, and why';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.error IS
	'the error that ended the background worker of the run (cleared when it starts again)';

-- The worker of a run, started as the current role; its process id.
CREATE FUNCTION @extschema@.snowseq_rebalance_job_launch(job bigint)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_job_launch'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_launch(bigint) IS
	'for snowseq_rebalance_start: start the background worker that runs rebalance job, as the current role (which must be able to log in), after this transaction; its process id';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_launch(bigint) FROM PUBLIC;

-- The lag of a shard server's standbys, in bytes of WAL not replayed.
CREATE FUNCTION @extschema@.snowseq_shard_standby_lag(server name)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_shard_standby_lag'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_shard_standby_lag(name) IS
	'the most bytes of WAL a standby of the postgres_fdw server has yet to replay (NULL: no standby), read there with the current user''s mapping (its user needs pg_read_all_stats there): the throttle max_lag_bytes';
REVOKE ALL ON FUNCTION @extschema@.snowseq_shard_standby_lag(name) FROM PUBLIC;

-- The records of a job, as the runs' owner for the roles granted them (the
-- table's owner alone: snowseq_caller_owns).  takeover false (the start):
-- the run is running again, in the worker of process runner, its stop and
-- error cleared, its throttle set, a run with no step yet planned in the
-- worker (three rounds, as a CALL's).  takeover true (the worker): the
-- worker's role and process are recorded, and a stop asked meanwhile is made; the
-- run's state (NULL: no such run of the role's tables).
CREATE FUNCTION @extschema@.snowseq_rebalance_job_record_impl(job bigint, max_rows_per_second double precision,
	max_lag_bytes bigint, runner integer, takeover boolean)
	RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $record$
DECLARE
	st pg_catalog.text;
BEGIN
	IF takeover THEN
		UPDATE @extschema@.snowseq_rebalance_runs r
			-- the role by its OID: a rename does not lose the job
			SET job_role = (SELECT CAST(a.oid AS pg_catalog.regrole) FROM pg_catalog.pg_roles a
					WHERE a.rolname OPERATOR(pg_catalog.=) SESSION_USER),
				state = CASE WHEN r.stop IS NULL THEN r.state ELSE @extschema@.snowseq_rebalance_next(r.state, r.stop) END,
				finished_at = CASE WHEN r.stop OPERATOR(pg_catalog.=) 'abandon' THEN pg_catalog.clock_timestamp() ELSE r.finished_at END,
				-- the worker drives it from now (its driver records its start)
				runner_pid = CASE WHEN r.stop IS NULL THEN pg_catalog.pg_backend_pid() END,
				runner_start = NULL
			WHERE r.run_id OPERATOR(pg_catalog.=) job AND @extschema@.snowseq_caller_owns(r.parent)
				AND NOT @extschema@.snowseq_rebalance_is_over(r.state)
				-- the worker the start launched, or one resuming a run no
				-- process runs: never a run another live process drives
				AND (r.runner_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
					OR NOT @extschema@.snowseq_rebalance_runner_alive(r.runner_pid, r.runner_start))
			RETURNING r.state INTO st;
		RETURN st;
	END IF;
	IF max_rows_per_second IS NOT NULL AND NOT max_rows_per_second OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'max_rows_per_second % is not above 0', max_rows_per_second
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Give the most rows per second the rebalance may copy on average, or NULL for no throttle.';
	END IF;
	IF max_lag_bytes IS NOT NULL AND NOT max_lag_bytes OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'max_lag_bytes % is not above 0', max_lag_bytes
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Give the most bytes of WAL a standby of the servers of a step may have to replay as the step begins, or NULL for no throttle.';
	END IF;
	UPDATE @extschema@.snowseq_rebalance_runs r
		-- the role is the worker's, recorded as it takes the run over (a
		-- session's SET ROLE or a definer's rights are not the worker's)
		SET job_role = NULL, state = @extschema@.snowseq_rebalance_next(r.state, 'take'), stop = NULL, error = NULL, finished_at = NULL,
			max_rows_per_second = snowseq_rebalance_job_record_impl.max_rows_per_second,
			max_lag_bytes = snowseq_rebalance_job_record_impl.max_lag_bytes, throttled_until = NULL, throttled_by = NULL,
			runner_pid = runner, runner_start = NULL,
			rounds = CASE WHEN EXISTS (SELECT FROM @extschema@.snowseq_rebalance_steps st
				WHERE st.run_id OPERATOR(pg_catalog.=) job) THEN r.rounds ELSE 0 END
		WHERE r.run_id OPERATOR(pg_catalog.=) job
			AND NOT @extschema@.snowseq_rebalance_is_over(r.state)
			AND @extschema@.snowseq_caller_owns(r.parent)
		RETURNING r.state INTO st;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'rebalance job % is not an open run of a table of role %', job, SESSION_USER
			USING ERRCODE = 'undefined_object';
	END IF;
	RETURN st;
END
$record$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_record_impl(bigint, double precision, bigint, integer, boolean) IS
	'the body of snowseq_rebalance_job_record, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_record_impl(bigint, double precision, bigint, integer, boolean) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_job_record(job bigint, max_rows_per_second double precision,
	max_lag_bytes bigint, runner integer, takeover boolean)
	RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_record(bigint, double precision, bigint, integer, boolean) IS
	'for snowseq_rebalance_start (takeover false: the run runs again in the worker of process runner, with the throttles) and its worker (takeover true: its role recorded, a stop asked meanwhile made; the state)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_record(bigint, double precision, bigint, integer, boolean) FROM PUBLIC;
-- The error that ended a job's worker: the run stops (unless another
-- session runs it now), resumable as any stopped run.
CREATE FUNCTION @extschema@.snowseq_rebalance_job_failed_impl(job bigint, message text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $failed$
BEGIN
	UPDATE @extschema@.snowseq_rebalance_runs r
		SET error = message, throttled_until = NULL, throttled_by = NULL, runner_pid = NULL, runner_start = NULL,
			state = CASE WHEN @extschema@.snowseq_rebalance_is_over(r.state) THEN r.state
				ELSE @extschema@.snowseq_rebalance_next(r.state, 'fail') END
		WHERE r.run_id OPERATOR(pg_catalog.=) job AND @extschema@.snowseq_caller_owns(r.parent)
			AND (r.runner_pid IS NULL OR r.runner_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
				OR NOT @extschema@.snowseq_rebalance_runner_alive(r.runner_pid, r.runner_start));
END
$failed$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_failed_impl(bigint, text) IS
	'the body of snowseq_rebalance_job_failed, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_failed_impl(bigint, text) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_job_failed(job bigint, message text)
	RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_failed(bigint, text) IS
	'for the worker of a background rebalance: record the error that ended it, and stop the run (unless another session runs it)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_failed(bigint, text) FROM PUBLIC;
-- Until when and why a run sleeps for a throttle (NULL: it does not).
CREATE FUNCTION @extschema@.snowseq_rebalance_job_throttled_impl(job bigint, throttled_until timestamptz, throttled_by text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $throttled$
BEGIN
	UPDATE @extschema@.snowseq_rebalance_runs r
		SET throttled_until = snowseq_rebalance_job_throttled_impl.throttled_until,
			throttled_by = snowseq_rebalance_job_throttled_impl.throttled_by
		WHERE r.run_id OPERATOR(pg_catalog.=) job AND @extschema@.snowseq_caller_owns(r.parent);
END
$throttled$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_throttled_impl(bigint, timestamptz, text) IS
	'the body of snowseq_rebalance_job_throttled, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_throttled_impl(bigint, timestamptz, text) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_job_throttled(job bigint, throttled_until timestamptz, throttled_by text)
	RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_throttled(bigint, timestamptz, text) IS
	'for snowseq_rebalance_throttle: record until when (max_rows_per_second) and why the run sleeps for a throttle (NULL: it does not)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_throttled(bigint, timestamptz, text) FROM PUBLIC;

-- The parts of the run (snowseq_rebalance): its end, a step done, the move or
-- merge of a step, the steps of a plan.
CREATE FUNCTION @extschema@.snowseq_rebalance_finish(run @extschema@.snowseq_rebalance_runs, step text)
	RETURNS @extschema@.snowseq_rebalance_runs
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $finish$
BEGIN
	run.state := @extschema@.snowseq_rebalance_next(run.state, step);
	IF @extschema@.snowseq_rebalance_is_over(run.state) THEN
		run.finished_at := pg_catalog.clock_timestamp();
	END IF;
	run.runner_pid := NULL;
	run.runner_start := NULL;
	RETURN @extschema@.snowseq_rebalance_save_run(run);
END
$finish$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_finish(@extschema@.snowseq_rebalance_runs, text) IS
	'for snowseq_rebalance: record the step that ends its call (finish, abandon: over, and when; stop, fail: stopped), no session running it';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_finish(@extschema@.snowseq_rebalance_runs, text) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_step_done(s @extschema@.snowseq_rebalance_steps, move_id bigint,
	rows_copied bigint)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $done$
BEGIN
	s.state := @extschema@.snowseq_rebalance_next(s.state, 'succeed');
	s.move_id := CASE WHEN s.from_server OPERATOR(pg_catalog.<>) s.to_server THEN move_id END;
	s.rows_copied := rows_copied;
	s.error := NULL;
	s.finished_at := pg_catalog.clock_timestamp();
	PERFORM @extschema@.snowseq_rebalance_save_steps(ARRAY[s]);
END
$done$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_step_done(@extschema@.snowseq_rebalance_steps, bigint, bigint) IS
	'for snowseq_rebalance: record a step done by move move_id (a merge: no move), rows_copied rows copied';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_step_done(@extschema@.snowseq_rebalance_steps, bigint, bigint) FROM PUBLIC;
-- The last move (from_server <> to_server) of a step's genes to its
-- server, or merge of its genes, begun at since or later (NULL: any move;
-- a merge done), and whether it is done (a move: or kept revertable).
CREATE FUNCTION @extschema@.snowseq_rebalance_step_move(parent regclass, s @extschema@.snowseq_rebalance_steps,
	since timestamptz, OUT move_id bigint, OUT done boolean, OUT error text, OUT rows_copied bigint)
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	AS $step$
BEGIN
	IF s.from_server OPERATOR(pg_catalog.=) s.to_server THEN
		SELECT m.merge_id, @extschema@.snowseq_merge_is_done(m.state), m.error, m.rows_copied INTO move_id, done, error, rows_copied
			FROM @extschema@.snowseq_merges m
			WHERE m.parent OPERATOR(pg_catalog.=) snowseq_rebalance_step_move.parent AND m.group_merge IS NULL
				AND m.first_gene OPERATOR(pg_catalog.=) s.first_gene AND m.last_gene OPERATOR(pg_catalog.=) s.last_gene
				AND (m.started_at OPERATOR(pg_catalog.>=) since OR since IS NULL AND @extschema@.snowseq_merge_is_done(m.state))
			ORDER BY m.merge_id DESC LIMIT 1;
	ELSE
		SELECT COALESCE(m.group_move, m.move_id),
				@extschema@.snowseq_move_is_done(m.state) OR @extschema@.snowseq_move_is_revertable(m.state),
				m.error, m.rows_copied INTO move_id, done, error, rows_copied
			FROM @extschema@.snowseq_moves m
			WHERE m.parent OPERATOR(pg_catalog.=) snowseq_rebalance_step_move.parent
				AND m.first_gene OPERATOR(pg_catalog.=) s.first_gene AND m.last_gene OPERATOR(pg_catalog.=) s.last_gene
				AND m.dest_server OPERATOR(pg_catalog.=) s.to_server
				AND (m.started_at OPERATOR(pg_catalog.>=) since OR since IS NULL)
			ORDER BY m.move_id DESC LIMIT 1;
	END IF;
END
$step$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_step_move(regclass, @extschema@.snowseq_rebalance_steps, timestamptz) IS
	'for snowseq_rebalance: the last move of the step''s genes of table parent to its server (a merge, where its servers are one: of its genes), begun at since or later (NULL: any move, a merge done)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_step_move(regclass, @extschema@.snowseq_rebalance_steps, timestamptz) FROM PUBLIC;
-- A round of planning: the plan from the loads now, drain the servers to
-- drain, numbered after the run's steps and recorded; how many steps.
CREATE FUNCTION @extschema@.snowseq_rebalance_plan_steps(run @extschema@.snowseq_rebalance_runs, drain name[],
	w0p oid[], w0 bigint[], w0x bigint[], w0_at timestamptz)
	RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $plan$
DECLARE
	planned @extschema@.snowseq_rebalance_steps[];
	n integer;
BEGIN
	SELECT COALESCE(pg_catalog.max(st.step), 0) INTO n
		FROM @extschema@.snowseq_rebalance_steps st WHERE st.run_id OPERATOR(pg_catalog.=) run.run_id;
	planned := ARRAY(SELECT ROW(run.run_id, n OPERATOR(pg_catalog.+) p.step, p.first_gene, p.last_gene,
			p.from_server, p.to_server, p.rows, p.bytes, NULL, NULL, NULL, NULL, NULL, NULL)::@extschema@.snowseq_rebalance_steps
		FROM @extschema@.snowseq_rebalance_plan_from(run.parent, run.strategy, run.threshold, drain, run.fill, run.sample,
			w0p, w0, w0x, w0_at, false, run.merge_below) p);
	PERFORM @extschema@.snowseq_rebalance_save_steps(planned);
	RETURN COALESCE(pg_catalog.cardinality(planned), 0);
END
$plan$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan_steps(@extschema@.snowseq_rebalance_runs, name[], oid[], bigint[], bigint[], timestamptz) IS
	'for snowseq_rebalance: plan a round of the run (the servers in drain drained, strategy writes from the first reading w0p, w0, w0x taken at w0_at), record its steps after the run''s; how many';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_plan_steps(@extschema@.snowseq_rebalance_runs, name[], oid[], bigint[], bigint[], timestamptz) FROM PUBLIC;

-- The throttles, before each step of a run: with max_lag_bytes, it waits
-- (a second at a time, each committed, a stop seen) until no standby of the
-- step's servers has more than that many bytes of WAL to replay; with
-- max_rows_per_second, it sleeps (likewise) until the rows its steps done
-- copied, over the time since the first of them began, are at most that
-- many per second.  slept: it did.
CREATE PROCEDURE @extschema@.snowseq_rebalance_throttle(job bigint, servers name[], INOUT slept boolean DEFAULT false)
	LANGUAGE plpgsql
	AS $throttle$
DECLARE
	run @extschema@.snowseq_rebalance_runs;
	lag record;
	since pg_catalog.timestamptz;
	copied bigint;
	until pg_catalog.timestamptz;
BEGIN
	slept := false;
	LOOP
		SELECT * INTO run FROM @extschema@.snowseq_rebalance_runs r WHERE r.run_id OPERATOR(pg_catalog.=) job;
		EXIT WHEN run.max_lag_bytes IS NULL OR run.stop IS NOT NULL;
		SELECT l.srv, l.bytes INTO lag FROM (SELECT DISTINCT sv AS srv, @extschema@.snowseq_shard_standby_lag(sv) AS bytes
			FROM pg_catalog.unnest(servers) sv) l ORDER BY l.bytes DESC NULLS LAST LIMIT 1;
		EXIT WHEN lag.bytes IS NULL OR lag.bytes OPERATOR(pg_catalog.<=) run.max_lag_bytes;
		IF NOT slept THEN
			RAISE NOTICE 'rebalance %: waiting for the standbys of server "%" (% bytes to replay, at most %)',
				job, lag.srv, lag.bytes, run.max_lag_bytes;
		END IF;
		PERFORM @extschema@.snowseq_rebalance_job_throttled(job, NULL, pg_catalog.format(
			'max_lag_bytes: a standby of server %I has %s bytes of WAL to replay (at most %s)', lag.srv, lag.bytes, run.max_lag_bytes));
		COMMIT;
		slept := true;
		PERFORM pg_catalog.pg_sleep(1);
	END LOOP;
	SELECT pg_catalog.min(st.started_at), pg_catalog.sum(st.rows_copied) INTO since, copied
		FROM @extschema@.snowseq_rebalance_steps st
		WHERE st.run_id OPERATOR(pg_catalog.=) job AND @extschema@.snowseq_rebalance_step_is_over(st.state);
	until := since OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => copied OPERATOR(pg_catalog./) run.max_rows_per_second);
	IF until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() AND run.stop IS NULL THEN
		PERFORM @extschema@.snowseq_rebalance_job_throttled(job, until, pg_catalog.format(
			'max_rows_per_second: %s rows copied since %s, at most %s a second', copied, since, run.max_rows_per_second));
		COMMIT;
		RAISE NOTICE 'rebalance %: throttled until % (% rows copied since %, at most % rows per second)',
			job, until, copied, since, run.max_rows_per_second;
		WHILE pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) until AND NOT EXISTS (SELECT
				FROM @extschema@.snowseq_rebalance_runs r WHERE r.run_id OPERATOR(pg_catalog.=) job AND r.stop IS NOT NULL) LOOP
			PERFORM pg_catalog.pg_sleep_for(LEAST(until OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp(), CAST('1 s' AS pg_catalog.interval)));
			COMMIT;
		END LOOP;
		slept := true;
	END IF;
	IF slept THEN
		PERFORM @extschema@.snowseq_rebalance_job_throttled(job, NULL, NULL);
		COMMIT;
	END IF;
END
$throttle$;
COMMENT ON PROCEDURE @extschema@.snowseq_rebalance_throttle(bigint, name[], boolean) IS
	'for snowseq_rebalance, before a step on servers: with the run''s max_lag_bytes, wait until no standby of those servers has more bytes of WAL to replay; with its max_rows_per_second, sleep until the rows its steps done copied since the first began are at most that many per second (a second at a time, each committed, until a stop); slept: it did';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_rebalance_throttle(bigint, name[], boolean) FROM PUBLIC;

-- What the worker CALLs: the run of job, as CALL snowseq_rebalance runs it.
CREATE PROCEDURE @extschema@.snowseq_rebalance_job_run(job bigint)
	LANGUAGE plpgsql
	AS $job$
DECLARE
	tbl pg_catalog.regclass;
	run @extschema@.snowseq_rebalance_runs;
BEGIN
	-- the run as the takeover left it (a statement of its own: a query in
	-- the same statement would read the run as it was before)
	PERFORM @extschema@.snowseq_rebalance_job_record(job, NULL, NULL, pg_catalog.pg_backend_pid(), true);
	SELECT * INTO run FROM @extschema@.snowseq_rebalance_runs r WHERE r.run_id OPERATOR(pg_catalog.=) job;
	IF NOT FOUND OR NOT @extschema@.snowseq_rebalance_driven(run) OR run.runner_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() THEN
		RETURN;					-- rolled back, stopped or given up before the worker began, or another's
	END IF;
	tbl := run.parent;
	COMMIT;
	CALL @extschema@.snowseq_rebalance(tbl);
END
$job$;
COMMENT ON PROCEDURE @extschema@.snowseq_rebalance_job_run(bigint) IS
	'what the background worker of rebalance job runs: CALL snowseq_rebalance on its table, which continues the run';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_rebalance_job_run(bigint) FROM PUBLIC;

-- Start: a run of the table (a new one, or the one not finished, which
-- goes on from its first step not done), run by a background worker.
CREATE FUNCTION @extschema@.snowseq_rebalance_start(parent regclass, strategy text DEFAULT 'rows',
	threshold double precision DEFAULT 1.25, drain name[] DEFAULT '{}', fill name[] DEFAULT '{}',
	sample interval DEFAULT '10 s', merge_below double precision DEFAULT 0,
	max_rows_per_second double precision DEFAULT NULL, max_lag_bytes bigint DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $start$
DECLARE
	run @extschema@.snowseq_rebalance_runs;
BEGIN
	IF parent IS NULL THEN
		RAISE EXCEPTION 'the table of a rebalance must not be NULL';
	END IF;
	IF max_rows_per_second IS NOT NULL AND NOT max_rows_per_second OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'max_rows_per_second % is not above 0', max_rows_per_second
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Give the most rows per second the rebalance may copy on average, or NULL for no throttle.';
	END IF;
	IF max_lag_bytes IS NOT NULL AND NOT max_lag_bytes OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'max_lag_bytes % is not above 0', max_lag_bytes
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Give the most bytes of WAL a standby of the servers of a step may have to replay as the step begins, or NULL for no throttle.';
	END IF;
	SELECT * INTO run FROM @extschema@.snowseq_rebalance_open_run(parent);
	IF FOUND THEN
		IF @extschema@.snowseq_rebalance_driven(run) AND run.runner_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() THEN
			RAISE EXCEPTION 'rebalance % of table % is running in process %', run.run_id, parent, run.runner_pid
				USING ERRCODE = 'object_in_use',
					HINT = 'Wait for it (snowseq_rebalance_wait), or stop it between steps with snowseq_rebalance_stop().';
		END IF;
		RAISE NOTICE 'rebalance %: the run of table % not finished goes on in the background from its first step not done',
			run.run_id, parent;
	ELSE
		PERFORM FROM @extschema@.snowseq_rebalance_plan_from(parent, strategy, threshold, drain, fill, sample,
			NULL, NULL, NULL, NULL, true, merge_below);
		run.parent := parent;
		run.strategy := strategy;
		run.threshold := threshold;
		run.drain := drain;
		run.fill := fill;
		run.sample := COALESCE(sample, CAST('10 s' AS pg_catalog.interval));
		run.merge_below := merge_below;
		run := @extschema@.snowseq_rebalance_save_run(run);
	END IF;
	PERFORM @extschema@.snowseq_rebalance_job_record(run.run_id, max_rows_per_second, max_lag_bytes,
		@extschema@.snowseq_rebalance_job_launch(run.run_id), false);
	RETURN run.run_id;
END
$start$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_start(regclass, text, double precision, name[], name[], interval, double precision, double precision, bigint) IS
	'start a rebalance of the table in a background worker, as the current role (arguments as for snowseq_rebalance; max_rows_per_second, max_lag_bytes: the throttles, NULL none), or continue its run not finished there; returns the job (its run_id) at once; the worker goes on after this session, and again after a restart of the server';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_start(regclass, text, double precision, name[], name[], interval, double precision, double precision, bigint) FROM PUBLIC;

-- Whether the role that called the record function running now has the
-- privileges of a role: the status's check of pg_monitor.
CREATE FUNCTION @extschema@.snowseq_caller_has_privs_of(role regrole)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_caller_has_privs_of'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_caller_has_privs_of(regrole) IS
	'whether the role that called the rebalance''s record function running now (outside one: the current user) has the privileges of role: the status''s check of pg_monitor';
REVOKE ALL ON FUNCTION @extschema@.snowseq_caller_has_privs_of(regrole) FROM PUBLIC;

-- Status: the runs of the tables the caller owns (pg_monitor:
-- every run, without its error).
CREATE FUNCTION @extschema@.snowseq_rebalance_status_impl(job bigint DEFAULT NULL)
	RETURNS TABLE (run_id bigint, parent regclass, state text, background boolean, job_role name,
		runner_alive boolean, steps_done integer, steps_total integer, step integer, step_running text,
		rows_copied bigint, rows_planned bigint, time_left interval, throttled_until timestamptz,
		throttled_by text, last_error text, started_at timestamptz, finished_at timestamptz)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $status$
BEGIN
	RETURN QUERY
	SELECT r.run_id, r.parent, r.state::pg_catalog.text, r.job_role IS NOT NULL,
		-- the role's name now; a role dropped since shows as its OID
		CAST(COALESCE((SELECT CAST(a.rolname AS pg_catalog.text) FROM pg_catalog.pg_roles a
			WHERE a.oid OPERATOR(pg_catalog.=) CAST(r.job_role AS pg_catalog.oid)),
			CAST(CAST(r.job_role AS pg_catalog.oid) AS pg_catalog.text)) AS pg_catalog.name),
		@extschema@.snowseq_rebalance_driven(r),
		st.done, st.total, cur.step,
		CASE WHEN cur.step IS NOT NULL THEN pg_catalog.format(CASE WHEN cur.from_server OPERATOR(pg_catalog.=) cur.to_server
			THEN 'merge of genes %s to %s on server %I' ELSE 'move of genes %s to %s from server %I to server %I' END,
			cur.first_gene, cur.last_gene, cur.from_server, cur.to_server) END,
		st.copied OPERATOR(pg_catalog.+) COALESCE(mv.rows_copied, 0), st.planned,
		CASE WHEN st.copied OPERATOR(pg_catalog.>) 0 AND st.secs OPERATOR(pg_catalog.>) 0 THEN pg_catalog.make_interval(secs =>
			GREATEST(st.left_rows OPERATOR(pg_catalog.-) COALESCE(mv.rows_copied, 0), 0)
			OPERATOR(pg_catalog.*) st.secs OPERATOR(pg_catalog./) st.copied) END,
		CASE WHEN r.throttled_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() THEN r.throttled_until END,
		CASE WHEN @extschema@.snowseq_rebalance_driven(r) THEN r.throttled_by END,
		CASE WHEN @extschema@.snowseq_caller_owns(r.parent) THEN r.error END,
		r.started_at, r.finished_at
	FROM @extschema@.snowseq_rebalance_runs r
	CROSS JOIN LATERAL (SELECT pg_catalog.count(*) FILTER (WHERE @extschema@.snowseq_rebalance_step_is_over(s.state))::integer AS done,
			pg_catalog.count(*)::integer AS total,
			COALESCE(pg_catalog.sum(s.rows_copied) FILTER (WHERE @extschema@.snowseq_rebalance_step_is_over(s.state)), 0)::bigint AS copied,
			COALESCE(pg_catalog.sum(s.rows), 0)::bigint AS planned,
			COALESCE(pg_catalog.sum(s.rows) FILTER (WHERE NOT @extschema@.snowseq_rebalance_step_is_over(s.state)), 0)::bigint AS left_rows,
			pg_catalog.sum(pg_catalog.date_part('epoch', s.finished_at OPERATOR(pg_catalog.-) s.started_at))
				FILTER (WHERE @extschema@.snowseq_rebalance_step_is_over(s.state)) AS secs
		FROM @extschema@.snowseq_rebalance_steps s WHERE s.run_id OPERATOR(pg_catalog.=) r.run_id) st
	LEFT JOIN LATERAL (SELECT s.* FROM @extschema@.snowseq_rebalance_steps s
		WHERE s.run_id OPERATOR(pg_catalog.=) r.run_id AND @extschema@.snowseq_rebalance_is_running(s.state)
		ORDER BY s.step LIMIT 1) cur ON true
	LEFT JOIN LATERAL (SELECT m.rows_copied FROM @extschema@.snowseq_moves m
		WHERE m.parent OPERATOR(pg_catalog.=) r.parent AND m.first_gene OPERATOR(pg_catalog.=) cur.first_gene
			AND m.last_gene OPERATOR(pg_catalog.=) cur.last_gene AND m.dest_server OPERATOR(pg_catalog.=) cur.to_server
			AND m.started_at OPERATOR(pg_catalog.>=) cur.started_at
		UNION ALL SELECT g.rows_copied FROM @extschema@.snowseq_merges g
		WHERE cur.from_server OPERATOR(pg_catalog.=) cur.to_server AND g.parent OPERATOR(pg_catalog.=) r.parent
			AND g.group_merge IS NULL AND g.first_gene OPERATOR(pg_catalog.=) cur.first_gene
			AND g.last_gene OPERATOR(pg_catalog.=) cur.last_gene AND g.started_at OPERATOR(pg_catalog.>=) cur.started_at
		LIMIT 1) mv ON true
	WHERE (snowseq_rebalance_status_impl.job IS NULL OR r.run_id OPERATOR(pg_catalog.=) snowseq_rebalance_status_impl.job)
		AND (@extschema@.snowseq_caller_owns(r.parent)
			OR @extschema@.snowseq_caller_has_privs_of(CAST('pg_monitor' AS pg_catalog.regrole)))
	ORDER BY r.run_id;
	IF NOT FOUND AND job IS NOT NULL THEN
		RAISE EXCEPTION 'rebalance job % does not exist', job
			USING ERRCODE = 'undefined_object',
				DETAIL = 'Or its table is not one the session''s role owns.',
				HINT = 'snowseq_rebalance_status() lists the jobs of the tables the role owns.';
	END IF;
END
$status$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_status_impl(bigint) IS
	'the body of snowseq_rebalance_status, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_status_impl(bigint) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_status(job bigint DEFAULT NULL)
	RETURNS TABLE (run_id bigint, parent regclass, state text, background boolean, job_role name,
		runner_alive boolean, steps_done integer, steps_total integer, step integer, step_running text,
		rows_copied bigint, rows_planned bigint, time_left interval, throttled_until timestamptz,
		throttled_by text, last_error text, started_at timestamptz, finished_at timestamptz)
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_status(bigint) IS
	'the rebalances (job: that one, an ERROR if the session''s role does not own its table) of the tables the session''s role owns (pg_monitor: all, without their errors): state, whether in the background and as which role, whether a process runs it, steps done of all, the step running, rows copied (the move running included) of the rows planned, time left at the copy rate of its steps done (throttles not counted), until when and why it sleeps for a throttle, the error that ended its worker';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_status(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_rebalance_status(bigint) TO pg_monitor;

-- Wait for a job to end (read committed: each look at it sees the last
-- commits): its final state; an ERROR with its error if its worker failed,
-- or if no process has run it for 10 seconds.
CREATE FUNCTION @extschema@.snowseq_rebalance_wait(job bigint)
	RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $wait$
DECLARE
	st record;
	run_state @extschema@.snowseq_rebalance_state;
	nap double precision := 0.05;
	orphan pg_catalog.timestamptz;
BEGIN
	IF job IS NULL THEN
		RAISE EXCEPTION 'the job to wait for must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
		RAISE EXCEPTION 'snowseq_rebalance_wait needs isolation level read committed'
			USING ERRCODE = 'feature_not_supported',
				HINT = 'Its snapshot must move on to see the job end: call it outside a repeatable read or serializable transaction.';
	END IF;
	IF pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN
		RAISE EXCEPTION 'snowseq_rebalance_wait cannot wait in a transaction that has written'
			USING ERRCODE = 'active_sql_transaction',
				HINT = 'A job''s worker begins when the transaction that started it ends, and a long wait would hold its locks: commit, then wait.';
	END IF;
	LOOP
		-- each look sees the processes as they are now, not as this
		-- transaction first read them
		PERFORM pg_catalog.pg_stat_clear_snapshot();
		SELECT * INTO st FROM @extschema@.snowseq_rebalance_status(job);
		run_state := st.state;
		IF NOT @extschema@.snowseq_rebalance_is_running(run_state) THEN
			-- stopped (resumable) by its worker's error
			IF NOT @extschema@.snowseq_rebalance_is_over(run_state) AND st.last_error IS NOT NULL THEN
				RAISE EXCEPTION 'rebalance job % failed: %', job, st.last_error
					USING ERRCODE = 'object_not_in_prerequisite_state',
						HINT = 'Fix the cause and resume it with snowseq_rebalance_start, or give it up with snowseq_rebalance_stop(abandon => true).';
			END IF;
			RETURN st.state;
		END IF;
		orphan := CASE WHEN NOT st.runner_alive THEN COALESCE(orphan, pg_catalog.clock_timestamp()) END;
		IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) orphan OPERATOR(pg_catalog.>) CAST('10 s' AS pg_catalog.interval) THEN
			RAISE EXCEPTION 'rebalance job % is running but no process has run it for 10 seconds', job
				USING ERRCODE = 'object_not_in_prerequisite_state',
					HINT = 'Its worker ended (the server log says why): resume it with snowseq_rebalance_start, or give it up with snowseq_rebalance_stop(abandon => true).';
		END IF;
		PERFORM pg_catalog.pg_sleep(nap);
		nap := LEAST(nap OPERATOR(pg_catalog.*) 2, 1);
	END LOOP;
END
$wait$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_wait(bigint) IS
	'wait (sleeping up to a second between looks) until rebalance job ends, and return its state (done, stopped, abandoned); an ERROR with its error if its worker failed, or if no process has run it for 10 seconds';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_wait(bigint) FROM PUBLIC;
-- ---- end of background rebalances ----

-- ---- rebalance: the driver that runs a plan step by step (1.3) ----
-- In a file of its own (issue 39): CALL snowseq_rebalance plans, runs and
-- commits between steps; what it calls is in rebalance.sql.
-- The run: not in a transaction block (it commits between moves), so no
-- SET clause; every name is qualified.
CREATE PROCEDURE @extschema@.snowseq_rebalance(parent regclass, strategy text DEFAULT 'rows',
	threshold double precision DEFAULT 1.25, drain name[] DEFAULT '{}', fill name[] DEFAULT '{}',
	sample interval DEFAULT '10 s', merge_below double precision DEFAULT 0)
	LANGUAGE plpgsql
	AS $run$
DECLARE
	run @extschema@.snowseq_rebalance_runs;
	s @extschema@.snowseq_rebalance_steps;
	mv record;
	nsteps integer;
	on_dest boolean;
	is_merge boolean;					-- the step merges (one server)
	throttled boolean;
	mine boolean;						-- this process held the run already
	t0 pg_catalog.timestamptz := pg_catalog.clock_timestamp();
	w0p pg_catalog.oid[];			-- strategy writes: the first reading of the sample
	w0 bigint[];
	w0x bigint[];
	w0_at pg_catalog.timestamptz;
BEGIN
	IF parent IS NULL THEN
		RAISE EXCEPTION 'the table of a rebalance must not be NULL';
	END IF;
	SELECT * INTO run FROM @extschema@.snowseq_rebalance_open_run(parent);
	IF FOUND THEN
		IF @extschema@.snowseq_rebalance_driven(run) AND run.runner_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() THEN
			RAISE EXCEPTION 'rebalance % of table % is running in the session of process %', run.run_id, parent, run.runner_pid
				USING ERRCODE = 'object_in_use',
					HINT = 'Wait for it, or stop it between moves with snowseq_rebalance_stop().';
		END IF;
		RAISE NOTICE 'rebalance %: resuming the run of table % (strategy %, threshold %) from its first step not done',
			run.run_id, parent, run.strategy, run.threshold;
	ELSE
		-- the arguments checked before the sample, which commits each
		-- second of it (no lock on the table, no old snapshot held)
		PERFORM FROM @extschema@.snowseq_rebalance_plan_from(parent, strategy, threshold, drain, fill, sample,
			NULL, NULL, NULL, NULL, true, merge_below);
		IF strategy OPERATOR(pg_catalog.=) 'writes' THEN
			CALL @extschema@.snowseq_rebalance_sample(parent, sample, w0p, w0, w0x, w0_at);
		END IF;
		-- the plan checks the arguments: an error takes the run's row back
		run.parent := parent;
		run.strategy := strategy;
		run.threshold := threshold;
		run.drain := drain;
		run.fill := fill;
		run.sample := COALESCE(sample, CAST('10 s' AS pg_catalog.interval));
		run.merge_below := merge_below;
		run := @extschema@.snowseq_rebalance_save_run(run);
		nsteps := @extschema@.snowseq_rebalance_plan_steps(run, drain, w0p, w0, w0x, w0_at);
		RAISE NOTICE 'rebalance %: % moves planned for table % (strategy %, threshold %)',
			run.run_id, nsteps, parent, strategy, threshold;
	END IF;
	-- a session taking the run on clears the stop that ended it; the
	-- process that already holds it (a worker that took it over, a session
	-- whose CALL was cut) keeps a stop asked since, and stops below
	mine := run.runner_pid IS NOT DISTINCT FROM pg_catalog.pg_backend_pid();
	run.state := @extschema@.snowseq_rebalance_next(run.state, 'take');
	run.runner_pid := pg_catalog.pg_backend_pid();
	run.runner_start := (SELECT a.backend_start FROM pg_catalog.pg_stat_activity a
		WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid());
	run := @extschema@.snowseq_rebalance_save_run(run, NOT mine);
	COMMIT;

	LOOP
		-- stopped between moves?
		SELECT * INTO run FROM @extschema@.snowseq_rebalance_runs r
			WHERE r.run_id OPERATOR(pg_catalog.=) run.run_id;
		IF run.stop IS NOT NULL THEN
			run := @extschema@.snowseq_rebalance_finish(run, run.stop);
			COMMIT;
			RAISE NOTICE 'rebalance %: %', run.run_id,
				CASE WHEN run.stop OPERATOR(pg_catalog.=) 'abandon' THEN 'abandoned between moves'
				ELSE 'stopped between moves; CALL snowseq_rebalance again to resume it' END;
			RETURN;
		END IF;

		SELECT * INTO s FROM @extschema@.snowseq_rebalance_steps st
			WHERE st.run_id OPERATOR(pg_catalog.=) run.run_id AND NOT @extschema@.snowseq_rebalance_step_is_over(st.state)
			ORDER BY st.step LIMIT 1;
		IF NOT FOUND THEN
			-- the plan estimated (writes assumed even over genes, and the
			-- tables are written meanwhile): plan again
			-- from what is there now, at most three rounds in all
			IF run.rounds OPERATOR(pg_catalog.<) 3 THEN
				IF run.strategy OPERATOR(pg_catalog.=) 'writes' THEN
					CALL @extschema@.snowseq_rebalance_sample(run.parent, run.sample, w0p, w0, w0x, w0_at);
				END IF;
				-- drained servers have left the map
				IF @extschema@.snowseq_rebalance_plan_steps(run, ARRAY(SELECT d FROM pg_catalog.unnest(run.drain) d
						WHERE EXISTS (SELECT FROM @extschema@.snowseq_route_ranges() sm WHERE sm.shard OPERATOR(pg_catalog.=) d)),
						w0p, w0, w0x, w0_at) OPERATOR(pg_catalog.>) 0 THEN
					run.rounds := run.rounds OPERATOR(pg_catalog.+) 1;
					run := @extschema@.snowseq_rebalance_save_run(run);
					COMMIT;
					RAISE NOTICE 'rebalance %: planned again from the loads now: more moves', run.run_id;
					CONTINUE;
				END IF;
			END IF;
			run := @extschema@.snowseq_rebalance_finish(run, 'finish');
			COMMIT;
			SELECT pg_catalog.count(*) AS moves, pg_catalog.sum(st.rows_copied) AS copied INTO mv
				FROM @extschema@.snowseq_rebalance_steps st WHERE st.run_id OPERATOR(pg_catalog.=) run.run_id;
			RAISE NOTICE 'rebalance %: done, % moves, % rows copied, this call took %', run.run_id,
				mv.moves, COALESCE(mv.copied, 0), pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0;
			RETURN;
		END IF;

		-- a move interrupted (a router crash) is finished or undone first;
		-- the map says whether its genes are on the destination
		IF NOT @extschema@.snowseq_rebalance_step_is_planned(s.state) THEN
			FOR mv IN SELECT c.move_id, c.server, c.object, c.action FROM @extschema@.snowseq_move_cleanup() c LOOP
				RAISE NOTICE 'rebalance %: step % was cut: move %: %', run.run_id, s.step, mv.move_id,
					pg_catalog.concat_ws(' ', mv.action, mv.object,
						'on server ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(mv.server));
			END LOOP;
		END IF;
		-- a merge is a step whose servers are one: its record says whether
		-- it is done; a move's, the map
		is_merge := s.from_server OPERATOR(pg_catalog.=) s.to_server;
		SELECT * INTO mv FROM @extschema@.snowseq_rebalance_step_move(run.parent, s, NULL);
		on_dest := mv.move_id IS NOT NULL;
		IF NOT is_merge THEN
			-- the router's own lookup (route.c, its cached map), as snowseq_route routes
			SELECT pg_catalog.bool_and(@extschema@.snowseq_route_gene(g) OPERATOR(pg_catalog.=) s.to_server) INTO on_dest
				FROM pg_catalog.generate_series(s.first_gene, s.last_gene) g;
		END IF;
		IF on_dest AND NOT @extschema@.snowseq_rebalance_step_is_planned(s.state) THEN
			PERFORM @extschema@.snowseq_rebalance_step_done(s, mv.move_id, mv.rows_copied);
			COMMIT;
			RAISE NOTICE 'rebalance %: step % (genes % to %) was done by % %', run.run_id, s.step,
				s.first_gene, s.last_gene, CASE WHEN is_merge THEN 'merge' ELSE 'move' END, mv.move_id;
			CONTINUE;
		END IF;
		-- the throttle sleeps before a step; a stop asked meanwhile is seen first
		CALL @extschema@.snowseq_rebalance_throttle(run.run_id, ARRAY[s.from_server, s.to_server], throttled);
		CONTINUE WHEN throttled;

		SELECT pg_catalog.max(st.step) INTO nsteps FROM @extschema@.snowseq_rebalance_steps st
			WHERE st.run_id OPERATOR(pg_catalog.=) run.run_id;
		s.state := @extschema@.snowseq_rebalance_next(s.state, 'begin');
		s.started_at := pg_catalog.clock_timestamp();
		s.finished_at := NULL;
		PERFORM @extschema@.snowseq_rebalance_save_steps(ARRAY[s]);
		COMMIT;
		IF is_merge THEN
			RAISE NOTICE 'rebalance %: step % of %: the partitions of genes % to % of table % on server "%" merge (about % rows)',
				run.run_id, s.step, nsteps, s.first_gene, s.last_gene, run.parent, s.from_server, s.rows;
			CALL @extschema@.snowseq_merge_partitions(run.parent, s.first_gene, s.last_gene);
		ELSE
			RAISE NOTICE 'rebalance %: step % of %: genes % to % of table % from server "%" to server "%" (about % rows)',
				run.run_id, s.step, nsteps, s.first_gene, s.last_gene, run.parent, s.from_server, s.to_server, s.rows;
			CALL @extschema@.snowseq_move_genes(run.parent, s.first_gene, s.last_gene, s.to_server);
		END IF;
		SELECT * INTO mv FROM @extschema@.snowseq_rebalance_step_move(run.parent, s, s.started_at);
		IF mv.done THEN
			PERFORM @extschema@.snowseq_rebalance_step_done(s, mv.move_id, mv.rows_copied);
			COMMIT;
		ELSE
			s.state := @extschema@.snowseq_rebalance_next(s.state, 'fail');
			s.move_id := CASE WHEN NOT is_merge THEN mv.move_id END;
			s.error := COALESCE(mv.error, CASE WHEN is_merge THEN 'the merge did not finish' ELSE 'the move did not finish' END);
			s.finished_at := pg_catalog.clock_timestamp();
			PERFORM @extschema@.snowseq_rebalance_save_steps(ARRAY[s]);
			run := @extschema@.snowseq_rebalance_finish(run, 'fail');
			COMMIT;
			RAISE EXCEPTION 'rebalance %: step % (% %, genes % to % % server "%") failed: %', run.run_id, s.step,
				CASE WHEN is_merge THEN 'merge' ELSE 'move' END, mv.move_id, s.first_gene, s.last_gene,
				CASE WHEN is_merge THEN 'on' ELSE 'to' END, s.to_server, s.error
				USING ERRCODE = 'object_not_in_prerequisite_state',
					HINT = 'Fix the cause and CALL snowseq_rebalance again to retry the step, or give the run up with snowseq_rebalance_stop(abandon => true).';
		END IF;
	END LOOP;
END
$run$;
COMMENT ON PROCEDURE @extschema@.snowseq_rebalance(regclass, text, double precision, name[], name[], interval, double precision) IS
	'plan the moves and merges of snowseq_rebalance_plan (strategy writes: sampled again for each round, committing each second of the sample) into snowseq_rebalance_steps and run them one by one with snowseq_move_genes and snowseq_merge_partitions, committing between steps; a CALL with a run of the table not finished (stopped, or cut by a crash) continues it from its first step not done';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_rebalance(regclass, text, double precision, name[], name[], interval, double precision) FROM PUBLIC;
-- ---- merges: neighbouring partitions of one server become one (1.3) ----
-- The records of merges, one per table of the placement group (the first
-- leads: group_merge NULL, and holds the state).  Written by snowseq alone,
-- as the owner of the records, like those of moves: the resolver and
-- cleanup act on them (a prepared transaction to commit or roll back, a
-- table to drop), so the guard refuses changes by any other role.
-- The states of a merge, those of MoveStateNames (src/shards/operations/merge.h) a
-- merge goes through: the one list of them in SQL, written and read as
-- text by snowseq, as a move's.
CREATE TYPE @extschema@.snowseq_merge_state AS ENUM
	('prepare', 'copy', 'switch', 'switched', 'done', 'failed', 'rollback');
COMMENT ON TYPE @extschema@.snowseq_merge_state IS
	'the states of a merge (snowseq_merges.state)';
CREATE CAST (pg_catalog.text AS @extschema@.snowseq_merge_state) WITH INOUT AS ASSIGNMENT;
-- What a state is, derived from the merge's machine (src/shards/records/move_states.c).
CREATE FUNCTION @extschema@.snowseq_merge_is_over(state @extschema@.snowseq_merge_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_merge_is_over'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_merge_is_over(@extschema@.snowseq_merge_state) IS
	'whether a merge in this state is over: nothing of it runs or is left (done or failed)';
CREATE FUNCTION @extschema@.snowseq_merge_is_done(state @extschema@.snowseq_merge_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_merge_is_done'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_merge_is_done(@extschema@.snowseq_merge_state) IS
	'whether a merge in this state is finished';
CREATE TABLE @extschema@.snowseq_merges (
	merge_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	group_merge bigint,
	parent regclass NOT NULL,
	first_gene integer NOT NULL
		CHECK (first_gene OPERATOR(pg_catalog.>=) 0 AND first_gene OPERATOR(pg_catalog.<=) 32767),
	last_gene integer NOT NULL
		CHECK (last_gene OPERATOR(pg_catalog.>=) first_gene AND last_gene OPERATOR(pg_catalog.<=) 32767),
	server name NOT NULL,
	parts text[] NOT NULL,
	source_tables text[] NOT NULL,
	new_part_name text NOT NULL,
	new_table text NOT NULL,
	part_lower bigint,
	part_upper bigint,
	id_column text NOT NULL,
	token text NOT NULL,
	state @extschema@.snowseq_merge_state NOT NULL,
	error text,
	mover oid NOT NULL,
	started_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	copied_at timestamptz,
	switched_at timestamptz,
	finished_at timestamptz,
	rows_copied bigint,
	pause_ms double precision
);
CREATE INDEX snowseq_merges_group_merge ON @extschema@.snowseq_merges (group_merge);
COMMENT ON TABLE @extschema@.snowseq_merges IS
	'merges of neighbouring partitions of one server run on this router: one row per table of the placement group, the first (group_merge NULL) leads';
COMMENT ON COLUMN @extschema@.snowseq_merges.state IS
	'prepare, copy, switch, switched: in progress (or interrupted); done, failed: over; rollback: leftovers remain';
COMMENT ON COLUMN @extschema@.snowseq_merges.parts IS
	'the router''s partitions that became one, in gene order';
COMMENT ON COLUMN @extschema@.snowseq_merges.source_tables IS
	'the tables they read on the server, dropped by the switch';
COMMENT ON COLUMN @extschema@.snowseq_merges.new_table IS
	'the table on the server that holds the rows of all of them, filled while they take writes';
COMMENT ON COLUMN @extschema@.snowseq_merges.pause_ms IS
	'how long the router held the tables locked for the switch';
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_merges
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_merges ENABLE ALWAYS TRIGGER snowseq_guard;
GRANT SELECT (merge_id, state, started_at, copied_at, switched_at)
	ON @extschema@.snowseq_merges TO pg_monitor;

-- On a shard server: the trigger that keeps the merged table current while
-- it fills.  It writes into another table as that table's owner, so it is
-- not for PUBLIC (creating a trigger needs EXECUTE), and it refuses a
-- target whose owner is not the owner of the table it fires on.
CREATE FUNCTION @extschema@.snowseq_merge_mirror() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_merge_mirror'
	LANGUAGE C;
COMMENT ON FUNCTION @extschema@.snowseq_merge_mirror() IS
	'trigger of a merge on a shard table: applies each row written to the merged table (arguments: that table, the ID column)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_merge_mirror() FROM PUBLIC;

CREATE PROCEDURE @extschema@.snowseq_merge_partitions(parent regclass, first_gene integer, last_gene integer)
	AS 'MODULE_PATHNAME', 'snowseq_merge_partitions'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_merge_partitions(regclass, integer, integer) IS
	'make the partitions holding genes first_gene..last_gene, on one server, one partition, for every table of the placement group, while they take writes';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_merge_partitions(regclass, integer, integer) FROM PUBLIC;
-- ---- end of merges (1.3) ----

-- ---- the moves by their own names (1.3) ----
-- "shard" has one meaning (src/shards/README.md, "Glossary"): a server of
-- the map, as the map's shard column and snowseq_route_key name it.  The
-- older names of two moves used it for a partition: snowseq_split_shard
-- splits a partition, snowseq_merge_shards moves a partition to another
-- server and merges no table.  Their clear names are the same procedures;
-- the older names stay.
CREATE PROCEDURE @extschema@.snowseq_split_partition(parent pg_catalog.regclass, at_gene pg_catalog.int4, to_server pg_catalog.name)
	AS 'MODULE_PATHNAME', 'snowseq_split_shard'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_split_partition(pg_catalog.regclass, pg_catalog.int4, pg_catalog.name) IS
	'move the genes from at_gene to the end of its partition to another server; snowseq_split_shard is its older name';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_split_partition(pg_catalog.regclass, pg_catalog.int4, pg_catalog.name) FROM PUBLIC;
CREATE PROCEDURE @extschema@.snowseq_move_to_neighbour(parent pg_catalog.regclass, gene pg_catalog.int4)
	AS 'MODULE_PATHNAME', 'snowseq_merge_shards'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_move_to_neighbour(pg_catalog.regclass, pg_catalog.int4) IS
	'move the partition holding gene to the server of its left neighbour (its right one for the first); snowseq_merge_shards is its older name';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_move_to_neighbour(pg_catalog.regclass, pg_catalog.int4) FROM PUBLIC;
-- A role granted an older name keeps what it may do under the clear one:
-- each EXECUTE grant of snowseq_split_shard and snowseq_merge_shards (but
-- the owner's) is made on snowseq_split_partition and
-- snowseq_move_to_neighbour too.
DO $$
DECLARE
	g record;
BEGIN
	FOR g IN
		SELECT DISTINCT n.clear, a.grantee
		FROM (VALUES
			(CAST('@extschema@.snowseq_split_shard(pg_catalog.regclass, pg_catalog.int4, pg_catalog.name)' AS pg_catalog.regprocedure),
			 '@extschema@.snowseq_split_partition(pg_catalog.regclass, pg_catalog.int4, pg_catalog.name)'),
			(CAST('@extschema@.snowseq_merge_shards(pg_catalog.regclass, pg_catalog.int4)' AS pg_catalog.regprocedure),
			 '@extschema@.snowseq_move_to_neighbour(pg_catalog.regclass, pg_catalog.int4)')) AS n(old, clear),
			pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
		WHERE p.oid OPERATOR(pg_catalog.=) n.old AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
			AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON PROCEDURE %s TO %s', g.clear,
								  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
								  ELSE CAST(CAST(g.grantee AS pg_catalog.regrole) AS pg_catalog.text) END);
	END LOOP;
END
$$;

-- ---- drift between the router and its shard servers (1.3) ----
CREATE FUNCTION @extschema@.snowseq_check_shards(OUT parent pg_catalog.regclass, OUT server pg_catalog.text,
	OUT remote_table pg_catalog.text, OUT kind pg_catalog.text, OUT object pg_catalog.text,
	OUT router pg_catalog.text, OUT shard pg_catalog.text, OUT problem pg_catalog.text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_check_shards'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_check_shards() IS
	'one row per difference between the router''s gene-sharded tables and their tables on the shard servers (columns, indexes, CHECK and foreign key constraints, triggers), and per server of another snowseq version; no row: no drift';
REVOKE ALL ON FUNCTION @extschema@.snowseq_check_shards() FROM PUBLIC;

-- ---- type prefixes of public text IDs (1.3) ----
-- ord_<code>, as TypeID and Stripe-style IDs write them; reading checks the
-- prefix.  The same markings and rights as the functions without one.
CREATE FUNCTION @extschema@.snowseq_public_text(id pg_catalog.int8, prefix pg_catalog.text) RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'snowseq_public_text_prefixed'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_public_text(pg_catalog.int8, pg_catalog.text) IS
	'public ID of a gene ID as text with a type prefix: prefix, an underscore and the 14 characters of snowseq_public_text(id)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_public_text(pg_catalog.int8, pg_catalog.text) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_from_public_text(code pg_catalog.text, prefix pg_catalog.text) RETURNS pg_catalog.int8
	AS 'MODULE_PATHNAME', 'snowseq_from_public_text_prefixed'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_from_public_text(pg_catalog.text, pg_catalog.text) IS
	'gene ID of a public text ID of that type prefix; an ERROR for another prefix, none, or a mistyped code';
REVOKE ALL ON FUNCTION @extschema@.snowseq_from_public_text(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

-- ---- monitoring of merges and rebalance runs, for pg_monitor (1.3) ----
-- The exporter's queries read what a merge and a run are (table, genes,
-- server, state, instants, rows), not their tokens, tables made or errors.
GRANT SELECT (group_merge, parent, first_gene, last_gene, server)
	ON @extschema@.snowseq_merges TO pg_monitor;
GRANT SELECT (run_id, parent, state, runner_pid, runner_start, started_at)
	ON @extschema@.snowseq_rebalance_runs TO pg_monitor;
GRANT SELECT (run_id, step, state, rows_copied)
	ON @extschema@.snowseq_rebalance_steps TO pg_monitor;
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
