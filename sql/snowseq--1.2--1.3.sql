/* snowseq--1.2--1.3.sql: upgrade of the snowseq extension from 1.2 to 1.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.3'" to load this file. \quit

-- Each change of 1.3 is a section of its own, marked
-- "-- ---- <part>: <what> (1.3) ----", in the same order as in
-- snowseq--1.3.sql.

-- ---- moves: transient replication errors, own locks (1.3) ----
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
-- ---- end of moves: transient replication errors, own locks (1.3) ----
