/* snowseq--1.2--1.3.sql: upgrade of the snowseq extension from 1.2 to 1.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.3'" to load this file. \quit

-- Each change of 1.3 is a section of its own, marked
-- "-- ---- <part>: <what> (1.3) ----", in the same order as in
-- snowseq--1.3.sql.

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
