--@block rebalance_run
-- ---- rebalance: the driver that runs a plan step by step (1.3) ----
-- In a file of its own (issue 39): CALL snowseq_rebalance plans, runs and
-- commits between steps; what it calls is in rebalance.sql.
-- The run: not in a transaction block (it commits between moves), so no
-- SET clause; every name is qualified.
CREATE PROCEDURE @extschema@.snowseq_rebalance(parent regclass, strategy text DEFAULT 'rows',
	threshold double precision DEFAULT 1.25, drain name[] DEFAULT '{}', fill name[] DEFAULT '{}',
	sample interval DEFAULT '10 s', merge_below double precision DEFAULT 0)
	LANGUAGE plpgsql
	AS $run$
DECLARE
	run @extschema@.snowseq_rebalance_runs;
	s @extschema@.snowseq_rebalance_steps;
	mv record;
	nsteps integer;
	on_dest boolean;
	is_merge boolean;					-- the step merges (one server)
	throttled boolean;
	mine boolean;						-- this process held the run already
	t0 pg_catalog.timestamptz := pg_catalog.clock_timestamp();
	w0p pg_catalog.oid[];			-- strategy writes: the first reading of the sample
	w0 bigint[];
	w0x bigint[];
	w0_at pg_catalog.timestamptz;
BEGIN
	IF parent IS NULL THEN
		RAISE EXCEPTION 'the table of a rebalance must not be NULL';
	END IF;
	SELECT * INTO run FROM @extschema@.snowseq_rebalance_open_run(parent);
	IF FOUND THEN
		IF @extschema@.snowseq_rebalance_driven(run) AND run.runner_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() THEN
			RAISE EXCEPTION 'rebalance % of table % is running in the session of process %', run.run_id, parent, run.runner_pid
				USING ERRCODE = 'object_in_use',
					HINT = 'Wait for it, or stop it between moves with snowseq_rebalance_stop().';
		END IF;
		RAISE NOTICE 'rebalance %: resuming the run of table % (strategy %, threshold %) from its first step not done',
			run.run_id, parent, run.strategy, run.threshold;
	ELSE
		-- the arguments checked before the sample, which commits each
		-- second of it (no lock on the table, no old snapshot held)
		PERFORM FROM @extschema@.snowseq_rebalance_plan_from(parent, strategy, threshold, drain, fill, sample,
			NULL, NULL, NULL, NULL, true, merge_below);
		IF strategy OPERATOR(pg_catalog.=) 'writes' THEN
			CALL @extschema@.snowseq_rebalance_sample(parent, sample, w0p, w0, w0x, w0_at);
		END IF;
		-- the plan checks the arguments: an error takes the run's row back
		run.parent := parent;
		run.strategy := strategy;
		run.threshold := threshold;
		run.drain := drain;
		run.fill := fill;
		run.sample := COALESCE(sample, CAST('10 s' AS pg_catalog.interval));
		run.merge_below := merge_below;
		run := @extschema@.snowseq_rebalance_save_run(run);
		nsteps := @extschema@.snowseq_rebalance_plan_steps(run, drain, w0p, w0, w0x, w0_at);
		RAISE NOTICE 'rebalance %: % moves planned for table % (strategy %, threshold %)',
			run.run_id, nsteps, parent, strategy, threshold;
	END IF;
	-- a session taking the run on clears the stop that ended it; the
	-- process that already holds it (a worker that took it over, a session
	-- whose CALL was cut) keeps a stop asked since, and stops below
	mine := run.runner_pid IS NOT DISTINCT FROM pg_catalog.pg_backend_pid();
	run.state := @extschema@.snowseq_rebalance_next(run.state, 'take');
	run.runner_pid := pg_catalog.pg_backend_pid();
	run.runner_start := (SELECT a.backend_start FROM pg_catalog.pg_stat_activity a
		WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid());
	run := @extschema@.snowseq_rebalance_save_run(run, NOT mine);
	COMMIT;

	LOOP
		-- stopped between moves?
		SELECT * INTO run FROM @extschema@.snowseq_rebalance_runs r
			WHERE r.run_id OPERATOR(pg_catalog.=) run.run_id;
		IF run.stop IS NOT NULL THEN
			run := @extschema@.snowseq_rebalance_finish(run, run.stop);
			COMMIT;
			RAISE NOTICE 'rebalance %: %', run.run_id,
				CASE WHEN run.stop OPERATOR(pg_catalog.=) 'abandon' THEN 'abandoned between moves'
				ELSE 'stopped between moves; CALL snowseq_rebalance again to resume it' END;
			RETURN;
		END IF;

		SELECT * INTO s FROM @extschema@.snowseq_rebalance_steps st
			WHERE st.run_id OPERATOR(pg_catalog.=) run.run_id AND NOT @extschema@.snowseq_rebalance_step_is_over(st.state)
			ORDER BY st.step LIMIT 1;
		IF NOT FOUND THEN
			-- the plan estimated (writes assumed even over genes, and the
			-- tables are written meanwhile): plan again
			-- from what is there now, at most three rounds in all
			IF run.rounds OPERATOR(pg_catalog.<) 3 THEN
				IF run.strategy OPERATOR(pg_catalog.=) 'writes' THEN
					CALL @extschema@.snowseq_rebalance_sample(run.parent, run.sample, w0p, w0, w0x, w0_at);
				END IF;
				-- drained servers have left the map
				IF @extschema@.snowseq_rebalance_plan_steps(run, ARRAY(SELECT d FROM pg_catalog.unnest(run.drain) d
						WHERE EXISTS (SELECT FROM @extschema@.snowseq_route_ranges() sm WHERE sm.shard OPERATOR(pg_catalog.=) d)),
						w0p, w0, w0x, w0_at) OPERATOR(pg_catalog.>) 0 THEN
					run.rounds := run.rounds OPERATOR(pg_catalog.+) 1;
					run := @extschema@.snowseq_rebalance_save_run(run);
					COMMIT;
					RAISE NOTICE 'rebalance %: planned again from the loads now: more moves', run.run_id;
					CONTINUE;
				END IF;
			END IF;
			run := @extschema@.snowseq_rebalance_finish(run, 'finish');
			COMMIT;
			SELECT pg_catalog.count(*) AS moves, pg_catalog.sum(st.rows_copied) AS copied INTO mv
				FROM @extschema@.snowseq_rebalance_steps st WHERE st.run_id OPERATOR(pg_catalog.=) run.run_id;
			RAISE NOTICE 'rebalance %: done, % moves, % rows copied, this call took %', run.run_id,
				mv.moves, COALESCE(mv.copied, 0), pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0;
			RETURN;
		END IF;

		-- a move interrupted (a router crash) is finished or undone first;
		-- the map says whether its genes are on the destination
		IF NOT @extschema@.snowseq_rebalance_step_is_planned(s.state) THEN
			FOR mv IN SELECT c.move_id, c.server, c.object, c.action FROM @extschema@.snowseq_move_cleanup() c LOOP
				RAISE NOTICE 'rebalance %: step % was cut: move %: %', run.run_id, s.step, mv.move_id,
					pg_catalog.concat_ws(' ', mv.action, mv.object,
						'on server ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(mv.server));
			END LOOP;
		END IF;
		-- a merge is a step whose servers are one: its record says whether
		-- it is done; a move's, the map
		is_merge := s.from_server OPERATOR(pg_catalog.=) s.to_server;
		SELECT * INTO mv FROM @extschema@.snowseq_rebalance_step_move(run.parent, s, NULL);
		on_dest := mv.move_id IS NOT NULL;
		IF NOT is_merge THEN
			-- the router's own lookup (route.c, its cached map), as snowseq_route routes
			SELECT pg_catalog.bool_and(@extschema@.snowseq_route_gene(g) OPERATOR(pg_catalog.=) s.to_server) INTO on_dest
				FROM pg_catalog.generate_series(s.first_gene, s.last_gene) g;
		END IF;
		IF on_dest AND NOT @extschema@.snowseq_rebalance_step_is_planned(s.state) THEN
			PERFORM @extschema@.snowseq_rebalance_step_done(s, mv.move_id, mv.rows_copied);
			COMMIT;
			RAISE NOTICE 'rebalance %: step % (genes % to %) was done by % %', run.run_id, s.step,
				s.first_gene, s.last_gene, CASE WHEN is_merge THEN 'merge' ELSE 'move' END, mv.move_id;
			CONTINUE;
		END IF;
		-- the throttle sleeps before a step; a stop asked meanwhile is seen first
		CALL @extschema@.snowseq_rebalance_throttle(run.run_id, ARRAY[s.from_server, s.to_server], throttled);
		CONTINUE WHEN throttled;

		SELECT pg_catalog.max(st.step) INTO nsteps FROM @extschema@.snowseq_rebalance_steps st
			WHERE st.run_id OPERATOR(pg_catalog.=) run.run_id;
		s.state := @extschema@.snowseq_rebalance_next(s.state, 'begin');
		s.started_at := pg_catalog.clock_timestamp();
		s.finished_at := NULL;
		PERFORM @extschema@.snowseq_rebalance_save_steps(ARRAY[s]);
		COMMIT;
		IF is_merge THEN
			RAISE NOTICE 'rebalance %: step % of %: the partitions of genes % to % of table % on server "%" merge (about % rows)',
				run.run_id, s.step, nsteps, s.first_gene, s.last_gene, run.parent, s.from_server, s.rows;
			CALL @extschema@.snowseq_merge_partitions(run.parent, s.first_gene, s.last_gene);
		ELSE
			RAISE NOTICE 'rebalance %: step % of %: genes % to % of table % from server "%" to server "%" (about % rows)',
				run.run_id, s.step, nsteps, s.first_gene, s.last_gene, run.parent, s.from_server, s.to_server, s.rows;
			CALL @extschema@.snowseq_move_genes(run.parent, s.first_gene, s.last_gene, s.to_server);
		END IF;
		SELECT * INTO mv FROM @extschema@.snowseq_rebalance_step_move(run.parent, s, s.started_at);
		IF mv.done THEN
			PERFORM @extschema@.snowseq_rebalance_step_done(s, mv.move_id, mv.rows_copied);
			COMMIT;
		ELSE
			s.state := @extschema@.snowseq_rebalance_next(s.state, 'fail');
			s.move_id := CASE WHEN NOT is_merge THEN mv.move_id END;
			s.error := COALESCE(mv.error, CASE WHEN is_merge THEN 'the merge did not finish' ELSE 'the move did not finish' END);
			s.finished_at := pg_catalog.clock_timestamp();
			PERFORM @extschema@.snowseq_rebalance_save_steps(ARRAY[s]);
			run := @extschema@.snowseq_rebalance_finish(run, 'fail');
			COMMIT;
			RAISE EXCEPTION 'rebalance %: step % (% %, genes % to % % server "%") failed: %', run.run_id, s.step,
				CASE WHEN is_merge THEN 'merge' ELSE 'move' END, mv.move_id, s.first_gene, s.last_gene,
				CASE WHEN is_merge THEN 'on' ELSE 'to' END, s.to_server, s.error
				USING ERRCODE = 'object_not_in_prerequisite_state',
					HINT = 'Fix the cause and CALL snowseq_rebalance again to retry the step, or give the run up with snowseq_rebalance_stop(abandon => true).';
		END IF;
	END LOOP;
END
$run$;
COMMENT ON PROCEDURE @extschema@.snowseq_rebalance(regclass, text, double precision, name[], name[], interval, double precision) IS
	'plan the moves and merges of snowseq_rebalance_plan (strategy writes: sampled again for each round, committing each second of the sample) into snowseq_rebalance_steps and run them one by one with snowseq_move_genes and snowseq_merge_partitions, committing between steps; a CALL with a run of the table not finished (stopped, or cut by a crash) continues it from its first step not done';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_rebalance(regclass, text, double precision, name[], name[], interval, double precision) FROM PUBLIC;
--@end
