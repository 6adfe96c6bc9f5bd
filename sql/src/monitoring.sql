-- ---- status: who may read it (1.3) ----
-- The generator's state and the reservations are for monitoring: the
-- predefined role pg_monitor (and superusers) may read them, PUBLIC not.
-- A named counter's reservation shows to roles with the privileges of
-- pg_read_all_stats in every database (as pg_stat_statements shows them
-- every query), to others only in its database and if they may use it;
-- with its database (one name in two databases is two counters).
--@block status_grants
REVOKE ALL ON FUNCTION @extschema@.snowseq_status() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.snowseq_reservations() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_status() TO pg_monitor;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_reservations() TO pg_monitor;
GRANT SELECT ON @extschema@.snowseq_status TO pg_monitor;
GRANT SELECT ON @extschema@.snowseq_reservations TO pg_monitor;
COMMENT ON FUNCTION @extschema@.snowseq_import_wrap_keys(text) IS
	'add the wrap keys and the key version mark of a copy of another cluster''s keyring file (all or none); a regular file only; needs pg_read_server_files too; returns how many wrap keys were new';
--@end
-- ---- end of status: who may read it (1.3) ----

--@block capacity
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

--@end
--@block monitoring_grants
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

--@end
--@block monitoring_runs
-- ---- monitoring of merges and rebalance runs, for pg_monitor (1.3) ----
-- The exporter's queries read what a merge and a run are (table, genes,
-- server, state, instants, rows), not their tokens, tables made or errors.
GRANT SELECT (group_merge, parent, first_gene, last_gene, server)
	ON @extschema@.snowseq_merges TO pg_monitor;
GRANT SELECT (run_id, parent, state, runner_pid, runner_start, started_at)
	ON @extschema@.snowseq_rebalance_runs TO pg_monitor;
GRANT SELECT (run_id, step, state, rows_copied)
	ON @extschema@.snowseq_rebalance_steps TO pg_monitor;
--@end
