--@block rebalance
-- ---- rebalance: plans and runs of moves that even out the servers (1.3) ----
-- A rebalance plans moves from the servers of the map above threshold x the
-- mean load to the least loaded ones (and everything off drained servers),
-- writes the plan, and runs it move by move with snowseq_move_genes,
-- committing between moves: resumable after a crash, stoppable between
-- moves.  Its runs and steps are written by the procedure alone (the guard).
-- The states of a run and of a step: the one list of each in SQL.
CREATE TYPE @extschema@.snowseq_rebalance_state AS ENUM
	('running', 'stopped', 'done', 'abandoned');
COMMENT ON TYPE @extschema@.snowseq_rebalance_state IS
	'the states of a rebalance (snowseq_rebalance_runs.state): running, stopped (resumable), done, abandoned (over)';
CREATE TYPE @extschema@.snowseq_rebalance_step_state AS ENUM
	('planned', 'running', 'failed', 'done');
COMMENT ON TYPE @extschema@.snowseq_rebalance_step_state IS
	'the states of a step of a rebalance (snowseq_rebalance_steps.state)';
-- What a state is, derived from the machines (src/shards/rebalance/rebalance_state.c).
CREATE FUNCTION @extschema@.snowseq_rebalance_is_over(state @extschema@.snowseq_rebalance_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_state_is_over'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_is_over(@extschema@.snowseq_rebalance_state) IS
	'whether a rebalance in this state is over: neither running nor resumable (done or abandoned)';
CREATE FUNCTION @extschema@.snowseq_rebalance_step_is_over(state @extschema@.snowseq_rebalance_step_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_state_is_over'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_step_is_over(@extschema@.snowseq_rebalance_step_state) IS
	'whether a step of a rebalance in this state is over (done; a failed one is tried again)';
CREATE FUNCTION @extschema@.snowseq_rebalance_is_running(state anyenum)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_is_running'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_is_running(anyenum) IS
	'whether a rebalance run or step in this state runs (the state its step begin leads to)';
CREATE FUNCTION @extschema@.snowseq_rebalance_step_is_planned(state @extschema@.snowseq_rebalance_step_state)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_step_is_planned'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_step_is_planned(@extschema@.snowseq_rebalance_step_state) IS
	'whether a step of a rebalance in this state is planned, not begun';
-- The state machines of a run and of a step (src/shards/rebalance/rebalance_state.c):
-- the state a step takes one to; every state the SQL sources store comes
-- from here, and a step the state does not allow is an ERROR.
CREATE FUNCTION @extschema@.snowseq_rebalance_next(state anyenum, step text)
	RETURNS anyenum
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_next'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_next(anyenum, text) IS
	'the state (snowseq_rebalance_state or snowseq_rebalance_step_state) that a step takes a rebalance run (begin, take, stop, abandon, fail, finish) or one of its steps (plan, begin, succeed, fail) to from state (NULL: not recorded yet); an ERROR for a step the state does not allow';
-- What the record functions store a state with: the new state if a step
-- leads there from the committed one (or it is that one), else an ERROR.
CREATE FUNCTION @extschema@.snowseq_rebalance_to(state anyenum, new_state anyenum)
	RETURNS anyenum
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_to'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_to(anyenum, anyenum) IS
	'new_state, if a step of the state machine of a rebalance run or step leads there from state (NULL: not recorded yet), or it is state; an ERROR otherwise: the check of the record functions against the committed state';
CREATE TABLE @extschema@.snowseq_rebalance_runs (
	run_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	parent regclass NOT NULL,
	strategy text NOT NULL,
	threshold double precision NOT NULL,
	drain name[] NOT NULL,
	fill name[] NOT NULL DEFAULT '{}',
	sample interval NOT NULL DEFAULT '10 s',
	merge_below double precision NOT NULL DEFAULT 0,
	state @extschema@.snowseq_rebalance_state NOT NULL,
	stop text
		CHECK (stop OPERATOR(pg_catalog.=) ANY (ARRAY['stop', 'abandon']::pg_catalog.text[])),
	rounds integer NOT NULL DEFAULT 1,
	runner_pid integer,
	runner_start timestamptz,
	started_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	finished_at timestamptz,
	-- of background rebalances (the block of that name below)
	job_role regrole,
	max_rows_per_second double precision
		CHECK (max_rows_per_second OPERATOR(pg_catalog.>) 0),
	max_lag_bytes bigint
		CHECK (max_lag_bytes OPERATOR(pg_catalog.>) 0),
	throttled_until timestamptz,
	throttled_by text,
	error text
);
CREATE UNIQUE INDEX snowseq_rebalance_runs_open ON @extschema@.snowseq_rebalance_runs (parent)
	WHERE NOT @extschema@.snowseq_rebalance_is_over(state);
COMMENT ON TABLE @extschema@.snowseq_rebalance_runs IS
	'rebalances run on this router: table, strategy, threshold, drained servers, servers to fill, the sample of strategy writes, the load below which neighbouring partitions merge, state (running, stopped: resumable; done, abandoned: over), stop requested, rounds of planning';
CREATE TABLE @extschema@.snowseq_rebalance_steps (
	run_id bigint NOT NULL REFERENCES @extschema@.snowseq_rebalance_runs ON DELETE CASCADE,
	step integer NOT NULL,
	first_gene integer NOT NULL,
	last_gene integer NOT NULL,
	from_server name NOT NULL,
	to_server name NOT NULL,
	rows bigint,
	bytes bigint,
	state @extschema@.snowseq_rebalance_step_state NOT NULL,
	move_id bigint,
	rows_copied bigint,
	error text,
	started_at timestamptz,
	finished_at timestamptz,
	PRIMARY KEY (run_id, step)
);
COMMENT ON TABLE @extschema@.snowseq_rebalance_steps IS
	'the steps of each rebalance (a move, or a merge where from_server and to_server are one server): genes, servers, planned rows and bytes, state (planned, running, failed, done), the move that ran it, rows it copied, timings';
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_rebalance_runs
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_rebalance_runs ENABLE ALWAYS TRIGGER snowseq_guard;
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_rebalance_steps
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_rebalance_steps ENABLE ALWAYS TRIGGER snowseq_guard;
REVOKE ALL ON TABLE @extschema@.snowseq_rebalance_runs, @extschema@.snowseq_rebalance_steps FROM PUBLIC;

-- The planner itself (src/shards/rebalance/rebalance_plan.c): from the loads, one
-- jsonb document (docs/elastic-shards.md, "The planner"), the plan's rows.
-- snowseq_rebalance_plan_json reads nothing but its argument (a cut sized
-- by a histogram takes it from the loads): PUBLIC may run it, as any
-- function of its argument alone.  snowseq_rebalance_plan_counted is the
-- same planner where a partition a step cuts that names its oid and key
-- and brings no histogram has it counted where its rows live, by
-- snowseq_shard_histogram as the caller: PUBLIC may run it too, since
-- what it reads needs the caller's EXECUTE on that function and SELECT on
-- the partition.
CREATE FUNCTION @extschema@.snowseq_rebalance_plan_json(loads jsonb)
	RETURNS TABLE (step integer, first_gene integer, last_gene integer, from_server name,
		to_server name, rows bigint, bytes bigint)
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_plan_json'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan_json(jsonb) IS
	'the rebalance plan from loads given as jsonb (strategy, threshold, servers, drain, partitions of the table and of its placement group, revertable moves, merge_below, keep; histograms as rows per gene): the planner of snowseq_rebalance_plan without the servers; reads nothing else, so PUBLIC may run it';
CREATE FUNCTION @extschema@.snowseq_rebalance_plan_counted(loads jsonb)
	RETURNS TABLE (step integer, first_gene integer, last_gene integer, from_server name,
		to_server name, rows bigint, bytes bigint)
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_plan_counted'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan_counted(jsonb) IS
	'the rebalance plan from loads as for snowseq_rebalance_plan_json, the histogram of a partition a step cuts counted where its rows live (snowseq_shard_histogram, as the caller: its EXECUTE and SELECT on the partition needed) unless the loads give it; what snowseq_rebalance_plan_from runs; PUBLIC may run it, as it reads only with the caller''s rights';

-- The plan: the load of each partition (rows or row bytes, counted where
-- they live, by snowseq_shard_stats; or writes per second: the writes
-- snowseq_shard_stats reads from the servers' cumulative statistics,
-- sampled twice, sample apart), summed per server of the map.  While
-- a server is above threshold x the mean of the servers not drained (or
-- any partition is on a drained server), the most loaded one gives the
-- least loaded one a whole partition, or the first or last genes of one
-- (what a move accepts), sized for rows and bytes by a histogram of the
-- partition's rows over 64 buckets of its genes, for writes by a
-- histogram of the rows written since the first reading (their xmin;
-- without first_xids, on the assumption that its writes are spread
-- evenly over its genes).
-- Strategy writes: the first reading is first_parts, first_writes and
-- first_xids (snowseq_shard_counters at first_at), taken by the caller; first_at
-- NULL: taken here, and the sample slept here, in the caller's statement
-- (its snapshot held, but no lock on the table).  only_check: the
-- arguments checked, nothing read, nothing planned.
-- The loads are collected here and planned in C by
-- snowseq_rebalance_plan_counted; floats go into them exactly
-- (extra_float_digits), so the planner compares the numbers read.
CREATE FUNCTION @extschema@.snowseq_rebalance_plan_from(parent regclass, strategy text,
	threshold double precision, drain name[], fill name[], sample interval,
	first_parts oid[], first_writes bigint[], first_xids bigint[], first_at timestamptz, only_check boolean,
	merge_below double precision DEFAULT 0)
	RETURNS TABLE (step integer, first_gene integer, last_gene integer, from_server name,
		to_server name, rows bigint, bytes bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET extra_float_digits = 3
	AS $plan$
DECLARE
	sv pg_catalog.name[];		-- servers of the map, then those to fill
	kept integer;
	t0 pg_catalog.timestamptz := first_at;
	w0p pg_catalog.oid[] := first_parts;	-- strategy writes: the first reading
	w0 bigint[] := first_writes;
	w0x bigint[] := first_xids;
	by_writes boolean := strategy OPERATOR(pg_catalog.=) 'writes';
	secs double precision;
	r record;
	i integer;
	part jsonb;
	parts jsonb := '[]';
	grp jsonb := '[]';
BEGIN
	IF parent IS NULL THEN
		RAISE EXCEPTION 'the table of a rebalance must not be NULL';
	END IF;
	IF strategy IS NULL OR strategy OPERATOR(pg_catalog.<>) ALL (ARRAY['rows', 'bytes', 'writes']) THEN
		RAISE EXCEPTION 'unknown rebalance strategy %', pg_catalog.quote_nullable(strategy)
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Use ''rows'' (rows per server), ''bytes'' (row bytes per server) or ''writes'' (rows written per second per server, sampled).';
	END IF;
	-- a busy session reports its counts to the statistics at most once a
	-- second: a shorter sample measures little; one over an hour is a slip
	IF sample IS NULL OR sample OPERATOR(pg_catalog.<) CAST('1 s' AS pg_catalog.interval)
		OR sample OPERATOR(pg_catalog.>) CAST('1 h' AS pg_catalog.interval) THEN
		RAISE EXCEPTION 'rebalance sample % is not between 1 second and 1 hour', pg_catalog.quote_nullable(sample)
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'The sample is how long strategy ''writes'' waits between its two readings of the servers'' write counters: such as ''10 s'' (the longer, the steadier the rates).';
	END IF;
	IF threshold IS NULL OR threshold OPERATOR(pg_catalog.<) 1 OR threshold OPERATOR(pg_catalog.=) 'NaN' THEN
		RAISE EXCEPTION 'rebalance threshold % is below 1', pg_catalog.quote_nullable(threshold)
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'The threshold is the most load a server may hold, as a multiple of the mean: 1 or more, such as 1.25.';
	END IF;
	IF drain IS NULL OR pg_catalog.array_position(drain, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'the servers to drain must not be NULL'
			USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass ''{}'' to drain none.';
	END IF;
	IF fill IS NULL OR pg_catalog.array_position(fill, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'the servers to fill must not be NULL'
			USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass ''{}'' to fill none.';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_partitioned_table t JOIN pg_catalog.pg_inherits h
			ON h.inhparent OPERATOR(pg_catalog.=) t.partrelid JOIN pg_catalog.pg_foreign_table ft
			ON ft.ftrelid OPERATOR(pg_catalog.=) h.inhrelid
			WHERE t.partrelid OPERATOR(pg_catalog.=) parent) THEN
		RAISE EXCEPTION 'table % is not gene-sharded', parent
			USING ERRCODE = 'wrong_object_type',
				HINT = 'A rebalance moves genes of a table partitioned by range on its bigint ID, whose partitions are foreign tables on the servers of snowseq_shard_map.';
	END IF;

	-- the map's servers as routing reads them (route.c's cache)
	sv := ARRAY(SELECT CAST(s.shard AS pg_catalog.name) FROM @extschema@.snowseq_route_ranges() s
		GROUP BY s.shard ORDER BY s.shard);
	FOR i IN 1 .. COALESCE(pg_catalog.array_length(drain, 1), 0) LOOP
		IF pg_catalog.array_position(sv, drain[i]) IS NULL THEN
			RAISE EXCEPTION 'server "%" to drain is not in snowseq_shard_map', drain[i]
				USING ERRCODE = 'invalid_parameter_value',
					HINT = 'Drain servers the map names: SELECT DISTINCT shard FROM snowseq_shard_map.';
		END IF;
	END LOOP;
	-- servers not in the map yet that are to receive genes
	FOR i IN 1 .. COALESCE(pg_catalog.array_length(fill, 1), 0) LOOP
		IF fill[i] OPERATOR(pg_catalog.=) ANY (drain) THEN
			RAISE EXCEPTION 'server "%" is both to drain and to fill', fill[i]
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_foreign_server fs JOIN pg_catalog.pg_foreign_data_wrapper w
				ON w.oid OPERATOR(pg_catalog.=) fs.srvfdw
				WHERE fs.srvname OPERATOR(pg_catalog.=) fill[i] AND w.fdwname OPERATOR(pg_catalog.=) 'postgres_fdw') THEN
			RAISE EXCEPTION 'server "%" to fill is not a postgres_fdw server', fill[i]
				USING ERRCODE = 'undefined_object',
					HINT = 'Create it with CREATE SERVER ... FOREIGN DATA WRAPPER postgres_fdw, and a user mapping for it.';
		END IF;
		IF pg_catalog.array_position(sv, fill[i]) IS NULL THEN
			sv := sv OPERATOR(pg_catalog.||) fill[i];
		END IF;
	END LOOP;
	kept := COALESCE(pg_catalog.array_length(sv, 1), 0) OPERATOR(pg_catalog.-)
		(SELECT pg_catalog.count(DISTINCT d) FROM pg_catalog.unnest(drain) d);
	IF kept OPERATOR(pg_catalog.<) 1 THEN
		RAISE EXCEPTION 'a rebalance that drains every server of snowseq_shard_map has nowhere to move genes'
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Name servers to fill, or drain fewer servers.';
	END IF;
	IF merge_below IS NULL OR merge_below OPERATOR(pg_catalog.<) 0 OR merge_below OPERATOR(pg_catalog.>) 1
		OR merge_below OPERATOR(pg_catalog.=) 'NaN' THEN
		RAISE EXCEPTION 'rebalance merge_below % is not between 0 and 1', pg_catalog.quote_nullable(merge_below)
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Neighbouring partitions of one server merge when their load together is at most merge_below x the mean load of a partition: such as 0.25; 0 merges none.';
	END IF;
	IF only_check THEN
		RETURN;
	END IF;

	-- strategy writes: the write counters then (first_at; NULL: now, and
	-- the sample slept), and again now; counters start at 0 with a table
	-- (a moved partition) and at a reset
	IF by_writes THEN
		IF t0 IS NULL THEN
			t0 := pg_catalog.clock_timestamp();
			SELECT pg_catalog.array_agg(CAST(sc.partition AS pg_catalog.oid)), pg_catalog.array_agg(sc.writes),
					pg_catalog.array_agg(sc.next_xid) INTO w0p, w0, w0x
				FROM @extschema@.snowseq_placement_group(parent) pg,
					LATERAL @extschema@.snowseq_shard_counters(pg.member) sc;
			PERFORM pg_catalog.pg_sleep_for(sample);
		END IF;
		secs := pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0);
	END IF;

	-- the partitions of the table (named) and of the other tables of its
	-- group, their genes, server, counts and the remote table they read; a
	-- map entry a table has no partition for has no row here
	FOR r IN SELECT m.member OPERATOR(pg_catalog.=) parent AS named, s.partition,
			pg_catalog.min(s.first_gene) AS f, pg_catalog.max(s.last_gene) AS l,
			pg_catalog.min(s.shard) AS shard, pg_catalog.count(DISTINCT s.shard) AS shards,
			pg_catalog.sum(s.rows) AS rows, pg_catalog.sum(s.bytes) AS bytes, pg_catalog.sum(s.writes) AS writes,
			(SELECT pg_catalog.quote_ident(COALESCE((SELECT o.option_value FROM pg_catalog.pg_options_to_table(x.ftoptions) o
					WHERE o.option_name OPERATOR(pg_catalog.=) 'schema_name'), n.nspname::pg_catalog.text))
				OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||)
				pg_catalog.quote_ident(COALESCE((SELECT o.option_value FROM pg_catalog.pg_options_to_table(x.ftoptions) o
					WHERE o.option_name OPERATOR(pg_catalog.=) 'table_name'), pc.relname::pg_catalog.text))
				FROM pg_catalog.pg_foreign_table x JOIN pg_catalog.pg_class pc ON pc.oid OPERATOR(pg_catalog.=) x.ftrelid
				JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) pc.relnamespace
				WHERE x.ftrelid OPERATOR(pg_catalog.=) s.partition) AS remote,
			(SELECT a.attname FROM pg_catalog.pg_partitioned_table t
				JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) t.partrelid
					AND a.attnum OPERATOR(pg_catalog.=) t.partattrs[0]
				WHERE t.partrelid OPERATOR(pg_catalog.=) m.member) AS key
			FROM @extschema@.snowseq_placement_group(parent) m,
				LATERAL @extschema@.snowseq_shard_stats(m.member) s
			JOIN pg_catalog.pg_foreign_table ft ON ft.ftrelid OPERATOR(pg_catalog.=) s.partition
			GROUP BY m.member, s.partition ORDER BY 1, 3 LOOP
		IF r.shards OPERATOR(pg_catalog.>) 1 THEN
			RAISE EXCEPTION 'snowseq_shard_map names more than one server for genes % to % of partition %',
				r.f, r.l, r.partition
				USING ERRCODE = 'object_not_in_prerequisite_state',
					HINT = 'Make the map name the foreign server of each partition before rebalancing.';
		END IF;
		-- writes in the sample: a partition new since the first reading, or
		-- whose counters went back (a table created again, a reset), counts from 0
		i := pg_catalog.array_position(w0p, CAST(r.partition AS pg_catalog.oid));
		part := pg_catalog.jsonb_build_object('first', r.f, 'last', r.l, 'server', r.shard,
			'rows', r.rows, 'bytes', r.bytes, 'table', r.remote, 'key', r.key,
			'oid', CAST(CAST(r.partition AS pg_catalog.oid) AS bigint), 'name', CAST(r.partition AS pg_catalog.text),
			'writes', CASE WHEN i IS NULL OR w0[i] OPERATOR(pg_catalog.>) r.writes THEN r.writes
				ELSE r.writes OPERATOR(pg_catalog.-) w0[i] END,
			'since', CASE WHEN by_writes AND i IS NOT NULL THEN w0x[i] END);
		IF r.named THEN
			parts := parts OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(part);
		ELSE
			grp := grp OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(part);
		END IF;
	END LOOP;

	RETURN QUERY SELECT * FROM @extschema@.snowseq_rebalance_plan_counted(pg_catalog.jsonb_build_object(
		'strategy', strategy, 'threshold', threshold, 'merge_below', merge_below, 'seconds', secs,
		'table', CAST(parent AS pg_catalog.text), 'sample', CAST(sample AS pg_catalog.text),
		'servers', pg_catalog.to_jsonb(sv), 'drain', pg_catalog.to_jsonb(drain),
		'partitions', parts, 'group', grp,
		-- moves kept revertable (snowseq.move_revert_window): what a revertable
		-- move touched is not moved again until it is finalized or reverted
		'keep', CAST(COALESCE(pg_catalog.current_setting('snowseq.move_revert_window', true), '0') AS pg_catalog.interval)
			OPERATOR(pg_catalog.>) CAST('0' AS pg_catalog.interval),
		'revertable_moves', COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('move', COALESCE(mv.group_move, mv.move_id),
				'first', mv.first_gene, 'last', mv.last_gene, 'source', mv.source_server, 'dest', mv.dest_server,
				'table', mv.source_table, 'oid', CAST(CAST(pg_catalog.to_regclass(mv.part_name) AS pg_catalog.oid) AS bigint))
				ORDER BY mv.move_id)
			FROM @extschema@.snowseq_moves mv
			WHERE @extschema@.snowseq_move_is_revertable(mv.state) AND mv.parent OPERATOR(pg_catalog.=) ANY
				(ARRAY(SELECT m.member FROM @extschema@.snowseq_placement_group(snowseq_rebalance_plan_from.parent) m))), '[]'),
		-- a cut by writes is sized by the rows written since the first reading
		-- (their xmin): without its transaction ids, as even over its genes
		'histograms', NOT by_writes OR (w0x IS NOT NULL
			AND pg_catalog.cardinality(w0x) OPERATOR(pg_catalog.=) pg_catalog.cardinality(w0p))));
END
$plan$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan_from(regclass, text, double precision, name[], name[], interval, oid[], bigint[], bigint[], timestamptz, boolean, double precision) IS
	'the plan of snowseq_rebalance_plan, strategy writes from a first reading of snowseq_shard_counters taken at first_at (partitions, writes and next transaction ids; NULL: taken here, and sample slept); only_check: check the arguments alone';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_plan_from(regclass, text, double precision, name[], name[], interval, oid[], bigint[], bigint[], timestamptz, boolean, double precision) FROM PUBLIC;

-- The plan, one statement: strategy writes sleeps the sample in it, with
-- no lock on the table (snowseq_shard_counters) but its snapshot.
CREATE FUNCTION @extschema@.snowseq_rebalance_plan(parent regclass, strategy text DEFAULT 'rows',
	threshold double precision DEFAULT 1.25, drain name[] DEFAULT '{}', fill name[] DEFAULT '{}',
	sample interval DEFAULT '10 s', merge_below double precision DEFAULT 0)
	RETURNS TABLE (step integer, first_gene integer, last_gene integer, from_server name,
		to_server name, rows bigint, bytes bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $plan$
BEGIN
	RETURN QUERY SELECT * FROM @extschema@.snowseq_rebalance_plan_from(parent, strategy, threshold, drain, fill, sample,
		CAST(NULL AS pg_catalog.oid[]), CAST(NULL AS bigint[]), CAST(NULL AS bigint[]), CAST(NULL AS pg_catalog.timestamptz), false,
		merge_below);
END
$plan$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan(regclass, text, double precision, name[], name[], interval, double precision) IS
	'the moves that bring every server of the map (and the servers in fill) to at most threshold x the mean rows (strategy rows), row bytes (bytes) or rows written per second over sample (writes) of a gene-sharded table, and everything off the servers in drain: whole partitions, or the last genes of one sized by a histogram of its rows over its genes (rows, bytes) or of its rows written during the sample (writes); then, with merge_below above 0, merges (from_server = to_server) of neighbouring partitions of one server whose load together is at most merge_below x the mean load of a partition; counts from snowseq_shard_stats, the first reading of writes from snowseq_shard_counters, no lock on the table held through the sample';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_plan(regclass, text, double precision, name[], name[], interval, double precision) FROM PUBLIC;

-- Whether the session that runs a rebalance is still there.
CREATE FUNCTION @extschema@.snowseq_rebalance_runner_alive(pid integer, started timestamptz)
	RETURNS boolean
	LANGUAGE sql STABLE PARALLEL SAFE
	RETURN EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
		WHERE a.pid OPERATOR(pg_catalog.=) $1
			AND (a.backend_start IS NULL OR $2 IS NULL OR a.backend_start OPERATOR(pg_catalog.=) $2));
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_runner_alive(integer, timestamptz) IS
	'whether the session that started at started (NULL: at any time) with process id pid is there (it runs a rebalance)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_runner_alive(integer, timestamptz) FROM PUBLIC;
-- Whether a live process drives a run now.
CREATE FUNCTION @extschema@.snowseq_rebalance_driven(run @extschema@.snowseq_rebalance_runs)
	RETURNS boolean
	LANGUAGE sql STABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_rebalance_is_running($1.state)
		AND @extschema@.snowseq_rebalance_runner_alive($1.runner_pid, $1.runner_start);
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_driven(@extschema@.snowseq_rebalance_runs) IS
	'whether the run is running in a process that is there';

-- The records of a run are written as the tables' owner (the guard refuses
-- every other role), by these functions for the procedure: a role granted
-- them (a router administrator, with the procedure) runs rebalances
-- without any right on the tables but SELECT.  Each is two functions: the
-- one granted, in C (snowseq_rebalance_as_caller, src/shards/
-- rebalance_rights.c), notes the role that calls it (the current user,
-- inside whatever SECURITY DEFINER function calls it) and runs the other,
-- its body <name>_impl, SECURITY DEFINER (the search path pg_catalog and
-- pg_temp only, every name qualified) and granted to no one.  Each records
-- runs of the tables whose owner's privileges that caller has
-- (snowseq_caller_owns), and no other: a role granted them plants no run
-- for a table of another role that its owner would then run, and the code
-- of a SECURITY DEFINER function that an owner calls acts with its own
-- role's rights, not the owner's.
CREATE FUNCTION @extschema@.snowseq_caller_owns(rel regclass)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_caller_owns'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_caller_owns(regclass) IS
	'whether the role that called the rebalance''s record function running now (outside one: the current user) has the privileges of the owner of rel: the check of those functions';
REVOKE ALL ON FUNCTION @extschema@.snowseq_caller_owns(regclass) FROM PUBLIC;
-- The run of a table not finished, locked until the transaction ends (a
-- second CALL waits for the first to decide), or no row.
CREATE FUNCTION @extschema@.snowseq_rebalance_open_run_impl(parent regclass)
	RETURNS SETOF @extschema@.snowseq_rebalance_runs
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $open$
BEGIN
	IF NOT @extschema@.snowseq_caller_owns(parent) THEN
		RAISE EXCEPTION 'must be owner of table % to rebalance it', parent
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	RETURN QUERY SELECT r.* FROM @extschema@.snowseq_rebalance_runs r
		WHERE r.parent OPERATOR(pg_catalog.=) snowseq_rebalance_open_run_impl.parent
			AND NOT @extschema@.snowseq_rebalance_is_over(r.state)
		FOR UPDATE;
END
$open$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_open_run_impl(regclass) IS
	'the body of snowseq_rebalance_open_run, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_open_run_impl(regclass) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_open_run(parent regclass)
	RETURNS SETOF @extschema@.snowseq_rebalance_runs
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_open_run(regclass) IS
	'the rebalance of a table not finished (running or stopped), locked for the transaction: for snowseq_rebalance';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_open_run(regclass) FROM PUBLIC;
-- A new run (run_id NULL: its table, strategy, threshold, drain, fill,
-- sample and state), or the state, rounds, runner and end of one; its stop
-- (set by snowseq_rebalance_stop at any time) is cleared only when asked,
-- as a session takes the run on.
CREATE FUNCTION @extschema@.snowseq_rebalance_save_run_impl(run @extschema@.snowseq_rebalance_runs,
	clear_stop boolean DEFAULT false)
	RETURNS @extschema@.snowseq_rebalance_runs
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $save$
DECLARE
	saved @extschema@.snowseq_rebalance_runs;
	tbl pg_catalog.regclass;
BEGIN
	tbl := run.parent;
	IF run.run_id IS NOT NULL THEN
		SELECT r.parent INTO tbl FROM @extschema@.snowseq_rebalance_runs r
			WHERE r.run_id OPERATOR(pg_catalog.=) run.run_id;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'rebalance run % does not exist', run.run_id
				USING ERRCODE = 'undefined_object',
				HINT = 'Pass a run_id of snowseq_rebalance_runs, or a NULL run_id to record a new run.';
		END IF;
	END IF;
	IF tbl IS NULL OR NOT @extschema@.snowseq_caller_owns(tbl) THEN
		RAISE EXCEPTION 'must be owner of table % to record its rebalance', COALESCE(tbl::pg_catalog.text, 'NULL')
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	IF run.run_id IS NULL THEN
		INSERT INTO @extschema@.snowseq_rebalance_runs (parent, strategy, threshold, drain, fill, sample, merge_below, state)
			VALUES (run.parent, run.strategy, run.threshold, run.drain, run.fill, run.sample, run.merge_below,
				@extschema@.snowseq_rebalance_next(CAST(NULL AS @extschema@.snowseq_rebalance_state), 'begin'))
			RETURNING * INTO saved;
	ELSE
		UPDATE @extschema@.snowseq_rebalance_runs r
			SET state = @extschema@.snowseq_rebalance_to(r.state, run.state), stop = CASE WHEN clear_stop THEN NULL ELSE r.stop END, rounds = run.rounds, runner_pid = run.runner_pid,
				runner_start = run.runner_start, finished_at = run.finished_at
			WHERE r.run_id OPERATOR(pg_catalog.=) run.run_id
			RETURNING * INTO saved;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'rebalance % does not exist', run.run_id
				USING ERRCODE = 'undefined_object';
		END IF;
	END IF;
	RETURN saved;
END
$save$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_save_run_impl(@extschema@.snowseq_rebalance_runs, boolean) IS
	'the body of snowseq_rebalance_save_run, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_save_run_impl(@extschema@.snowseq_rebalance_runs, boolean) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_save_run(run @extschema@.snowseq_rebalance_runs,
	clear_stop boolean DEFAULT false)
	RETURNS @extschema@.snowseq_rebalance_runs
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_save_run(@extschema@.snowseq_rebalance_runs, boolean) IS
	'record a new rebalance, or the state, rounds, runner and end of one (clear_stop: and clear its stop): for snowseq_rebalance';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_save_run(@extschema@.snowseq_rebalance_runs, boolean) FROM PUBLIC;
-- Steps of a run: new ones, or the state, move, rows copied, error and
-- times of planned ones.
CREATE FUNCTION @extschema@.snowseq_rebalance_save_steps_impl(steps @extschema@.snowseq_rebalance_steps[])
	RETURNS void
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $steps$
DECLARE
	tbl pg_catalog.regclass;
	missing bigint;
BEGIN
	SELECT s.run_id INTO missing FROM pg_catalog.unnest(steps) s
		WHERE NOT EXISTS (SELECT 1 FROM @extschema@.snowseq_rebalance_runs r
			WHERE r.run_id OPERATOR(pg_catalog.=) s.run_id)
		LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'rebalance run % does not exist', COALESCE(missing::pg_catalog.text, 'NULL')
			USING ERRCODE = 'undefined_object',
			HINT = 'Record the run first (snowseq_rebalance_save_run), and pass its run_id in every step.';
	END IF;
	SELECT r.parent INTO tbl FROM pg_catalog.unnest(steps) s
		LEFT JOIN @extschema@.snowseq_rebalance_runs r ON r.run_id OPERATOR(pg_catalog.=) s.run_id
		WHERE r.run_id IS NULL OR NOT @extschema@.snowseq_caller_owns(r.parent)
		LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'must be owner of table % to record its rebalance', COALESCE(tbl::pg_catalog.text, '(no such run)')
			USING ERRCODE = 'insufficient_privilege';
	END IF;
		INSERT INTO @extschema@.snowseq_rebalance_steps AS st (run_id, step, first_gene, last_gene, from_server,
				to_server, rows, bytes, state, move_id, rows_copied, error, started_at, finished_at)
			SELECT s.run_id, s.step, s.first_gene, s.last_gene, s.from_server, s.to_server, s.rows, s.bytes,
				-- a new step is planned; a recorded one goes where a step leads
				CASE WHEN EXISTS (SELECT FROM @extschema@.snowseq_rebalance_steps o
						WHERE o.run_id OPERATOR(pg_catalog.=) s.run_id AND o.step OPERATOR(pg_catalog.=) s.step) THEN s.state
					ELSE @extschema@.snowseq_rebalance_to(CAST(NULL AS @extschema@.snowseq_rebalance_step_state),
						COALESCE(s.state, @extschema@.snowseq_rebalance_next(CAST(NULL AS @extschema@.snowseq_rebalance_step_state), 'plan'))) END,
				s.move_id, s.rows_copied, s.error, s.started_at, s.finished_at
			FROM pg_catalog.unnest(steps) s
			ON CONFLICT (run_id, step) DO UPDATE
				SET state = @extschema@.snowseq_rebalance_to(st.state, excluded.state), move_id = excluded.move_id, rows_copied = excluded.rows_copied,
					error = excluded.error, started_at = excluded.started_at, finished_at = excluded.finished_at;
END
$steps$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_save_steps_impl(@extschema@.snowseq_rebalance_steps[]) IS
	'the body of snowseq_rebalance_save_steps, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_save_steps_impl(@extschema@.snowseq_rebalance_steps[]) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_save_steps(steps @extschema@.snowseq_rebalance_steps[])
	RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_save_steps(@extschema@.snowseq_rebalance_steps[]) IS
	'record new steps of a rebalance, or the state, move, rows copied, error and times of its steps: for snowseq_rebalance';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_save_steps(@extschema@.snowseq_rebalance_steps[]) FROM PUBLIC;
-- The first reading of strategy writes (parts, writes, xids at taken_at) and
-- its sample, for snowseq_rebalance: committed, then slept a second at a
-- time, each committed, so that the run holds no lock and no snapshot
-- older than a second through the sample.
CREATE PROCEDURE @extschema@.snowseq_rebalance_sample(parent regclass, sample interval,
	INOUT parts oid[], INOUT writes bigint[], INOUT xids bigint[], INOUT taken_at timestamptz)
	LANGUAGE plpgsql
	AS $sample$
DECLARE
	remaining pg_catalog.interval;
BEGIN
	taken_at := pg_catalog.clock_timestamp();
	SELECT pg_catalog.array_agg(CAST(sc.partition AS pg_catalog.oid)), pg_catalog.array_agg(sc.writes),
			pg_catalog.array_agg(sc.next_xid) INTO parts, writes, xids
		FROM @extschema@.snowseq_placement_group(parent) pg,
			LATERAL @extschema@.snowseq_shard_counters(pg.member) sc;
	COMMIT;
	LOOP
		remaining := taken_at OPERATOR(pg_catalog.+) sample OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp();
		-- no sample (NULL) ends it as an elapsed one does
		EXIT WHEN remaining IS NULL OR remaining OPERATOR(pg_catalog.<=) CAST('0' AS pg_catalog.interval);
		PERFORM pg_catalog.pg_sleep_for(LEAST(remaining, CAST('1 s' AS pg_catalog.interval)));
		COMMIT;
	END LOOP;
END
$sample$;
COMMENT ON PROCEDURE @extschema@.snowseq_rebalance_sample(regclass, interval, oid[], bigint[], bigint[], timestamptz) IS
	'for snowseq_rebalance: the write counters of each partition of the table and of the other tables of its placement group and their servers'' next transaction ids (snowseq_shard_counters) and when they were read, committed, then sample slept a second at a time, each committed';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_rebalance_sample(regclass, interval, oid[], bigint[], bigint[], timestamptz) FROM PUBLIC;

-- Stop: writes the runs as their owner, for the roles granted it
-- (SECURITY DEFINER: the search path is pg_catalog and pg_temp only).
CREATE FUNCTION @extschema@.snowseq_rebalance_stop_impl(parent regclass DEFAULT NULL, abandon boolean DEFAULT false)
	RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $stop$
DECLARE
	n integer;
BEGIN
	IF abandon IS NULL THEN
		RAISE EXCEPTION 'abandon must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- a run its session is running stops before its next move; one no
	-- session runs stops (or is given up) now
	UPDATE @extschema@.snowseq_rebalance_runs r
		SET stop = CASE WHEN abandon THEN 'abandon' ELSE 'stop' END,
			state = CASE WHEN @extschema@.snowseq_rebalance_driven(r) THEN r.state
				ELSE @extschema@.snowseq_rebalance_next(r.state, CASE WHEN abandon THEN 'abandon' ELSE 'stop' END) END,
			finished_at = CASE WHEN abandon AND NOT @extschema@.snowseq_rebalance_driven(r)
				THEN pg_catalog.clock_timestamp() END
		WHERE NOT @extschema@.snowseq_rebalance_is_over(r.state)
			AND (snowseq_rebalance_stop_impl.parent IS NULL OR r.parent OPERATOR(pg_catalog.=) snowseq_rebalance_stop_impl.parent)
			-- the runs of the caller's own tables alone
			AND @extschema@.snowseq_caller_owns(r.parent);
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$stop$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_stop_impl(regclass, boolean) IS
	'the body of snowseq_rebalance_stop, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_stop_impl(regclass, boolean) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_stop(parent regclass DEFAULT NULL, abandon boolean DEFAULT false)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_stop(regclass, boolean) IS
	'stop the rebalances of a table (NULL: of every table) before their next move, resumable by CALL snowseq_rebalance; abandon => true gives them up (the next CALL plans anew); returns how many runs it marked';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_stop(regclass, boolean) FROM PUBLIC;
-- ---- end of rebalance (1.3) ----

-- ---- background rebalances (1.3) ----
-- A rebalance run by a background worker (src/shards/rebalance/rebalance_job.c):
-- snowseq_rebalance_start records the run and starts a worker in this
-- database as the caller's role, which CALLs snowseq_rebalance as that
-- role's session would, and returns the run's id (the job) at once.  The
-- move resolver starts a worker again, at the router's start, for each
-- background run still running.  A run's job_role is the role of its
-- worker (NULL: a run of CALL snowseq_rebalance); max_rows_per_second and
-- max_lag_bytes its throttles; throttled_until and throttled_by the end
-- and the cause of the sleep it is in for them; error
-- the error that ended its worker (columns of snowseq_rebalance_runs, in
-- its definition: an install script alters nothing it creates).
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.job_role IS
	'the role whose background worker runs the rebalance (snowseq_rebalance_start), by its OID (a rename keeps it); NULL: a run of CALL snowseq_rebalance';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.max_rows_per_second IS
	'the throttle: before each step, the run sleeps until the rows its steps copied over the time since its first step began are at most this many per second';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.max_lag_bytes IS
	'the throttle: before each step, the run waits until no standby of its servers has more than this many bytes of WAL to replay (snowseq_shard_standby_lag)';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.throttled_until IS
	'while the run sleeps for max_rows_per_second: until when';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.throttled_by IS
	'while the run sleeps for a throttle: which, and why';
COMMENT ON COLUMN @extschema@.snowseq_rebalance_runs.error IS
	'the error that ended the background worker of the run (cleared when it starts again)';

-- The worker of a run, started as the current role; its process id.
CREATE FUNCTION @extschema@.snowseq_rebalance_job_launch(job bigint)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_job_launch'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_launch(bigint) IS
	'for snowseq_rebalance_start: start the background worker that runs rebalance job, as the current role (which must be able to log in), after this transaction; its process id';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_launch(bigint) FROM PUBLIC;

-- The lag of a shard server's standbys, in bytes of WAL not replayed.
CREATE FUNCTION @extschema@.snowseq_shard_standby_lag(server name)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_shard_standby_lag'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_shard_standby_lag(name) IS
	'the most bytes of WAL a standby of the postgres_fdw server has yet to replay (NULL: no standby), read there with the current user''s mapping (its user needs pg_read_all_stats there): the throttle max_lag_bytes';
REVOKE ALL ON FUNCTION @extschema@.snowseq_shard_standby_lag(name) FROM PUBLIC;

-- The records of a job, as the runs' owner for the roles granted them (the
-- table's owner alone: snowseq_caller_owns).  takeover false (the start):
-- the run is running again, in the worker of process runner, its stop and
-- error cleared, its throttle set, a run with no step yet planned in the
-- worker (three rounds, as a CALL's).  takeover true (the worker): the
-- worker's role and process are recorded, and a stop asked meanwhile is made; the
-- run's state (NULL: no such run of the role's tables).
CREATE FUNCTION @extschema@.snowseq_rebalance_job_record_impl(job bigint, max_rows_per_second double precision,
	max_lag_bytes bigint, runner integer, takeover boolean)
	RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $record$
DECLARE
	st pg_catalog.text;
BEGIN
	IF takeover THEN
		UPDATE @extschema@.snowseq_rebalance_runs r
			-- the role by its OID: a rename does not lose the job
			SET job_role = (SELECT CAST(a.oid AS pg_catalog.regrole) FROM pg_catalog.pg_roles a
					WHERE a.rolname OPERATOR(pg_catalog.=) SESSION_USER),
				state = CASE WHEN r.stop IS NULL THEN r.state ELSE @extschema@.snowseq_rebalance_next(r.state, r.stop) END,
				finished_at = CASE WHEN r.stop OPERATOR(pg_catalog.=) 'abandon' THEN pg_catalog.clock_timestamp() ELSE r.finished_at END,
				-- the worker drives it from now (its driver records its start)
				runner_pid = CASE WHEN r.stop IS NULL THEN pg_catalog.pg_backend_pid() END,
				runner_start = NULL
			WHERE r.run_id OPERATOR(pg_catalog.=) job AND @extschema@.snowseq_caller_owns(r.parent)
				AND NOT @extschema@.snowseq_rebalance_is_over(r.state)
				-- the worker the start launched, or one resuming a run no
				-- process runs: never a run another live process drives
				AND (r.runner_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
					OR NOT @extschema@.snowseq_rebalance_runner_alive(r.runner_pid, r.runner_start))
			RETURNING r.state INTO st;
		RETURN st;
	END IF;
	IF max_rows_per_second IS NOT NULL AND NOT max_rows_per_second OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'max_rows_per_second % is not above 0', max_rows_per_second
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Give the most rows per second the rebalance may copy on average, or NULL for no throttle.';
	END IF;
	IF max_lag_bytes IS NOT NULL AND NOT max_lag_bytes OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'max_lag_bytes % is not above 0', max_lag_bytes
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Give the most bytes of WAL a standby of the servers of a step may have to replay as the step begins, or NULL for no throttle.';
	END IF;
	UPDATE @extschema@.snowseq_rebalance_runs r
		-- the role is the worker's, recorded as it takes the run over (a
		-- session's SET ROLE or a definer's rights are not the worker's)
		SET job_role = NULL, state = @extschema@.snowseq_rebalance_next(r.state, 'take'), stop = NULL, error = NULL, finished_at = NULL,
			max_rows_per_second = snowseq_rebalance_job_record_impl.max_rows_per_second,
			max_lag_bytes = snowseq_rebalance_job_record_impl.max_lag_bytes, throttled_until = NULL, throttled_by = NULL,
			runner_pid = runner, runner_start = NULL,
			rounds = CASE WHEN EXISTS (SELECT FROM @extschema@.snowseq_rebalance_steps st
				WHERE st.run_id OPERATOR(pg_catalog.=) job) THEN r.rounds ELSE 0 END
		WHERE r.run_id OPERATOR(pg_catalog.=) job
			AND NOT @extschema@.snowseq_rebalance_is_over(r.state)
			AND @extschema@.snowseq_caller_owns(r.parent)
		RETURNING r.state INTO st;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'rebalance job % is not an open run of a table of role %', job, SESSION_USER
			USING ERRCODE = 'undefined_object';
	END IF;
	RETURN st;
END
$record$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_record_impl(bigint, double precision, bigint, integer, boolean) IS
	'the body of snowseq_rebalance_job_record, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_record_impl(bigint, double precision, bigint, integer, boolean) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_job_record(job bigint, max_rows_per_second double precision,
	max_lag_bytes bigint, runner integer, takeover boolean)
	RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_record(bigint, double precision, bigint, integer, boolean) IS
	'for snowseq_rebalance_start (takeover false: the run runs again in the worker of process runner, with the throttles) and its worker (takeover true: its role recorded, a stop asked meanwhile made; the state)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_record(bigint, double precision, bigint, integer, boolean) FROM PUBLIC;
-- The error that ended a job's worker: the run stops (unless another
-- session runs it now), resumable as any stopped run.
CREATE FUNCTION @extschema@.snowseq_rebalance_job_failed_impl(job bigint, message text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $failed$
BEGIN
	UPDATE @extschema@.snowseq_rebalance_runs r
		SET error = message, throttled_until = NULL, throttled_by = NULL, runner_pid = NULL, runner_start = NULL,
			state = CASE WHEN @extschema@.snowseq_rebalance_is_over(r.state) THEN r.state
				ELSE @extschema@.snowseq_rebalance_next(r.state, 'fail') END
		WHERE r.run_id OPERATOR(pg_catalog.=) job AND @extschema@.snowseq_caller_owns(r.parent)
			AND (r.runner_pid IS NULL OR r.runner_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
				OR NOT @extschema@.snowseq_rebalance_runner_alive(r.runner_pid, r.runner_start));
END
$failed$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_failed_impl(bigint, text) IS
	'the body of snowseq_rebalance_job_failed, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_failed_impl(bigint, text) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_job_failed(job bigint, message text)
	RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_failed(bigint, text) IS
	'for the worker of a background rebalance: record the error that ended it, and stop the run (unless another session runs it)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_failed(bigint, text) FROM PUBLIC;
-- Until when and why a run sleeps for a throttle (NULL: it does not).
CREATE FUNCTION @extschema@.snowseq_rebalance_job_throttled_impl(job bigint, throttled_until timestamptz, throttled_by text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $throttled$
BEGIN
	UPDATE @extschema@.snowseq_rebalance_runs r
		SET throttled_until = snowseq_rebalance_job_throttled_impl.throttled_until,
			throttled_by = snowseq_rebalance_job_throttled_impl.throttled_by
		WHERE r.run_id OPERATOR(pg_catalog.=) job AND @extschema@.snowseq_caller_owns(r.parent);
END
$throttled$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_throttled_impl(bigint, timestamptz, text) IS
	'the body of snowseq_rebalance_job_throttled, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_throttled_impl(bigint, timestamptz, text) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_job_throttled(job bigint, throttled_until timestamptz, throttled_by text)
	RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_job_throttled(bigint, timestamptz, text) IS
	'for snowseq_rebalance_throttle: record until when (max_rows_per_second) and why the run sleeps for a throttle (NULL: it does not)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_job_throttled(bigint, timestamptz, text) FROM PUBLIC;

-- The parts of the run (snowseq_rebalance): its end, a step done, the move or
-- merge of a step, the steps of a plan.
CREATE FUNCTION @extschema@.snowseq_rebalance_finish(run @extschema@.snowseq_rebalance_runs, step text)
	RETURNS @extschema@.snowseq_rebalance_runs
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $finish$
BEGIN
	run.state := @extschema@.snowseq_rebalance_next(run.state, step);
	IF @extschema@.snowseq_rebalance_is_over(run.state) THEN
		run.finished_at := pg_catalog.clock_timestamp();
	END IF;
	run.runner_pid := NULL;
	run.runner_start := NULL;
	RETURN @extschema@.snowseq_rebalance_save_run(run);
END
$finish$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_finish(@extschema@.snowseq_rebalance_runs, text) IS
	'for snowseq_rebalance: record the step that ends its call (finish, abandon: over, and when; stop, fail: stopped), no session running it';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_finish(@extschema@.snowseq_rebalance_runs, text) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_step_done(s @extschema@.snowseq_rebalance_steps, move_id bigint,
	rows_copied bigint)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $done$
BEGIN
	s.state := @extschema@.snowseq_rebalance_next(s.state, 'succeed');
	s.move_id := CASE WHEN s.from_server OPERATOR(pg_catalog.<>) s.to_server THEN move_id END;
	s.rows_copied := rows_copied;
	s.error := NULL;
	s.finished_at := pg_catalog.clock_timestamp();
	PERFORM @extschema@.snowseq_rebalance_save_steps(ARRAY[s]);
END
$done$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_step_done(@extschema@.snowseq_rebalance_steps, bigint, bigint) IS
	'for snowseq_rebalance: record a step done by move move_id (a merge: no move), rows_copied rows copied';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_step_done(@extschema@.snowseq_rebalance_steps, bigint, bigint) FROM PUBLIC;
-- The last move (from_server <> to_server) of a step's genes to its
-- server, or merge of its genes, begun at since or later (NULL: any move;
-- a merge done), and whether it is done (a move: or kept revertable).
CREATE FUNCTION @extschema@.snowseq_rebalance_step_move(parent regclass, s @extschema@.snowseq_rebalance_steps,
	since timestamptz, OUT move_id bigint, OUT done boolean, OUT error text, OUT rows_copied bigint)
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	AS $step$
BEGIN
	IF s.from_server OPERATOR(pg_catalog.=) s.to_server THEN
		SELECT m.merge_id, @extschema@.snowseq_merge_is_done(m.state), m.error, m.rows_copied INTO move_id, done, error, rows_copied
			FROM @extschema@.snowseq_merges m
			WHERE m.parent OPERATOR(pg_catalog.=) snowseq_rebalance_step_move.parent AND m.group_merge IS NULL
				AND m.first_gene OPERATOR(pg_catalog.=) s.first_gene AND m.last_gene OPERATOR(pg_catalog.=) s.last_gene
				AND (m.started_at OPERATOR(pg_catalog.>=) since OR since IS NULL AND @extschema@.snowseq_merge_is_done(m.state))
			ORDER BY m.merge_id DESC LIMIT 1;
	ELSE
		SELECT COALESCE(m.group_move, m.move_id),
				@extschema@.snowseq_move_is_done(m.state) OR @extschema@.snowseq_move_is_revertable(m.state),
				m.error, m.rows_copied INTO move_id, done, error, rows_copied
			FROM @extschema@.snowseq_moves m
			WHERE m.parent OPERATOR(pg_catalog.=) snowseq_rebalance_step_move.parent
				AND m.first_gene OPERATOR(pg_catalog.=) s.first_gene AND m.last_gene OPERATOR(pg_catalog.=) s.last_gene
				AND m.dest_server OPERATOR(pg_catalog.=) s.to_server
				AND (m.started_at OPERATOR(pg_catalog.>=) since OR since IS NULL)
			ORDER BY m.move_id DESC LIMIT 1;
	END IF;
END
$step$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_step_move(regclass, @extschema@.snowseq_rebalance_steps, timestamptz) IS
	'for snowseq_rebalance: the last move of the step''s genes of table parent to its server (a merge, where its servers are one: of its genes), begun at since or later (NULL: any move, a merge done)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_step_move(regclass, @extschema@.snowseq_rebalance_steps, timestamptz) FROM PUBLIC;
-- A round of planning: the plan from the loads now, drain the servers to
-- drain, numbered after the run's steps and recorded; how many steps.
CREATE FUNCTION @extschema@.snowseq_rebalance_plan_steps(run @extschema@.snowseq_rebalance_runs, drain name[],
	w0p oid[], w0 bigint[], w0x bigint[], w0_at timestamptz)
	RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $plan$
DECLARE
	planned @extschema@.snowseq_rebalance_steps[];
	n integer;
BEGIN
	SELECT COALESCE(pg_catalog.max(st.step), 0) INTO n
		FROM @extschema@.snowseq_rebalance_steps st WHERE st.run_id OPERATOR(pg_catalog.=) run.run_id;
	planned := ARRAY(SELECT ROW(run.run_id, n OPERATOR(pg_catalog.+) p.step, p.first_gene, p.last_gene,
			p.from_server, p.to_server, p.rows, p.bytes, NULL, NULL, NULL, NULL, NULL, NULL)::@extschema@.snowseq_rebalance_steps
		FROM @extschema@.snowseq_rebalance_plan_from(run.parent, run.strategy, run.threshold, drain, run.fill, run.sample,
			w0p, w0, w0x, w0_at, false, run.merge_below) p);
	PERFORM @extschema@.snowseq_rebalance_save_steps(planned);
	RETURN COALESCE(pg_catalog.cardinality(planned), 0);
END
$plan$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_plan_steps(@extschema@.snowseq_rebalance_runs, name[], oid[], bigint[], bigint[], timestamptz) IS
	'for snowseq_rebalance: plan a round of the run (the servers in drain drained, strategy writes from the first reading w0p, w0, w0x taken at w0_at), record its steps after the run''s; how many';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_plan_steps(@extschema@.snowseq_rebalance_runs, name[], oid[], bigint[], bigint[], timestamptz) FROM PUBLIC;

-- The throttles, before each step of a run: with max_lag_bytes, it waits
-- (a second at a time, each committed, a stop seen) until no standby of the
-- step's servers has more than that many bytes of WAL to replay; with
-- max_rows_per_second, it sleeps (likewise) until the rows its steps done
-- copied, over the time since the first of them began, are at most that
-- many per second.  slept: it did.
CREATE PROCEDURE @extschema@.snowseq_rebalance_throttle(job bigint, servers name[], INOUT slept boolean DEFAULT false)
	LANGUAGE plpgsql
	AS $throttle$
DECLARE
	run @extschema@.snowseq_rebalance_runs;
	lag record;
	since pg_catalog.timestamptz;
	copied bigint;
	until pg_catalog.timestamptz;
BEGIN
	slept := false;
	LOOP
		SELECT * INTO run FROM @extschema@.snowseq_rebalance_runs r WHERE r.run_id OPERATOR(pg_catalog.=) job;
		EXIT WHEN run.max_lag_bytes IS NULL OR run.stop IS NOT NULL;
		SELECT l.srv, l.bytes INTO lag FROM (SELECT DISTINCT sv AS srv, @extschema@.snowseq_shard_standby_lag(sv) AS bytes
			FROM pg_catalog.unnest(servers) sv) l ORDER BY l.bytes DESC NULLS LAST LIMIT 1;
		EXIT WHEN lag.bytes IS NULL OR lag.bytes OPERATOR(pg_catalog.<=) run.max_lag_bytes;
		IF NOT slept THEN
			RAISE NOTICE 'rebalance %: waiting for the standbys of server "%" (% bytes to replay, at most %)',
				job, lag.srv, lag.bytes, run.max_lag_bytes;
		END IF;
		PERFORM @extschema@.snowseq_rebalance_job_throttled(job, NULL, pg_catalog.format(
			'max_lag_bytes: a standby of server %I has %s bytes of WAL to replay (at most %s)', lag.srv, lag.bytes, run.max_lag_bytes));
		COMMIT;
		slept := true;
		PERFORM pg_catalog.pg_sleep(1);
	END LOOP;
	SELECT pg_catalog.min(st.started_at), pg_catalog.sum(st.rows_copied) INTO since, copied
		FROM @extschema@.snowseq_rebalance_steps st
		WHERE st.run_id OPERATOR(pg_catalog.=) job AND @extschema@.snowseq_rebalance_step_is_over(st.state);
	until := since OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => copied OPERATOR(pg_catalog./) run.max_rows_per_second);
	IF until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() AND run.stop IS NULL THEN
		PERFORM @extschema@.snowseq_rebalance_job_throttled(job, until, pg_catalog.format(
			'max_rows_per_second: %s rows copied since %s, at most %s a second', copied, since, run.max_rows_per_second));
		COMMIT;
		RAISE NOTICE 'rebalance %: throttled until % (% rows copied since %, at most % rows per second)',
			job, until, copied, since, run.max_rows_per_second;
		WHILE pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) until AND NOT EXISTS (SELECT
				FROM @extschema@.snowseq_rebalance_runs r WHERE r.run_id OPERATOR(pg_catalog.=) job AND r.stop IS NOT NULL) LOOP
			PERFORM pg_catalog.pg_sleep_for(LEAST(until OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp(), CAST('1 s' AS pg_catalog.interval)));
			COMMIT;
		END LOOP;
		slept := true;
	END IF;
	IF slept THEN
		PERFORM @extschema@.snowseq_rebalance_job_throttled(job, NULL, NULL);
		COMMIT;
	END IF;
END
$throttle$;
COMMENT ON PROCEDURE @extschema@.snowseq_rebalance_throttle(bigint, name[], boolean) IS
	'for snowseq_rebalance, before a step on servers: with the run''s max_lag_bytes, wait until no standby of those servers has more bytes of WAL to replay; with its max_rows_per_second, sleep until the rows its steps done copied since the first began are at most that many per second (a second at a time, each committed, until a stop); slept: it did';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_rebalance_throttle(bigint, name[], boolean) FROM PUBLIC;

-- What the worker CALLs: the run of job, as CALL snowseq_rebalance runs it.
CREATE PROCEDURE @extschema@.snowseq_rebalance_job_run(job bigint)
	LANGUAGE plpgsql
	AS $job$
DECLARE
	tbl pg_catalog.regclass;
	run @extschema@.snowseq_rebalance_runs;
BEGIN
	-- the run as the takeover left it (a statement of its own: a query in
	-- the same statement would read the run as it was before)
	PERFORM @extschema@.snowseq_rebalance_job_record(job, NULL, NULL, pg_catalog.pg_backend_pid(), true);
	SELECT * INTO run FROM @extschema@.snowseq_rebalance_runs r WHERE r.run_id OPERATOR(pg_catalog.=) job;
	IF NOT FOUND OR NOT @extschema@.snowseq_rebalance_driven(run) OR run.runner_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() THEN
		RETURN;					-- rolled back, stopped or given up before the worker began, or another's
	END IF;
	tbl := run.parent;
	COMMIT;
	CALL @extschema@.snowseq_rebalance(tbl);
END
$job$;
COMMENT ON PROCEDURE @extschema@.snowseq_rebalance_job_run(bigint) IS
	'what the background worker of rebalance job runs: CALL snowseq_rebalance on its table, which continues the run';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_rebalance_job_run(bigint) FROM PUBLIC;

-- Start: a run of the table (a new one, or the one not finished, which
-- goes on from its first step not done), run by a background worker.
CREATE FUNCTION @extschema@.snowseq_rebalance_start(parent regclass, strategy text DEFAULT 'rows',
	threshold double precision DEFAULT 1.25, drain name[] DEFAULT '{}', fill name[] DEFAULT '{}',
	sample interval DEFAULT '10 s', merge_below double precision DEFAULT 0,
	max_rows_per_second double precision DEFAULT NULL, max_lag_bytes bigint DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $start$
DECLARE
	run @extschema@.snowseq_rebalance_runs;
BEGIN
	IF parent IS NULL THEN
		RAISE EXCEPTION 'the table of a rebalance must not be NULL';
	END IF;
	IF max_rows_per_second IS NOT NULL AND NOT max_rows_per_second OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'max_rows_per_second % is not above 0', max_rows_per_second
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Give the most rows per second the rebalance may copy on average, or NULL for no throttle.';
	END IF;
	IF max_lag_bytes IS NOT NULL AND NOT max_lag_bytes OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'max_lag_bytes % is not above 0', max_lag_bytes
			USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Give the most bytes of WAL a standby of the servers of a step may have to replay as the step begins, or NULL for no throttle.';
	END IF;
	SELECT * INTO run FROM @extschema@.snowseq_rebalance_open_run(parent);
	IF FOUND THEN
		IF @extschema@.snowseq_rebalance_driven(run) AND run.runner_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() THEN
			RAISE EXCEPTION 'rebalance % of table % is running in process %', run.run_id, parent, run.runner_pid
				USING ERRCODE = 'object_in_use',
					HINT = 'Wait for it (snowseq_rebalance_wait), or stop it between steps with snowseq_rebalance_stop().';
		END IF;
		RAISE NOTICE 'rebalance %: the run of table % not finished goes on in the background from its first step not done',
			run.run_id, parent;
	ELSE
		PERFORM FROM @extschema@.snowseq_rebalance_plan_from(parent, strategy, threshold, drain, fill, sample,
			NULL, NULL, NULL, NULL, true, merge_below);
		run.parent := parent;
		run.strategy := strategy;
		run.threshold := threshold;
		run.drain := drain;
		run.fill := fill;
		run.sample := COALESCE(sample, CAST('10 s' AS pg_catalog.interval));
		run.merge_below := merge_below;
		run := @extschema@.snowseq_rebalance_save_run(run);
	END IF;
	PERFORM @extschema@.snowseq_rebalance_job_record(run.run_id, max_rows_per_second, max_lag_bytes,
		@extschema@.snowseq_rebalance_job_launch(run.run_id), false);
	RETURN run.run_id;
END
$start$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_start(regclass, text, double precision, name[], name[], interval, double precision, double precision, bigint) IS
	'start a rebalance of the table in a background worker, as the current role (arguments as for snowseq_rebalance; max_rows_per_second, max_lag_bytes: the throttles, NULL none), or continue its run not finished there; returns the job (its run_id) at once; the worker goes on after this session, and again after a restart of the server';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_start(regclass, text, double precision, name[], name[], interval, double precision, double precision, bigint) FROM PUBLIC;

-- Whether the role that called the record function running now has the
-- privileges of a role: the status's check of pg_monitor.
CREATE FUNCTION @extschema@.snowseq_caller_has_privs_of(role regrole)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_caller_has_privs_of'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_caller_has_privs_of(regrole) IS
	'whether the role that called the rebalance''s record function running now (outside one: the current user) has the privileges of role: the status''s check of pg_monitor';
REVOKE ALL ON FUNCTION @extschema@.snowseq_caller_has_privs_of(regrole) FROM PUBLIC;

-- Status: the runs of the tables the caller owns (pg_monitor:
-- every run, without its error).
CREATE FUNCTION @extschema@.snowseq_rebalance_status_impl(job bigint DEFAULT NULL)
	RETURNS TABLE (run_id bigint, parent regclass, state text, background boolean, job_role name,
		runner_alive boolean, steps_done integer, steps_total integer, step integer, step_running text,
		rows_copied bigint, rows_planned bigint, time_left interval, throttled_until timestamptz,
		throttled_by text, last_error text, started_at timestamptz, finished_at timestamptz)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $status$
BEGIN
	RETURN QUERY
	SELECT r.run_id, r.parent, r.state::pg_catalog.text, r.job_role IS NOT NULL,
		-- the role's name now; a role dropped since shows as its OID
		CAST(COALESCE((SELECT CAST(a.rolname AS pg_catalog.text) FROM pg_catalog.pg_roles a
			WHERE a.oid OPERATOR(pg_catalog.=) CAST(r.job_role AS pg_catalog.oid)),
			CAST(CAST(r.job_role AS pg_catalog.oid) AS pg_catalog.text)) AS pg_catalog.name),
		@extschema@.snowseq_rebalance_driven(r),
		st.done, st.total, cur.step,
		CASE WHEN cur.step IS NOT NULL THEN pg_catalog.format(CASE WHEN cur.from_server OPERATOR(pg_catalog.=) cur.to_server
			THEN 'merge of genes %s to %s on server %I' ELSE 'move of genes %s to %s from server %I to server %I' END,
			cur.first_gene, cur.last_gene, cur.from_server, cur.to_server) END,
		st.copied OPERATOR(pg_catalog.+) COALESCE(mv.rows_copied, 0), st.planned,
		CASE WHEN st.copied OPERATOR(pg_catalog.>) 0 AND st.secs OPERATOR(pg_catalog.>) 0 THEN pg_catalog.make_interval(secs =>
			GREATEST(st.left_rows OPERATOR(pg_catalog.-) COALESCE(mv.rows_copied, 0), 0)
			OPERATOR(pg_catalog.*) st.secs OPERATOR(pg_catalog./) st.copied) END,
		CASE WHEN r.throttled_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() THEN r.throttled_until END,
		CASE WHEN @extschema@.snowseq_rebalance_driven(r) THEN r.throttled_by END,
		CASE WHEN @extschema@.snowseq_caller_owns(r.parent) THEN r.error END,
		r.started_at, r.finished_at
	FROM @extschema@.snowseq_rebalance_runs r
	CROSS JOIN LATERAL (SELECT pg_catalog.count(*) FILTER (WHERE @extschema@.snowseq_rebalance_step_is_over(s.state))::integer AS done,
			pg_catalog.count(*)::integer AS total,
			COALESCE(pg_catalog.sum(s.rows_copied) FILTER (WHERE @extschema@.snowseq_rebalance_step_is_over(s.state)), 0)::bigint AS copied,
			COALESCE(pg_catalog.sum(s.rows), 0)::bigint AS planned,
			COALESCE(pg_catalog.sum(s.rows) FILTER (WHERE NOT @extschema@.snowseq_rebalance_step_is_over(s.state)), 0)::bigint AS left_rows,
			pg_catalog.sum(pg_catalog.date_part('epoch', s.finished_at OPERATOR(pg_catalog.-) s.started_at))
				FILTER (WHERE @extschema@.snowseq_rebalance_step_is_over(s.state)) AS secs
		FROM @extschema@.snowseq_rebalance_steps s WHERE s.run_id OPERATOR(pg_catalog.=) r.run_id) st
	LEFT JOIN LATERAL (SELECT s.* FROM @extschema@.snowseq_rebalance_steps s
		WHERE s.run_id OPERATOR(pg_catalog.=) r.run_id AND @extschema@.snowseq_rebalance_is_running(s.state)
		ORDER BY s.step LIMIT 1) cur ON true
	LEFT JOIN LATERAL (SELECT m.rows_copied FROM @extschema@.snowseq_moves m
		WHERE m.parent OPERATOR(pg_catalog.=) r.parent AND m.first_gene OPERATOR(pg_catalog.=) cur.first_gene
			AND m.last_gene OPERATOR(pg_catalog.=) cur.last_gene AND m.dest_server OPERATOR(pg_catalog.=) cur.to_server
			AND m.started_at OPERATOR(pg_catalog.>=) cur.started_at
		UNION ALL SELECT g.rows_copied FROM @extschema@.snowseq_merges g
		WHERE cur.from_server OPERATOR(pg_catalog.=) cur.to_server AND g.parent OPERATOR(pg_catalog.=) r.parent
			AND g.group_merge IS NULL AND g.first_gene OPERATOR(pg_catalog.=) cur.first_gene
			AND g.last_gene OPERATOR(pg_catalog.=) cur.last_gene AND g.started_at OPERATOR(pg_catalog.>=) cur.started_at
		LIMIT 1) mv ON true
	WHERE (snowseq_rebalance_status_impl.job IS NULL OR r.run_id OPERATOR(pg_catalog.=) snowseq_rebalance_status_impl.job)
		AND (@extschema@.snowseq_caller_owns(r.parent)
			OR @extschema@.snowseq_caller_has_privs_of(CAST('pg_monitor' AS pg_catalog.regrole)))
	ORDER BY r.run_id;
	IF NOT FOUND AND job IS NOT NULL THEN
		RAISE EXCEPTION 'rebalance job % does not exist', job
			USING ERRCODE = 'undefined_object',
				DETAIL = 'Or its table is not one the session''s role owns.',
				HINT = 'snowseq_rebalance_status() lists the jobs of the tables the role owns.';
	END IF;
END
$status$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_status_impl(bigint) IS
	'the body of snowseq_rebalance_status, run as the records'' owner for the role that called it (snowseq_caller_owns)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_status_impl(bigint) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_rebalance_status(job bigint DEFAULT NULL)
	RETURNS TABLE (run_id bigint, parent regclass, state text, background boolean, job_role name,
		runner_alive boolean, steps_done integer, steps_total integer, step integer, step_running text,
		rows_copied bigint, rows_planned bigint, time_left interval, throttled_until timestamptz,
		throttled_by text, last_error text, started_at timestamptz, finished_at timestamptz)
	AS 'MODULE_PATHNAME', 'snowseq_rebalance_as_caller'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_status(bigint) IS
	'the rebalances (job: that one, an ERROR if the session''s role does not own its table) of the tables the session''s role owns (pg_monitor: all, without their errors): state, whether in the background and as which role, whether a process runs it, steps done of all, the step running, rows copied (the move running included) of the rows planned, time left at the copy rate of its steps done (throttles not counted), until when and why it sleeps for a throttle, the error that ended its worker';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_status(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.snowseq_rebalance_status(bigint) TO pg_monitor;

-- Wait for a job to end (read committed: each look at it sees the last
-- commits): its final state; an ERROR with its error if its worker failed,
-- or if no process has run it for 10 seconds.
CREATE FUNCTION @extschema@.snowseq_rebalance_wait(job bigint)
	RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $wait$
DECLARE
	st record;
	run_state @extschema@.snowseq_rebalance_state;
	nap double precision := 0.05;
	orphan pg_catalog.timestamptz;
BEGIN
	IF job IS NULL THEN
		RAISE EXCEPTION 'the job to wait for must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
		RAISE EXCEPTION 'snowseq_rebalance_wait needs isolation level read committed'
			USING ERRCODE = 'feature_not_supported',
				HINT = 'Its snapshot must move on to see the job end: call it outside a repeatable read or serializable transaction.';
	END IF;
	IF pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN
		RAISE EXCEPTION 'snowseq_rebalance_wait cannot wait in a transaction that has written'
			USING ERRCODE = 'active_sql_transaction',
				HINT = 'A job''s worker begins when the transaction that started it ends, and a long wait would hold its locks: commit, then wait.';
	END IF;
	LOOP
		-- each look sees the processes as they are now, not as this
		-- transaction first read them
		PERFORM pg_catalog.pg_stat_clear_snapshot();
		SELECT * INTO st FROM @extschema@.snowseq_rebalance_status(job);
		run_state := st.state;
		IF NOT @extschema@.snowseq_rebalance_is_running(run_state) THEN
			-- stopped (resumable) by its worker's error
			IF NOT @extschema@.snowseq_rebalance_is_over(run_state) AND st.last_error IS NOT NULL THEN
				RAISE EXCEPTION 'rebalance job % failed: %', job, st.last_error
					USING ERRCODE = 'object_not_in_prerequisite_state',
						HINT = 'Fix the cause and resume it with snowseq_rebalance_start, or give it up with snowseq_rebalance_stop(abandon => true).';
			END IF;
			RETURN st.state;
		END IF;
		orphan := CASE WHEN NOT st.runner_alive THEN COALESCE(orphan, pg_catalog.clock_timestamp()) END;
		IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) orphan OPERATOR(pg_catalog.>) CAST('10 s' AS pg_catalog.interval) THEN
			RAISE EXCEPTION 'rebalance job % is running but no process has run it for 10 seconds', job
				USING ERRCODE = 'object_not_in_prerequisite_state',
					HINT = 'Its worker ended (the server log says why): resume it with snowseq_rebalance_start, or give it up with snowseq_rebalance_stop(abandon => true).';
		END IF;
		PERFORM pg_catalog.pg_sleep(nap);
		nap := LEAST(nap OPERATOR(pg_catalog.*) 2, 1);
	END LOOP;
END
$wait$;
COMMENT ON FUNCTION @extschema@.snowseq_rebalance_wait(bigint) IS
	'wait (sleeping up to a second between looks) until rebalance job ends, and return its state (done, stopped, abandoned); an ERROR with its error if its worker failed, or if no process has run it for 10 seconds';
REVOKE ALL ON FUNCTION @extschema@.snowseq_rebalance_wait(bigint) FROM PUBLIC;
-- ---- end of background rebalances ----

--@end
