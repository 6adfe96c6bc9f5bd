-- Routing: shard_of, gene ranges, the map and its cache, partitions.
SELECT shard_of(0), shard_of((5::bigint << 48) | 123), shard_of(9223372036854775807);
SELECT snowseq_gene_range(0), snowseq_gene_range(1), snowseq_gene_range(32767);
SELECT snowseq_key_range('abc') = snowseq_gene_range(29182) AS key_range_ok;

-- shard_of is IMMUTABLE: generated columns, index expressions, partition keys
CREATE TABLE g_cols (id bigint PRIMARY KEY, shard int GENERATED ALWAYS AS (shard_of(id)) STORED);
CREATE INDEX ON g_cols (shard_of(id));
INSERT INTO g_cols (id) VALUES (snowseq_gene_next('x')), (snowseq_gene_next('y'));
SELECT bool_and(shard = snowseq_gene(k)) AS generated_ok
FROM g_cols JOIN (VALUES ('x'), ('y')) v(k) ON shard_of(g_cols.id) = snowseq_gene(k);
CREATE TABLE by_gene (id bigint) PARTITION BY RANGE (shard_of(id));
CREATE TABLE by_gene_lo PARTITION OF by_gene FOR VALUES FROM (0) TO (16384);
CREATE TABLE by_gene_hi PARTITION OF by_gene FOR VALUES FROM (16384) TO (32768);
INSERT INTO by_gene VALUES (1), (20000::bigint << 48);
SELECT tableoid::regclass, shard_of(id) FROM by_gene ORDER BY id;

-- the <@ operator means what the built-in one means
SELECT x, x <@ r AS ours, x OPERATOR(pg_catalog.<@) r AS builtin,
       r @> x AS ours_commuted, r OPERATOR(pg_catalog.@>) x AS builtin_commuted
FROM (VALUES (4::bigint, int8range(5, 10)), (5, int8range(5, 10)), (9, int8range(5, 10)),
             (10, int8range(5, 10)), (7, 'empty'::int8range), (7, int8range(NULL, 8)),
             (7, int8range(6, NULL)), (7, int8range(5, 7, '[]')), (7, NULL), (9223372036854775807, int8range(0, NULL)),
             (-9223372036854775808, int8range(NULL, 0)), (-9223372036854775808, 'empty'),
             (9223372036854775807, 'empty'),
             -- ranges that end before the smallest bigint contain nothing
             (5, int8range(NULL, '-9223372036854775808')),
             (-9223372036854775808, int8range(NULL, '-9223372036854775808')),
             (-9223372036854775808, int8range('-9223372036854775808', '-9223372036854775808', '[]'))) v(x, r);

-- the map: ceiling lookup
INSERT INTO snowseq_shard_map VALUES (99, 'a'), (100, 'b'), (32767, 'c');
SELECT g, snowseq_route_gene(g) FROM (VALUES (0), (99), (100), (101), (32767)) v(g);
SELECT snowseq_route(100::bigint << 48), snowseq_route((101::bigint << 48) - 1),
       snowseq_route_key('abc'), snowseq_route_key(0::bigint), snowseq_route_key('\x00'::bytea);
-- a change is seen by the next lookup
UPDATE snowseq_shard_map SET shard = 'c2' WHERE upper_gene = 32767;
SELECT snowseq_route_gene(32767);
-- the map as routing reads it: each server's genes, first to last
SELECT * FROM snowseq_route_ranges();
BEGIN;
DELETE FROM snowseq_shard_map WHERE upper_gene = 100;
SELECT snowseq_route_gene(100);
-- the transaction's own change, as shard_of sees it
SELECT * FROM snowseq_route_ranges();
ROLLBACK;
SELECT * FROM snowseq_route_ranges();
SELECT snowseq_route_gene(100);
TRUNCATE snowseq_shard_map;
SELECT snowseq_route_gene(100);
SELECT count(*) AS ranges FROM snowseq_route_ranges();

-- snowseq_create_shards: partitions on gene boundaries, map to match
CREATE TABLE shop_orders (order_id bigint NOT NULL, buyer text NOT NULL)
	PARTITION BY RANGE (order_id);
SELECT snowseq_create_shards('shop_orders', 4);
SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'shop_orders'::regclass ORDER BY c.relname;
SELECT * FROM snowseq_shard_map ORDER BY upper_gene;
INSERT INTO shop_orders SELECT snowseq_gene_next('buyer-' || i), 'buyer-' || i FROM generate_series(1, 400) i;
SELECT bool_and(snowseq_route(order_id) = 'public.' || tableoid::regclass::text) AS map_matches_partitions
FROM shop_orders;
-- a second call with the same count keeps the map
CREATE TABLE shop_items (item_id bigint NOT NULL) PARTITION BY RANGE (item_id);
SELECT snowseq_create_shards('shop_items', 4);
SELECT count(*) FROM snowseq_shard_map;
-- one buyer, one partition
EXPLAIN (COSTS OFF) SELECT * FROM shop_orders WHERE order_id <@ snowseq_key_range('buyer-7');
EXPLAIN (COSTS OFF) SELECT * FROM shop_orders WHERE snowseq_key_range('buyer-7') @> order_id;
EXPLAIN (COSTS OFF) SELECT * FROM shop_orders WHERE order_id = (20000::bigint << 48) + 5;
SELECT count(*) = 1 AS found FROM shop_orders WHERE order_id <@ snowseq_key_range('buyer-7') AND buyer = 'buyer-7';
PREPARE by_buyer(text) AS SELECT count(*) FROM shop_orders WHERE order_id <@ snowseq_key_range($1);
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE by_buyer('buyer-7');
RESET plan_cache_mode;

-- the map changes however applied: with session_replication_role = replica
-- (as a logical replication subscriber applies changes) the triggers still
-- fire, so the cached copy is reloaded
SELECT snowseq_route_gene(32767) AS before;
SET session_replication_role = replica;
UPDATE snowseq_shard_map SET shard = 'replicated' WHERE upper_gene = 32767;
RESET session_replication_role;
SELECT snowseq_route_gene(32767) AS after_replica_update;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'snowseq_shard_map'::regclass AND NOT tgisinternal
ORDER BY tgname;
UPDATE snowseq_shard_map SET shard = 'public.shop_orders_3' WHERE upper_gene = 32767;
