-- What snowseq knows of the states of its operations: every label of each
-- state type, and what the predicates derived from the state machines
-- (src/shards/records/machine.c) say of it.  The SQL names each state once, in its
-- enum type; statements ask these functions instead of naming a state.
-- a move
SELECT s AS state,
	snowseq_move_is_over(s) AS over,
	snowseq_move_is_copying(s) AS copying,
	snowseq_move_is_undone(s) AS undone,
	snowseq_move_has_leftovers(s) AS leftovers,
	snowseq_move_is_revertable(s) AS revertable,
	snowseq_move_is_done(s) AS done
FROM unnest(enum_range(NULL::snowseq_move_state)) s;

-- a merge
SELECT s AS state, snowseq_merge_is_over(s) AS over, snowseq_merge_is_done(s) AS done
FROM unnest(enum_range(NULL::snowseq_merge_state)) s;

-- a rebalance run, and a step of one
SELECT s AS state, snowseq_rebalance_is_over(s) AS over, snowseq_rebalance_is_running(s) AS running
FROM unnest(enum_range(NULL::snowseq_rebalance_state)) s;
SELECT s AS state, snowseq_rebalance_step_is_over(s) AS over, snowseq_rebalance_is_running(s) AS running,
	snowseq_rebalance_step_is_planned(s) AS planned
FROM unnest(enum_range(NULL::snowseq_rebalance_step_state)) s;

-- the steps of a rebalance run and of a step: where each leads from each
-- state (NULL: not recorded yet), and the steps no state allows
CREATE FUNCTION pg_temp.next_of(f anyenum, st text) RETURNS text
	LANGUAGE plpgsql AS $$
BEGIN
	RETURN snowseq_rebalance_next(f, st)::text;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RETURN '-';
END
$$;
SELECT coalesce(f::text, '(new)') AS from_state, st AS step, pg_temp.next_of(f, st) AS next
FROM unnest(NULL::snowseq_rebalance_state || enum_range(NULL::snowseq_rebalance_state)) WITH ORDINALITY AS f(f, n),
	unnest(ARRAY['begin', 'take', 'stop', 'abandon', 'fail', 'finish']) st
ORDER BY n, st;
SELECT coalesce(f::text, '(new)') AS from_state, st AS step, pg_temp.next_of(f, st) AS next
FROM unnest(NULL::snowseq_rebalance_step_state || enum_range(NULL::snowseq_rebalance_step_state)) WITH ORDINALITY AS f(f, n),
	unnest(ARRAY['plan', 'begin', 'succeed', 'fail']) st
ORDER BY n, st;
SELECT snowseq_rebalance_next('done'::snowseq_rebalance_state, 'take');
SELECT snowseq_rebalance_next(NULL::snowseq_rebalance_step_state, 'plan');
SELECT snowseq_rebalance_next('planned'::snowseq_rebalance_step_state, 'succeed');
SELECT snowseq_rebalance_next('planned'::snowseq_rebalance_step_state, 'finish');
SELECT snowseq_rebalance_to('running'::snowseq_rebalance_state, 'done');
SELECT snowseq_rebalance_to('stopped'::snowseq_rebalance_state, 'done');

-- another enum type is not a rebalance state
SELECT snowseq_rebalance_is_running('copy'::snowseq_move_state);

-- a predicate is immutable and parallel safe: an index can use it
SELECT p.proname, p.provolatile, p.proparallel
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
	AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
WHERE p.proname ~ '_(is|has)_' AND p.proname ~ '^snowseq_(move|merge|rebalance)'
	AND p.prorettype = 'boolean'::regtype AND p.pronargs = 1
	AND p.proargtypes[0] IN ('snowseq_move_state'::regtype, 'snowseq_merge_state'::regtype,
		'snowseq_rebalance_state'::regtype, 'snowseq_rebalance_step_state'::regtype, 'anyenum'::regtype)
ORDER BY 1;

-- a label the library does not know (an enum altered by hand): an ERROR
-- that says so, in a database of its own
SELECT current_database() AS here \gset
CREATE DATABASE snowseq_states_labels;
\c snowseq_states_labels
CREATE EXTENSION snowseq;
ALTER TYPE snowseq_move_state ADD VALUE 'zzz';
ALTER TYPE snowseq_merge_state ADD VALUE 'zzz';
ALTER TYPE snowseq_rebalance_state ADD VALUE 'zzz';
SELECT snowseq_move_is_over('zzz');
SELECT snowseq_merge_is_done('zzz');
SELECT snowseq_rebalance_is_running('zzz'::snowseq_rebalance_state);
\c :here
DROP DATABASE snowseq_states_labels;
