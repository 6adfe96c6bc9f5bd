-- Whose rights the rebalance's record functions act with: the role that
-- calls them, even inside a SECURITY DEFINER function of another role.
-- regress_rb_owner owns a table and records a run of it; regress_rb_admin
-- is granted the record functions too (a router administrator) and owns a
-- SECURITY DEFINER function that the owner calls.  Before, the functions
-- asked about the session's role (the owner's, in that call), and the
-- administrator's function stopped and read the owner's runs.
CREATE ROLE regress_rb_owner;
CREATE ROLE regress_rb_admin;
CREATE SCHEMA regress_rb AUTHORIZATION regress_rb_admin;
GRANT USAGE ON SCHEMA regress_rb TO regress_rb_owner;
GRANT SELECT ON snowseq_rebalance_runs TO regress_rb_owner, regress_rb_admin;
GRANT EXECUTE ON FUNCTION snowseq_rebalance_save_run(snowseq_rebalance_runs, boolean),
	snowseq_rebalance_stop(regclass, boolean), snowseq_rebalance_status(bigint),
	snowseq_rebalance_runner_alive(integer, timestamptz),
	snowseq_rebalance_job_record(bigint, double precision, bigint, integer, boolean)
	TO regress_rb_owner, regress_rb_admin;
GRANT EXECUTE ON PROCEDURE snowseq_rebalance_job_run(bigint) TO regress_rb_owner;
CREATE TABLE regress_rb_owned (k int);
ALTER TABLE regress_rb_owned OWNER TO regress_rb_owner;

-- the owner records a run of its table
SET ROLE regress_rb_owner;
SELECT run_id > 0 AS recorded, state
FROM snowseq_rebalance_save_run(jsonb_populate_record(NULL::snowseq_rebalance_runs,
	'{"parent": "regress_rb_owned", "strategy": "rows", "threshold": 1.25, "drain": [], "fill": [], "sample": "10 s", "merge_below": 0}'));
SELECT count(*) AS runs_the_owner_sees FROM snowseq_rebalance_status();
RESET ROLE;

-- the administrator's functions, SECURITY DEFINER, which the owner calls
SET ROLE regress_rb_admin;
CREATE FUNCTION regress_rb.stop_all() RETURNS integer
	LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp
	AS $$ SELECT snowseq_rebalance_stop(NULL, true) $$;
CREATE FUNCTION regress_rb.peek() RETURNS bigint
	LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp
	AS $$ SELECT count(*) FROM snowseq_rebalance_status() $$;
GRANT EXECUTE ON FUNCTION regress_rb.stop_all(), regress_rb.peek() TO regress_rb_owner;
-- as itself: none of the owner's runs is its to stop or see
SELECT regress_rb.stop_all() AS stopped_as_admin, regress_rb.peek() AS seen_as_admin;
RESET ROLE;

-- called by the owner: they act with the administrator's rights still
SET ROLE regress_rb_owner;
SELECT regress_rb.stop_all() AS stopped_for_the_owner;
SELECT regress_rb.peek() AS seen_for_the_owner;
SELECT state, stop FROM snowseq_rebalance_runs WHERE parent = 'regress_rb_owned'::regclass;
-- nor in a parallel plan, whose workers run the checks of status's body
-- (they are parallel restricted: the caller is noted in the leader alone)
RESET ROLE;
SET ROLE regress_rb_admin;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = off;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS seen_by_the_admin_in_parallel FROM snowseq_rebalance_status();
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;
RESET enable_indexscan;
RESET enable_bitmapscan;
RESET ROLE;
SET ROLE regress_rb_owner;
-- the owner stops its run; a worker of it, run as the owner (granted what
-- docs/security.md lists), takes the stop and ends
SELECT snowseq_rebalance_stop('regress_rb_owned') AS stopped_by_the_owner;
SELECT max(run_id) AS rb_run FROM snowseq_rebalance_runs \gset
CALL snowseq_rebalance_job_run(:rb_run);
SELECT state, stop, runner_pid FROM snowseq_rebalance_runs WHERE parent = 'regress_rb_owned'::regclass;
-- a record function stores no state that no step leads to from the
-- committed one: a stopped run is not done by a write
SELECT snowseq_rebalance_save_run(jsonb_populate_record(r, '{"state": "done"}')) IS NOT NULL
FROM snowseq_rebalance_runs r WHERE parent = 'regress_rb_owned'::regclass;
-- the owner itself, directly, gives it up
SELECT snowseq_rebalance_stop('regress_rb_owned', true) AS abandoned_by_the_owner;
SELECT state, stop, finished_at IS NOT NULL AS finished FROM snowseq_rebalance_runs
WHERE parent = 'regress_rb_owned'::regclass;
RESET ROLE;

-- the bodies are granted to no one: a granted role cannot call one by name
SET ROLE regress_rb_admin;
SELECT snowseq_rebalance_stop_impl(NULL, true);
RESET ROLE;

DROP SCHEMA regress_rb CASCADE;
DELETE FROM snowseq_rebalance_runs WHERE parent = 'regress_rb_owned'::regclass;
DROP TABLE regress_rb_owned;
REVOKE ALL ON snowseq_rebalance_runs FROM regress_rb_owner, regress_rb_admin;
REVOKE ALL ON FUNCTION snowseq_rebalance_save_run(snowseq_rebalance_runs, boolean),
	snowseq_rebalance_stop(regclass, boolean), snowseq_rebalance_status(bigint),
	snowseq_rebalance_runner_alive(integer, timestamptz),
	snowseq_rebalance_job_record(bigint, double precision, bigint, integer, boolean)
	FROM regress_rb_owner, regress_rb_admin;
REVOKE ALL ON PROCEDURE snowseq_rebalance_job_run(bigint) FROM regress_rb_owner;
DROP ROLE regress_rb_owner;
DROP ROLE regress_rb_admin;
