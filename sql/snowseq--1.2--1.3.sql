/* snowseq--1.2--1.3.sql: upgrade of the snowseq extension from 1.2 to 1.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.3'" to load this file. \quit

-- Each change of 1.3 is a section of its own, marked
-- "-- ---- <part>: <what> (1.3) ----", in the same order as in
-- snowseq--1.3.sql.

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
