/*
 * move_cleanup.c
 *		Elastic shards: the end of a move, whichever way it ends.
 *
 * Finish (commit the prepared source transaction, drop what replication
 * used, delete the moved rows in batches, point a split's partition back
 * at its table), undo a move that did not switch, roll forward one whose
 * source committed, resolve moves that are not running (snowseq_move_cleanup,
 * and the resolver at the router's start); the orphans of moves on every
 * server are move_orphans.c's.
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "fence.h"
#include "move_cleanup.h"
#include "move_common.h"
#include "move_group.h"
#include "move_keep.h"
#include "move_plan.h"
#include "move_repl.h"
#include "move_switch.h"
#include "snowseq.h"
#include "sqlrun.h"
#include "testpoint.h"

#define MOVE_DELETE_BATCH		50000

typedef enum MoveUndone
{
	UNDONE,						/* the old placement serves, as it always did */
	SWITCHED,					/* the source transaction committed: finish */
	UNKNOWN						/* the source cannot say: nothing was touched */
} MoveUndone;

/*
 * Update the move's record to a state, and more columns (sets, or NULL),
 * with its error (NULL: none) as a parameter: a message is never SQL text.
 */
static void
MoveRecordStepError(Move *m, MoveTransitionStep step, const char *sets, const char *error)
{
	MoveRecordStep(m, step, sets);
	MoveRecordSetParams(m, "error = $1::pg_catalog.text", SQL_ARGS(error));
}

/* Delete the moved rows left on the source, in batches, as a move (no triggers). */
static void
MoveDeleteSource(Move *m)
{
	RemoteConn *src = MoveSrc(m);
	char	   *sql = psprintf("DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM %s WHERE %s LIMIT %d))",
							   m->src_table, m->src_table, MoveIdCondition(m), MOVE_DELETE_BATCH);
	int64		total = 0;

	MoveRefuseReferenced(m, src);
	RemoteCommand(src, "SET session_replication_role = replica", "turn triggers off");
	for (;;)
	{
		PGresult   *res = RemoteExec(src, sql, "delete the moved rows");
		int64		n = pg_strtoint64(PQcmdTuples(res));

		PQclear(res);
		total += n;
		if (n == 0)
			break;
	}
	RemoteCommand(src, "RESET session_replication_role", "turn triggers on");
	if (total > 0)
		MoveNote(m, m->src_name, psprintf("%s: " INT64_FORMAT " moved rows", m->src_table, total), "deleted");
}

/*
 * After the switch: the source rows, the mark and the record of one table
 * of the group.  A split's moved rows are deleted while the router reads
 * the rows that stay through the keep view.
 */
static void
MoveFinishTable(Move *m)
{
	char	   *rows;
	char	   *bytes;

	MoveDeleteSource(m);
	rows = RemoteValue(MoveDst(m), psprintf("SELECT pg_catalog.count(*) FROM %s", m->dst_table), "count the moved rows");
	bytes = RemoteValueParams(MoveDst(m), "SELECT pg_catalog.pg_table_size($1::pg_catalog.regclass)",
							  SQL_ARGS(m->dst_table), "read the size of the moved rows");
	MoveRecordSetParams(m, "finished_at = pg_catalog.clock_timestamp(), rows_copied = $1::pg_catalog.int8, "
						"bytes_copied = $2::pg_catalog.int8", SQL_ARGS(rows, bytes));
}

/*
 * Step (in MoveFinish): keep the source current after the switch, by
 * replication from the destination back to it, until the move is
 * finalized or reverted (or its window ends).
 */
static void
MoveKeepSource(Move *m)
{
	MoveBackSubscribe(m, true);
	MoveRecordStep(m, MOVE_STEP_KEEP, "revertable_until = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) revert_window");
	MoveNote(m, NULL, "move", MoveStateName(MOVE_STATE_REVERTABLE));
}

/*
 * Step: after the switch, remove what replication to the destination used;
 * then keep the source current for a revert (the move's revert window), or
 * finish at once (MoveFinishSource).
 */
void
MoveFinish(Move *m)
{
	ListCell   *lc;

	RemoteClose(m->sess.lock);
	m->sess.lock = NULL;
	MoveResolvePrepared(m, true);
	MoveReleaseParent(m);
	MoveDropSubscription(m);
	MoveDropPublication(m);
	MoveDropSlots(m);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		RemoteCommand(MoveDst(m), psprintf("COMMENT ON TABLE %s IS %s", t->dst_table,
										   quote_literal_cstr(psprintf("snowseq: genes %d to %d of %s, moved here by %s",
																	   t->first, t->last, t->parent_q, m->op.token))),
					  "mark the destination table");
	}
	/*
	 * Gone: the replication to the destination and the prepared source
	 * transaction; the copies serve and the fences stay moved, for good.
	 */
	MoveForgetObjects(m, MOVE_FORGET_OWN);
	/* before the router holds any lock: validating scans the destination tables */
	MoveValidateGroupKeys(m);
	if (m->revert.window > 0)
	{
		ErrorData  *err = MoveTry(m, MoveKeepSource);

		if (err == NULL)
			return;
		ereport(WARNING,
				(errmsg("move " INT64_FORMAT " cannot be reverted: %s", m->op.id, err->message),
				 err->hint ? errhint("%s", err->hint) : 0));
		err = MoveTry(m, MoveBackDrop);
		if (err != NULL)
			MoveNote(m, m->dst_name, "replication back to the source", psprintf("left: %s", err->message));
	}
	MoveFinishSource(m);
}

/*
 * A whole move leaves its source tables empty: drop them with their fences
 * (in one statement, so the foreign keys between them go too), unless a
 * router partition reads one or it holds rows of other genes.  Moves back
 * and forth left a table behind each time, whose name a later move or
 * split to that server then met.  Run again, it finds them gone.
 */
static void
MoveDropEmptySources(Move *m)
{
	RemoteConn *src = MoveSrc(m);
	StringInfoData tables;
	ListCell   *lc;

	initStringInfo(&tables);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *empty;

		if (strcmp(RemoteValueParams(src, "SELECT (pg_catalog.to_regclass($1::pg_catalog.text) IS NOT NULL)::pg_catalog.text",
									 SQL_ARGS(t->src_table), "look up the source table"), "true") != 0 ||
			MoveTableReadBy(t, m->src_name, t->dst_nsp, t->src_rel) != NULL)
			continue;
		empty = RemoteValue(src, psprintf("SELECT (NOT EXISTS (SELECT FROM %s))::pg_catalog.text", t->src_table),
							"look for rows left in the source table");
		if (strcmp(empty, "true") != 0)
			continue;
		RemoteCommandParams(src, psprintf("SELECT %s($1::pg_catalog.regclass)", MoveRemoteExt(src, "snowseq_fence_clear")),
							SQL_ARGS(t->src_table), "remove the fences of the source table");
		appendStringInfo(&tables, "%s%s", tables.len > 0 ? ", " : "", t->src_table);
		MoveNote(t, m->src_name, psprintf("table %s", t->src_table), "dropped");
	}
	if (tables.len > 0)
		RemoteCommand(src, psprintf("DROP TABLE %s", tables.data), "drop the emptied source tables");
}

/*
 * After the switch, once the source is no longer kept current: delete the
 * moved rows there, point a split's partitions back at their tables; the
 * move is done.  The lead's record counts the rows and bytes of the whole
 * group.
 */
void
MoveFinishSource(Move *m)
{
	ListCell   *lc;

	SNOWSEQ_TESTPOINT("move_before_source_delete");
	foreach(lc, MoveDeleteOrder(m, MoveSrc(m)))
		MoveFinishTable(lfirst(lc));
	/* a split's partitions read their tables again: last, the locks are held to the commit */
	MovePointBack(m);
	if (m->kind == MOVE_KIND_WHOLE)
		MoveDropEmptySources(m);
	MoveRecordStep(m, MOVE_STEP_FINISH,
					m->group.members == NIL ? NULL :
					psprintf("(rows_copied, bytes_copied) = (SELECT pg_catalog.sum(rows_copied), "
							 "pg_catalog.sum(bytes_copied) FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT
							 " OR group_move OPERATOR(pg_catalog.=) " INT64_FORMAT ")",
							 MoveExt(m, "snowseq_moves"), m->op.id, m->op.id));
	MoveNote(m, NULL, "move", "finished");
}

/*
 * Step: finalize a revertable move: the replication back to the source
 * ends, the moved rows leave the source.  It can no longer be reverted.
 */
void
MoveFinalize(Move *m)
{
	MoveBackDrop(m);
	MoveFinishSource(m);
}

/*
 * Step: finish a revert whose router switched back: commit its prepared
 * transactions, on the destination of the move it reverts (the fences
 * there become moved) and on its source (the fences there go: it takes
 * the genes' writes again), drop the way back (its slot, publication and
 * partitioned tables), and remove the destination tables.  The move is
 * reverted.
 */
void
MoveRevertFinish(Move *m)
{
	Move	   *o = m->revert.of;
	StringInfoData dropped;
	StringInfoData emptied;
	ListCell   *lc;

	RemoteClose(m->sess.lock);
	m->sess.lock = NULL;
	RemoteClose(m->sess.dst_lock);
	m->sess.dst_lock = NULL;
	MoveResolvePrepared(m, true);
	MoveReleaseParent(m);
	MoveBackDrop(o);
	initStringInfo(&dropped);
	initStringInfo(&emptied);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		Move	   *ot = t->revert.of;

		/* the source's fences went with its prepared transaction */
		MoveNote(t, m->dst_name, psprintf("fence of %s", t->dst_table), "removed");
		RemoteCommandParams(MoveSrc(m), psprintf("SELECT %s($1::pg_catalog.regclass)",
												 MoveRemoteExt(MoveSrc(m), "snowseq_fence_clear")),
							SQL_ARGS(t->src_table), "remove the fences of the destination table");
		appendStringInfo(ot->dest_created == 1 ? &dropped : &emptied, "%s%s",
						 (ot->dest_created == 1 ? dropped.len : emptied.len) ? ", " : "", t->src_table);
		MoveNote(t, m->src_name, psprintf("table %s", t->src_table), ot->dest_created == 1 ? "dropped" : "emptied");
	}
	/* together: the foreign keys between them go with them */
	if (dropped.len > 0)
		RemoteCommand(MoveSrc(m), psprintf("DROP TABLE %s", dropped.data), "drop the destination tables");
	if (emptied.len > 0)
		RemoteCommand(MoveSrc(m), psprintf("TRUNCATE %s", emptied.data), "empty the destination tables");
	MoveForgetObjects(m, MOVE_FORGET_ALL);
	MoveRecordStep(m, MOVE_STEP_FINISH, "finished_at = pg_catalog.clock_timestamp()");
	MoveRecordStep(o, MOVE_STEP_REVERT, "revertable_until = NULL");
	MoveNote(m, NULL, "move", MoveStateName(MOVE_STATE_REVERTED));
}

/* Undo actions, each on its own so that one failing leaves the others done. */
static void
MoveUndoLock(Move *m)
{
	/* closing the session aborts the source transaction and frees the locks */
	RemoteClose(m->sess.lock);
	m->sess.lock = NULL;
	RemoteClose(m->sess.dst_lock);
	m->sess.dst_lock = NULL;
}

/* Undo: roll back the prepared source transaction, if any. */
static void
MoveRollbackSource(Move *m)
{
	MoveResolvePrepared(m, false);
}

/* Undo: remove the fence, unless the source says the move switched. */
static void
MoveUndoFence(Move *m)
{
	char	   *v;

	/* waits for the source transaction: its outcome decides */
	v = RemoteValueParams(MoveSrc(m), psprintf("SELECT %s($1::pg_catalog.text)", MoveRemoteExt(MoveSrc(m), "snowseq_fence_drop")),
						  SQL_ARGS(m->op.token), "remove the fence");
	if (strcmp(v, "t") == 0)
		return;
	v = RemoteValueParams(MoveSrc(m), psprintf("SELECT state FROM %s WHERE token OPERATOR(pg_catalog.=) $1::pg_catalog.text",
											   MoveRemoteExt(MoveSrc(m), "snowseq_fence")),
						  SQL_ARGS(m->op.token), "read the fence");
	m->hold.fence_moved = v != NULL && strcmp(v, FenceStateName(FENCE_MOVED)) == 0;
}

/*
 * Undo: drop the copies the tables of a group made, and empty the tables
 * they took, each kind in one statement: the foreign keys between the
 * copies (a group's tables reference one another) go with them, whatever
 * the order of the tables.
 */
static void
MoveUndoTables(Move *m)
{
	RemoteConn *dst = MoveDst(m);
	StringInfoData dropped;
	StringInfoData emptied;
	List	   *notes = NIL;
	ListCell   *lc;

	initStringInfo(&dropped);
	initStringInfo(&emptied);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		PGresult   *res;
		char	   *table;
		char	   *rel;
		char	   *mark;

		/* renamed in the block, or still under the source's name */
		res = RemoteExecParams(dst, "SELECT t::pg_catalog.text, pg_catalog.obj_description(t, 'pg_class'), c.relname "
							   "FROM (SELECT coalesce(pg_catalog.to_regclass($1::pg_catalog.text), "
							   "pg_catalog.to_regclass($2::pg_catalog.text)) t) s "
							   "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.t",
							   SQL_ARGS(t->dst_table, t->src_table), "look up the copy");
		if (PQntuples(res) == 0)
		{
			PQclear(res);
			continue;
		}
		table = pstrdup(PQgetvalue(res, 0, 0));
		mark = PQgetisnull(res, 0, 1) ? NULL : pstrdup(PQgetvalue(res, 0, 1));
		rel = pstrdup(PQgetvalue(res, 0, 2));
		PQclear(res);
		if (t->dest_created == 1 && mark != NULL && strcmp(mark, MoveCopyMark(t)) == 0)
		{
			appendStringInfo(&dropped, "%s%s", dropped.len > 0 ? ", " : "", table);
			notes = lappend(notes, list_make3(t, table, "dropped"));
		}
		else if (t->dest_created == 0 && MoveTableReadBy(t, m->dst_name, t->dst_nsp, rel) == NULL)
		{
			/* it was empty before the move */
			appendStringInfo(&emptied, "%s%s", emptied.len > 0 ? ", " : "", table);
			notes = lappend(notes, list_make3(t, table, "emptied"));
		}
	}
	/* the copies first: a table emptied may be referenced by one of them */
	if (dropped.len > 0)
		RemoteCommand(dst, psprintf("DROP TABLE %s", dropped.data), "drop the copies");
	if (emptied.len > 0)
		RemoteCommand(dst, psprintf("TRUNCATE %s", emptied.data), "empty the copies");
	foreach(lc, notes)
	{
		List	   *n = lfirst(lc);

		MoveNote(linitial(n), m->dst_name, psprintf("table %s", (char *) lsecond(n)), lthird(n));
	}
}

/* Undo: drop the router's foreign table on the copy, if not attached. */
static void
MoveUndoPartition(Move *m)
{
	char	   *v = SpiValueParams(m->op.cxt, "SELECT NOT c.relispartition FROM pg_catalog.pg_class c "
								   "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text)",
								   SQL_ARGS(m->newpart.q));

	if (v != NULL && v[0] == 't')
		SpiRun(psprintf("DROP FOREIGN TABLE %s", m->newpart.q), SPI_OK_UTILITY);
}

/* Run an undo action; on failure, note what is left behind. */
static void
MoveUndoStep(Move *m, MoveStep step, const char *server, const char *object)
{
	ErrorData  *err = MoveTry(m, step);

	if (err != NULL)
	{
		MoveLead(m)->op.leftovers = true;
		MoveNote(m, server, object, psprintf("left: %s", err->message));
	}
}

/*
 * Undo a move that did not switch: the old placement serves throughout.
 * If the source says the move did switch (its transaction committed), or
 * cannot say, nothing is undone.
 */
static MoveUndone
MoveRollback(Move *m)
{
	bool		src_known;
	ListCell   *lc;

	m->op.leftovers = false;
	MoveUndoLock(m);
	/* the router did not commit its switch: neither does the source */
	if (m->op.state == MOVE_STATE_SWITCH)
	{
		MoveUndoStep(m, MoveRollbackSource, m->src_name, psprintf("prepared transaction %s", m->op.token));
		if (m->op.leftovers)
		{
			MoveNote(m, m->src_name, "move", "unresolved: the prepared source transaction could not be rolled back");
			return UNKNOWN;
		}
	}
	/* nothing was created before the checks ended */
	if (m->op.state == MOVE_STATE_PREPARE && m->dest_created < 0)
	{
		MoveNote(m, NULL, "move", "undone");
		return UNDONE;
	}
	m->hold.fence_moved = false;
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		t->hold.fence_moved = false;
		MoveUndoStep(t, MoveUndoFence, m->src_name, psprintf("fence of %s", t->src_table));
		m->hold.fence_moved = m->hold.fence_moved || t->hold.fence_moved;
	}
	src_known = !m->op.leftovers;
	if (m->hold.fence_moved)
		return SWITCHED;
	if (!src_known && m->op.state == MOVE_STATE_SWITCH)
	{
		MoveNote(m, m->src_name, "move", "unresolved: the source cannot tell whether it switched");
		return UNKNOWN;
	}
	MoveUndoStep(m, MoveDropSubscription, m->dst_name, psprintf("subscription %s", m->op.token));
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		if (t->kind != MOVE_KIND_WHOLE)
			MoveUndoStep(t, MoveDropKeepViewOf, m->src_name, psprintf("view %s", MoveKeepView(t)));
	}
	if (src_known)
		MoveUndoStep(m, MoveUndoTables, m->dst_name, m->group.members == NIL ? psprintf("table %s", m->dst_table) :
					 psprintf("tables of the group of %s", m->dst_table));
	else
	{
		foreach(lc, MoveGroup(m))
		{
			Move	   *t = lfirst(lc);

			/* the copy may be all there is of the rows: keep it */
			m->op.leftovers = true;
			MoveNote(t, m->dst_name, psprintf("table %s", t->dst_table), "kept: the source cannot tell whether the move switched");
		}
	}
	if (m->revert.window > 0)
		MoveUndoStep(m, MoveBackDrop, m->dst_name, psprintf("replication back to the source %s", MoveBackName(m)));
	MoveUndoStep(m, MoveDropPublication, m->src_name, psprintf("publication %s", m->op.token));
	MoveUndoStep(m, MoveDropSlots, m->src_name, psprintf("replication slot %s", m->op.token));
	foreach(lc, MoveGroup(m))
		MoveUndoStep(lfirst(lc), MoveUndoPartition, NULL, psprintf("foreign table %s", ((Move *) lfirst(lc))->newpart.q));
	MoveNote(m, NULL, "move", m->op.leftovers ? "undone, with leftovers" : "undone");
	return UNDONE;
}

/* Step: finish a move whose source transaction committed, switching the router. */
static void
MoveRollForward(Move *m)
{
	(void) MoveLockParent(m, false);
	MoveSwitchRouter(m);
	MoveRecordStep(m, MOVE_STEP_SWITCH, "switched_at = pg_catalog.clock_timestamp()");
	MoveNote(m, NULL, "router", MoveStateName(MOVE_STATE_SWITCHED));
}

/* Undo: subscribe back to the source again, on the slot a revert kept. */
static void
MoveBackResubscribe(Move *m)
{
	MoveBackSubscribe(m, false);
}

/*
 * Bring a revert that is not running to an end: finish it if its router
 * switched back (or its destination says it did), else undo it, and the
 * move is revertable again: the fences it opened on the destination of the
 * move go, and the source subscribes again where the revert stopped
 * replicating (the slot stayed).
 */
static void
MoveRevertResolve(Move *m, const char *error)
{
	bool		forward = m->op.state == MOVE_STATE_SWITCHED;
	ErrorData  *err = NULL;
	ListCell   *lc;

	m->op.leftovers = false;
	if (!forward)
	{
		MoveUndoLock(m);
		if (m->op.state == MOVE_STATE_SWITCH)
		{
			MoveUndoStep(m, MoveRollbackSource, m->src_name, psprintf("prepared transaction %s", m->op.token));
			if (m->op.leftovers)
			{
				MoveNote(m, m->src_name, "revert", "unresolved: the prepared transaction could not be rolled back");
				return;
			}
		}
		foreach(lc, MoveGroup(m))
		{
			Move	   *t = lfirst(lc);

			t->hold.fence_moved = false;
			if (t->hold.fence_id != 0)
				MoveUndoStep(t, MoveUndoFence, m->src_name, psprintf("fence of %s", t->src_table));
			forward = forward || t->hold.fence_moved;
		}
		if (forward)
		{
			err = MoveTry(m, MoveRollForward);
			forward = err == NULL;
		}
	}
	if (forward)
	{
		err = MoveTry(m, MoveRevertFinish);
		if (err != NULL)
		{
			MoveNote(m, NULL, "revert", psprintf("switched back, left: %s", err->message));
			MoveRecordStepError(m, MOVE_STEP_LEFT, NULL, err->message);
		}
		return;
	}
	if (m->op.leftovers)
	{
		MoveNote(m, m->src_name, "revert", "unresolved: its fences could not be removed");
		return;
	}
	err = MoveTry(m->revert.of, MoveBackResubscribe);
	if (err != NULL)
	{
		m->op.leftovers = true;
		MoveNote(m, m->dst_name, psprintf("subscription %s", m->op.token), psprintf("left: %s", err->message));
	}
	if (!m->op.leftovers)
		MoveForgetObjects(m, MOVE_FORGET_ALL);
	MoveRecordStepError(m, m->op.leftovers ? MOVE_STEP_UNDO_LEFT : MOVE_STEP_UNDO,
						 "finished_at = pg_catalog.clock_timestamp()", error);
	MoveNote(m, NULL, "revert", m->op.leftovers ? "undone, with leftovers: the move is revertable" :
			 "undone: the move is revertable again");
}

/*
 * Bring a move that is not running to an end, from its committed state:
 * undo it, or finish it if it switched.  Records the outcome.
 */
void
MoveResolve(Move *m, const char *error)
{
	ErrorData  *err = NULL;
	bool		forward = m->op.state == MOVE_STATE_SWITCHED || m->op.state == MOVE_STATE_REVERTABLE;
	MoveUndone undone = UNDONE;

	if (m->revert.reverts != 0)
	{
		MoveRevertResolve(m, error);
		MoveCloseSessions(m);
		MoveCloseSessions(m->revert.of);
		return;
	}
	if (!forward)
		undone = MoveRollback(m);
	if (undone == UNKNOWN)
	{
		MoveCloseSessions(m);
		return;
	}
	if (undone == SWITCHED)
	{
		err = MoveTry(m, MoveRollForward);
		forward = err == NULL;
		if (err != NULL)
			MoveNote(m, NULL, "router", psprintf("not switched: %s", err->message));
	}
	if (forward)
	{
		err = MoveTry(m, MoveFinish);
		if (err != NULL)
		{
			m->op.leftovers = true;
			MoveNote(m, NULL, "move", psprintf("switched, left: %s", err->message));
			MoveRecordStepError(m, MOVE_STEP_LEFT, NULL, err->message);
		}
	}
	else if (err == NULL)
	{
		/* undone: nothing of it is left (with leftovers, cleanup drops them by their records) */
		if (!m->op.leftovers)
			MoveForgetObjects(m, MOVE_FORGET_ALL);
		MoveRecordStepError(m, m->op.leftovers ? MOVE_STEP_UNDO_LEFT : MOVE_STEP_UNDO,
							 "finished_at = pg_catalog.clock_timestamp()", error);
	}
	MoveCloseSessions(m);
}

/* The columns of a move's record that MoveLoad reads, and the parts of its names. */
#define MOVE_LOAD_COLUMNS "*, (pg_catalog.parse_ident(dest_table))[1] AS dst_nsp, " \
	"(pg_catalog.parse_ident(dest_table))[2] AS dst_rel, " \
	"(pg_catalog.parse_ident(source_table))[2] AS src_rel"

/* A move rebuilt from its record, for cleanup (lead: NULL, or the group's lead). */
static Move *
MoveLoad(const char *ext, HeapTuple t, TupleDesc d, Move *lead)
{
	Move	   *m = lead ? MoveNewMember(lead, InvalidOid) : MoveNew(ext);
	MemoryContext old = MemoryContextSwitchTo(m->op.cxt);
	bool		isnull;
	char	   *v;

#define COL(name) SPI_fnumber(d, name)
#define TEXT(name) (SPI_getvalue(t, d, COL(name)))
	m->op.id = DatumGetInt64(SPI_getbinval(t, d, COL("move_id"), &isnull));
	m->parent = DatumGetObjectId(SPI_getbinval(t, d, COL("parent"), &isnull));
	m->first = DatumGetInt32(SPI_getbinval(t, d, COL("first_gene"), &isnull));
	m->last = DatumGetInt32(SPI_getbinval(t, d, COL("last_gene"), &isnull));
	m->src_name = TEXT("source_server");
	m->dst_name = TEXT("dest_server");
	m->kind = MoveKindFromName(TEXT("kind"));
	m->part.q = TEXT("part_name");
	m->part.lo = DatumGetInt64(SPI_getbinval(t, d, COL("part_lower"), &isnull));
	m->part.has_lo = !isnull;
	m->part.hi = DatumGetInt64(SPI_getbinval(t, d, COL("part_upper"), &isnull));
	m->part.has_hi = !isnull;
	m->newpart.q = TEXT("new_part_name");
	m->src_table = TEXT("source_table");
	m->dst_table = TEXT("dest_table");
	m->id_col = TEXT("id_column");
	v = TEXT("dest_created");
	m->dest_created = v == NULL ? -1 : v[0] == 't' ? 1 : 0;
	m->op.token = TEXT("token");
	v = TEXT("fence_id");
	m->hold.fence_id = v ? pg_strtoint32(v) : 0;
	v = TEXT("sub_oid");
	m->copy.sub_oid = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;
	m->op.state = MoveStateFromName(TEXT("state"));
	v = TEXT("mover");
	m->op.mover = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;
	/* since 1.3 (a catalog not yet updated has none of these) */
	{
		Datum		w = SPI_getbinval(t, d, COL("revert_window"), &isnull);

		if (!isnull)
		{
			Interval   *iv = DatumGetIntervalP(w);

			m->revert.window = (int) Min(iv->time / USECS_PER_SEC + (int64) iv->day * SECS_PER_DAY +
										 (int64) iv->month * DAYS_PER_MONTH * SECS_PER_DAY, PG_INT32_MAX);
		}
	}
	v = TEXT("reverts");
	m->revert.reverts = v ? pg_strtoint64(v) : 0;
	m->revert.back_lsn = TEXT("back_lsn");
#undef COL
#undef TEXT
	m->parent_q = get_rel_name(m->parent) ?
		quote_qualified_identifier(get_namespace_name(get_rel_namespace(m->parent)), get_rel_name(m->parent)) :
		psprintf("%u", m->parent);
	m->parent_rel = get_rel_name(m->parent) ? get_rel_name(m->parent) : m->parent_q;
	m->dst_nsp = SPI_getvalue(t, d, SPI_fnumber(d, "dst_nsp"));
	m->src_rel = SPI_getvalue(t, d, SPI_fnumber(d, "src_rel"));
	m->dst_rel = SPI_getvalue(t, d, SPI_fnumber(d, "dst_rel"));
	MemoryContextSwitchTo(old);
	return m;
}

/* The other tables of a loaded move's group, from their records. */
static void
MoveLoadMembers(Move *m)
{
	SPITupleTable *rows;
	uint64		n;

	MoveRecordsRun(m->op.ext, psprintf("SELECT " MOVE_LOAD_COLUMNS " FROM %s WHERE group_move OPERATOR(pg_catalog.=) " INT64_FORMAT
									" ORDER BY move_id", MoveExt(m, "snowseq_moves"), m->op.id), SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
		(void) MoveLoad(m->op.ext, rows->vals[i], rows->tupdesc, m);
}

/*
 * A revert's Moves of the move it reverts, linked table by table
 * (revert.of), from the records of that move.
 */
static void
MoveLoadRevertOf(Move *m)
{
	Move	   *o = MoveLoadById(m->op.ext, m->revert.reverts);
	ListCell   *lc;

	if (o == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("move " INT64_FORMAT " reverts move " INT64_FORMAT ", which has no record", m->op.id, m->revert.reverts)));
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		ListCell   *oc;

		foreach(oc, MoveGroup(o))
			if (((Move *) lfirst(oc))->op.id == t->revert.reverts)
				t->revert.of = lfirst(oc);
		if (t->revert.of == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("move " INT64_FORMAT " reverts move " INT64_FORMAT ", which has no record", t->op.id, t->revert.reverts)));
	}
}

/*
 * A move rebuilt from its leading record, with the other tables of its
 * group and, for a revert, the move it reverts; NULL if there is no such
 * record.
 */
Move *
MoveLoadById(const char *ext, int64 id)
{
	Move	   *m;

	MoveRecordsRun(ext, psprintf("SELECT " MOVE_LOAD_COLUMNS " FROM %s.snowseq_moves WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
								 ext, id), SPI_OK_SELECT);
	if (SPI_processed != 1)
		return NULL;
	m = MoveLoad(ext, SPI_tuptable->vals[0], SPI_tuptable->tupdesc, NULL);
	MoveLoadMembers(m);
	if (m->revert.reverts != 0)
		MoveLoadRevertOf(m);
	return m;
}

/*
 * A revertable move that no one is reverting or finalizing: finalized if
 * its window has ended, else left as it is.
 */
static void
CleanupRevertable(Move *m, bool report)
{
	char	   *until = MoveRecordsValue(m->op.ext, m->op.cxt, psprintf("SELECT CASE WHEN revertable_until OPERATOR(pg_catalog.<=) "
												  "pg_catalog.clock_timestamp() THEN '' ELSE revertable_until::pg_catalog.text END "
												  "FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
												  MoveExt(m, "snowseq_moves"), m->op.id));
	ErrorData  *err;

	if (until != NULL && until[0] != '\0')
	{
		if (report)
			MoveNote(m, NULL, "move", psprintf("revertable until %s", until));
		return;
	}
	err = MoveTry(m, MoveFinalize);
	if (err != NULL)
		MoveNote(m, NULL, "move", psprintf("revert window over, not finalized: %s", err->message));
	else
		MoveNote(m, NULL, "move", "revert window over: finalized");
	MoveCloseSessions(m);
}

/*
 * Resolve the moves that are not running (of one table, or all; at_start:
 * from the resolver at the router's start, as the role that ran each):
 * undo or finish them.  Reports into collect, if given, or at elevel.  Returns how
 * many are still unresolved (running ones do not count).
 */
int
CleanupMoves(const char *ext, Oid parent, MoveOp *collect, bool at_start, int elevel)
{
	SPITupleTable *rows;
	uint64		n;
	int			left = 0;
	bool		groups = MoveGroupsRecorded(ext);

	/* the leading records (all, before 1.2), and those of the table's group */
	MoveRecordsRunParams(ext, psprintf("SELECT " MOVE_LOAD_COLUMNS " "
				 "FROM %s m WHERE %s state::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) %s"
				 "ORDER BY move_id",
				 psprintf("%s.snowseq_moves", ext), groups ? "group_move IS NULL AND" : "",
				 !OidIsValid(parent) ? "" : !groups ? psprintf("AND parent OPERATOR(pg_catalog.=) %u ", parent) :
				 psprintf("AND (parent OPERATOR(pg_catalog.=) %u OR EXISTS (SELECT 1 FROM %s.snowseq_moves g "
						  "WHERE g.group_move OPERATOR(pg_catalog.=) m.move_id AND g.parent OPERATOR(pg_catalog.=) %u)) ",
						  parent, ext, parent)),
		SQL_ARGS(MoveStatesOver()),
		SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		Move	   *m = MoveLoad(ext, rows->vals[i], rows->tupdesc, NULL);

		if (groups)
			MoveLoadMembers(m);
		if (m->revert.reverts != 0)
			MoveLoadRevertOf(m);
		if (!MoveLock(m->op.id, false))
			MoveNote(m, NULL, "move", "running");
		else if (m->op.state == MOVE_STATE_REVERTABLE)
		{
			CleanupRevertable(m, collect != NULL);
			MoveUnlock(m->op.id);
		}
		else
		{
			MoveStateId state;
			Oid			save_user;
			int			save_sec;

			/* at the router's start: as the role that ran the move, if it is still there */
			GetUserIdAndSecContext(&save_user, &save_sec);
			if (at_start && OidIsValid(m->op.mover) &&
				SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(m->op.mover)))
				SetUserIdAndSecContext(m->op.mover, save_sec | SECURITY_LOCAL_USERID_CHANGE);
			MoveResolve(m, "interrupted");
			SetUserIdAndSecContext(save_user, save_sec);
			MoveUnlock(m->op.id);
			state = MoveStateRead(m);
			if (state != MOVE_STATE_DONE && state != MOVE_STATE_FAILED && state != MOVE_STATE_ROLLBACK)
				left++;
		}
		if (collect == NULL)
		{
			ListCell   *lc;

			foreach(lc, m->op.report)
			{
				MoveReport *r = lfirst(lc);

				ereport(elevel,
						(errmsg("interrupted move " INT64_FORMAT " of genes %d to %d: %s%s%s: %s",
								m->op.id, m->first, m->last, r->server ? r->server : "",
								r->server ? ": " : "", r->object, r->action)));
			}
		}
		else
			MoveReportCopy(collect, &m->op);
		MemoryContextDelete(m->op.cxt);
	}
	return left;
}

/*
 * At the start of a router (from its resolver worker, in a transaction):
 * resolve the moves of this database that its end interrupted, as
 * snowseq_move_cleanup() would: the prepared source transaction of one cut
 * in or after its switch, which holds its source table, commits or rolls
 * back as the router's record says, and one cut earlier (or undone with
 * leftovers) is undone, its copies dropped.  Returns how many are left
 * unresolved.
 */
int
MoveResolveSwitches(int elevel)
{
	int			left = 0;
	char	   *nsp;

	SPI_connect();
	nsp = ExtSchemaInstalled();
	if (nsp != NULL)
		left = CleanupMoves(nsp, InvalidOid, NULL, true, elevel);
	SPI_finish();
	return left;
}

/* Add the report of a move to a collection. */
void
MoveReportCopy(MoveOp *collect, MoveOp *op)
{
	MemoryContext old = MemoryContextSwitchTo(collect->cxt);
	ListCell   *lc;

	foreach(lc, op->report)
	{
		MoveReport *r = lfirst(lc);
		MoveReport *c = palloc(sizeof(MoveReport));

		*c = *r;
		c->server = r->server ? pstrdup(r->server) : NULL;
		c->object = pstrdup(r->object);
		c->action = pstrdup(r->action);
		collect->report = lappend(collect->report, c);
	}
	MemoryContextSwitchTo(old);
}
