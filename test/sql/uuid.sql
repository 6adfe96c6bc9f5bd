-- snowseq_uuid(): RFC 9562 version 7 UUIDs drawn from the snowflake clock,
-- on a server with snowseq.node_id = 7 and the default layout (41/10/12 bits,
-- 1 ms, epoch 2025-01-01 UTC).  Across backends, restarts and clock steps:
-- test/t/050_uuid.pl.
SET timezone = 'UTC';

-- the fields of a UUID: unix_ts_ms, version, rand_a (the counter), variant,
-- then 62 bits of rand_b: node id (10 bits here), random
CREATE FUNCTION uuid_fields(u uuid, OUT ms bigint, OUT version int, OUT counter int,
                            OUT variant int, OUT node int, OUT random bigint)
LANGUAGE sql IMMUTABLE AS $$
	SELECT ('x' || substr(h, 1, 12))::bit(48)::bigint,
	       ('x' || substr(h, 13, 1))::bit(4)::int,
	       ('x' || substr(h, 14, 3))::bit(12)::int,
	       (('x' || substr(h, 17, 1))::bit(4)::int) >> 2,
	       (('x' || substr(h, 17, 4))::bit(16)::int >> 4) & 1023,
	       ('x' || substr(h, 20, 13))::bit(52)::bigint & ((1::bigint << 52) - 1)
	FROM (SELECT replace(u::text, '-', '') AS h) s
$$;

-- 20,000 UUIDs in one statement: version 7, RFC variant, node 7, unique,
-- strictly increasing in the order they were made, random tails
CREATE TEMP TABLE u AS SELECT n, snowseq_uuid() AS u FROM generate_series(1, 20000) n;
SELECT count(*) AS n, count(DISTINCT u) AS distinct_uuids,
       bool_and((uuid_fields(u)).version = 7) AS version_7,
       bool_and((uuid_fields(u)).variant = 2) AS variant_rfc,
       bool_and((uuid_fields(u)).node = 7) AS node_7,
       count(DISTINCT (uuid_fields(u)).random) > 19990 AS random_tails
FROM u;
SELECT bool_and(u > prev) AS strictly_increasing
FROM (SELECT u, lag(u) OVER (ORDER BY n) AS prev FROM u) t WHERE prev IS NOT NULL;
-- Method 1: within a millisecond, rand_a counts up
SELECT bool_and(c = prev_c + 1) AS counter_counts, count(*) > 1000 AS most_pairs
FROM (SELECT ms, c, lag(ms) OVER (ORDER BY n) AS prev_ms, lag(c) OVER (ORDER BY n) AS prev_c
      FROM (SELECT n, (uuid_fields(u)).ms, (uuid_fields(u)).counter AS c FROM u) f) t
WHERE ms = prev_ms;

-- the same clock as snowseq_next(): a UUID lies between the IDs issued just
-- before and just after it (counter = time << 12 | seq in both)
CREATE TEMP TABLE mix AS
SELECT n, snowseq_next() AS a, snowseq_uuid() AS u, snowseq_next() AS b FROM generate_series(1, 5000) n;
SELECT bool_and(((a >> 22) << 12 | (a & 4095)) < c AND c < ((b >> 22) << 12 | (b & 4095))) AS between_ids,
       bool_and(snowseq_uuid_time(u) BETWEEN snowseq_time(a) AND snowseq_time(b)) AS time_between
FROM (SELECT a, b, u, (((uuid_fields(u)).ms - 1735689600000) << 12) | (uuid_fields(u)).counter AS c FROM mix) t;

-- the instant is now (the clock may lead by borrowing, at most max_lead_ms)
SELECT snowseq_uuid_time(snowseq_uuid()) BETWEEN now() - interval '1 minute'
       AND clock_timestamp() + interval '11 seconds' AS time_now;

-- as a primary key: ORDER BY id is the order of insertion
CREATE TABLE docs (id uuid PRIMARY KEY DEFAULT snowseq_uuid(), n int);
INSERT INTO docs (n) SELECT g FROM generate_series(1, 1000) g;
INSERT INTO docs (n) VALUES (1001);
INSERT INTO docs (n) VALUES (1002);
SELECT count(*), bool_and((uuid_fields(id)).version = 7) AS v7,
       bool_and(n = prev + 1) AS insertion_order
FROM (SELECT id, n, lag(n) OVER (ORDER BY id) AS prev FROM docs) t;
DROP TABLE docs;

-- snowseq_uuid_time reads any version 7 UUID: RFC 9562's example, the
-- smallest and the largest timestamps
SELECT snowseq_uuid_time('017f22e2-79b0-7cc3-98c4-dc0c0c07398f') AS rfc_example,
       snowseq_uuid_time('00000000-0000-7000-8000-000000000000') AS smallest,
       snowseq_uuid_time('ffffffff-ffff-7fff-bfff-ffffffffffff') AS largest;
SELECT snowseq_uuid_time(NULL) AS null_in;

-- anything else is an ERROR: version 4, the nil and max UUIDs, a version 7
-- with the Microsoft variant, version 1
SELECT snowseq_uuid_time('8a90d3cd-a6de-45a7-9131-c6e527da2779');
SELECT snowseq_uuid_time('00000000-0000-0000-0000-000000000000');
SELECT snowseq_uuid_time('ffffffff-ffff-ffff-ffff-ffffffffffff');
SELECT snowseq_uuid_time('017f22e2-79b0-7cc3-c8c4-dc0c0c07398f');
SELECT snowseq_uuid_time('c232ab00-9414-11ec-b3c8-9f6bdeced846');

DROP FUNCTION uuid_fields(uuid);
