-- 128-bit gene IDs: snowseq_gene_uuid(key) on PostgreSQL's uuid type, on a
-- server with snowseq.node_id = 7.  From the most significant bit on: a
-- 23-bit gene whose top 15 bits are snowseq_gene(key), a 20-bit key
-- version (0), then a 79-bit segment ((counter << 30) | node id) around the
-- RFC 9562 version (8) and variant bits.
SET timezone = 'UTC';

-- the fields of a 128-bit gene ID
CREATE FUNCTION wide_fields(u uuid, OUT gene int, OUT key_version int, OUT version int,
                            OUT variant int, OUT counter numeric, OUT node int)
LANGUAGE sql IMMUTABLE AS $$
	SELECT (('x' || substr(h, 1, 6))::bit(24)::int) >> 1,
	       (('x' || substr(h, 6, 6))::bit(24)::int >> 1) & 1048575,
	       ('x' || substr(h, 13, 1))::bit(4)::int,
	       ('x' || substr(h, 17, 1))::bit(4)::int >> 2,
	       -- counter: segment bits 78..30 = 5 bits, 12 bits, then the top 32 of the last 62
	       ((('x' || substr(h, 11, 2))::bit(8)::int & 31)::numeric * 2^44
	        + ('x' || substr(h, 14, 3))::bit(12)::int::numeric * 2^32
	        + ((('x' || substr(h, 17, 16))::bit(64)::bigint >> 30) & 4294967295)::numeric),
	       (('x' || substr(h, 25, 8))::bit(32)::bigint & 1073741823)::int
	FROM (SELECT replace(u::text, '-', '') AS h) s
$$;

-- vectors: the wide genes of fixed keys (the 15-bit gene, then 8 more bits
-- of the same hash), key version 0, version 8, RFC variant, node 7
SELECT k, snowseq_gene(k) AS gene, shard_of(u) AS wide_gene, shard_of(u) >> 8 AS top_15,
       (wide_fields(u)).key_version, (wide_fields(u)).version, (wide_fields(u)).variant,
       (wide_fields(u)).node
FROM (SELECT k, snowseq_gene_uuid(k) AS u FROM unnest(ARRAY['order-1', 'customer:42', '', 'é']) k) s
ORDER BY k;
SELECT shard_of(snowseq_gene_uuid(12345::bigint)) AS int8_key, snowseq_gene(12345::bigint) AS gene,
       shard_of(snowseq_gene_uuid('\x0102ff'::bytea)) AS bytea_key, snowseq_gene('\x0102ff'::bytea) AS bytea_gene;

-- the wide gene extends the narrow one, for every key of every type
SELECT count(*) AS keys,
       count(*) FILTER (WHERE shard_of(snowseq_gene_uuid(k)) >> 8 = shard_of(snowseq_gene_next(k))) AS text_same,
       count(*) FILTER (WHERE shard_of(snowseq_gene_uuid(g::bigint)) >> 8 = shard_of(snowseq_gene_next(g::bigint))) AS bigint_same,
       count(*) FILTER (WHERE shard_of(snowseq_gene_uuid(convert_to(k, 'UTF8'))) >> 8
                              = shard_of(snowseq_gene_next(convert_to(k, 'UTF8')))) AS bytea_same,
       count(DISTINCT shard_of(snowseq_gene_uuid(k))) > 9000 AS wide_genes_spread
FROM (SELECT g, 'key-' || g AS k FROM generate_series(1, 10000) g) s;

-- segments: unique, increasing in the order taken, node 7 in the low 30 bits
CREATE TEMP TABLE w AS SELECT n, snowseq_gene_uuid('same key') AS u FROM generate_series(1, 20000) n;
SELECT count(DISTINCT u) AS distinct_ids, count(DISTINCT shard_of(u)) AS genes,
       bool_and((wide_fields(u)).node = 7) AS node_7,
       bool_and((wide_fields(u)).version = 8 AND (wide_fields(u)).variant = 2) AS rfc_version_8
FROM w;
SELECT bool_and(u > prev) AS increasing,
       bool_and((wide_fields(u)).counter = (wide_fields(prev)).counter + 1) AS consecutive_counters
FROM (SELECT u, lag(u) OVER (ORDER BY n) AS prev FROM w) s WHERE prev IS NOT NULL;

-- routing: rows of both widths of one key land on the same shard, through
-- the one map.  orders64 is sharded by snowseq_create_shards; orders128 is
-- partitioned on the same gene ranges, its bounds the wide genes' first UUIDs.
-- The map already holds 4 shards (test route): both tables follow it.
CREATE TABLE orders64 (id bigint, k text) PARTITION BY RANGE (id);
SELECT snowseq_create_shards('orders64', 4);
CREATE TABLE orders128 (id uuid, k text) PARTITION BY RANGE (id);
DO $$
BEGIN
	FOR i IN 0 .. 3 LOOP
		EXECUTE format('CREATE TABLE orders128_%s PARTITION OF orders128 FOR VALUES FROM (%L) TO (%s)', i,
			lpad(to_hex((i * 8192)::bigint << 49), 16, '0') || '0000000000000000',
			CASE WHEN i = 3 THEN 'MAXVALUE'
			     ELSE quote_literal(lpad(to_hex(((i + 1) * 8192)::bigint << 49), 16, '0') || '0000000000000000') END);
	END LOOP;
END $$;
INSERT INTO orders64 SELECT snowseq_gene_next('buyer-' || g), 'buyer-' || g FROM generate_series(1, 2000) g;
INSERT INTO orders128 SELECT snowseq_gene_uuid('buyer-' || g), 'buyer-' || g FROM generate_series(1, 2000) g;
SELECT count(*) AS keys,
       count(*) FILTER (WHERE snowseq_route(a.id) = snowseq_route(b.id)) AS same_route,
       count(*) FILTER (WHERE substring(a.tableoid::regclass::text from '_(\d+)$')
                              = substring(b.tableoid::regclass::text from '_(\d+)$')) AS same_partition,
       count(*) FILTER (WHERE substring(snowseq_route(b.id) from '_(\d+)$')
                              = substring(b.tableoid::regclass::text from '_(\d+)$')) AS routed_to_its_shard,
       count(DISTINCT a.tableoid) AS shards_used
FROM orders64 a JOIN orders128 b USING (k);
SELECT snowseq_route('00000000-0000-8000-8000-000000000000'::uuid) AS first_gene,
       snowseq_route('ffffffff-ffff-8fff-bfff-ffffffffffff'::uuid) AS last_gene;

-- every bad input: a clear ERROR
SELECT snowseq_gene_uuid(NULL::text);
SELECT snowseq_gene_uuid(NULL::bigint);
SELECT snowseq_gene_uuid(NULL::bytea);
SELECT shard_of('01941f29-7fe8-7000-8000-000000000000'::uuid);
SELECT shard_of('01941f29-7fe8-8000-c000-000000000000'::uuid);
SELECT snowseq_route('01a20bde-f27e-7000-807f-a46d471e081d'::uuid);
SELECT shard_of(NULL::uuid) IS NULL AS strict_null;
DELETE FROM snowseq_shard_map;
SELECT snowseq_route(snowseq_gene_uuid('k'));
DROP TABLE orders64, orders128;
DROP FUNCTION wide_fields(uuid);

-- untyped literals and untyped parameters resolve as in 1.1 (the text
-- overloads): up to 20 characters a bigint, longer a uuid
SELECT shard_of('281474976710656') AS one, shard_of('9223090561878065152') AS top,
       shard_of('00000200-0000-8000-8000-000000000000') AS wide;
PREPARE untyped_shard AS SELECT shard_of($1) AS gene;
EXECUTE untyped_shard('562949953421312');
EXECUTE untyped_shard('ffffff00-0000-8000-8000-000000000000');
DEALLOCATE untyped_shard;
SELECT shard_of('-1');
SELECT shard_of('not a number');
