-- IDs for a past instant: snowseq_id_at(ts), snowseq_uuid_at(ts), on a
-- server with snowseq.node_id = 7, snowseq.backfill_node_id = 1000 and the
-- default layout (41/10/12 bits, 1 ms, epoch 2025-01-01 UTC).  They carry
-- the backfill node id; each time unit has its own sequence values, taken
-- in order: rows of one instant take consecutive values, and any order of
-- instants works.  UUIDs have a space of their own, per millisecond.
-- Concurrent clients, a crash and a restart: test/t/053_backfill.pl; what
-- a restart may cost: test/t/019_capacity.pl.
SET timezone = 'UTC';

-- vectors: the first IDs for an instant are (t << 22) | (1000 << 12) | seq,
-- t = 13,089,600,123 ms after the epoch, seq 0, 1, 2 in the order taken
SELECT snowseq_id_at('2025-06-01 12:00:00.123456+00') AS first,
       snowseq_id_at('2025-06-01 12:00:00.123+00') AS second;
SELECT snowseq_id_at('2025-06-01 12:00:00.1239+00') = 54901762158395394 AS third_is_seq_2;
-- the fields: the instant truncated to the time unit, the backfill node
SELECT * FROM snowseq_parse(54901762158395392);
-- the UUID form has its own counter per millisecond: the first UUID of
-- this one has counter 0 in rand_a, the backfill node id where
-- snowseq_uuid() has the node id, then the counter's low 20 bits
SELECT snowseq_uuid_time(u) AS ts,
       substr(u::text, 15, 1) AS version, substr(u::text, 16, 3) AS counter_hex,
       ((('x' || substr(replace(u::text, '-', ''), 17, 4))::bit(16)::int >> 4) & 1023) AS node,
       ((('x' || substr(replace(u::text, '-', ''), 19, 8))::bit(32)::bigint >> 10) & 1048575) AS counter_low
FROM snowseq_uuid_at('2025-06-01 12:00:00.123+00') u;
-- a million UUIDs for one instant, all distinct and in order
SELECT count(*) AS uuids, count(DISTINCT u) AS distinct_uuids,
       bool_and(snowseq_uuid_time(u) = '2025-06-02 00:00:00+00') AS one_instant
FROM (SELECT snowseq_uuid_at('2025-06-02 00:00:00+00') AS u FROM generate_series(1, 1000000)) t;

-- 1,500 IDs for two later instants: sequence values from 0 in each
CREATE TEMP TABLE at_ids AS
	SELECT n, snowseq_id_at('2025-07-01 00:00:00.5+00') AS id FROM generate_series(1, 1000) n;
INSERT INTO at_ids SELECT 1000 + n, snowseq_id_at('2025-07-01 00:00:00.501+00') FROM generate_series(1, 500) n;
SELECT count(*) AS n, count(DISTINCT id) AS distinct_ids,
       bool_and(snowseq_node(id) = 1000) AS backfill_node,
       count(DISTINCT snowseq_time(id)) AS instants,
       min(snowseq_time(id)) AS first_ts, max(snowseq_time(id)) AS last_ts,
       min((snowseq_parse(id)).seq) AS min_seq, max((snowseq_parse(id)).seq) AS max_seq
FROM at_ids;
SELECT bool_and(id > prev) AS increasing
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM at_ids) s WHERE prev IS NOT NULL;
SELECT count(*) AS equal_to_clock_ids
FROM at_ids JOIN (SELECT snowseq_next() AS id FROM generate_series(1, 5000)) c USING (id);
-- they lie within the bounds of their instant, like every snowflake ID
SELECT bool_and(id BETWEEN snowseq_min_id('2025-07-01 00:00:00.5+00')
                       AND snowseq_max_id('2025-07-01 00:00:00.501+00')) AS within FROM at_ids;

-- a step back in time costs nothing: the first instant goes on where it
-- was (seq 3), the later one where it was (seq 1000)
INSERT INTO at_ids SELECT 2000, snowseq_id_at('2025-06-01 12:00:00.123+00');
SELECT id = ((13089600123::bigint << 22) | (1000 << 12) | 3) AS vector, (snowseq_parse(id)).*
FROM at_ids WHERE n = 2000;
INSERT INTO at_ids SELECT 2000 + n, snowseq_id_at('2025-07-01 00:00:00.5+00') FROM generate_series(1, 10) n;
SELECT min((snowseq_parse(id)).seq) AS min_seq, count(DISTINCT id) AS distinct_ids, count(*) AS n
FROM at_ids WHERE n > 2000;
-- many steps back (5,000 descending instants, more than a time unit holds
-- values): each one at seq 0 of its own time unit, all distinct
INSERT INTO at_ids SELECT 3000 + n, snowseq_id_at('2025-05-01 00:00:00+00'::timestamptz - n * interval '1 ms')
FROM generate_series(1, 5000) n;
SELECT count(*) AS n, count(DISTINCT id) AS distinct_ids, max((snowseq_parse(id)).seq) AS max_seq
FROM at_ids WHERE n > 3000;

-- what is left: the fullest time unit (1,010 values of 2025-07-01
-- 00:00:00.5); a million UUIDs of one millisecond
SELECT kind, capacity, used, remaining FROM snowseq_capacity WHERE kind LIKE 'backfill%' ORDER BY kind;

-- every bad input: a clear ERROR
SELECT snowseq_id_at(NULL);
SELECT snowseq_uuid_at(NULL);
SELECT snowseq_id_at('2024-12-31 23:59:59+00');
SELECT snowseq_id_at('2090-01-01 00:00:00+00');
SELECT snowseq_uuid_at('2090-01-01 00:00:00+00');
-- a second ahead of now is refused too (the instant masked: it changes)
DO $$
BEGIN
	PERFORM snowseq_id_at(now() + interval '1 second');
EXCEPTION WHEN datetime_field_overflow THEN
	RAISE NOTICE 'refused: %', regexp_replace(SQLERRM, '\d{4}-\S+ \S+', 'TS');
END $$;
SELECT snowseq_id_at('infinity');
SELECT snowseq_id_at('-infinity');

-- UUID bounds of an instant: unix_ts_ms, then all zeros or all ones
SELECT snowseq_uuid_min('2025-01-01 00:00:01+00') AS min, snowseq_uuid_max('2025-01-01 00:00:01+00') AS max;
SELECT snowseq_uuid_min('2025-06-01 12:00:00.1235+00') AS min, snowseq_uuid_max('2025-06-01 12:00:00.1235+00') AS max;
-- before the epoch: the nil UUID, as snowseq_min_id gives 0
SELECT snowseq_uuid_min('2024-06-01') AS min, snowseq_uuid_max('2024-06-01') AS max;
-- past the end of the time field: an ERROR naming it
SELECT snowseq_uuid_min('2200-01-01');
SELECT snowseq_uuid_min(NULL) IS NULL AS strict_null;
-- every fresh UUID lies within the bounds of its instant, and none of
-- another instant does
CREATE TEMP TABLE uu AS SELECT snowseq_uuid() AS u FROM generate_series(1, 2000);
SELECT bool_and(u >= snowseq_uuid_min(snowseq_uuid_time(u)) AND u <= snowseq_uuid_max(snowseq_uuid_time(u))) AS within,
       bool_and(u > snowseq_uuid_max(snowseq_uuid_time(u) - interval '1 ms')
                AND u < snowseq_uuid_min(snowseq_uuid_time(u) + interval '1 ms')) AS outside_neighbours
FROM uu;
-- and so does a backfilled one; WHERE id >= ... AND id <= ... uses the index
CREATE TEMP TABLE events (id uuid PRIMARY KEY, note text);
INSERT INTO events SELECT snowseq_uuid(), 'now' FROM generate_series(1, 5000);
INSERT INTO events VALUES (snowseq_uuid_at('2025-08-01 10:00:00+00'), 'backfilled');
ANALYZE events;
SELECT note FROM events
WHERE id >= snowseq_uuid_min('2025-08-01 10:00:00+00') AND id <= snowseq_uuid_max('2025-08-01 10:00:00+00');
EXPLAIN (COSTS OFF) SELECT note FROM events
WHERE id >= snowseq_uuid_min('2025-08-01 10:00:00+00') AND id <= snowseq_uuid_max('2025-08-01 10:00:00+00');

-- EXECUTE is a GRANT: an ordinary role cannot move the backfill clock on
CREATE ROLE backfill_user;
SET ROLE backfill_user;
SELECT snowseq_id_at('2025-08-01 10:00:00+00');
SELECT snowseq_uuid_min('2025-08-01 10:00:00+00') IS NOT NULL AS bounds_for_everyone;
RESET ROLE;
GRANT EXECUTE ON FUNCTION snowseq_id_at(timestamptz) TO backfill_user;
SET ROLE backfill_user;
SELECT snowseq_node(snowseq_id_at('2025-08-01 10:00:00+00')) AS node;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION snowseq_id_at(timestamptz) FROM backfill_user;
DROP ROLE backfill_user;

-- the limits: a time unit holds the sequence values 0 to 4095 (4,096 IDs);
-- the next is refused naming the instant and what is left where
SELECT count(DISTINCT snowseq_id_at('2025-09-01 00:00:00+00')) AS taken FROM generate_series(1, 4096);
SELECT snowseq_id_at('2025-09-01 00:00:00+00');
-- the next instant is fine, and so is a step back: each its own values
SELECT (snowseq_parse(snowseq_id_at('2025-09-01 00:00:00.001+00'))).seq AS next_instant_seq;
SELECT (snowseq_parse(snowseq_id_at('2025-08-31 00:00:00+00'))).seq AS earlier_instant_seq;
SELECT snowseq_uuid_time(snowseq_uuid_at('2025-08-31 00:00:00+00')) AS uuid_earlier;
