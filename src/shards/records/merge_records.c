/*
 * merge_records.c
 *		Elastic shards: the records of merges (snowseq_merges) and the
 *		router's lock of a merge.
 *
 * A merge is recorded one row per table of its group, the lead first, in
 * state prepare (MergeRecordNew, which refuses a merge that overlaps a move
 * or a merge not over); each step records the state it reached, as the
 * records' owner.  The session that runs a merge holds its lock, so that
 * cleanup and the resolver leave it alone.  The comment on a merged table
 * (MergeMark) marks it as the merge's until the switch.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "merge.h"
#include "merge_records.h"
#include "move_common.h"
#include "move_plan.h"
#include "snowseq.h"
#include "sqlrun.h"

/* The router's lock of a merge, held by the session that runs it. */
bool
MergeLock(int64 id, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_MERGE, id);
	return LockAcquire(&tag, ExclusiveLock, true, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

void
MergeUnlock(int64 id)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_MERGE, id);
	(void) LockRelease(&tag, ExclusiveLock, true);
}

/* Set columns of the records of a merge (every table's), as their owner. */
void
MergeRecordSet(Move *m, const char *sets, int nargs, const char *const *values)
{
	MoveRecordsRunParams(m->op.ext, psprintf("UPDATE %s SET %s WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT
										  " OR group_merge OPERATOR(pg_catalog.=) " INT64_FORMAT,
										  MoveExt(m, "snowseq_merges"), sets, m->op.id, m->op.id),
						 nargs, values, SPI_OK_UPDATE);
}

/*
 * The state machine of a merge: for each step, the state it starts from and
 * the state it records.  Before "switched" a merge only goes back (failed,
 * or rollback while something is left; a rollback retried goes on); from
 * "switched" only forward, to done.
 */
static const MachineRow MergeTransitions[] = {
	{MOVE_STATE_PREPARE, MERGE_STEP_COPY, MOVE_STATE_COPY},
	{MOVE_STATE_COPY, MERGE_STEP_BLOCK, MOVE_STATE_SWITCH},
	{MOVE_STATE_SWITCH, MERGE_STEP_SWITCH, MOVE_STATE_SWITCHED},
	{MOVE_STATE_SWITCHED, MERGE_STEP_FINISH, MOVE_STATE_DONE},
	{MOVE_STATE_PREPARE, MERGE_STEP_UNDO, MOVE_STATE_FAILED},
	{MOVE_STATE_COPY, MERGE_STEP_UNDO, MOVE_STATE_FAILED},
	{MOVE_STATE_SWITCH, MERGE_STEP_UNDO, MOVE_STATE_FAILED},
	{MOVE_STATE_ROLLBACK, MERGE_STEP_UNDO, MOVE_STATE_FAILED},
	{MOVE_STATE_PREPARE, MERGE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK},
	{MOVE_STATE_COPY, MERGE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK},
	{MOVE_STATE_SWITCH, MERGE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK},
	{MOVE_STATE_ROLLBACK, MERGE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK},
};

/*
 * The machine of a merge: its states are named as a move's (merge.h), the
 * labels of snowseq_merge_state a subset of snowseq_move_state's.
 */
const Machine MergeMachine = {MergeTransitions, lengthof(MergeTransitions), MoveStateNames, MOVE_STATE_COUNT};

/* Names of the steps, for the error of a step its state does not allow (MergeStep order). */
static const char *const MergeStepNames[] = {"start its copy", "hold writes back", "switch the router", "finish", "be undone", "be undone"};

/*
 * Record a step of a merge: its state as MergeTransitions gives it from the
 * committed one (locked, so no other session changes it meanwhile), and
 * more columns (sets, or NULL; arg is its $2, or NULL).  The one writer of
 * a merge's state; a step the committed state does not allow is refused.
 */
void
MergeRecordStep(Move *m, MergeStep step, const char *sets, const char *arg)
{
	MoveStateId from;
	MoveStateId next;
	const char *to;

	from = MoveStateFromName(MoveRecordsValue(m->op.ext, m->op.cxt,
											  psprintf("SELECT state FROM %s WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT " FOR UPDATE",
													   MoveExt(m, "snowseq_merges"), m->op.id)));
	next = MachineNext(&MergeMachine, from, step);
	if (next == MOVE_STATE_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("merge " INT64_FORMAT " cannot %s in state \"%s\"",
						m->op.id, MergeStepNames[step], from == MOVE_STATE_NONE ? "(no record)" : MoveStateName(from)),
				 errdetail("Another session changed the merge's record meanwhile, or the record was edited."),
				 errhint("SELECT * FROM snowseq_move_progress; shows the merge; SELECT * FROM snowseq_move_cleanup(); resolves an interrupted one.")));
	to = MoveStateName(next);
	if (arg != NULL)
		MergeRecordSet(m, psprintf("state = $1::pg_catalog.text%s%s", sets ? ", " : "", sets ? sets : ""),
					   SQL_ARGS(to, arg));
	else
		MergeRecordSet(m, psprintf("state = $1::pg_catalog.text%s%s", sets ? ", " : "", sets ? sets : ""),
					   SQL_ARGS(to));
}

/* The committed state of a merge (MOVE_STATE_NONE: no record). */
MoveStateId
MergeStateRead(Move *m)
{
	return MoveStateFromName(MoveRecordsValue(m->op.ext, m->op.cxt, psprintf("SELECT state FROM %s WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
																			 MoveExt(m, "snowseq_merges"), m->op.id)));
}

/* Whether a merge in a state is over (MergeTransitions: entered, never left). */
bool
MergeStateOver(MoveStateId state)
{
	return MachineOver(&MergeMachine, state);
}

/* The states of a merge that are over, as an array parameter's value ($n::pg_catalog.text[]). */
char *
MergeStatesOver(void)
{
	return MachineStatesOver(&MergeMachine);
}

/* The comment that marks the merged table as the merge's until its switch. */
char *
MergeMark(Move *m)
{
	return psprintf("snowseq %s: merge in progress", MoveLead(m)->op.token);
}

/*
 * Refuse a merge that overlaps a move or merge not over, of any table of
 * its group; record it (one row per table, the lead first) and take its
 * lock.  Its names: the router's node, this database and the merge.
 */
void
MergeRecordNew(Move *m)
{
	char	   *node = MoveLocalNode(m);
	ListCell   *lc;

	MoveLockStart();
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *v;

		v = MoveRecordsValueParams(m->op.ext, m->op.cxt,
								   psprintf("SELECT move_id::pg_catalog.text OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||) state OPERATOR(pg_catalog.||) ')' "
											"FROM %s WHERE parent OPERATOR(pg_catalog.=) %u "
											"AND state::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) "
											"AND (last_gene OPERATOR(pg_catalog.>=) %d AND first_gene OPERATOR(pg_catalog.<=) %d "
											"OR part_name OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]) "
											"OR new_part_name OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])) "
											"ORDER BY move_id LIMIT 1",
											MoveExt(m, "snowseq_moves"), t->parent, m->first, m->last),
								   SQL_ARGS(MoveStatesOver(),
											SqlTextArray(MergeOf(t)->parts)));
		if (v != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("genes %d to %d of table \"%s\" are in move %s", m->first, m->last, t->parent_rel, v),
					 errhint("Merge once it is over: done, failed, or (a revertable move) finalized; snowseq_move_cleanup() ends one that was interrupted.")));
		v = MoveRecordsValueParams(m->op.ext, m->op.cxt,
								   psprintf("SELECT merge_id::pg_catalog.text FROM %s WHERE parent OPERATOR(pg_catalog.=) %u "
											"AND state::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) "
											"AND last_gene OPERATOR(pg_catalog.>=) %d AND first_gene OPERATOR(pg_catalog.<=) %d "
											"ORDER BY merge_id LIMIT 1",
											MoveExt(m, "snowseq_merges"), t->parent, m->first, m->last),
								   SQL_ARGS(MergeStatesOver()));
		if (v != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("genes %d to %d of table \"%s\" are in merge %s, which is not over", m->first, m->last, t->parent_rel, v),
					 errhint("Wait for it to end; snowseq_move_cleanup() ends one that was interrupted.")));
	}
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		MemoryContext old;
		char	   *name;

		t->op.id = pg_strtoint64(MoveRecordsValueParams(m->op.ext, m->op.cxt,
													 "SELECT pg_catalog.nextval(pg_catalog.pg_get_serial_sequence($1::pg_catalog.text, 'merge_id'))",
													 SQL_ARGS(MoveExt(m, "snowseq_merges"))));
		old = MemoryContextSwitchTo(m->op.cxt);
		if (t->group.lead == NULL)
			t->op.token = psprintf("snowseq_merge_%s_%u_" INT64_FORMAT, node, MyDatabaseId, t->op.id);
		else
			t->op.token = m->op.token;
		/* the merged table and the new partition: the parent's name, with the range */
		name = psprintf("%s_g%d_%d", t->parent_rel, m->first, m->last);
		if (strlen(name) >= NAMEDATALEN - 12)
			ereport(ERROR,
					(errcode(ERRCODE_NAME_TOO_LONG),
					 errmsg("the name of the merged table, \"%s\", is too long", name),
					 errhint("Use a shorter table name.")));
		t->dst_rel = name;
		t->dst_table = quote_qualified_identifier(t->dst_nsp, name);
		if (OidIsValid(get_relname_relid(name, get_rel_namespace(t->parent))))
			name = psprintf("%s_j" INT64_FORMAT, name, t->op.id);
		t->newpart.q = quote_qualified_identifier(get_namespace_name(get_rel_namespace(t->parent)), name);
		MemoryContextSwitchTo(old);
		MoveRecordsRunParams(m->op.ext, psprintf("INSERT INTO %s (merge_id, group_merge, parent, first_gene, last_gene, server, "
											  "parts, source_tables, new_part_name, new_table, part_lower, part_upper, id_column, "
											  "token, state, mover) OVERRIDING SYSTEM VALUE VALUES ($1::pg_catalog.int8, "
											  "$2::pg_catalog.int8, $3::pg_catalog.oid, $4::pg_catalog.int4, $5::pg_catalog.int4, "
											  "$6::pg_catalog.name, $7::pg_catalog.text[], $8::pg_catalog.text[], $9::pg_catalog.text, "
											  "$10::pg_catalog.text, $11::pg_catalog.int8, $12::pg_catalog.int8, $13::pg_catalog.text, "
											  "$14::pg_catalog.text, $15::pg_catalog.text, $16::pg_catalog.oid)",
											  MoveExt(m, "snowseq_merges")),
							 SQL_ARGS(psprintf(INT64_FORMAT, t->op.id), Int8Arg(t->group.lead != NULL, m->op.id),
									  psprintf("%u", t->parent), psprintf("%d", m->first), psprintf("%d", m->last),
									  m->src_name, SqlTextArray(MergeOf(t)->parts), SqlTextArray(MergeOf(t)->tables),
									  t->newpart.q, t->dst_table, Int8Arg(t->part.has_lo, t->part.lo),
									  Int8Arg(t->part.has_hi, t->part.hi), t->id_col, t->op.token, MoveStateName(MOVE_STATE_PREPARE),
									  psprintf("%u", GetUserId())),
							 SPI_OK_INSERT);
	}
	/*
	 * What the merge will make on its server, recorded now, committed by
	 * the caller before any of it is made: each merged table, the triggers
	 * on each table merged, the lead's prepared transaction.
	 */
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		ListCell   *lt;

		MoveRecordObject(t, m->src_name, MOVE_OBJECT_MERGED, t->dst_table);
		foreach(lt, MergeOf(t)->tables)
			MoveRecordObject(t, m->src_name, MOVE_OBJECT_MERGE_TRIGGER, lfirst(lt));
	}
	MoveRecordObject(m, m->src_name, MOVE_OBJECT_PREPARED, m->op.token);
	(void) MergeLock(m->op.id, true);
}
