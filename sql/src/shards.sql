--@block check_shards

-- ---- drift between the router and its shard servers (1.3) ----
CREATE FUNCTION @extschema@.snowseq_check_shards(OUT parent pg_catalog.regclass, OUT server pg_catalog.text,
	OUT remote_table pg_catalog.text, OUT kind pg_catalog.text, OUT object pg_catalog.text,
	OUT router pg_catalog.text, OUT shard pg_catalog.text, OUT problem pg_catalog.text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_check_shards'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_check_shards() IS
	'one row per difference between the router''s gene-sharded tables and their tables on the shard servers (columns, indexes, CHECK and foreign key constraints, triggers), and per server of another snowseq version; no row: no drift';
REVOKE ALL ON FUNCTION @extschema@.snowseq_check_shards() FROM PUBLIC;
--@end
--@block shard_stats
CREATE FUNCTION @extschema@.snowseq_shard_stats(parent regclass,
	OUT first_gene integer, OUT last_gene integer, OUT shard text,
	OUT partition regclass, OUT rows bigint, OUT bytes bigint,
	OUT writes bigint, OUT reads bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_shard_stats_1_3'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_shard_stats(regclass) IS
	'one row per routing-map entry and partition of a sharded table: genes, server, rows and row bytes, counted where they live; rows written (inserted, updated, deleted) and read (by sequential scans, fetched by index scans) in the partition''s table there since it was created or its statistics reset, shared out over its pieces by rows';
REVOKE ALL ON FUNCTION @extschema@.snowseq_shard_stats(regclass) FROM PUBLIC;

-- The rebalancer's first reading of strategy writes: no row counted, and
-- no lock on the table kept through the sample that follows.
CREATE FUNCTION @extschema@.snowseq_shard_counters(parent regclass,
	OUT partition regclass, OUT writes bigint, OUT reads bigint, OUT next_xid bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_shard_counters'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_shard_counters(regclass) IS
	'one row per partition of a sharded table: the rows written and read in its table on its server, as snowseq_shard_stats reads them, without counting rows, and that server''s pg_snapshot_xmax(pg_current_snapshot()) at the reading (xid8: one past the latest transaction completed then); keeps no lock on the table';
REVOKE ALL ON FUNCTION @extschema@.snowseq_shard_counters(regclass) FROM PUBLIC;

-- The rebalancer's histogram of a partition over its genes, counted where
-- it lives: its rows, and of them those written (inserted or updated)
-- since a reading of snowseq_shard_counters (xmin at or after next_xid).
CREATE FUNCTION @extschema@.snowseq_shard_histogram(part regclass, key name, first_gene integer,
	last_gene integer, width integer, since bigint,
	OUT bucket integer, OUT rows bigint, OUT written bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_shard_histogram'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_shard_histogram(regclass, name, integer, integer, integer, bigint) IS
	'the rows of a partition of a gene-sharded table in genes first_gene to last_gene, counted where they live, in buckets of width genes from first_gene (bucket 0), and of them the rows whose version was written by transaction since (a next_xid of snowseq_shard_counters) of its server or a later one (since NULL: every row); needs SELECT on the partition';
REVOKE ALL ON FUNCTION @extschema@.snowseq_shard_histogram(regclass, name, integer, integer, integer, bigint) FROM PUBLIC;

-- The tables that move with a table (a placement group): what the
-- rebalancer counts as the load of its partitions.
CREATE FUNCTION @extschema@.snowseq_placement_group(parent regclass)
	RETURNS TABLE (member regclass)
	AS 'MODULE_PATHNAME', 'snowseq_placement_group'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_placement_group(regclass) IS
	'the tables that move with the table (a move of its genes takes those of them that hold the genes on another server than the destination), the table first: every gene-sharded table (partitioned by range on one bigint column into foreign tables on the servers snowseq_shard_map names) if it is one, else the table alone';
REVOKE ALL ON FUNCTION @extschema@.snowseq_placement_group(regclass) FROM PUBLIC;
--@end

------------------------------------------------------------------------
-- Node ids across a fleet
------------------------------------------------------------------------

-- Asks every postgres_fdw server, through the caller's user mappings.
-- PARALLEL UNSAFE: opens connections and subtransactions.
CREATE FUNCTION @extschema@.snowseq_check_nodes(OUT server text, OUT node_id integer, OUT layout text,
	OUT epoch timestamptz, OUT version text, OUT cluster text, OUT problem text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_check_nodes'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_check_nodes() IS
	'this server (server NULL) and every postgres_fdw server: node id, layout, epoch, snowseq version, cluster (system identifier), and what is wrong (a node id of another cluster, other layouts, unreachable)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_check_nodes() FROM PUBLIC;
