/*
 * move_states.c
 *		The SQL predicates of a move's and a merge's states, derived from
 *		their machines (MoveTransitions, MergeTransitions): what is over,
 *		and which step a state is the one of.  The enum types of the SQL
 *		sources name each state once; every statement that asks something
 *		of a state asks it here, so no SQL lists or compares a state name.
 *
 * IMMUTABLE, and an index uses one: the unique token index of
 * snowseq_moves covers the moves NOT snowseq_move_is_undone(state).  What
 * each predicate says of each label is pinned by test/expected/states.out;
 * a library that changes it (a machine whose steps lead elsewhere) must
 * REINDEX snowseq_moves_token_key in its update script, as PostgreSQL asks
 * of an index whose immutable function changed.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "machine.h"
#include "merge_records.h"
#include "move_common.h"

/*
 * The state of argument 0, a label of snowseq_move_state (m: MoveMachine)
 * or snowseq_merge_state (MergeMachine); a label this library does not
 * know is an ERROR.
 */
static MoveStateId
StateArg(FunctionCallInfo fcinfo, const Machine *m)
{
	char	   *label = DatumGetCString(DirectFunctionCall1(enum_out, PG_GETARG_DATUM(0)));
	int			state = MachineStateOf(m, label);

	if (state < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a state of a %s that snowseq knows", label, m == &MergeMachine ? "merge" : "move"),
				 errhint("Install the snowseq library of the extension's version.")));
	return (MoveStateId) state;
}

PG_FUNCTION_INFO_V1(snowseq_move_is_over);

/* snowseq_move_is_over(state): nothing of the move runs or is left (done, failed, reverted). */
Datum
snowseq_move_is_over(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(MachineOver(&MoveMachine, StateArg(fcinfo, &MoveMachine)));
}

PG_FUNCTION_INFO_V1(snowseq_move_is_copying);

/* snowseq_move_is_copying(state): the move copies rows (the state its copy step records). */
Datum
snowseq_move_is_copying(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(MachineEnters(&MoveMachine, StateArg(fcinfo, &MoveMachine), MOVE_STEP_COPY));
}

PG_FUNCTION_INFO_V1(snowseq_move_is_undone);

/* snowseq_move_is_undone(state): undone before its switch, nothing left (failed). */
Datum
snowseq_move_is_undone(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(MachineEnters(&MoveMachine, StateArg(fcinfo, &MoveMachine), MOVE_STEP_UNDO));
}

PG_FUNCTION_INFO_V1(snowseq_move_has_leftovers);

/* snowseq_move_has_leftovers(state): undone, with objects left for cleanup (rollback). */
Datum
snowseq_move_has_leftovers(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(MachineEnters(&MoveMachine, StateArg(fcinfo, &MoveMachine), MOVE_STEP_UNDO_LEFT));
}

PG_FUNCTION_INFO_V1(snowseq_move_is_revertable);

/* snowseq_move_is_revertable(state): switched, its source kept current for a revert. */
Datum
snowseq_move_is_revertable(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(MachineEnters(&MoveMachine, StateArg(fcinfo, &MoveMachine), MOVE_STEP_KEEP));
}

PG_FUNCTION_INFO_V1(snowseq_move_is_done);

/* snowseq_move_is_done(state): finished (the state its finish step records). */
Datum
snowseq_move_is_done(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(MachineEnters(&MoveMachine, StateArg(fcinfo, &MoveMachine), MOVE_STEP_FINISH));
}

PG_FUNCTION_INFO_V1(snowseq_merge_is_over);

/* snowseq_merge_is_over(state): nothing of the merge runs or is left (done, failed). */
Datum
snowseq_merge_is_over(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(MachineOver(&MergeMachine, StateArg(fcinfo, &MergeMachine)));
}

PG_FUNCTION_INFO_V1(snowseq_merge_is_done);

/* snowseq_merge_is_done(state): finished (the state its finish step records). */
Datum
snowseq_merge_is_done(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(MachineEnters(&MergeMachine, StateArg(fcinfo, &MergeMachine), MERGE_STEP_FINISH));
}
