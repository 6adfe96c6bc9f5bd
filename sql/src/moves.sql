-- Elastic shards
------------------------------------------------------------------------

--@block move_state
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
--@end

-- On a router: one row per move of a gene range, kept as history.  Not
-- marked for pg_dump: the rows name replication objects of this cluster's
-- own moves, which a restored copy must neither resume nor clean up.
CREATE TABLE @extschema@.snowseq_moves (
	move_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	parent regclass NOT NULL,
	first_gene integer NOT NULL
		CHECK (first_gene OPERATOR(pg_catalog.>=) 0 AND first_gene OPERATOR(pg_catalog.<=) 32767),
	last_gene integer NOT NULL
		CHECK (last_gene OPERATOR(pg_catalog.>=) first_gene AND last_gene OPERATOR(pg_catalog.<=) 32767),
	source_server name NOT NULL,
	dest_server name NOT NULL,
	kind text NOT NULL
		CHECK (kind OPERATOR(pg_catalog.=) ANY (ARRAY['whole', 'prefix', 'suffix']::text[])),
	part_name text NOT NULL,
	part_lower bigint,
	part_upper bigint,
	new_part_name text NOT NULL,
	source_table text NOT NULL,
	dest_table text NOT NULL,
	id_column text NOT NULL,
	dest_created boolean,
	token text NOT NULL,
	fence_id integer,
	sub_oid oid,
	state @extschema@.snowseq_move_state NOT NULL,
	error text,
	started_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	copied_at timestamptz,
	blocked_at timestamptz,
	switched_at timestamptz,
	finished_at timestamptz,
	rows_copied bigint,
	pause_ms double precision,
	mover oid,
	rows_total bigint,
	bytes_copied bigint,
	lag_bytes bigint,
	copy_started_at timestamptz,
	progress_at timestamptz,
	group_move bigint,
	revert_window interval,
	revertable_until timestamptz,
	reverts bigint,
	back_lsn pg_lsn
);
--@block move_token_key
-- A revert is named after the move it reverts (the way back's name), and
-- a revert that failed (over: its undo left nothing) leaves that name to
-- the next revert of the move: unique among the moves not failed.
CREATE UNIQUE INDEX snowseq_moves_token_key ON @extschema@.snowseq_moves (token)
	WHERE NOT @extschema@.snowseq_move_is_undone(state);
--@end
CREATE INDEX snowseq_moves_group_move ON @extschema@.snowseq_moves (group_move);
COMMENT ON TABLE @extschema@.snowseq_moves IS
	'gene-range moves run on this router: state, objects and timings';
COMMENT ON COLUMN @extschema@.snowseq_moves.state IS
	'prepare, copy, block, switch, switched: in progress (or interrupted); revertable: switched, the source kept current; done, failed, reverted: over; rollback: leftovers remain';
COMMENT ON COLUMN @extschema@.snowseq_moves.part_lower IS
	'lower bound of the partition the move cut, NULL for MINVALUE';
COMMENT ON COLUMN @extschema@.snowseq_moves.part_upper IS
	'upper bound of the partition the move cut, NULL for MAXVALUE';
COMMENT ON COLUMN @extschema@.snowseq_moves.dest_created IS
	'true: the move created dest_table (marked by a comment until done); false: it reused an empty one';
COMMENT ON COLUMN @extschema@.snowseq_moves.mover IS
	'the role that ran the move; the resolver at the router''s start acts as it';
COMMENT ON COLUMN @extschema@.snowseq_moves.rows_total IS
	'rows of the moved genes on the source when the copy began';
COMMENT ON COLUMN @extschema@.snowseq_moves.bytes_copied IS
	'size of the copy on the destination (pg_table_size), as last seen';
COMMENT ON COLUMN @extschema@.snowseq_moves.lag_bytes IS
	'WAL of the source not yet confirmed by the subscription, as last seen';
COMMENT ON COLUMN @extschema@.snowseq_moves.copy_started_at IS
	'when the initial copy began';
COMMENT ON COLUMN @extschema@.snowseq_moves.progress_at IS
	'when the progress columns were last written';
COMMENT ON COLUMN @extschema@.snowseq_moves.group_move IS
	'NULL: the move''s leading record (its state and progress are the whole move''s); else the leading record of the move this table moved in';
COMMENT ON COLUMN @extschema@.snowseq_moves.revert_window IS
	'how long the move keeps its source current after the switch (snowseq.move_revert_window when it ran); NULL: it finishes at once';
COMMENT ON COLUMN @extschema@.snowseq_moves.revertable_until IS
	'while the move is revertable: when it is finalized unless snowseq_move_revert or snowseq_move_finalize comes first';
COMMENT ON COLUMN @extschema@.snowseq_moves.reverts IS
	'a revert: the move it reverts';
COMMENT ON COLUMN @extschema@.snowseq_moves.back_lsn IS
	'the destination''s WAL position when the move stopped replicating to it: replication back to the source starts there';
COMMENT ON COLUMN @extschema@.snowseq_moves.pause_ms IS
	'how long writes to the moved genes were held back on the source';

-- On a shard server: the fences the snowseq_fence trigger enforces.  A
-- fence is open (no effect), block (writers of its IDs wait), reject (they
-- fail and retry) or moved (the IDs live elsewhere now; writes are
-- refused).  Not marked for pg_dump: rows name tables by OID.
CREATE TABLE @extschema@.snowseq_fence (
	fence_id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	token text NOT NULL UNIQUE,
	relid oid NOT NULL,
	lo bigint,
	hi bigint,
	state text NOT NULL
		CHECK (state OPERATOR(pg_catalog.=) ANY (ARRAY['open', 'block', 'reject', 'moved']::text[])),
	to_server text NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE @extschema@.snowseq_fence IS
	'ID ranges of local tables being moved away (block, reject) or gone (moved); lo inclusive, hi exclusive, NULL unbounded';

CREATE FUNCTION @extschema@.snowseq_fence() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_fence'
	LANGUAGE C;
COMMENT ON FUNCTION @extschema@.snowseq_fence() IS
	'trigger on a shard table: holds back, refuses or lets through writes of IDs in a fence (argument: the ID column)';

CREATE FUNCTION @extschema@.snowseq_fence_open(token text, rel regclass, lo bigint, hi bigint, to_server text)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_fence_open'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_fence_open(text, regclass, bigint, bigint, text) IS
	'an open fence on an ID range of a local table, for a move; returns its id';
REVOKE ALL ON FUNCTION @extschema@.snowseq_fence_open(text, regclass, bigint, bigint, text) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_fence_state(fence_id integer, state text) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_fence_state'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_fence_state(integer, text) IS
	'set a fence to open, block, reject or moved; every backend sees it at its next write';
REVOKE ALL ON FUNCTION @extschema@.snowseq_fence_state(integer, text) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_fence_drop(token text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_fence_drop'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_fence_drop(text) IS
	'remove the fence of a move (unless it is a moved tombstone); true if one was removed';
REVOKE ALL ON FUNCTION @extschema@.snowseq_fence_drop(text) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_fence_clear(rel regclass) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_fence_clear'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_fence_clear(regclass) IS
	'remove every fence of a table, tombstones included (an empty table about to receive a range)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_fence_clear(regclass) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_fence_wait(fence_id integer, timeout_ms integer) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_fence_wait'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_fence_wait(integer, integer) IS
	'wait until every transaction that was writing to the fenced table has ended or waits on the fence; false on timeout';
REVOKE ALL ON FUNCTION @extschema@.snowseq_fence_wait(integer, integer) FROM PUBLIC;

-- Moves are procedures: they commit between steps, and CREATE and DROP
-- SUBSCRIPTION run outside a transaction block on the destination.
CREATE PROCEDURE @extschema@.snowseq_move_genes(parent regclass, first_gene integer, last_gene integer,
									to_server name)
	AS 'MODULE_PATHNAME', 'snowseq_move_genes'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_move_genes(regclass, integer, integer, name) IS
	'move the rows of genes first_gene..last_gene of a sharded table to a postgres_fdw server, online';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_move_genes(regclass, integer, integer, name) FROM PUBLIC;

CREATE PROCEDURE @extschema@.snowseq_split_shard(parent regclass, at_gene integer, to_server name)
	AS 'MODULE_PATHNAME', 'snowseq_split_shard'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_split_shard(regclass, integer, name) IS
	'move the genes from at_gene to the end of its partition to another server';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_split_shard(regclass, integer, name) FROM PUBLIC;

CREATE PROCEDURE @extschema@.snowseq_merge_shards(parent regclass, gene integer)
	AS 'MODULE_PATHNAME', 'snowseq_merge_shards'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_merge_shards(regclass, integer) IS
	'move the partition holding gene to the server of its left neighbour (its right one for the first)';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_merge_shards(regclass, integer) FROM PUBLIC;

--@block clear_names
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
--@end

CREATE FUNCTION @extschema@.snowseq_move_cleanup(
	OUT move_id bigint, OUT parent regclass, OUT first_gene integer, OUT last_gene integer,
	OUT server name, OUT object text, OUT action text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_move_cleanup'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_move_cleanup() IS
	'finish or undo interrupted moves and remove their replication slots, publications, subscriptions and copies; one row per object';
REVOKE ALL ON FUNCTION @extschema@.snowseq_move_cleanup() FROM PUBLIC;

-- ---- moves: crash-safe switch (1.2) ----
-- The source's part of a switch is a prepared transaction that the router's
-- record decides; at the router's start a resolver commits or rolls it
-- back, acting as the role that ran the move (its user mappings).
-- ---- end of moves: crash-safe switch (1.2) ----

-- ---- moves: progress (1.2) ----
-- A move commits its progress about twice a second while it copies, so
-- that other sessions see it; the columns stay as the move's record.

-- The moves not over, with their progress, as pg_stat_progress_* views
-- show commands: phase, rows copied of the total, bytes, lag, time left
-- (the copy's rate so far, over the rows left).
--@block move_progress
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
--@end
-- ---- end of moves: progress (1.2) ----

-- ---- moves: placement groups (1.2) ----
-- snowseq_shard_map governs every gene-sharded table, so a move takes the
-- genes of all of them at once (the placement group): one record per
-- table, those of the other tables pointing at the move's leading record.


-- Without a table: every gene-sharded table.
CREATE PROCEDURE @extschema@.snowseq_move_genes(first_gene integer, last_gene integer, to_server name)
	AS 'MODULE_PATHNAME', 'snowseq_move_genes_all'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_move_genes(integer, integer, name) IS
	'move the rows of genes first_gene..last_gene of every gene-sharded table to a postgres_fdw server, online, in one move';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_move_genes(integer, integer, name) FROM PUBLIC;
-- ---- end of moves: placement groups (1.2) ----
--@block move_locks
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
--@end
--@block move_objects

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

--@end
--@block move_revert

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

--@end
--@block move_guard
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

--@end
