/*
 * merge_cleanup.c
 *		Elastic shards: the undo of a merge, and the resolution of merges
 *		that no session runs.
 *
 * A merge that fails before its router switched is undone: the server's
 * prepared transaction rolled back, the merge triggers and the merged
 * tables (those still marked as the merge's) dropped, each found by the
 * record the merge wrote before making it (snowseq_move_objects), by the
 * same code as the cleanup of moves (move_orphans.c).  One cut off by a
 * crash or a lost session is resolved as its record says, by
 * snowseq_move_cleanup() and at the start of a merge of the same tables
 * (MergeCleanup), or by the resolver at the router's start
 * (MergeResolveSwitches): finished if its router switched, else undone.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "merge.h"
#include "merge_cleanup.h"
#include "merge_records.h"
#include "merge_switch.h"
#include "move_cleanup.h"
#include "move_common.h"
#include "move_orphans.h"
#include "move_switch.h"
#include "sqlrun.h"

/*
 * Step of an undo: what the merge recorded removed as its records'
 * policies say for a merge undone (CleanupRecordedMerge): the server
 * transaction rolled back if it was prepared, the merge triggers dropped
 * from the tables merged (which are there again), the merged tables still
 * marked as the merge's dropped; each record forgotten once its object is
 * gone.  What could not be removed keeps its record, and is an ERROR.
 */
static void
MergeUndoObjects(Move *m)
{
	char	   *error = NULL;
	int			left = CleanupRecordedMerge(m, &error);

	if (left > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg_plural("%d object of the merge could not be removed: %s",
							   "%d objects of the merge could not be removed: %s", left, left,
							   error ? error : "?")));
}

/*
 * Undo a merge that did not switch: the server transaction rolled back (if
 * prepared), the merge triggers and the merged tables (those still marked
 * as the merge's) dropped.  Leaves state failed, or rollback if something
 * could not be removed (with a WARNING).
 */
void
MergeUndo(Move *m, const char *error)
{
	ErrorData  *err;

	RemoteClose(m->sess.lock);
	m->sess.lock = NULL;
	MoveReleaseParent(m);
	err = MoveTry(m, MergeUndoObjects);
	if (err != NULL)
	{
		MoveNote(m, m->src_name, "merge", psprintf("not undone: %s", err->message));
		MergeRecordStep(m, MERGE_STEP_UNDO_LEFT, "error = $2::pg_catalog.text, finished_at = pg_catalog.clock_timestamp()", error);
		ereport(WARNING,
				(errmsg("merge " INT64_FORMAT " could not be undone on server \"%s\": %s", m->op.id, m->src_name, err->message),
				 errhint("SELECT * FROM snowseq_move_cleanup(); undoes it once the server is reachable.")));
		return;
	}
	MergeRecordStep(m, MERGE_STEP_UNDO, "error = $2::pg_catalog.text, finished_at = pg_catalog.clock_timestamp()", error);
}

/*
 * Resolve a merge that no session runs (its lock taken): finish it if its
 * router switched, else undo it; report into collect, or at elevel.
 */
static void
MergeResolve(Move *m, MoveOp *collect, int elevel)
{
	if (MergeStateRead(m) == MOVE_STATE_SWITCHED)
	{
		ErrorData  *err = MoveTry(m, MergeFinish);

		if (err != NULL)
		{
			MoveNote(m, m->src_name, "merge", psprintf("not finished: %s", err->message));
			MergeRecordSet(m, "error = $1::pg_catalog.text", SQL_ARGS(err->message));
		}
		else
			MoveNote(m, m->src_name, "merge", "finished");
	}
	else
	{
		MergeUndo(m, "interrupted");
		if (MergeStateRead(m) == MOVE_STATE_FAILED)
			MoveNote(m, m->src_name, "merge", "undone");
	}
	if (collect != NULL)
		MoveReportCopy(collect, &m->op);
	else
	{
		ListCell   *lc;

		foreach(lc, m->op.report)
		{
			MoveReport *r = lfirst(lc);

			ereport(elevel,
					(errmsg("interrupted merge " INT64_FORMAT " of genes %d to %d: %s%s%s: %s",
							m->op.id, m->first, m->last, r->server ? r->server : "",
							r->server ? ": " : "", r->object, r->action)));
		}
	}
}

/*
 * A merge's Move from its records: the lead's row, and one Move per other
 * table, each with its partitions and tables.
 */
static Move *
MergeLoad(const char *ext, int64 id)
{
	Move	   *m = MoveNew(ext);
	SPITupleTable *rows;
	uint64		n;

	MoveRecordsRunParams(ext, psprintf("SELECT merge_id, parent, first_gene, last_gene, server, parts, source_tables, "
									   "new_part_name, new_table, (pg_catalog.parse_ident(new_table))[1], "
									   "(pg_catalog.parse_ident(new_table))[2], token, parent::pg_catalog.text, mover "
									   "FROM %s.snowseq_merges WHERE merge_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 "
									   "OR group_merge OPERATOR(pg_catalog.=) $1::pg_catalog.int8 ORDER BY merge_id", ext),
						 SQL_ARGS(psprintf(INT64_FORMAT, id)), SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = rows->vals[i];
		TupleDesc	d = rows->tupdesc;
		bool		isnull;
		Move	   *t = i == 0 ? m : MoveNewMember(m, InvalidOid);
		MergeTable *mt = MemoryContextAllocZero(m->op.cxt, sizeof(MergeTable));
		MemoryContext old = MemoryContextSwitchTo(m->op.cxt);
		ArrayType  *a;
		Datum	   *elems;
		int			ne;

		t->merge = mt;
		t->op.id = DatumGetInt64(SPI_getbinval(tup, d, 1, &isnull));
		t->parent = DatumGetObjectId(SPI_getbinval(tup, d, 2, &isnull));
		t->first = DatumGetInt32(SPI_getbinval(tup, d, 3, &isnull));
		t->last = DatumGetInt32(SPI_getbinval(tup, d, 4, &isnull));
		t->src_name = SPI_getvalue(tup, d, 5);
		t->dst_name = t->src_name;
		a = DatumGetArrayTypeP(SPI_getbinval(tup, d, 6, &isnull));
		deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &ne);
		for (int j = 0; j < ne; j++)
			mt->parts = lappend(mt->parts, TextDatumGetCString(elems[j]));
		a = DatumGetArrayTypeP(SPI_getbinval(tup, d, 7, &isnull));
		deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &ne);
		for (int j = 0; j < ne; j++)
			mt->tables = lappend(mt->tables, TextDatumGetCString(elems[j]));
		t->newpart.q = SPI_getvalue(tup, d, 8);
		t->dst_table = SPI_getvalue(tup, d, 9);
		t->dst_nsp = SPI_getvalue(tup, d, 10);
		t->dst_rel = SPI_getvalue(tup, d, 11);
		t->op.token = SPI_getvalue(tup, d, 12);
		t->parent_q = SPI_getvalue(tup, d, 13);
		t->parent_rel = t->parent_q;
		t->op.mover = DatumGetObjectId(SPI_getbinval(tup, d, 14, &isnull));
		MemoryContextSwitchTo(old);
	}
	return m;
}

/*
 * Load and resolve one merge (into *m, for the caller to close); *over:
 * whether it is over.
 */
static void
MergeCleanupResolve(const char *ext, int64 id, MoveOp *collect, bool at_start, int elevel, Move *volatile *m,
					volatile bool *over)
{
	Oid			save_user;
	int			save_sec;
	*m = MergeLoad(ext, id);
	/* at the router's start: as the role that ran the merge (its user mappings), if it is still there */
	GetUserIdAndSecContext(&save_user, &save_sec);
	if (at_start && OidIsValid((*m)->op.mover) &&
		SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum((*m)->op.mover)))
		SetUserIdAndSecContext((*m)->op.mover, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	MergeResolve(*m, collect, elevel);
	SetUserIdAndSecContext(save_user, save_sec);
	*over = MergeStateOver(MergeStateRead(*m));
}

/* Close the sessions of a merge cleanup resolved (if loaded), and let go of its lock. */
static void
MergeCleanupRelease(int64 id, Move *m)
{
	if (m != NULL)
	{
		MoveCloseSessions(m);
		MemoryContextDelete(m->op.cxt);
	}
	MergeUnlock(id);
}

/*
 * Resolve one merge whose lock this session has just taken (MergeCleanup),
 * and let go of the lock and of its sessions, whatever happens; whether it
 * is over.
 */
static bool
MergeCleanupOne(const char *ext, int64 id, MoveOp *collect, bool at_start, int elevel)
{
	Move	   *volatile m = NULL;
	volatile bool over = false;

	PG_TRY();
	{
		MergeCleanupResolve(ext, id, collect, at_start, elevel, &m, &over);
	}
	PG_CATCH();
	{
		MergeCleanupRelease(id, m);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MergeCleanupRelease(id, m);
	return over;
}

/*
 * Resolve the merges that no session runs (of one table's group, or all):
 * finish those the router switched, undo the others; at_start (the
 * resolver, at the router's start) as the role that ran each.  Returns how
 * many are still not over.
 */
int
MergeCleanup(const char *ext, Oid parent, MoveOp *collect, bool at_start, int elevel)
{
	List	   *ids = NIL;
	ListCell   *lc;
	int			left = 0;

	/* a catalog older than 1.3 has no merges */
	if (SpiValueParams(CurrentMemoryContext, "SELECT pg_catalog.to_regclass($1::pg_catalog.text)",
					   SQL_ARGS(psprintf("%s.snowseq_merges", ext))) == NULL)
		return 0;
	MoveRecordsRunParams(ext, psprintf("SELECT m.merge_id FROM %s.snowseq_merges m WHERE m.group_merge IS NULL "
									   "AND m.state::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) %s ORDER BY m.merge_id",
									   ext,
									   OidIsValid(parent) ?
									   psprintf("AND EXISTS (SELECT 1 FROM %s.snowseq_merges g WHERE (g.merge_id OPERATOR(pg_catalog.=) m.merge_id "
												"OR g.group_merge OPERATOR(pg_catalog.=) m.merge_id) AND g.parent OPERATOR(pg_catalog.=) %u)",
												ext, parent) : ""),
						 SQL_ARGS(MergeStatesOver()), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		ids = lappend(ids, psprintf(INT64_FORMAT, DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
																			   SPI_tuptable->tupdesc, 1, &isnull))));
	}
	foreach(lc, ids)
	{
		int64		id = pg_strtoint64(lfirst(lc));

		if (!MergeLock(id, false) || !MergeCleanupOne(ext, id, collect, at_start, elevel))
			left++;
	}
	return left;
}

/*
 * At the start of a router (its resolver, in a transaction): resolve the
 * merges of this database that a crash interrupted, as snowseq_move_cleanup()
 * would: one in or after its switch holds the server's tables in its
 * prepared transaction, one before it keeps the trigger on the tables it
 * merges (a cost to every write there, and TRUNCATE refused), and nothing of
 * either runs after a restart.  Returns how many are left.
 */
int
MergeResolveSwitches(int elevel)
{
	int			left = 0;
	char	   *nsp;

	SPI_connect();
	nsp = ExtSchemaInstalled();
	if (nsp != NULL)
		left = MergeCleanup(nsp, InvalidOid, NULL, true, elevel);
	SPI_finish();
	return left;
}
