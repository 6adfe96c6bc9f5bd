--@block merges
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

--@end
