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
--@include create_counter
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

--@include counter_status

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
--@include reservations
--@include status_grants
-- ---- end of status: who may read it (1.3) ----

--@include wrap_keys_drop
--@include guard
--@include capacity
--@include move_locks
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
--@include move_state
DROP VIEW @extschema@.snowseq_move_progress;
ALTER TABLE @extschema@.snowseq_moves DROP CONSTRAINT snowseq_moves_state_check;
ALTER TABLE @extschema@.snowseq_moves DROP CONSTRAINT snowseq_moves_token_key;
ALTER TABLE @extschema@.snowseq_moves
	ALTER COLUMN state TYPE @extschema@.snowseq_move_state USING state::@extschema@.snowseq_move_state;
COMMENT ON COLUMN @extschema@.snowseq_moves.state IS
	'prepare, copy, block, switch, switched: in progress (or interrupted); revertable: switched, the source kept current; done, failed, reverted: over; rollback: leftovers remain';
--@include move_token_key
--@include move_objects
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

--@include move_progress
--@include move_revert
--@include move_guard
--@include monitoring_grants
-- snowseq_shard_stats gains the writes and reads of each partition's table
-- from its server's cumulative statistics: a new C symbol, so the 1.2
-- definition never meets the wider row
DROP FUNCTION @extschema@.snowseq_shard_stats(regclass);
-- elastic shards read the map as the routing functions do, through their
-- cache (snowseq_route_ranges)
--@include route_ranges
--@include shard_stats

--@include rebalance
--@include rebalance_run
--@include merges
--@include clear_names
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
--@include check_shards
--@include public_text_prefix

--@include monitoring_runs
--@include overloads
