/* snowseq--1.2--1.3.sql: upgrade of the snowseq extension from 1.2 to 1.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.3'" to load this file. \quit

-- Each change of 1.3 is a section of its own, marked
-- "-- ---- <part>: <what> (1.3) ----", in the same order as in
-- snowseq--1.3.sql.

-- ---- moves: transient replication errors (1.3) ----
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
-- ---- end of moves: transient replication errors (1.3) ----
