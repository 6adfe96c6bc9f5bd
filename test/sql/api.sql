-- The snowflake API on a preloaded server with snowseq.node_id = 7 and the
-- default layout (41/10/12 bits, 1 ms, epoch 2025-01-01 UTC).
CREATE EXTENSION snowseq;
SET timezone = 'UTC';

-- every marking is deliberate: volatility, strictness, parallel safety
SELECT p.oid::regprocedure AS function, p.provolatile AS vol, p.proisstrict AS strict,
       p.proparallel AS par, has_function_privilege('public', p.oid, 'EXECUTE') AS public_exec
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowseq'
ORDER BY p.oid::regprocedure::text;

-- snowseq_next: positive, strictly increasing, this node
SELECT bool_and(id > 0) AS positive,
       bool_and(id > prev) AS increasing,
       bool_and(snowseq_node(id) = 7) AS node_7,
       count(DISTINCT id) AS distinct_ids
FROM (SELECT id, lag(id, 1, 0::bigint) OVER (ORDER BY n) AS prev
      FROM (SELECT n, snowseq_next() AS id FROM generate_series(1, 10000) n) s) t;

-- snowseq_next_n: n consecutive IDs taken in one step, above earlier IDs
CREATE TEMP TABLE before AS SELECT snowseq_next() AS id;
SELECT count(*) AS n, count(DISTINCT id) AS distinct_ids,
       min(id) > (SELECT id FROM before) AS above_earlier,
       bool_and(snowseq_node(id) = 7) AS node_7
FROM snowseq_next_n(50000) AS id;
SELECT bool_and(id = prev + 1 OR (snowseq_parse(id)).seq = 0) AS consecutive
FROM (SELECT id, lag(id) OVER (ORDER BY id) AS prev FROM snowseq_next_n(100) id) t
WHERE prev IS NOT NULL;
-- a batch is exactly what it reserved: the next ID is above all of it
CREATE TEMP TABLE batch AS SELECT id FROM snowseq_next_n(3) id;
SELECT snowseq_next() > (SELECT max(id) FROM batch) AS next_above_batch;
SELECT count(*) FROM snowseq_next_n(0);
SELECT count(*) FROM snowseq_next_n(NULL);

-- parse: fixed vectors of the default layout
SELECT * FROM snowseq_parse((1000::bigint << 22) | (7 << 12) | 5);
SELECT * FROM snowseq_parse(1);
SELECT * FROM snowseq_parse(9223372036854775807);
SELECT snowseq_time((86400000::bigint << 22) | 42), snowseq_node((86400000::bigint << 22) | (1023 << 12));

-- parse round trip of fresh IDs: this node, now, seq within 12 bits
SELECT (p).node = 7 AS node_ok,
       (p).ts BETWEEN now() - interval '1 minute' AND clock_timestamp() + interval '1 minute' AS time_ok,
       (p).seq BETWEEN 0 AND 4095 AS seq_ok,
       snowseq_time(id) = (p).ts AS time_fn_ok
FROM (SELECT id, snowseq_parse(id) AS p FROM (SELECT snowseq_next() AS id) s) t;

-- min/max bounds of an instant
SELECT snowseq_min_id('2025-01-01 00:00:01+00') = 1000::bigint << 22 AS min_ok,
       snowseq_max_id('2025-01-01 00:00:01+00') = (1001::bigint << 22) - 1 AS max_ok,
       snowseq_min_id('2025-01-01 00:00:01.0009+00') = snowseq_min_id('2025-01-01 00:00:01+00') AS same_ms,
       snowseq_min_id('2024-06-01') AS before_epoch_min, snowseq_max_id('2024-06-01') AS before_epoch_max,
       snowseq_min_id('2025-01-01 00:00:00+00') AS at_epoch;
-- every fresh ID lies within the bounds of its own instant
SELECT bool_and(id BETWEEN snowseq_min_id(snowseq_time(id)) AND snowseq_max_id(snowseq_time(id))) AS within
FROM snowseq_next_n(1000) id;
-- and parse(min_id(ts)) is ts truncated to the time unit
SELECT (snowseq_parse(snowseq_min_id('2026-03-04 05:06:07.891234+00'))).*;

-- DEFAULT snowseq_next() in table DDL
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowseq_next(), item text);
INSERT INTO orders (item) VALUES ('a'), ('b'), ('c');
SELECT item, snowseq_node(id) AS node, id > (SELECT id FROM before) AS fresh FROM orders ORDER BY id;

-- WHERE id >= snowseq_min_id(...) uses the primary key index
INSERT INTO orders (id, item)
SELECT snowseq_min_id(now() - interval '30 days') + g, 'old' FROM generate_series(1, 20000) g;
ANALYZE orders;
EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE id >= snowseq_min_id(now() - interval '1 day');
SELECT count(*) FROM orders WHERE id >= snowseq_min_id(now() - interval '1 day');
SELECT count(*) FROM orders WHERE id <= snowseq_max_id(now() - interval '29 days');

-- status: node, layout, counters
SELECT node_id, time_bits, node_bits, seq_bits, time_unit_ms, epoch, state, worker_running,
       ids_issued >= 61000 AS counted,
       last_time <= clock_reserved_until AS within_reservation,
       reservation_advances >= 1 AS advanced, shmem_bytes > 0 AS has_shmem
FROM snowseq_status;
SELECT kind, counter <= bound AS within FROM snowseq_reservations ORDER BY kind;

-- every advance is a WAL record of snowseq's resource manager, which
-- describes itself; gene IDs past the first block force advances
CREATE EXTENSION pg_walinspect;
SELECT pg_current_wal_flush_lsn() AS lsn_before \gset
SELECT count(snowseq_gene_next(g::bigint)) FROM generate_series(1, 5000) g;
SELECT count(*) > 0 AS logged, bool_and(record_type = 'RESERVE') AS identified,
       bool_and(description LIKE 'node 7 layout 41/10/12@1ms % bound % block %') AS described
FROM pg_get_wal_records_info(:'lsn_before', pg_current_wal_flush_lsn())
WHERE resource_manager = 'snowseq';
DROP EXTENSION pg_walinspect;
