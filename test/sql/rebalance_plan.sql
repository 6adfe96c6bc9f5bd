-- The rebalance planner alone (snowseq_rebalance_plan_json): loads given as
-- jsonb, no server read.  Each server's load is the sum of its partitions'
-- (rows here, unless the strategy says otherwise); a server above
-- threshold x the mean of the servers kept gives to the least loaded one.

-- an even cluster: nothing to do
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25,
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 100, "bytes": 1000},
		{"first": 100, "last": 199, "server": "b", "rows": 100, "bytes": 1000}]}');

-- one heavy server (a: 400 rows, the mean 200): first the partition that
-- fits what b lacks (100 rows) whole, then the last third of the other
-- one, its rows taken as even over its genes (no histogram), to c
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25,
	"servers": ["a", "b", "c"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 300, "bytes": 3000},
		{"first": 100, "last": 199, "server": "a", "rows": 100, "bytes": 1000},
		{"first": 200, "last": 299, "server": "b", "rows": 100, "bytes": 1000},
		{"first": 300, "last": 399, "server": "c", "rows": 100, "bytes": 1000}]}');

-- the same by bytes: the loads are the bytes, rows go along
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "bytes", "threshold": 1.25,
	"servers": ["a", "b", "c"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 10, "bytes": 3000},
		{"first": 100, "last": 199, "server": "a", "rows": 10, "bytes": 1000},
		{"first": 200, "last": 299, "server": "b", "rows": 10, "bytes": 1000},
		{"first": 300, "last": 399, "server": "c", "rows": 10, "bytes": 1000}]}');

-- a cut sized by a histogram (rows per gene): 160 of the 200 rows of
-- genes 0 to 63 are in genes 60 to 63: the 100 rows b lacks are genes 63
-- and 62, and half of gene 61's rows (a move takes whole genes: 61 to 63,
-- counted as 100 rows)
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.1,
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 63, "server": "a", "rows": 200, "bytes": 2000,
			"histogram": [[10, 40], [60, 40], [61, 40], [62, 40], [63, 40]]},
		{"first": 64, "last": 127, "server": "b", "rows": 0, "bytes": 0}]}');

-- a threshold not reached: a holds 240 rows, 1.2 x the mean
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25,
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 240},
		{"first": 100, "last": 199, "server": "b", "rows": 160}]}');
-- ... and reached with a lower one
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.1,
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 240},
		{"first": 100, "last": 199, "server": "b", "rows": 160}]}');

-- drain: every partition of b, the biggest first, to the least loaded
-- server kept (ties of load told apart by rows, then by the servers' order)
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25,
	"servers": ["a", "b", "c"], "drain": ["b"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 100},
		{"first": 100, "last": 149, "server": "b", "rows": 30},
		{"first": 150, "last": 199, "server": "b", "rows": 70},
		{"first": 200, "last": 299, "server": "c", "rows": 100}]}');

-- fill: a server holding nothing yet (servers lists it) receives
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25,
	"servers": ["a", "b", "new"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 150},
		{"first": 100, "last": 199, "server": "a", "rows": 150},
		{"first": 200, "last": 299, "server": "b", "rows": 150},
		{"first": 300, "last": 399, "server": "b", "rows": 150}]}');

-- ties: b and c hold the same load and rows, so b (listed first) receives
-- first; a's two partitions of 60 rows tie, and the first listed is cut;
-- then what is left of it fits what c lacks, and goes whole
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.0,
	"servers": ["a", "b", "c"],
	"partitions": [{"first": 0, "last": 9, "server": "a", "rows": 60},
		{"first": 10, "last": 19, "server": "a", "rows": 60},
		{"first": 20, "last": 29, "server": "b", "rows": 30},
		{"first": 30, "last": 39, "server": "c", "rows": 30}]}');

-- writes: loads are writes per second (writes over seconds); none counted
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "writes", "threshold": 1.25, "seconds": 10,
	"table": "items", "sample": "00:00:10",
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 100, "writes": 0},
		{"first": 100, "last": 199, "server": "b", "rows": 100, "writes": 0}]}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "writes", "threshold": 1.25, "seconds": 10,
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 100, "writes": 3000},
		{"first": 100, "last": 199, "server": "b", "rows": 100, "writes": 1000}]}');

-- a placement group: the other table's partition on a's genes counts with
-- a's, and moves along; a table name taken on the receiver keeps it away
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25,
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 49, "server": "a", "rows": 100, "table": "s.items_1"},
		{"first": 50, "last": 99, "server": "a", "rows": 100, "table": "s.items_2"},
		{"first": 100, "last": 199, "server": "b", "rows": 10, "table": "s.items_3"}],
	"group": [{"first": 50, "last": 99, "server": "a", "rows": 100, "table": "s.lines_2", "name": "lines_2"}]}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25,
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 49, "server": "a", "rows": 100, "table": "s.items_1"},
		{"first": 50, "last": 99, "server": "a", "rows": 100, "table": "s.items_2"},
		{"first": 100, "last": 199, "server": "b", "rows": 10, "table": "s.items_2"}]}');

-- a revertable move pins the partitions of its genes: none to drain
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25,
	"servers": ["a", "b"], "drain": ["b"],
	"partitions": [{"first": 0, "last": 99, "server": "a", "rows": 100},
		{"first": 100, "last": 199, "server": "b", "rows": 100}],
	"revertable_moves": [{"move": 7, "first": 100, "last": 149, "source": "a", "dest": "b"}]}');

-- merges: neighbours of one server whose loads together are at most
-- merge_below x the mean load of a partition (95 / 7 rows here) become one
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25, "merge_below": 1,
	"servers": ["a", "b"],
	"partitions": [{"first": 0, "last": 9, "server": "a", "rows": 5},
		{"first": 10, "last": 19, "server": "a", "rows": 5},
		{"first": 20, "last": 29, "server": "a", "rows": 40},
		{"first": 30, "last": 39, "server": "b", "rows": 25},
		{"first": 40, "last": 49, "server": "b", "rows": 5},
		{"first": 50, "last": 59, "server": "b", "rows": 5},
		{"first": 60, "last": 69, "server": "b", "rows": 10}]}');

-- malformed loads: what is wrong, and the shape in the hint
\set VERBOSITY default
SELECT * FROM snowseq_rebalance_plan_json(NULL);
SELECT * FROM snowseq_rebalance_plan_json('[1, 2]');
SELECT * FROM snowseq_rebalance_plan_json('{"threshold": 1.25, "servers": ["a"], "partitions": []}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "size", "threshold": 1.25, "servers": ["a"], "partitions": []}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 0.5, "servers": ["a"], "partitions": []}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": "high", "servers": ["a"], "partitions": []}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25, "servers": "a", "partitions": []}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25, "servers": ["a"], "drain": ["a"], "partitions": []}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25, "servers": ["a"],
	"partitions": [{"first": 0, "last": 9, "server": "z", "rows": 1}]}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25, "servers": ["a"],
	"partitions": [{"first": 9, "last": 0, "server": "a", "rows": 1}]}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25, "servers": ["a"],
	"partitions": [{"first": 0.5, "last": 9, "server": "a", "rows": 1}]}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "rows", "threshold": 1.25, "servers": ["a"],
	"partitions": [{"first": 0, "last": 9, "server": "a", "rows": 1, "histogram": [[1]]}]}');
SELECT * FROM snowseq_rebalance_plan_json('{"strategy": "writes", "threshold": 1.25, "servers": ["a"], "partitions": []}');

-- The state machines of a rebalance run and of its steps
-- (snowseq_rebalance_next): the state each step takes a run or step to
-- from each state (NULL: not recorded yet), or refused.
CREATE FUNCTION pg_temp.try_next(state anyenum, step text) RETURNS text
	LANGUAGE plpgsql AS $$
BEGIN
	RETURN snowseq_rebalance_next(state, step)::text;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RETURN '-';
END
$$;
SELECT coalesce(s::text, '(none)') AS run_state,
	pg_temp.try_next(s, 'begin') AS "begin", pg_temp.try_next(s, 'take') AS take,
	pg_temp.try_next(s, 'stop') AS stop, pg_temp.try_next(s, 'abandon') AS abandon,
	pg_temp.try_next(s, 'fail') AS fail, pg_temp.try_next(s, 'finish') AS finish
FROM unnest(array_prepend(NULL, enum_range(NULL::snowseq_rebalance_state))) WITH ORDINALITY AS u(s, n) ORDER BY n;
SELECT coalesce(s::text, '(none)') AS step_state,
	pg_temp.try_next(s, 'plan') AS plan, pg_temp.try_next(s, 'begin') AS "begin",
	pg_temp.try_next(s, 'succeed') AS succeed, pg_temp.try_next(s, 'fail') AS fail
FROM unnest(array_prepend(NULL, enum_range(NULL::snowseq_rebalance_step_state))) WITH ORDINALITY AS u(s, n) ORDER BY n;
-- a step the state does not allow, an unknown step, a NULL step, another type
SELECT snowseq_rebalance_next('done'::snowseq_rebalance_state, 'take');
SELECT snowseq_rebalance_next(NULL::snowseq_rebalance_step_state, 'succeed');
SELECT snowseq_rebalance_next('running'::snowseq_rebalance_state, 'resume');
SELECT snowseq_rebalance_next('running'::snowseq_rebalance_state, NULL);
SELECT snowseq_rebalance_next('copy'::snowseq_move_state, 'begin');
-- the result has the type of the state
SELECT pg_typeof(snowseq_rebalance_next('stopped'::snowseq_rebalance_state, 'take'));
-- what the record functions store: a new state a step leads to from the
-- committed one, or the same; else refused
SELECT snowseq_rebalance_to('running'::snowseq_rebalance_state, 'done') AS finish,
	snowseq_rebalance_to(NULL, 'running'::snowseq_rebalance_state) AS "begin",
	snowseq_rebalance_to('stopped'::snowseq_rebalance_state, 'stopped') AS unchanged,
	snowseq_rebalance_to('failed'::snowseq_rebalance_step_state, 'running') AS retried;
SELECT snowseq_rebalance_to('done'::snowseq_rebalance_state, 'running');
SELECT snowseq_rebalance_to(NULL, 'stopped'::snowseq_rebalance_state);
SELECT snowseq_rebalance_to('planned'::snowseq_rebalance_step_state, 'done');
-- a type of another schema with the name of snowseq's is not a state of it
CREATE SCHEMA regress_rb_spoof;
CREATE TYPE regress_rb_spoof.snowseq_rebalance_state AS ENUM ('running', 'zzz');
SELECT snowseq_rebalance_next('zzz'::regress_rb_spoof.snowseq_rebalance_state, 'take');
DROP SCHEMA regress_rb_spoof CASCADE;
-- the sample of a run with no sample interval (NULL) is over at once: it
-- looped, sleeping a second at a time, until cancelled (the timeout only
-- turns that into an ERROR instead of a hang)
SET statement_timeout = '60s';
DO $$
DECLARE
	p oid[];
	w bigint[];
	x bigint[];
	t timestamptz;
BEGIN
	CALL snowseq_rebalance_sample(NULL, NULL, p, w, x, t);
	RAISE NOTICE 'sample over, parts %', p;
END
$$;
RESET statement_timeout;
