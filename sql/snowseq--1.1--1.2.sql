/* snowseq--1.1--1.2.sql: upgrade of the snowseq extension from 1.1 to 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.2'" to load this file. \quit

-- ---- moves: crash-safe switch (1.2) ----
-- The source's part of a switch is a prepared transaction that the router's
-- record decides; at the router's start a resolver commits or rolls it
-- back, acting as the role that ran the move (its user mappings).
ALTER TABLE @extschema@.snowseq_moves ADD COLUMN mover oid;
COMMENT ON COLUMN @extschema@.snowseq_moves.mover IS
	'the role that ran the move; the resolver at the router''s start acts as it';
-- ---- end of moves: crash-safe switch (1.2) ----

-- ---- moves: progress (1.2) ----
-- A move commits its progress about twice a second while it copies, so
-- that other sessions see it; the columns stay as the move's record.
ALTER TABLE @extschema@.snowseq_moves
	ADD COLUMN rows_total bigint,
	ADD COLUMN bytes_copied bigint,
	ADD COLUMN lag_bytes bigint,
	ADD COLUMN copy_started_at timestamptz,
	ADD COLUMN progress_at timestamptz;
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

-- The moves not over, with their progress, as pg_stat_progress_* views
-- show commands: phase, rows copied of the total, bytes, lag, time left
-- (the copy's rate so far, over the rows left).
CREATE VIEW @extschema@.snowseq_move_progress AS
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
	m.progress_at AS updated_at
FROM @extschema@.snowseq_moves m
WHERE m.state OPERATOR(pg_catalog.<>) ALL (ARRAY['done', 'failed', 'rollback']::pg_catalog.text[]);
COMMENT ON VIEW @extschema@.snowseq_move_progress IS
	'moves under way (or interrupted): phase, rows copied of the total, bytes, lag and estimated time left';
-- ---- end of moves: progress (1.2) ----
