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
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/builtins.h"
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

/* The machine of an enum type, by its name (an ERROR for another type). */
static RebalanceMachine
MachineOf(Oid typid)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	char		name[NAMEDATALEN];

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", typid);
	strlcpy(name, NameStr(((Form_pg_type) GETSTRUCT(tup))->typname), NAMEDATALEN);
	ReleaseSysCache(tup);
	if (strcmp(name, "snowseq_rebalance_state") == 0)
		return REBALANCE_RUN;
	if (strcmp(name, "snowseq_rebalance_step_state") == 0)
		return REBALANCE_STEP;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("snowseq_rebalance_next takes a state of type snowseq_rebalance_state or snowseq_rebalance_step_state, not %s",
					format_type_be(typid)),
			 errhint("Pass the state of a rebalance run or of one of its steps.")));
	return REBALANCE_RUN;		/* keep the compiler quiet */
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
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 0);
	RebalanceMachine machine;
	const RebalanceTransition *rows;
	const char *const *names;
	int			nrows;
	int			nnames;
	int			from = 0;
	const char *step;
	const char *what;

	if (!OidIsValid(typid))
		elog(ERROR, "could not determine the type of the state");
	machine = MachineOf(typid);
	what = machine == REBALANCE_RUN ? "run" : "step";
	rows = machine == REBALANCE_RUN ? RebalanceRunTransitions : RebalanceStepTransitions;
	nrows = machine == REBALANCE_RUN ? lengthof(RebalanceRunTransitions) : lengthof(RebalanceStepTransitions);
	names = machine == REBALANCE_RUN ? RebalanceStateNames : RebalanceStepStateNames;
	nnames = machine == REBALANCE_RUN ? lengthof(RebalanceStateNames) : lengthof(RebalanceStepStateNames);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the step of a rebalance %s must not be NULL", what)));
	step = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (!PG_ARGISNULL(0))
	{
		char	   *label = DatumGetCString(DirectFunctionCall1(enum_out, PG_GETARG_DATUM(0)));

		for (from = 1; from < nnames; from++)
			if (strcmp(names[from], label) == 0)
				break;
		if (from == nnames)
			elog(ERROR, "unknown rebalance %s state \"%s\"", what, label);
	}
	for (int i = 0; i < nrows; i++)
		if (rows[i].from == from && strcmp(rows[i].step, step) == 0)
			PG_RETURN_DATUM(DirectFunctionCall2(enum_in, CStringGetDatum(names[rows[i].to]),
												ObjectIdGetDatum(typid)));
	for (int i = 0; i < nrows; i++)
		if (strcmp(rows[i].step, step) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a rebalance %s %s cannot %s", what,
							from == 0 ? "not recorded yet" : psprintf("in state \"%s\"", names[from]), step),
					 errdetail("Another session changed the record meanwhile."),
					 errhint("SELECT * FROM snowseq_rebalance_status(); shows the runs; CALL snowseq_rebalance resumes a stopped one.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("\"%s\" is not a step of a rebalance %s", step, what),
			 errhint("%s", machine == REBALANCE_RUN ? "The steps of a run are begin, take, stop, abandon, fail and finish." :
					 "The steps of a step are plan, begin, succeed and fail.")));
	PG_RETURN_NULL();			/* keep the compiler quiet */
}
