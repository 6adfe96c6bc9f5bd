/* snowseq--1.0--1.1.sql: upgrade of the snowseq extension from 1.0 to 1.1 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.1'" to load this file. \quit

------------------------------------------------------------------------
-- Elastic shards
------------------------------------------------------------------------

-- On a router: one row per move of a gene range, kept as history.  Not
-- marked for pg_dump: the rows name replication objects of this cluster's
-- own moves, which a restored copy must neither resume nor clean up.
CREATE TABLE snowseq_moves (
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
	token text NOT NULL UNIQUE,
	fence_id integer,
	sub_oid oid,
	state text NOT NULL
		CHECK (state OPERATOR(pg_catalog.=) ANY (ARRAY['prepare', 'copy', 'block', 'switch',
				'switched', 'done', 'failed', 'rollback']::text[])),
	error text,
	started_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	copied_at timestamptz,
	blocked_at timestamptz,
	switched_at timestamptz,
	finished_at timestamptz,
	rows_copied bigint,
	pause_ms double precision
);
COMMENT ON TABLE snowseq_moves IS
	'gene-range moves run on this router: state, objects and timings';
COMMENT ON COLUMN snowseq_moves.state IS
	'prepare, copy, block, switch, switched: in progress (or interrupted); done, failed: over; rollback: leftovers remain';
COMMENT ON COLUMN snowseq_moves.part_lower IS
	'lower bound of the partition the move cut, NULL for MINVALUE';
COMMENT ON COLUMN snowseq_moves.part_upper IS
	'upper bound of the partition the move cut, NULL for MAXVALUE';
COMMENT ON COLUMN snowseq_moves.dest_created IS
	'true: the move created dest_table (marked by a comment until done); false: it reused an empty one';
COMMENT ON COLUMN snowseq_moves.pause_ms IS
	'how long writes to the moved genes were held back on the source';

-- On a shard server: the fences the snowseq_fence trigger enforces.  A
-- fence is open (no effect), block (writers of its IDs wait), reject (they
-- fail and retry) or moved (the IDs live elsewhere now; writes are
-- refused).  Not marked for pg_dump: rows name tables by OID.
CREATE TABLE snowseq_fence (
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
COMMENT ON TABLE snowseq_fence IS
	'ID ranges of local tables being moved away (block, reject) or gone (moved); lo inclusive, hi exclusive, NULL unbounded';

CREATE FUNCTION snowseq_fence() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_fence'
	LANGUAGE C;
COMMENT ON FUNCTION snowseq_fence() IS
	'trigger on a shard table: holds back, refuses or lets through writes of IDs in a fence (argument: the ID column)';

CREATE FUNCTION snowseq_fence_open(token text, rel regclass, lo bigint, hi bigint, to_server text)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_fence_open'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_fence_open(text, regclass, bigint, bigint, text) IS
	'an open fence on an ID range of a local table, for a move; returns its id';
REVOKE ALL ON FUNCTION snowseq_fence_open(text, regclass, bigint, bigint, text) FROM PUBLIC;

CREATE FUNCTION snowseq_fence_state(fence_id integer, state text) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_fence_state'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_fence_state(integer, text) IS
	'set a fence to open, block, reject or moved; every backend sees it at its next write';
REVOKE ALL ON FUNCTION snowseq_fence_state(integer, text) FROM PUBLIC;

CREATE FUNCTION snowseq_fence_drop(token text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_fence_drop'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_fence_drop(text) IS
	'remove the fence of a move (unless it is a moved tombstone); true if one was removed';
REVOKE ALL ON FUNCTION snowseq_fence_drop(text) FROM PUBLIC;

CREATE FUNCTION snowseq_fence_clear(rel regclass) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_fence_clear'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_fence_clear(regclass) IS
	'remove every fence of a table, tombstones included (an empty table about to receive a range)';
REVOKE ALL ON FUNCTION snowseq_fence_clear(regclass) FROM PUBLIC;

CREATE FUNCTION snowseq_fence_wait(fence_id integer, timeout_ms integer) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_fence_wait'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_fence_wait(integer, integer) IS
	'wait until every transaction that was writing to the fenced table has ended or waits on the fence; false on timeout';
REVOKE ALL ON FUNCTION snowseq_fence_wait(integer, integer) FROM PUBLIC;

-- Moves are procedures: they commit between steps, and CREATE and DROP
-- SUBSCRIPTION run outside a transaction block on the destination.
CREATE PROCEDURE snowseq_move_genes(parent regclass, first_gene integer, last_gene integer,
									to_server name)
	AS 'MODULE_PATHNAME', 'snowseq_move_genes'
	LANGUAGE C;
COMMENT ON PROCEDURE snowseq_move_genes(regclass, integer, integer, name) IS
	'move the rows of genes first_gene..last_gene of a sharded table to a postgres_fdw server, online';
REVOKE ALL ON PROCEDURE snowseq_move_genes(regclass, integer, integer, name) FROM PUBLIC;

CREATE PROCEDURE snowseq_split_shard(parent regclass, at_gene integer, to_server name)
	AS 'MODULE_PATHNAME', 'snowseq_split_shard'
	LANGUAGE C;
COMMENT ON PROCEDURE snowseq_split_shard(regclass, integer, name) IS
	'move the genes from at_gene to the end of its partition to another server';
REVOKE ALL ON PROCEDURE snowseq_split_shard(regclass, integer, name) FROM PUBLIC;

CREATE PROCEDURE snowseq_merge_shards(parent regclass, gene integer)
	AS 'MODULE_PATHNAME', 'snowseq_merge_shards'
	LANGUAGE C;
COMMENT ON PROCEDURE snowseq_merge_shards(regclass, integer) IS
	'move the partition holding gene to the server of its left neighbour (its right one for the first)';
REVOKE ALL ON PROCEDURE snowseq_merge_shards(regclass, integer) FROM PUBLIC;

CREATE FUNCTION snowseq_move_cleanup(
	OUT move_id bigint, OUT parent regclass, OUT first_gene integer, OUT last_gene integer,
	OUT server name, OUT object text, OUT action text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_move_cleanup'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_move_cleanup() IS
	'finish or undo interrupted moves and remove their replication slots, publications, subscriptions and copies; one row per object';
REVOKE ALL ON FUNCTION snowseq_move_cleanup() FROM PUBLIC;

CREATE FUNCTION snowseq_shard_stats(parent regclass,
	OUT first_gene integer, OUT last_gene integer, OUT shard text,
	OUT partition regclass, OUT rows bigint, OUT bytes bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_shard_stats'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_shard_stats(regclass) IS
	'one row per routing-map entry and partition of a sharded table: genes, server, rows and row bytes, counted where they live';
REVOKE ALL ON FUNCTION snowseq_shard_stats(regclass) FROM PUBLIC;
