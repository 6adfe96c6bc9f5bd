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

/* One row of a machine: from a state, a step, to a state. */
typedef struct RebalanceTransition
{
	int			from;
	const char *step;
	int			to;
} RebalanceTransition;

/*
 * A run (snowseq_rebalance_state): running while a process drives it or is
 * to; stopped (resumable) by a stop asked for or by a step that failed;
 * done or abandoned, over.
 */
static const RebalanceTransition RebalanceRunTransitions[] = {
	{RUN_NONE, "begin", RUN_RUNNING},	/* a new run */
	{RUN_RUNNING, "take", RUN_RUNNING},	/* a session or worker takes it on */
	{RUN_STOPPED, "take", RUN_RUNNING},	/* resumed */
	{RUN_RUNNING, "stop", RUN_STOPPED},
	{RUN_STOPPED, "stop", RUN_STOPPED},
	{RUN_RUNNING, "abandon", RUN_ABANDONED},
	{RUN_STOPPED, "abandon", RUN_ABANDONED},
	{RUN_RUNNING, "fail", RUN_STOPPED},	/* a step failed, or its worker */
	{RUN_STOPPED, "fail", RUN_STOPPED},
	{RUN_RUNNING, "finish", RUN_DONE},
};

/*
 * A step of a run (snowseq_rebalance_step_state): planned, running while
 * its move or merge runs (and after a cut, until the driver looks at it
 * again), failed (retried by the next call), done.
 */
static const RebalanceTransition RebalanceStepTransitions[] = {
	{STEP_NONE, "plan", STEP_PLANNED},
	{STEP_PLANNED, "begin", STEP_RUNNING},
	{STEP_RUNNING, "begin", STEP_RUNNING},	/* cut, and begun again */
	{STEP_FAILED, "begin", STEP_RUNNING},	/* retried */
	{STEP_RUNNING, "succeed", STEP_DONE},
	{STEP_FAILED, "succeed", STEP_DONE},	/* cut after its move was done */
	{STEP_RUNNING, "fail", STEP_FAILED},
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

/* A machine: its rows, its names and what it is of. */
typedef struct Machine
{
	const RebalanceTransition *rows;
	int			nrows;
	const char *const *names;
	int			nnames;
	const char *what;
} Machine;

static Machine
MachineFor(FunctionCallInfo fcinfo, int argno)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Machine		m;

	if (!OidIsValid(typid))
		elog(ERROR, "could not determine the type of the state");
	if (MachineOf(fcinfo, typid) == REBALANCE_RUN)
	{
		m.rows = RebalanceRunTransitions;
		m.nrows = lengthof(RebalanceRunTransitions);
		m.names = RebalanceStateNames;
		m.nnames = lengthof(RebalanceStateNames);
		m.what = "run";
	}
	else
	{
		m.rows = RebalanceStepTransitions;
		m.nrows = lengthof(RebalanceStepTransitions);
		m.names = RebalanceStepStateNames;
		m.nnames = lengthof(RebalanceStepStateNames);
		m.what = "step";
	}
	return m;
}

/* The state of argument argno in a machine (0: NULL, not recorded yet). */
static int
StateArg(FunctionCallInfo fcinfo, const Machine *m, int argno)
{
	char	   *label;

	if (PG_ARGISNULL(argno))
		return 0;
	label = DatumGetCString(DirectFunctionCall1(enum_out, PG_GETARG_DATUM(argno)));
	for (int i = 1; i < m->nnames; i++)
		if (strcmp(m->names[i], label) == 0)
			return i;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("\"%s\" is not a state of a rebalance %s that snowseq knows", label, m->what),
			 errhint("Install the snowseq library of the extension's version.")));
	return 0;					/* keep the compiler quiet */
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
	Machine		m = MachineFor(fcinfo, 0);
	int			from;
	const char *step;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the step of a rebalance %s must not be NULL", m.what)));
	step = text_to_cstring(PG_GETARG_TEXT_PP(1));
	from = StateArg(fcinfo, &m, 0);
	for (int i = 0; i < m.nrows; i++)
		if (m.rows[i].from == from && strcmp(m.rows[i].step, step) == 0)
			PG_RETURN_DATUM(DirectFunctionCall2(enum_in, CStringGetDatum(m.names[m.rows[i].to]),
												ObjectIdGetDatum(get_fn_expr_argtype(fcinfo->flinfo, 0))));
	for (int i = 0; i < m.nrows; i++)
		if (strcmp(m.rows[i].step, step) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a rebalance %s %s cannot %s", m.what,
							from == 0 ? "not recorded yet" : psprintf("in state \"%s\"", m.names[from]), step),
					 errdetail("Another session changed the record meanwhile."),
					 errhint("SELECT * FROM snowseq_rebalance_status(); shows the runs; CALL snowseq_rebalance resumes a stopped one.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("\"%s\" is not a step of a rebalance %s", step, m.what),
			 errhint("%s", m.rows == RebalanceRunTransitions ? "The steps of a run are begin, take, stop, abandon, fail and finish." :
					 "The steps of a step are plan, begin, succeed and fail.")));
	PG_RETURN_NULL();			/* keep the compiler quiet */
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
	Machine		m = MachineFor(fcinfo, PG_ARGISNULL(0) ? 1 : 0);
	int			from;
	int			to;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the new state of a rebalance %s must not be NULL", m.what)));
	from = StateArg(fcinfo, &m, 0);
	to = StateArg(fcinfo, &m, 1);
	if (from == to)
		PG_RETURN_DATUM(PG_GETARG_DATUM(1));
	for (int i = 0; i < m.nrows; i++)
		if (m.rows[i].from == from && m.rows[i].to == to)
			PG_RETURN_DATUM(PG_GETARG_DATUM(1));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("a rebalance %s %s cannot go to state \"%s\"", m.what,
					from == 0 ? "not recorded yet" : psprintf("in state \"%s\"", m.names[from]), m.names[to]),
			 errdetail("No step of a rebalance %s leads there: another session changed the record meanwhile, or the state given was not made by snowseq_rebalance_next.", m.what),
			 errhint("SELECT * FROM snowseq_rebalance_status(); shows the runs.")));
	PG_RETURN_NULL();			/* keep the compiler quiet */
}
