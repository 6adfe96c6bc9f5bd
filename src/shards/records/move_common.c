/*
 * move_common.c
 *		Elastic shards: the Move and what every phase of a move uses (its
 *		sessions on the servers, its record in snowseq_moves, its ID range as
 *		SQL, its state and kind names, its group).
 *
 * The phases (move_plan.c, move_repl.c, move_switch.c, move_cleanup.c) and
 * the procedures that run them in order (move.c) build on this file; it
 * calls none of them, so the move files form no cycle.
 */
#include "postgres.h"

#include "access/xact.h"
#include "lib/stringinfo.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

#include "move_common.h"
#include "snowseq.h"
#include "gene.h"
#include "sqlrun.h"

/* Sleep, interruptibly. */
void
MoveSleep(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms,
					 PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * The router's lock of a move (remote.h): taken when its record is made,
 * held by the mover's session until the move ends, so that a record whose
 * lock is free belongs to a move that ended or died.  With wait false,
 * false if another session holds it.
 */
bool
MoveLock(int64 id, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_MOVE, id);
	return LockAcquire(&tag, ExclusiveLock, true, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

/* Let go of the router's lock of a move. */
void
MoveUnlock(int64 id)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_MOVE, id);
	(void) LockRelease(&tag, ExclusiveLock, true);
}

/*
 * One starter of a move at a time, to the end of the transaction that
 * checks for overlaps and records the move; running moves hold no lock
 * that this waits for.
 */
void
MoveLockStart(void)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_MOVE, 0);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * Refuse to run inside a transaction block or a function: a move or a
 * merge (what names it, for the message) commits between its steps.
 */
void
MoveCheckNonAtomic(FunctionCallInfo fcinfo, const char *what)
{
	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		((CallContext *) fcinfo->context)->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("%s must run as a CALL of its own", what),
				 errhint("It commits between its steps: CALL it outside BEGIN ... COMMIT and outside functions.")));
}

/* Milliseconds since a moment. */
double
MsSince(TimestampTz t)
{
	return (double) (GetCurrentTimestamp() - t) / 1000.0;
}

/* The name of one of snowseq's objects here, qualified. */
char *
MoveExt(Move *m, const char *name)
{
	return psprintf("%s.%s", m->op.ext, name);
}

/* The name of one of snowseq's objects here, qualified, for any operation. */
char *
MoveOpExt(MoveOp *op, const char *name)
{
	return psprintf("%s.%s", op->ext, name);
}

/* The name of one of snowseq's objects on a remote server, qualified. */
char *
MoveRemoteExt(RemoteConn *rc, const char *name)
{
	return psprintf("%s.%s", rc->extschema, name);
}

/* A bigint as the text of a parameter (SQL_ARGS), or NULL for SQL NULL. */
char *
Int8Arg(bool has, int64 v)
{
	return has ? psprintf(INT64_FORMAT, v) : NULL;
}

/*
 * Cancel the autovacuums (VACUUM or ANALYZE by an autovacuum worker) that
 * hold a lock on any of tables (a list of names) on a server, as PostgreSQL
 * itself cancels one that a waiting lock finds after deadlock_timeout: a
 * switch about to lock them neither waits for one nor fails on a lock it
 * only tries (NOWAIT).  Not one that prevents wraparound, which PostgreSQL
 * does not cancel either (its worker's query says so).  Only where the
 * session's role is a superuser, who alone may cancel them; the autovacuum
 * runs again later.
 *
 * The session's view of pg_stat_activity is a snapshot taken at its first
 * read in a transaction and kept to its end, so a worker that started
 * since (the launcher starts one again after autovacuum_naptime) would
 * stay unseen through the switch's retries: the snapshot is dropped first.
 * pg_locks is read afresh by each statement.
 */
void
MoveCancelAutovacuum(RemoteConn *rc, List *tables)
{
	RemoteCommand(rc, "SELECT pg_catalog.pg_stat_clear_snapshot()", "see the autovacuum workers running now");
	RemoteCommandParams(rc, "SELECT pg_catalog.pg_cancel_backend(a.pid) FROM pg_catalog.pg_stat_activity a "
						"WHERE a.backend_type OPERATOR(pg_catalog.=) 'autovacuum worker' "
						"AND pg_catalog.strpos(a.query, '(to prevent wraparound)') OPERATOR(pg_catalog.=) 0 "
						"AND (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) "
						"AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks l WHERE l.pid OPERATOR(pg_catalog.=) a.pid "
						"AND l.locktype OPERATOR(pg_catalog.=) 'relation' "
						"AND l.relation OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT pg_catalog.to_regclass(t)::pg_catalog.oid "
						"FROM pg_catalog.unnest($1::pg_catalog.text[]) t)))",
						SQL_ARGS(SqlTextArray(tables)), "cancel the autovacuum of the tables");
}

/*
 * Who holds a lock on any of tables (a list of names) on a server that a
 * SHARE lock waits for, for an error message: "process 123 (client
 * backend, idle in transaction)", "a prepared transaction", comma
 * separated; NULL if none (any more).  Kinds and states only: the text of
 * another session's query is not the mover's to read out.
 */
char *
MoveLockHolders(RemoteConn *rc, List *tables)
{
	char	   *v;

	RemoteCommand(rc, "SELECT pg_catalog.pg_stat_clear_snapshot()", "see the sessions running now");
	v = RemoteValueParams(rc, "SELECT pg_catalog.string_agg(DISTINCT CASE WHEN l.pid IS NULL THEN 'a prepared transaction' "
						  "ELSE pg_catalog.format('process %s (%s)', l.pid, "
						  "pg_catalog.concat_ws(', ', a.backend_type, a.state)) END, ', ') "
						  "FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid "
						  "WHERE l.locktype OPERATOR(pg_catalog.=) 'relation' AND l.granted "
						  "AND l.pid IS DISTINCT FROM pg_catalog.pg_backend_pid() "
						  "AND l.mode OPERATOR(pg_catalog.=) ANY (ARRAY['RowExclusiveLock', 'ShareUpdateExclusiveLock', "
						  "'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock']) "
						  "AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d "
						  "WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) "
						  "AND l.relation OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT pg_catalog.to_regclass(t)::pg_catalog.oid "
						  "FROM pg_catalog.unnest($1::pg_catalog.text[]) t))",
						  SQL_ARGS(SqlTextArray(tables)), "look up who holds the tables");
	return v;
}

/* A range partition bound as SQL. */
char *
BoundSql(bool has, int64 v, const char *infinite)
{
	return has ? psprintf(INT64_FORMAT, v) : (char *) infinite;
}

/* The IDs that move: [lo, hi), either side possibly unbounded. */
void
MoveIds(Move *m, bool *has_lo, int64 *lo, bool *has_hi, int64 *hi)
{
	*has_lo = m->part.has_lo;
	*lo = m->part.lo;
	*has_hi = m->part.has_hi;
	*hi = m->part.hi;
	if (m->kind == MOVE_KIND_SUFFIX)
	{
		*has_lo = true;
		*lo = GeneFirstId(m->first);
	}
	if (m->kind == MOVE_KIND_PREFIX)
	{
		*has_hi = true;
		(void) GeneEndId(m->last, hi);
	}
}

/* A condition on the ID column that holds for exactly the moving IDs. */
char *
MoveIdCondition(Move *m)
{
	return MoveIdConditionOf(m, NULL);
}

/* MoveIdCondition, its column qualified by a table alias (NULL: none). */
char *
MoveIdConditionOf(Move *m, const char *alias)
{
	bool		has_lo,
				has_hi;
	int64		lo,
				hi;
	const char *col = alias ? psprintf("%s.%s", alias, quote_identifier(m->id_col)) : quote_identifier(m->id_col);

	MoveIds(m, &has_lo, &lo, &has_hi, &hi);
	if (has_lo && has_hi)
		return psprintf("%s >= " INT64_FORMAT " AND %s < " INT64_FORMAT, col, lo, col, hi);
	if (has_lo)
		return psprintf("%s >= " INT64_FORMAT, col, lo);
	if (has_hi)
		return psprintf("%s < " INT64_FORMAT, col, hi);
	return psprintf("%s IS NOT NULL", col);
}

/* Add a line to the report of a move. */
void
MoveNote(Move *m, const char *server, const char *object, const char *action)
{
	Move	   *lead = MoveLead(m);
	MemoryContext old = MemoryContextSwitchTo(lead->op.cxt);
	MoveReport *r = palloc(sizeof(MoveReport));

	r->id = lead->op.id;
	r->parent = m->parent;
	r->first = m->first;
	r->last = m->last;
	r->server = server ? pstrdup(server) : NULL;
	r->object = pstrdup(object);
	r->action = pstrdup(action);
	lead->op.report = lappend(lead->op.report, r);
	MemoryContextSwitchTo(old);
}

/* Names of the states, as snowseq_moves stores them (MoveStateId order). */
const char *const MoveStateNames[] = {
	NULL, "prepare", "copy", "block", "switch", "switched", "done", "failed", "rollback",
	"revertable", "reverted"
};
StaticAssertDecl(lengthof(MoveStateNames) == MOVE_STATE_COUNT, "a name for each move state");

/*
 * The state machine of a move: for each step, the states it starts from and
 * the state it records.  MoveRecordStep, the one writer of that state, takes
 * the next state from this table and refuses a step the committed state does
 * not allow (src/shards/README.md draws it).  Before "switched" a move only
 * goes back (failed, or rollback while objects are left); from "switched"
 * only forward.  "block" is a state of 1.0's moves, read and resolved, never
 * entered.
 */
static const MachineRow MoveTransitions[] = {
	/* forward, step by step */
	{MOVE_STATE_PREPARE, MOVE_STEP_COPY, MOVE_STATE_COPY},
	{MOVE_STATE_COPY, MOVE_STEP_BLOCK, MOVE_STATE_SWITCH},
	{MOVE_STATE_PREPARE, MOVE_STEP_BLOCK, MOVE_STATE_SWITCH},	/* a revert copies nothing */
	{MOVE_STATE_SWITCH, MOVE_STEP_SWITCH, MOVE_STATE_SWITCHED},
	{MOVE_STATE_BLOCK, MOVE_STEP_SWITCH, MOVE_STATE_SWITCHED},
	{MOVE_STATE_SWITCHED, MOVE_STEP_LEFT, MOVE_STATE_SWITCHED},
	{MOVE_STATE_REVERTABLE, MOVE_STEP_LEFT, MOVE_STATE_SWITCHED},
	{MOVE_STATE_SWITCHED, MOVE_STEP_KEEP, MOVE_STATE_REVERTABLE},
	{MOVE_STATE_SWITCHED, MOVE_STEP_FINISH, MOVE_STATE_DONE},
	{MOVE_STATE_REVERTABLE, MOVE_STEP_FINALIZE, MOVE_STATE_SWITCHED},
	{MOVE_STATE_REVERTABLE, MOVE_STEP_FINISH, MOVE_STATE_DONE},
	{MOVE_STATE_REVERTABLE, MOVE_STEP_REVERT, MOVE_STATE_REVERTED},
	/* back: undone before the switch */
	{MOVE_STATE_PREPARE, MOVE_STEP_UNDO, MOVE_STATE_FAILED},
	{MOVE_STATE_COPY, MOVE_STEP_UNDO, MOVE_STATE_FAILED},
	{MOVE_STATE_BLOCK, MOVE_STEP_UNDO, MOVE_STATE_FAILED},
	{MOVE_STATE_SWITCH, MOVE_STEP_UNDO, MOVE_STATE_FAILED},
	{MOVE_STATE_ROLLBACK, MOVE_STEP_UNDO, MOVE_STATE_FAILED},	/* its leftovers dropped */
	{MOVE_STATE_PREPARE, MOVE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK},
	{MOVE_STATE_COPY, MOVE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK},
	{MOVE_STATE_BLOCK, MOVE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK},
	{MOVE_STATE_SWITCH, MOVE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK},
	{MOVE_STATE_ROLLBACK, MOVE_STEP_UNDO_LEFT, MOVE_STATE_ROLLBACK}, /* some still left */
};

/* The machine of a move (machine.h derives what is over and the like). */
const Machine MoveMachine = {MoveTransitions, lengthof(MoveTransitions), MoveStateNames, MOVE_STATE_COUNT};

/* Names of the steps, for the error of a step its state does not allow (MoveTransitionStep order). */
static const char *const MoveStepNames[] = {
	"start its copy", "hold writes back", "switch the router", "record what the switch left",
	"stay revertable", "be finalized", "finish", "be reverted", "be undone", "be undone"
};

/* The states of a move that are over, as an array parameter's value ($n::pg_catalog.text[]). */
char *
MoveStatesOver(void)
{
	return MachineStatesOver(&MoveMachine);
}

/* Names of the kinds of recorded objects, as snowseq_move_object_kind labels them (MoveObjectKind order). */
static const char *const MoveObjectNames[] = {
	"publication", "replication slot", "subscription", "table", "fence", "prepared transaction", "view", "half copy",
	"merged table", "merge trigger"
};

/* Names of the cleanup policies, as snowseq_cleanup_policy labels them (MoveCleanupPolicy order). */
static const char *const MoveCleanupPolicyNames[] = {"always", "on_failure", "on_success"};

/* Names of the kinds, as snowseq_moves stores them (MoveKind order). */
static const char *const MoveKindNames[] = {"whole", "prefix", "suffix"};

/* The stored name of a state. */
const char *
MoveStateName(MoveStateId state)
{
	Assert(state > MOVE_STATE_NONE && state < lengthof(MoveStateNames));
	return MoveStateNames[state];
}

/* The state of a stored name (NULL: MOVE_STATE_NONE). */
MoveStateId
MoveStateFromName(const char *name)
{
	if (name == NULL)
		return MOVE_STATE_NONE;
	for (int i = MOVE_STATE_NONE + 1; i < lengthof(MoveStateNames); i++)
		if (strcmp(name, MoveStateNames[i]) == 0)
			return (MoveStateId) i;
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("snowseq_moves holds an unknown move state \"%s\"", name),
			 errhint("Move states are the labels of the type snowseq_move_state; restore the record.")));
	return MOVE_STATE_NONE;		/* keep the compiler quiet */
}

/*
 * States as the value of an array parameter ($n::pg_catalog.text[]) of
 * their stored names, for a query that tests a record's state:
 * MoveStateArray(MOVE_STATE_DONE, MOVE_STATE_FAILED, MOVE_STATE_NONE).  The
 * list ends at MOVE_STATE_NONE.
 */
char *
MoveStateArray(int first,...)
{
	List	   *names = NIL;
	va_list		args;
	int			state = first;

	va_start(args, first);
	while (state != MOVE_STATE_NONE)
	{
		names = lappend(names, (char *) MoveStateName(state));
		state = va_arg(args, int);
	}
	va_end(args);
	return SqlTextArray(names);
}

/* The stored name of a kind of recorded object. */
const char *
MoveObjectName(MoveObjectKind kind)
{
	Assert(kind >= MOVE_OBJECT_PUBLICATION && kind < lengthof(MoveObjectNames));
	return MoveObjectNames[kind];
}

/* The kind of recorded object of a stored name. */
MoveObjectKind
MoveObjectFromName(const char *name)
{
	for (int i = 0; i < lengthof(MoveObjectNames); i++)
		if (strcmp(name, MoveObjectNames[i]) == 0)
			return (MoveObjectKind) i;
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("snowseq_move_objects holds an unknown kind \"%s\"", name),
			 errhint("Kinds are the labels of type snowseq_move_object_kind; restore the record.")));
	return MOVE_OBJECT_PUBLICATION; /* keep the compiler quiet */
}

/* The stored name of a cleanup policy. */
const char *
MoveCleanupPolicyName(MoveCleanupPolicy policy)
{
	Assert(policy >= MOVE_CLEANUP_ALWAYS && policy < lengthof(MoveCleanupPolicyNames));
	return MoveCleanupPolicyNames[policy];
}

/*
 * The cleanup policy of a kind of object.  A move's or a merge's table
 * (the half copy, the merged table) serves once the operation is done,
 * and a merge's triggers go with the tables its switch drops: those are
 * removed only if the operation was undone.  Everything else (replication
 * objects, fences, prepared transactions, which cleanup commits or rolls
 * back as the operation ended, keep views, the tables of a way back) is
 * removed whatever the outcome.
 */
MoveCleanupPolicy
MoveObjectPolicy(MoveObjectKind kind)
{
	switch (kind)
	{
		case MOVE_OBJECT_COPY:
		case MOVE_OBJECT_MERGED:
		case MOVE_OBJECT_MERGE_TRIGGER:
			return MOVE_CLEANUP_ON_FAILURE;
		default:
			return MOVE_CLEANUP_ALWAYS;
	}
}

/*
 * Record an object a move or a merge (m->merge set: m->op.id is the
 * merge's id) is about to make on a server, with the policy of its kind,
 * in the current router transaction, which commits before the object is
 * made (as Citus records its cleanup): a crash in between leaves a record
 * whose object is absent, which cleanup takes as dropped.  Recording it
 * again changes nothing; a catalog older than 1.3 records nothing.
 */
void
MoveRecordObject(Move *m, const char *server, MoveObjectKind kind, const char *name)
{
	if (!MoveObjectsRecorded(m->op.ext))
		return;
	MoveRecordsRunParams(m->op.ext, psprintf("INSERT INTO %s (%s, server, kind, name, policy) VALUES ($1::pg_catalog.int8, "
										  "$2::pg_catalog.name, $3::%s, $4::pg_catalog.text, $5::%s) ON CONFLICT DO NOTHING",
										  MoveExt(m, "snowseq_move_objects"), m->merge != NULL ? "merge_id" : "move_id",
										  MoveExt(m, "snowseq_move_object_kind"), MoveExt(m, "snowseq_cleanup_policy")),
						 SQL_ARGS(psprintf(INT64_FORMAT, m->op.id), server, MoveObjectName(kind), name,
								  MoveCleanupPolicyName(MoveObjectPolicy(kind))),
						 SPI_OK_INSERT);
}

/* The move ids of a move's group, as an SQL array. */
static char *
MoveGroupIds(Move *m)
{
	StringInfoData ids;
	ListCell   *lc;

	initStringInfo(&ids);
	foreach(lc, MoveGroup(m))
		appendStringInfo(&ids, "%s" INT64_FORMAT, ids.len ? ", " : "ARRAY[", ((Move *) lfirst(lc))->op.id);
	appendStringInfoString(&ids, "]::pg_catalog.int8[]");
	return ids.data;
}

/*
 * Forget records of a move's group whose objects are gone, or stay for
 * good (a moved fence, a destination table that serves): all of them, its
 * own (all but the way back and the keep views, which outlive the switch),
 * or the way back's (its publication, slot, subscription and tables).
 */
void
MoveForgetObjects(Move *m, MoveForget which)
{
	const char *table = MoveObjectName(MOVE_OBJECT_TABLE);
	const char *view = MoveObjectName(MOVE_OBJECT_VIEW);
	char	   *revert_kinds;
	char	   *forget;

	if (!MoveObjectsRecorded(m->op.ext))
		return;
	/* a revert's fence and prepared transactions carry the way back's name */
	revert_kinds = SqlTextArray(list_make2((char *) MoveObjectName(MOVE_OBJECT_PREPARED),
										   (char *) MoveObjectName(MOVE_OBJECT_FENCE)));
	forget = psprintf("DELETE FROM %s WHERE move_id OPERATOR(pg_catalog.=) ANY (%s)",
					  MoveExt(m, "snowseq_move_objects"), MoveGroupIds(m));
	if (which == MOVE_FORGET_ALL)
		MoveRecordsRun(m->op.ext, forget, SPI_OK_DELETE);
	else if (which == MOVE_FORGET_OWN)
		MoveRecordsRunParams(m->op.ext, psprintf("%s AND kind::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) "
											  "AND (name OPERATOR(pg_catalog.<>) $2::pg_catalog.text "
											  "OR kind::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.text[]))", forget),
							 SQL_ARGS(SqlTextArray(list_make2((char *) table, (char *) view)),
									  MoveBackName(MoveLead(m)), revert_kinds),
							 SPI_OK_DELETE);
	else
		MoveRecordsRunParams(m->op.ext, psprintf("%s AND (kind::pg_catalog.text OPERATOR(pg_catalog.=) $1::pg_catalog.text "
											  "OR (name OPERATOR(pg_catalog.=) $2::pg_catalog.text "
											  "AND kind::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($3::pg_catalog.text[])))", forget),
							 SQL_ARGS(table, MoveBackName(MoveLead(m)), revert_kinds), SPI_OK_DELETE);
}

/* Forget the record of one object (of any move): it is gone. */
void
MoveForgetObject(Move *m, const char *server, MoveObjectKind kind, const char *name)
{
	if (!MoveObjectsRecorded(m->op.ext))
		return;
	MoveRecordsRunParams(m->op.ext, psprintf("DELETE FROM %s WHERE server OPERATOR(pg_catalog.=) $1::pg_catalog.name "
										  "AND kind::pg_catalog.text OPERATOR(pg_catalog.=) $2::pg_catalog.text "
										  "AND name OPERATOR(pg_catalog.=) $3::pg_catalog.text", MoveExt(m, "snowseq_move_objects")),
						 SQL_ARGS(server, MoveObjectName(kind), name), SPI_OK_DELETE);
}

/* The names of the objects of a kind that a move's group recorded on a server (char *, in m->op.cxt). */
List *
MoveRecordedNames(Move *m, const char *server, MoveObjectKind kind)
{
	List	   *names = NIL;

	if (!MoveObjectsRecorded(m->op.ext))
		return NIL;
	MoveRecordsRunParams(m->op.ext, psprintf("SELECT name FROM %s WHERE move_id OPERATOR(pg_catalog.=) ANY (%s) "
										  "AND server OPERATOR(pg_catalog.=) $1::pg_catalog.name "
										  "AND kind::pg_catalog.text OPERATOR(pg_catalog.=) $2::pg_catalog.text ORDER BY name",
										  MoveExt(m, "snowseq_move_objects"), MoveGroupIds(m)),
						 SQL_ARGS(server, MoveObjectName(kind)), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
		names = lappend(names, MemoryContextStrdup(m->op.cxt, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)));
	return names;
}

/*
 * The name of the publication, slot and subscription that keep the source
 * of a move current after its switch, and of its revert's fence and
 * prepared transaction: the move's token with "_back".
 */
char *
MoveBackName(Move *m)
{
	return psprintf("%s_back", m->op.token);
}

/* The stored name of a kind. */
const char *
MoveKindName(MoveKind kind)
{
	Assert(kind >= MOVE_KIND_WHOLE && kind < lengthof(MoveKindNames));
	return MoveKindNames[kind];
}

/* The kind of a stored name. */
MoveKind
MoveKindFromName(const char *name)
{
	for (int i = 0; name != NULL && i < lengthof(MoveKindNames); i++)
		if (strcmp(name, MoveKindNames[i]) == 0)
			return (MoveKind) i;
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("snowseq_moves holds an unknown move kind \"%s\"", name ? name : "NULL"),
			 errhint("Move kinds are whole, prefix and suffix; restore the record.")));
	return MOVE_KIND_WHOLE;		/* keep the compiler quiet */
}

/*
 * Record a step of a move: its state as MoveTransitions gives it from the
 * committed one, and more columns (sets, or NULL); the records of the other
 * tables of its group take the state too.  The one writer of a move's
 * state: it refuses a step the committed state does not allow.
 */
void
MoveRecordStep(Move *m, MoveTransitionStep step, const char *sets)
{
	Move	   *lead = MoveLead(m);
	MoveStateId from;
	MoveStateId to;
	const char *name;

	/* the stored state, locked: no other session changes it meanwhile */
	from = MoveStateFromName(MoveRecordsValue(m->op.ext, m->op.cxt,
											  psprintf("SELECT state FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT " FOR UPDATE",
													   MoveExt(m, "snowseq_moves"), m->op.id)));
	to = MachineNext(&MoveMachine, from, step);
	if (to == MOVE_STATE_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("move " INT64_FORMAT " cannot %s in state \"%s\"",
						m->op.id, MoveStepNames[step], from == MOVE_STATE_NONE ? "(no record)" : MoveStateName(from)),
				 errdetail("Another session changed the move's record meanwhile, or the record was edited."),
				 errhint("SELECT * FROM snowseq_move_progress; shows the move; SELECT * FROM snowseq_move_cleanup(); resolves an interrupted one.")));
	name = MoveStateName(to);
	MoveRecordSetParams(m, psprintf("state = $1::pg_catalog.text%s%s", sets ? ", " : "", sets ? sets : ""),
						SQL_ARGS(name));
	if (lead->group.members != NIL)
		MoveRecordsRunParams(m->op.ext, psprintf("UPDATE %s SET state = $1::pg_catalog.text WHERE group_move OPERATOR(pg_catalog.=) " INT64_FORMAT,
											  MoveExt(m, "snowseq_moves"), lead->op.id),
							 SQL_ARGS(name), SPI_OK_UPDATE);
}

/* Update the move's record (committed with the current transaction). */
void
MoveRecordSet(Move *m, const char *sets)
{
	MoveRecordSetParams(m, sets, 0, NULL);
}

/* The same, with text parameters $1..$nargs in sets (SQL_ARGS). */
void
MoveRecordSetParams(Move *m, const char *sets, int nargs, const char *const *values)
{
	MoveRecordsRunParams(m->op.ext, psprintf("UPDATE %s SET %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
										  MoveExt(m, "snowseq_moves"), sets, m->op.id),
						 nargs, values, SPI_OK_UPDATE);
}

/*
 * Run a step in a subtransaction.  Returns NULL, or the error it raised,
 * with the subtransaction rolled back, so the caller can undo and go on.
 */
ErrorData *
MoveTry(Move *m, MoveStep step)
{
	MemoryContext old = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(old);
	PG_TRY();
	{
		step(m);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(old);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(m->op.cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(old);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	return edata;
}

/* The session of a move on a server, reopened if it was lost. */
RemoteConn *
MoveSession(Move *m, RemoteConn **slot, const char *server)
{
	ForeignServer *fs;

	if (RemoteUsable(*slot))
		return *slot;
	fs = GetForeignServerByName(server, false);
	RemoteClose(*slot);
	{
		/* the session outlives the step and the transaction that opened it */
		MemoryContext old = MemoryContextSwitchTo(m->op.cxt);

		*slot = RemoteConnect(fs->serverid);
		MemoryContextSwitchTo(old);
	}
	if ((*slot)->extschema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq is not installed on server \"%s\"", server),
				 errhint("Run CREATE EXTENSION snowseq in that database.")));
	return *slot;
}

/* The session of a move on its source server. */
RemoteConn *
MoveSrc(Move *m)
{
	Move	   *lead = MoveLead(m);

	return MoveSession(lead, &lead->sess.src, lead->src_name);
}

/* The session of a move on its destination server. */
RemoteConn *
MoveDst(Move *m)
{
	Move	   *lead = MoveLead(m);

	return MoveSession(lead, &lead->sess.dst, lead->dst_name);
}

/*
 * The source session that holds the fence locks and the source transaction:
 * opened afresh only at the start of a block attempt, never behind the
 * back of a transaction it holds.
 */
RemoteConn *
MoveHolder(Move *m)
{
	m = MoveLead(m);
	if (m->sess.lock == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the session holding the fence on server \"%s\" was lost", m->src_name)));
	return m->sess.lock;
}

/* The tables of a move, for move_schema.c. */
MoveSchemaTables *
MoveTables(Move *m)
{
	MoveSchemaTables *t = palloc(sizeof(MoveSchemaTables));

	t->src = MoveSrc(m);
	t->dst = MoveDst(m);
	t->table = m->src_table;
	t->nsp = m->dst_nsp;
	t->src_rel = m->src_rel;
	t->dst_rel = m->dst_rel;
	t->group = MoveLead(m)->group.members != NIL ? MoveGroupRelations(m, false, false) : NULL;
	t->target = NULL;
	return t;
}

/* Close the sessions of a move. */
void
MoveCloseSessions(Move *m)
{
	RemoteClose(m->sess.lock);
	RemoteClose(m->sess.dst_lock);
	RemoteClose(m->sess.src);
	RemoteClose(m->sess.dst);
}

/* A new, empty move in a memory context that outlives commits. */
Move *
MoveNew(const char *ext)
{
	MemoryContext cxt = AllocSetContextCreate(PortalContext ? PortalContext : TopMemoryContext,
											  "snowseq move", ALLOCSET_DEFAULT_SIZES);
	Move	   *m = MemoryContextAllocZero(cxt, sizeof(Move));

	m->op.cxt = cxt;
	m->op.ext = MemoryContextStrdup(cxt, ext);
	m->dest_created = -1;
	return m;
}

/*
 * An operation alone, in its own memory: it collects the reports of others
 * (MoveReportCopy).
 */
MoveOp *
MoveOpNew(const char *ext)
{
	MemoryContext cxt = AllocSetContextCreate(PortalContext ? PortalContext : TopMemoryContext,
											  "snowseq move", ALLOCSET_DEFAULT_SIZES);
	MoveOp	   *op = MemoryContextAllocZero(cxt, sizeof(MoveOp));

	op->cxt = cxt;
	op->ext = MemoryContextStrdup(cxt, ext);
	return op;
}

/* A Move for another table of the lead's group, in the lead's memory. */
Move *
MoveNewMember(Move *lead, Oid parent)
{
	Move	   *m = MemoryContextAllocZero(lead->op.cxt, sizeof(Move));
	MemoryContext old = MemoryContextSwitchTo(lead->op.cxt);

	m->op.cxt = lead->op.cxt;
	m->op.ext = lead->op.ext;
	m->dest_created = -1;
	m->group.lead = lead;
	m->parent = parent;
	m->first = lead->first;
	m->last = lead->last;
	m->revert.window = lead->revert.window;
	lead->group.members = lappend(lead->group.members, m);
	MemoryContextSwitchTo(old);
	return m;
}

/*
 * Whether snowseq_moves records placement groups (group_move, since 1.2):
 * a library newer than its catalog moves one table at a time.
 */
bool
MoveGroupsRecorded(const char *ext)
{
	char	   *v = SpiValueParams(CurrentMemoryContext,
								   "SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute WHERE attrelid "
								   "OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND attname OPERATOR(pg_catalog.=) 'group_move' "
								   "AND NOT attisdropped",
								   SQL_ARGS(psprintf("%s.snowseq_moves", ext)));

	return v != NULL && strcmp(v, "0") != 0;
}

/*
 * Whether snowseq_move_objects exists (since 1.3): a library newer than its
 * catalog records nothing and keeps no source.
 */
bool
MoveObjectsRecorded(const char *ext)
{
	return SpiValueParams(CurrentMemoryContext, "SELECT pg_catalog.to_regclass($1::pg_catalog.text)",
						  SQL_ARGS(psprintf("%s.snowseq_move_objects", ext))) != NULL;
}

/*
 * The records of moves (snowseq_moves, snowseq_move_objects, and
 * snowseq_status for this server's node id) are read and written as their
 * owner: the guard lets no other role write them, and a router
 * administrator that moves holds no right on them.  Every statement on
 * them goes through MoveRecordsRun or MoveRecordsValue, which become the
 * owner for that statement alone (a security-restricted operation, as
 * PostgreSQL runs an index build as the table's owner); the move's DDL,
 * its sessions on other servers (the caller's user mappings) and its
 * changes of the map stay the caller's.
 */
static Oid
MoveRecordsOwner(const char *ext)
{
	char	   *rel = SpiValueParams(CurrentMemoryContext, "SELECT pg_catalog.to_regclass($1::pg_catalog.text)::pg_catalog.oid",
									 SQL_ARGS(psprintf("%s.snowseq_moves", ext)));

	return rel == NULL ? GetUserId() : ExtRelationOwner((Oid) strtoul(rel, NULL, 10));
}

/*
 * snowseq_move_cleanup resolves every role's moves: it is for a role with
 * the privileges of the records' owner, not for a router administrator
 * (whose own interrupted moves a move of the same table resolves first).
 */
void
MoveCheckCleaner(const char *ext)
{
	Oid			owner = MoveRecordsOwner(ext);

	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("snowseq_move_cleanup resolves the moves of every role: it needs the privileges of role \"%s\"",
						GetUserNameFromId(owner, false)),
				 errhint("Run it as that role; a move of a table resolves that table's interrupted moves first.")));
}

/* SpiRun of a statement on the records of moves, as their owner. */
uint64
MoveRecordsRun(const char *ext, const char *sql, int expect)
{
	return MoveRecordsRunParams(ext, sql, 0, NULL, expect);
}

uint64
MoveRecordsRunParams(const char *ext, const char *sql, int nargs, const char *const *values,
					 int expect)
{
	Oid			owner = MoveRecordsOwner(ext);
	Oid			save_user;
	int			save_sec;
	uint64		n;

	ExtBecome(owner, &save_user, &save_sec);
	n = SpiRunParams(sql, nargs, values, expect);
	SetUserIdAndSecContext(save_user, save_sec);
	return n;
}

/* SpiValue of a query of the records of moves, as their owner. */
char *
MoveRecordsValue(const char *ext, MemoryContext cxt, const char *sql)
{
	return MoveRecordsValueParams(ext, cxt, sql, 0, NULL);
}

char *
MoveRecordsValueParams(const char *ext, MemoryContext cxt, const char *sql, int nargs,
					   const char *const *values)
{
	Oid			owner = MoveRecordsOwner(ext);
	Oid			save_user;
	int			save_sec;
	char	   *v;

	ExtBecome(owner, &save_user, &save_sec);
	v = SpiValueParams(cxt, sql, nargs, values);
	SetUserIdAndSecContext(save_user, save_sec);
	return v;
}

/* Every Move of a move's group, the lead first. */
List *
MoveGroup(Move *m)
{
	Move	   *lead = MoveLead(m);

	return lcons(lead, list_copy(lead->group.members));
}

/*
 * The tables of a move's group (char *, the lead's first): their source
 * names (also the copies' names on the destination until the block renames
 * them), or their destination tables, of those the move created only
 * (created_only).  SqlTextArray makes them a parameter.
 */
List *
MoveGroupTables(Move *m, bool dst, bool created_only)
{
	List	   *tables = NIL;
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		if (created_only && t->dest_created != 1)
			continue;
		tables = lappend(tables, dst ? t->dst_table : t->src_table);
	}
	return tables;
}

/*
 * MoveGroupTables as the value of an array parameter, NULL if there are
 * none: a statement takes it as MOVE_GROUP_OIDS(n), the tables' oids.
 */
char *
MoveGroupRelations(Move *m, bool dst, bool created_only)
{
	List	   *tables = MoveGroupTables(m, dst, created_only);

	return tables != NIL ? SqlTextArray(tables) : NULL;
}

/* The committed state of a move (MOVE_STATE_NONE: no record). */
MoveStateId
MoveStateRead(Move *m)
{
	return MoveStateFromName(MoveRecordsValue(m->op.ext, m->op.cxt, psprintf("SELECT state FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
													   MoveExt(m, "snowseq_moves"), m->op.id)));
}
