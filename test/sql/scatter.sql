-- snowseq_scatter(id, bits) / snowseq_unscatter(value, bits): an exactly
-- invertible reordering of an ID's bits that brings its low bits (XORed
-- with a hash of the rest) to the top, so that range partitions over the
-- scattered value receive evenly spread writes.  Node 7, default layout.
SET timezone = 'UTC';

-- fixed vectors: the formula is documented, any language computes the same
-- (these were checked against an independent XXH64)
SELECT id, bits, snowseq_scatter(id, bits) AS scattered
FROM (VALUES (0::bigint, 0), (1, 0), (0, 1), (1, 1), (12345, 2), (12345, 8),
             (249900388394758144, 2), (9223372036854775807, 2),
             (9223372036854775807, 62), (0, 62), (1, 62)) v(id, bits);

-- 0 bits is the identity
SELECT bool_and(snowseq_scatter(id, 0) = id AND snowseq_unscatter(id, 0) = id) AS identity
FROM (VALUES (0::bigint), (1), (4242), (9223372036854775807)) v(id);

-- every width 0..62: 2,000 random IDs and 1,000 fresh snowseq IDs go and
-- come back exactly, into 0 .. 2^63 - 1, none on another's value
SELECT setseed(0.5);
CREATE TEMP TABLE ids AS
SELECT (random() * 9223372036854775000)::bigint AS id FROM generate_series(1, 2000)
UNION SELECT snowseq_next() FROM generate_series(1, 1000)
UNION VALUES (0), (1), (9223372036854775807);
SELECT count(*) FILTER (WHERE snowseq_unscatter(s, bits) <> id) AS not_inverted,
       count(*) FILTER (WHERE s < 0) AS negative,
       count(*) - count(DISTINCT (bits, s)) AS collisions,
       count(DISTINCT bits) AS widths
FROM (SELECT id, bits, snowseq_scatter(id, bits) AS s FROM ids, generate_series(0, 62) bits) t;

-- exhaustively on small domains: for bits 1..8, all of [0, 2^14) maps one
-- to one, unscatter undoes it, and scatter undoes unscatter
SELECT count(*) FILTER (WHERE snowseq_unscatter(snowseq_scatter(id, bits), bits) <> id) AS not_inverted,
       count(*) FILTER (WHERE snowseq_scatter(snowseq_unscatter(id, bits), bits) <> id) AS not_inverted_back,
       count(*) - count(DISTINCT (bits, snowseq_scatter(id, bits))) AS collisions
FROM generate_series(0, 16383) id, generate_series(1, 8) bits;
-- and the 2^bits IDs that differ only in their low bits take all 2^bits
-- top values, a permutation (for 1,000 values of the rest)
SELECT bool_and(tops = 1 << bits) AS permutation
FROM (SELECT bits, h, count(DISTINCT snowseq_scatter((h << bits) | l, bits) >> (63 - bits)) AS tops
      FROM generate_series(1, 8) bits, generate_series(0, 999) h,
           LATERAL generate_series(0, (1 << bits) - 1) l
      GROUP BY bits, h) t;

-- four range partitions on the scattered ID, 2 bits: 10,000 rows in one
-- statement land 25% +- 5% in each
CREATE TABLE events (id bigint NOT NULL DEFAULT snowseq_scatter(snowseq_next(), 2), n int)
	PARTITION BY RANGE (id);
CREATE TABLE events_0 PARTITION OF events FOR VALUES FROM (0) TO (1::bigint << 61);
CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (1::bigint << 61) TO (2::bigint << 61);
CREATE TABLE events_2 PARTITION OF events FOR VALUES FROM (2::bigint << 61) TO (3::bigint << 61);
CREATE TABLE events_3 PARTITION OF events FOR VALUES FROM (3::bigint << 61) TO (MAXVALUE);
ALTER TABLE events ADD PRIMARY KEY (id);
INSERT INTO events (n) SELECT g FROM generate_series(1, 10000) g;
SELECT tableoid::regclass AS partition, count(*) BETWEEN 2000 AND 3000 AS within_25_5
FROM events GROUP BY 1 ORDER BY 1;
-- the IDs come back: this node's, in insertion order
SELECT count(*) AS n, bool_and(snowseq_node(snowseq_unscatter(id, 2)) = 7) AS node_7,
       bool_and(n = prev + 1) AS insertion_order
FROM (SELECT id, n, lag(n) OVER (ORDER BY snowseq_unscatter(id, 2)) AS prev FROM events) t;
-- within each partition the values still increase with time: each index
-- appends at its right edge
SELECT tableoid::regclass AS partition, bool_and(id > prev) AS appends
FROM (SELECT tableoid, id, lag(id) OVER (PARTITION BY tableoid ORDER BY n) AS prev FROM events) t
WHERE prev IS NOT NULL GROUP BY 1 ORDER BY 1;
-- single-row inserts, a few per millisecond
DO $$ BEGIN FOR i IN 10001 .. 12000 LOOP INSERT INTO events (n) VALUES (i); END LOOP; END $$;
SELECT tableoid::regclass AS partition, count(*) BETWEEN 400 AND 600 AS within_25_5
FROM events WHERE n > 10000 GROUP BY 1 ORDER BY 1;

-- a quiet server issues at most one ID per millisecond, all with sequence 0:
-- they still spread evenly, where a plain rotation of the low bits would
-- send every one of them to the first partition
SELECT bucket, count(*) BETWEEN 2000 AND 3000 AS within_25_5, count(*) FILTER (WHERE rotated <> 0) AS rotated_elsewhere
FROM (SELECT snowseq_scatter(id, 2) >> 61 AS bucket, ((id & 3) << 61 | id >> 2) >> 61 AS rotated
      FROM (SELECT snowseq_min_id(ts) | (7 << 12) AS id
            FROM generate_series(timestamptz '2026-03-01 00:00:00+00', '2026-03-01 00:00:09.999+00',
                                 interval '1 ms') ts) q) t
GROUP BY bucket ORDER BY bucket;

-- IMMUTABLE: usable in a partition key expression (the stored ID stays
-- time-ordered, snowseq_min_id() still applies to it)
CREATE TABLE events_by_expr (id bigint NOT NULL DEFAULT snowseq_next())
	PARTITION BY RANGE (snowseq_scatter(id, 1));
CREATE TABLE events_by_expr_0 PARTITION OF events_by_expr FOR VALUES FROM (0) TO (1::bigint << 62);
CREATE TABLE events_by_expr_1 PARTITION OF events_by_expr FOR VALUES FROM (1::bigint << 62) TO (MAXVALUE);
INSERT INTO events_by_expr SELECT FROM generate_series(1, 1000);
SELECT tableoid::regclass AS partition, count(*) BETWEEN 400 AND 600 AS within_50_10
FROM events_by_expr GROUP BY 1 ORDER BY 1;
DROP TABLE events, events_by_expr;

-- bad input: widths out of range, negative values; NULL in, NULL out
SELECT snowseq_scatter(1, -1);
SELECT snowseq_scatter(1, 63);
SELECT snowseq_unscatter(1, 63);
SELECT snowseq_unscatter(1, -2147483648);
SELECT snowseq_scatter(-1, 2);
SELECT snowseq_unscatter(-9223372036854775808, 2);
SELECT snowseq_scatter(NULL, 2) IS NULL AS null_id, snowseq_scatter(1, NULL) IS NULL AS null_bits,
       snowseq_unscatter(NULL, 2) IS NULL AS null_value, snowseq_unscatter(1, NULL) IS NULL AS null_bits;
