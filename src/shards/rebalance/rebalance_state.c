/*
 * rebalance_state.c
 *		The state machines of a rebalance run and of its steps: declared
 *		tables of (state, step, next state), as moves and merges have theirs
 *		(move_common.c, merge_records.c).
 *
 * The driver and the jobs are PL/pgSQL (sql/src/rebalance.sql,
 * rebalance_run.sql): they name the step a run or a step of it takes
 * (begin, take, stop, abandon, finish, fail; plan, begin, succeed, fail)
 * and store the state snowseq_rebalance_next(state, step) returns, the one
 * place that knows which state a step leads to; a step the state does not
 * allow is an ERROR, and no statement of the SQL sources stores a state
 * it names itself (064 checks both).  A NULL state is a run or step not
 * recorded yet: only "begin" (a run) and "plan" (a step) start from it.
 * The record functions store what they are given through
 * snowseq_rebalance_to(committed state, new state), which refuses a new
 * state no step leads to from the state as committed (locked by their
 * UPDATE), so neither a stale copy nor a granted caller skips a step.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "machine.h"

/* The kinds of machine, by the enum type of the state. */
typedef enum RebalanceMachine
{
	REBALANCE_RUN,
	REBALANCE_STEP
} RebalanceMachine;

/*
 * The states of each, in the order of the labels of their enum types (064
 * checks): 0 is a run or step not recorded yet.
 */
enum
{
	RUN_NONE, RUN_RUNNING, RUN_STOPPED, RUN_DONE, RUN_ABANDONED
};
static const char *const RebalanceStateNames[] = {NULL, "running", "stopped", "done", "abandoned"};
enum
{
	STEP_NONE, STEP_PLANNED, STEP_RUNNING, STEP_FAILED, STEP_DONE
};
static const char *const RebalanceStepStateNames[] = {NULL, "planned", "running", "failed", "done"};

/* The steps of each, as the SQL callers name them (snowseq_rebalance_next). */
enum
{
	RUN_BEGIN, RUN_TAKE, RUN_STOP, RUN_ABANDON, RUN_FAIL, RUN_FINISH
};
static const char *const RebalanceRunSteps[] = {"begin", "take", "stop", "abandon", "fail", "finish"};
enum
{
	STEP_PLAN, STEP_BEGIN, STEP_SUCCEED, STEP_FAIL
};
static const char *const RebalanceStepSteps[] = {"plan", "begin", "succeed", "fail"};

/*
 * A run (snowseq_rebalance_state): running while a process drives it or is
 * to; stopped (resumable) by a stop asked for or by a step that failed;
 * done or abandoned, over.
 */
static const MachineRow RebalanceRunTransitions[] = {
	{RUN_NONE, RUN_BEGIN, RUN_RUNNING},	/* a new run */
	{RUN_RUNNING, RUN_TAKE, RUN_RUNNING},	/* a session or worker takes it on */
	{RUN_STOPPED, RUN_TAKE, RUN_RUNNING},	/* resumed */
	{RUN_RUNNING, RUN_STOP, RUN_STOPPED},
	{RUN_STOPPED, RUN_STOP, RUN_STOPPED},
	{RUN_RUNNING, RUN_ABANDON, RUN_ABANDONED},
	{RUN_STOPPED, RUN_ABANDON, RUN_ABANDONED},
	{RUN_RUNNING, RUN_FAIL, RUN_STOPPED},	/* a step failed, or its worker */
	{RUN_STOPPED, RUN_FAIL, RUN_STOPPED},
	{RUN_RUNNING, RUN_FINISH, RUN_DONE},
};

/*
 * A step of a run (snowseq_rebalance_step_state): planned, running while
 * its move or merge runs (and after a cut, until the driver looks at it
 * again), failed (retried by the next call), done.
 */
static const MachineRow RebalanceStepTransitions[] = {
	{STEP_NONE, STEP_PLAN, STEP_PLANNED},
	{STEP_PLANNED, STEP_BEGIN, STEP_RUNNING},
	{STEP_RUNNING, STEP_BEGIN, STEP_RUNNING},	/* cut, and begun again */
	{STEP_FAILED, STEP_BEGIN, STEP_RUNNING},	/* retried */
	{STEP_RUNNING, STEP_SUCCEED, STEP_DONE},
	{STEP_FAILED, STEP_SUCCEED, STEP_DONE},	/* cut after its move was done */
	{STEP_RUNNING, STEP_FAIL, STEP_FAILED},
};

/* A machine of a rebalance: its rows and states, its steps' names, what it is of. */
typedef struct RebalanceMachineOf
{
	Machine		m;
	const char *const *steps;
	int			nsteps;
	const char *what;
} RebalanceMachineOf;

static const RebalanceMachineOf Machines[] = {
	[REBALANCE_RUN] = {{RebalanceRunTransitions, lengthof(RebalanceRunTransitions), RebalanceStateNames, lengthof(RebalanceStateNames)},
	RebalanceRunSteps, lengthof(RebalanceRunSteps), "run"},
	[REBALANCE_STEP] = {{RebalanceStepTransitions, lengthof(RebalanceStepTransitions), RebalanceStepStateNames, lengthof(RebalanceStepStateNames)},
	RebalanceStepSteps, lengthof(RebalanceStepSteps), "step"},
};

/*
 * The machine of an enum type: snowseq_rebalance_state or
 * snowseq_rebalance_step_state of the schema of the function called (an
 * ERROR for another type, whatever its name).
 */
static RebalanceMachine
MachineOf(FunctionCallInfo fcinfo, Oid typid)
{
	Oid			nsp = get_func_namespace(fcinfo->flinfo->fn_oid);

	if (typid == GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("snowseq_rebalance_state"),
								 ObjectIdGetDatum(nsp)))
		return REBALANCE_RUN;
	if (typid == GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("snowseq_rebalance_step_state"),
								 ObjectIdGetDatum(nsp)))
		return REBALANCE_STEP;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("%s takes a state of type snowseq_rebalance_state or snowseq_rebalance_step_state, not %s",
					get_func_name(fcinfo->flinfo->fn_oid), format_type_be(typid)),
			 errhint("Pass the state of a rebalance run or of one of its steps.")));
	return REBALANCE_RUN;		/* keep the compiler quiet */
}

/*
 * The machine of argument argno: by the type of the expression passed, or
 * (a call with no expression) the type the function declares.
 */
static const RebalanceMachineOf *
MachineFor(FunctionCallInfo fcinfo, int argno)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, argno);

	if (!OidIsValid(typid))
	{
		Oid		   *argtypes;
		int			nargs;

		(void) get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
		if (argno < nargs && argtypes[argno] != ANYENUMOID)
			typid = argtypes[argno];
	}
	if (!OidIsValid(typid))
		elog(ERROR, "could not determine the type of the state");
	return &Machines[MachineOf(fcinfo, typid)];
}

/* The state of argument argno in a machine (0: NULL, not recorded yet). */
static int
StateArg(FunctionCallInfo fcinfo, const RebalanceMachineOf *r, int argno)
{
	char	   *label;
	int			state;

	if (PG_ARGISNULL(argno))
		return 0;
	label = DatumGetCString(DirectFunctionCall1(enum_out, PG_GETARG_DATUM(argno)));
	state = MachineStateOf(&r->m, label);
	if (state < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a state of a rebalance %s that snowseq knows", label, r->what),
				 errhint("Install the snowseq library of the extension's version.")));
	return state;
}

/* The step of a name in a machine (-1: none). */
static int
StepOf(const RebalanceMachineOf *r, const char *name)
{
	for (int i = 0; i < r->nsteps; i++)
		if (strcmp(r->steps[i], name) == 0)
			return i;
	return -1;
}

PG_FUNCTION_INFO_V1(snowseq_rebalance_next);

/*
 * snowseq_rebalance_next(state, step): the state a step takes a rebalance
 * run or step to from state (NULL: not recorded yet), of the same enum
 * type; an ERROR for a step the state does not allow.
 */
Datum
snowseq_rebalance_next(PG_FUNCTION_ARGS)
{
	const RebalanceMachineOf *r = MachineFor(fcinfo, 0);
	int			from;
	int			step;
	int			to;
	char	   *name;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the step of a rebalance %s must not be NULL", r->what)));
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	from = StateArg(fcinfo, r, 0);
	step = StepOf(r, name);
	if (step < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a step of a rebalance %s", name, r->what),
				 errhint("%s", r == &Machines[REBALANCE_RUN] ? "The steps of a run are begin, take, stop, abandon, fail and finish." :
						 "The steps of a step are plan, begin, succeed and fail.")));
	to = MachineNext(&r->m, from, step);
	if (to == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a rebalance %s %s cannot %s", r->what,
						from == 0 ? "not recorded yet" : psprintf("in state \"%s\"", r->m.names[from]), name),
				 errdetail("Another session changed the record meanwhile."),
				 errhint("SELECT * FROM snowseq_rebalance_status(); shows the runs; CALL snowseq_rebalance resumes a stopped one.")));
	PG_RETURN_DATUM(DirectFunctionCall2(enum_in, CStringGetDatum(r->m.names[to]),
										ObjectIdGetDatum(get_fn_expr_argtype(fcinfo->flinfo, 0))));
}

PG_FUNCTION_INFO_V1(snowseq_rebalance_to);

/*
 * snowseq_rebalance_to(from, to): to, if a step of the machine takes a run
 * or step from state from (NULL: not recorded yet) to it, or if it is from
 * (nothing changes); else an ERROR.  What the record functions store a
 * state with: the caller's new state, checked against the row as it is
 * committed (locked by the UPDATE), not against the caller's copy of it.
 */
Datum
snowseq_rebalance_to(PG_FUNCTION_ARGS)
{
	const RebalanceMachineOf *r = MachineFor(fcinfo, PG_ARGISNULL(0) ? 1 : 0);
	int			from;
	int			to;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the new state of a rebalance %s must not be NULL", r->what)));
	from = StateArg(fcinfo, r, 0);
	to = StateArg(fcinfo, r, 1);
	if (from == to || MachineLeads(&r->m, from, to))
		PG_RETURN_DATUM(PG_GETARG_DATUM(1));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("a rebalance %s %s cannot go to state \"%s\"", r->what,
					from == 0 ? "not recorded yet" : psprintf("in state \"%s\"", r->m.names[from]), r->m.names[to]),
			 errdetail("No step of a rebalance %s leads there: another session changed the record meanwhile, or the state given was not made by snowseq_rebalance_next.", r->what),
			 errhint("SELECT * FROM snowseq_rebalance_status(); shows the runs.")));
	PG_RETURN_NULL();			/* keep the compiler quiet */
}

PG_FUNCTION_INFO_V1(snowseq_rebalance_state_is_over);

/*
 * snowseq_rebalance_is_over(state), snowseq_rebalance_step_is_over(state):
 * whether a run or step in state is over, entered by a step and left by
 * none (a run done or abandoned; a step done).
 */
Datum
snowseq_rebalance_state_is_over(PG_FUNCTION_ARGS)
{
	const RebalanceMachineOf *r = MachineFor(fcinfo, 0);

	PG_RETURN_BOOL(MachineOver(&r->m, StateArg(fcinfo, r, 0)));
}

/* Whether the state of argument 0 is one the step of that name leads to. */
static bool
StateEnteredBy(FunctionCallInfo fcinfo, const char *name)
{
	const RebalanceMachineOf *r = MachineFor(fcinfo, 0);
	int			step = StepOf(r, name);

	return step >= 0 && MachineEnters(&r->m, StateArg(fcinfo, r, 0), step);
}

PG_FUNCTION_INFO_V1(snowseq_rebalance_is_running);

/*
 * snowseq_rebalance_is_running(state): whether a run or a step in state is
 * running, the state its step "begin" leads to.
 */
Datum
snowseq_rebalance_is_running(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(StateEnteredBy(fcinfo, "begin"));
}

PG_FUNCTION_INFO_V1(snowseq_rebalance_step_is_planned);

/*
 * snowseq_rebalance_step_is_planned(state): whether a step in state is
 * planned and not begun, the state its step "plan" leads to.
 */
Datum
snowseq_rebalance_step_is_planned(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(StateEnteredBy(fcinfo, "plan"));
}
