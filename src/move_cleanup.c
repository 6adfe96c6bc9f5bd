/*
 * move_cleanup.c
 *		Elastic shards: the end of a move, whichever way it ends.
 *
 * Finish (commit the prepared source transaction, drop what replication
 * used, delete the moved rows in batches, point a split's partition back
 * at its table), undo a move that did not switch, roll forward one whose
 * source committed, resolve moves that are not running (snowseq_move_cleanup,
 * and the resolver at the router's start), and remove the orphans of moves
 * on every server.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "snowseq.h"
#include "move_internal.h"
#include "sqlrun.h"
#include "testpoint.h"

#define MOVE_DELETE_BATCH		50000

typedef enum MoveUndone
{
	UNDONE,						/* the old placement serves, as it always did */
	SWITCHED,					/* the source transaction committed: finish */
	UNKNOWN						/* the source cannot say: nothing was touched */
} MoveUndone;

static void MoveReportCopy(Move *collect, Move *m);

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

	MoveDeleteSource(m);
	RemoteCommand(MoveDst(m), psprintf("COMMENT ON TABLE %s IS %s", m->dst_table,
									   quote_literal_cstr(psprintf("snowseq: genes %d to %d of %s, moved here by %s",
																   m->first, m->last, m->parent_q, MoveLead(m)->token))),
				  "mark the destination table");
	rows = RemoteValue(MoveDst(m), psprintf("SELECT pg_catalog.count(*) OPERATOR(pg_catalog.||) ', ' OPERATOR(pg_catalog.||) "
											"pg_catalog.pg_table_size(%s) FROM %s",
											quote_literal_cstr(m->dst_table), m->dst_table), "count the moved rows");
	MoveRecordSet(m, psprintf("finished_at = pg_catalog.clock_timestamp(), (rows_copied, bytes_copied) = (%s)", rows));
}

/*
 * Step: after the switch, remove what the source and destination no longer
 * need.  The lead's record counts the rows and bytes of the whole group.
 */
void
MoveFinish(Move *m)
{
	ListCell   *lc;

	RemoteClose(m->lock);
	m->lock = NULL;
	MoveResolvePrepared(m, true);
	MoveReleaseParent(m);
	MoveDropSubscription(m);
	MoveDropPublication(m);
	MoveDropSlots(m);
	SNOWSEQ_TESTPOINT("move_before_source_delete");
	foreach(lc, MoveDeleteOrder(m, MoveSrc(m)))
		MoveFinishTable(lfirst(lc));
	/* before the router holds any lock: validating scans the destination tables */
	MoveValidateGroupKeys(m);
	/* a split's partitions read their tables again: last, the locks are held to the commit */
	MovePointBack(m);
	MoveRecordState(m, MOVE_STATE_DONE,
					m->members == NIL ? NULL :
					psprintf("(rows_copied, bytes_copied) = (SELECT pg_catalog.sum(rows_copied), pg_catalog.sum(bytes_copied) "
							 "FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT " OR group_move OPERATOR(pg_catalog.=) " INT64_FORMAT ")",
							 MoveExt(m, "snowseq_moves"), m->id, m->id));
	MoveNote(m, NULL, "move", "finished");
}

/* Undo actions, each on its own so that one failing leaves the others done. */
static void
MoveUndoLock(Move *m)
{
	/* closing the session aborts the source transaction and frees the locks */
	RemoteClose(m->lock);
	m->lock = NULL;
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
	v = RemoteValue(MoveSrc(m), psprintf("SELECT %s(%s)", MoveRemoteExt(MoveSrc(m), "snowseq_fence_drop"),
									 quote_literal_cstr(m->token)), "remove the fence");
	if (strcmp(v, "t") == 0)
		return;
	v = RemoteValue(MoveSrc(m), psprintf("SELECT state FROM %s WHERE token OPERATOR(pg_catalog.=) %s",
									 MoveRemoteExt(MoveSrc(m), "snowseq_fence"), quote_literal_cstr(m->token)),
					"read the fence");
	m->fence_moved = v != NULL && strcmp(v, "moved") == 0;
}

/* Undo: drop the copy the move made, or empty the table it took. */
static void
MoveUndoTable(Move *m)
{
	RemoteConn *dst = MoveDst(m);
	PGresult   *res;
	char	   *table;
	char	   *rel;
	char	   *mark;

	/* renamed in the block, or still under the source's name */
	res = RemoteExec(dst, psprintf("SELECT t::text, pg_catalog.obj_description(t, 'pg_class'), c.relname "
								   "FROM (SELECT coalesce(pg_catalog.to_regclass(%s), pg_catalog.to_regclass(%s)) t) s "
								   "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.t",
								   quote_literal_cstr(m->dst_table), quote_literal_cstr(m->src_table)),
					 "look up the copy");
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		return;
	}
	table = pstrdup(PQgetvalue(res, 0, 0));
	mark = PQgetisnull(res, 0, 1) ? NULL : pstrdup(PQgetvalue(res, 0, 1));
	rel = pstrdup(PQgetvalue(res, 0, 2));
	PQclear(res);
	if (m->dest_created == 1 && mark != NULL && strcmp(mark, MoveCopyMark(m)) == 0)
	{
		RemoteCommand(dst, psprintf("DROP TABLE %s", table), "drop the copy");
		MoveNote(m, m->dst_name, psprintf("table %s", table), "dropped");
	}
	else if (m->dest_created == 0 && MoveTableReadBy(m, m->dst_name, m->dst_nsp, rel) == NULL)
	{
		/* it was empty before the move */
		RemoteCommand(dst, psprintf("TRUNCATE %s", table), "empty the copy");
		MoveNote(m, m->dst_name, psprintf("table %s", table), "emptied");
	}
}

/* Undo: drop the router's foreign table on the copy, if not attached. */
static void
MoveUndoPartition(Move *m)
{
	char	   *v = SpiValue(m->cxt, psprintf("SELECT NOT c.relispartition FROM pg_catalog.pg_class c "
											  "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s)",
											  quote_literal_cstr(m->new_part_q)));

	if (v != NULL && v[0] == 't')
		SpiRun(psprintf("DROP FOREIGN TABLE %s", m->new_part_q), SPI_OK_UTILITY);
}

/* Run an undo action; on failure, note what is left behind. */
static void
MoveUndoStep(Move *m, MoveStep step, const char *server, const char *object)
{
	ErrorData  *err = MoveTry(m, step);

	if (err != NULL)
	{
		MoveLead(m)->leftovers = true;
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

	m->leftovers = false;
	MoveUndoLock(m);
	/* the router did not commit its switch: neither does the source */
	if (m->state == MOVE_STATE_SWITCH)
	{
		MoveUndoStep(m, MoveRollbackSource, m->src_name, psprintf("prepared transaction %s", m->token));
		if (m->leftovers)
		{
			MoveNote(m, m->src_name, "move", "unresolved: the prepared source transaction could not be rolled back");
			return UNKNOWN;
		}
	}
	/* nothing was created before the checks ended */
	if (m->state == MOVE_STATE_PREPARE && m->dest_created < 0)
	{
		MoveNote(m, NULL, "move", "undone");
		return UNDONE;
	}
	m->fence_moved = false;
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		t->fence_moved = false;
		MoveUndoStep(t, MoveUndoFence, m->src_name, psprintf("fence of %s", t->src_table));
		m->fence_moved = m->fence_moved || t->fence_moved;
	}
	src_known = !m->leftovers;
	if (m->fence_moved)
		return SWITCHED;
	if (!src_known && m->state == MOVE_STATE_SWITCH)
	{
		MoveNote(m, m->src_name, "move", "unresolved: the source cannot tell whether it switched");
		return UNKNOWN;
	}
	MoveUndoStep(m, MoveDropSubscription, m->dst_name, psprintf("subscription %s", m->token));
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		if (t->kind != MOVE_KIND_WHOLE)
			MoveUndoStep(t, MoveDropKeepViewOf, m->src_name, psprintf("view %s", MoveKeepView(t)));
	}
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		if (src_known)
			MoveUndoStep(t, MoveUndoTable, m->dst_name, psprintf("table %s", t->dst_table));
		else
		{
			/* the copy may be all there is of the rows: keep it */
			m->leftovers = true;
			MoveNote(t, m->dst_name, psprintf("table %s", t->dst_table), "kept: the source cannot tell whether the move switched");
		}
	}
	MoveUndoStep(m, MoveDropPublication, m->src_name, psprintf("publication %s", m->token));
	MoveUndoStep(m, MoveDropSlots, m->src_name, psprintf("replication slot %s", m->token));
	foreach(lc, MoveGroup(m))
		MoveUndoStep(lfirst(lc), MoveUndoPartition, NULL, psprintf("foreign table %s", ((Move *) lfirst(lc))->new_part_q));
	MoveNote(m, NULL, "move", m->leftovers ? "undone, with leftovers" : "undone");
	return UNDONE;
}

/* Step: finish a move whose source transaction committed, switching the router. */
static void
MoveRollForward(Move *m)
{
	(void) MoveLockParent(m, false);
	MoveSwitchRouter(m);
	MoveRecordState(m, MOVE_STATE_SWITCHED, "switched_at = pg_catalog.clock_timestamp()");
	MoveNote(m, NULL, "router", "switched");
}

/*
 * Bring a move that is not running to an end, from its committed state:
 * undo it, or finish it if it switched.  Records the outcome.
 */
void
MoveResolve(Move *m, const char *error)
{
	ErrorData  *err = NULL;
	bool		forward = m->state == MOVE_STATE_SWITCHED;
	MoveUndone undone = UNDONE;

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
			m->leftovers = true;
			MoveNote(m, NULL, "move", psprintf("switched, left: %s", err->message));
			MoveRecordState(m, MOVE_STATE_SWITCHED, psprintf("error = %s", quote_literal_cstr(err->message)));
		}
	}
	else if (err == NULL)
		MoveRecordState(m, m->leftovers ? MOVE_STATE_ROLLBACK : MOVE_STATE_FAILED,
						psprintf("finished_at = pg_catalog.clock_timestamp(), error = %s",
								 error ? quote_literal_cstr(error) : "NULL"));
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
	MemoryContext old = MemoryContextSwitchTo(m->cxt);
	bool		isnull;
	char	   *v;

#define COL(name) SPI_fnumber(d, name)
#define TEXT(name) (SPI_getvalue(t, d, COL(name)))
	m->id = DatumGetInt64(SPI_getbinval(t, d, COL("move_id"), &isnull));
	m->parent = DatumGetObjectId(SPI_getbinval(t, d, COL("parent"), &isnull));
	m->first = DatumGetInt32(SPI_getbinval(t, d, COL("first_gene"), &isnull));
	m->last = DatumGetInt32(SPI_getbinval(t, d, COL("last_gene"), &isnull));
	m->src_name = TEXT("source_server");
	m->dst_name = TEXT("dest_server");
	m->kind = MoveKindFromName(TEXT("kind"));
	m->part_q = TEXT("part_name");
	m->part_lo = DatumGetInt64(SPI_getbinval(t, d, COL("part_lower"), &isnull));
	m->part_has_lo = !isnull;
	m->part_hi = DatumGetInt64(SPI_getbinval(t, d, COL("part_upper"), &isnull));
	m->part_has_hi = !isnull;
	m->new_part_q = TEXT("new_part_name");
	m->src_table = TEXT("source_table");
	m->dst_table = TEXT("dest_table");
	m->id_col = TEXT("id_column");
	v = TEXT("dest_created");
	m->dest_created = v == NULL ? -1 : v[0] == 't' ? 1 : 0;
	m->token = TEXT("token");
	v = TEXT("fence_id");
	m->fence_id = v ? pg_strtoint32(v) : 0;
	v = TEXT("sub_oid");
	m->sub_oid = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;
	m->state = MoveStateFromName(TEXT("state"));
	v = TEXT("mover");
	m->mover = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;
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

	SpiRun(psprintf("SELECT " MOVE_LOAD_COLUMNS " FROM %s WHERE group_move OPERATOR(pg_catalog.=) " INT64_FORMAT
					" ORDER BY move_id", MoveExt(m, "snowseq_moves"), m->id), SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
		(void) MoveLoad(m->ext, rows->vals[i], rows->tupdesc, m);
}

/*
 * Resolve the moves that are not running (of one table, or all; with
 * switching_only, those interrupted in or after the switch): undo or
 * finish them.  Reports into collect, if given, or at elevel.  Returns how
 * many are still unresolved (running ones do not count).
 */
int
CleanupMoves(const char *ext, Oid parent, Move *collect, bool switching_only, int elevel)
{
	SPITupleTable *rows;
	uint64		n;
	int			left = 0;
	bool		groups = MoveGroupsRecorded(ext);

	/* the leading records (all, before 1.2), and those of the table's group */
	SpiRun(psprintf("SELECT " MOVE_LOAD_COLUMNS " "
				 "FROM %s m WHERE %s state OPERATOR(pg_catalog.<>) ALL (ARRAY['done', 'failed']) %s%s ORDER BY move_id",
				 psprintf("%s.snowseq_moves", ext), groups ? "group_move IS NULL AND" : "",
				 !OidIsValid(parent) ? "" : !groups ? psprintf("AND parent OPERATOR(pg_catalog.=) %u ", parent) :
				 psprintf("AND (parent OPERATOR(pg_catalog.=) %u OR EXISTS (SELECT 1 FROM %s.snowseq_moves g "
						  "WHERE g.group_move OPERATOR(pg_catalog.=) m.move_id AND g.parent OPERATOR(pg_catalog.=) %u)) ",
						  parent, ext, parent),
				 switching_only ? "AND state OPERATOR(pg_catalog.=) ANY (ARRAY['switch', 'switched'])" : ""),
		SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		Move	   *m = MoveLoad(ext, rows->vals[i], rows->tupdesc, NULL);

		if (groups)
			MoveLoadMembers(m);
		if (!MoveLock(m->id, false))
			MoveNote(m, NULL, "move", "running");
		else
		{
			MoveStateId state;
			Oid			save_user;
			int			save_sec;

			/* at the router's start: as the role that ran the move, if it is still there */
			GetUserIdAndSecContext(&save_user, &save_sec);
			if (switching_only && OidIsValid(m->mover) &&
				SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(m->mover)))
				SetUserIdAndSecContext(m->mover, save_sec | SECURITY_LOCAL_USERID_CHANGE);
			MoveResolve(m, "interrupted");
			SetUserIdAndSecContext(save_user, save_sec);
			MoveUnlock(m->id);
			state = MoveStateRead(m);
			if (state != MOVE_STATE_DONE && state != MOVE_STATE_FAILED && state != MOVE_STATE_ROLLBACK)
				left++;
		}
		if (collect == NULL)
		{
			ListCell   *lc;

			foreach(lc, m->report)
			{
				MoveReport *r = lfirst(lc);

				ereport(elevel,
						(errmsg("interrupted move " INT64_FORMAT " of genes %d to %d: %s%s%s: %s",
								m->id, m->first, m->last, r->server ? r->server : "",
								r->server ? ": " : "", r->object, r->action)));
			}
		}
		else
			MoveReportCopy(collect, m);
		MemoryContextDelete(m->cxt);
	}
	return left;
}

/*
 * At the start of a router (from its resolver worker, in a transaction):
 * resolve the moves of this database interrupted in or after the switch,
 * as snowseq_move_cleanup() would, so that the prepared source transaction
 * of each, which holds its source table, commits or rolls back as the
 * router's record says.  Returns how many are left unresolved.
 */
int
MoveResolveSwitches(int elevel)
{
	int			left = 0;
	char	   *nsp;

	SPI_connect();
	/* no SQL function of snowseq was called: its schema from pg_extension */
	nsp = SpiValue(CurrentMemoryContext, "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e "
				   "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
				   "WHERE e.extname OPERATOR(pg_catalog.=) 'snowseq'");
	if (nsp != NULL)
		left = CleanupMoves(nsp, InvalidOid, NULL, true, elevel);
	SPI_finish();
	return left;
}

/* Add the report of a move to a collection. */
static void
MoveReportCopy(Move *collect, Move *m)
{
	MemoryContext old = MemoryContextSwitchTo(collect->cxt);
	ListCell   *lc;

	foreach(lc, m->report)
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

/*
 * Step (on a Move that stands for one server): find replication slots,
 * publications, subscriptions, half copies and keep views named after
 * moves of this router that are over or unknown, and drop them (a keep
 * view only once no partition of the router reads it).  A slot left behind keeps
 * WAL on its server for ever.
 */
static void
CleanupOrphansOn(Move *o)
{
	RemoteConn *rc = MoveSrc(o);
	char	   *mine = psprintf("snowseq_move_%s_", o->node);
	PGresult   *res;

	res = RemoteExec(rc,
					 "SELECT 'replication slot', slot_name::text, slot_name::text, "
					 "coalesce(pg_catalog.pg_size_pretty(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), restart_lsn)), '') "
					 "FROM pg_catalog.pg_replication_slots WHERE slot_name::text OPERATOR(pg_catalog.~) '^snowseq_move_' "
					 "AND database OPERATOR(pg_catalog.=) pg_catalog.current_database() "
					 "UNION ALL SELECT 'prepared transaction', gid, gid, '' FROM pg_catalog.pg_prepared_xacts "
					 "WHERE gid OPERATOR(pg_catalog.~) '^snowseq_move_' "
					 "AND database OPERATOR(pg_catalog.=) pg_catalog.current_database() "
					 "UNION ALL SELECT 'publication', pubname::text, pubname::text, '' FROM pg_catalog.pg_publication "
					 "WHERE pubname::text OPERATOR(pg_catalog.~) '^snowseq_move_' "
					 "UNION ALL SELECT 'subscription', subname::text, subname::text, '' FROM pg_catalog.pg_subscription "
					 "WHERE subname::text OPERATOR(pg_catalog.~) '^snowseq_move_' AND subdbid OPERATOR(pg_catalog.=) "
					 "(SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) "
					 "UNION ALL SELECT 'table', c.oid::pg_catalog.regclass::text, pg_catalog.substring(d.description, "
					 "'^snowseq (snowseq_move_[0-9]+_[0-9]+): copy in progress$'), '' "
					 "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_description d ON d.objoid OPERATOR(pg_catalog.=) c.oid "
					 "AND d.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid OPERATOR(pg_catalog.=) 0 "
					 "WHERE d.description OPERATOR(pg_catalog.~) '^snowseq snowseq_move_[0-9]+_[0-9]+: copy in progress$' "
					 "UNION ALL SELECT 'view', c.oid::pg_catalog.regclass::pg_catalog.text, pg_catalog.substring(c.relname::pg_catalog.text, "
					 "'^(snowseq_move_[0-9]+_[0-9]+)_keep_[0-9]+$'), '' FROM pg_catalog.pg_class c "
					 "WHERE c.relkind OPERATOR(pg_catalog.=) 'v' "
					 "AND c.relname::pg_catalog.text OPERATOR(pg_catalog.~) '^snowseq_move_[0-9]+_[0-9]+_keep_[0-9]+$'",
					 "list the objects of moves");
	for (int i = 0; i < PQntuples(res); i++)
	{
		char	   *kind = PQgetvalue(res, i, 0);
		char	   *name = PQgetvalue(res, i, 1);
		char	   *token = PQgetvalue(res, i, 2);
		char	   *wal = PQgetvalue(res, i, 3);
		char	   *object = psprintf("%s %s", kind, name);
		bool		switched = false;

		o->id = 0;
		o->parent = InvalidOid;
		o->first = o->last = 0;
		if (strncmp(token, mine, strlen(mine)) != 0)
		{
			MoveNote(o, o->src_name, object, "kept: made by another router");
			continue;
		}
		SpiRun(psprintf("SELECT move_id, parent, first_gene, last_gene, state, "
						"coalesce(finished_at OPERATOR(pg_catalog.>=) pg_catalog.transaction_timestamp(), false) "
						"FROM %s WHERE token OPERATOR(pg_catalog.=) %s",
						MoveExt(o, "snowseq_moves"), quote_literal_cstr(token)), SPI_OK_SELECT);
		if (SPI_processed == 1)
		{
			bool		isnull;
			MoveStateId state = MoveStateFromName(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5));

			o->id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
			o->parent = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
			o->first = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
			o->last = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
			/* a move still under way, or to be resolved, owns its objects */
			if (state != MOVE_STATE_DONE && state != MOVE_STATE_FAILED)
				continue;
			switched = state == MOVE_STATE_DONE;
			/* a keep view: until the router's partition reads the table again, committed */
			if (strcmp(kind, "view") == 0 &&
				DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull)))
			{
				MoveNote(o, o->src_name, object, "kept: its move finished in this transaction (the next cleanup drops it)");
				continue;
			}
		}
		if (strcmp(kind, "view") == 0 &&
			strcmp(SpiValue(o->cxt, psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_foreign_table f "
											 "JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) f.ftserver, "
											 "pg_catalog.pg_options_to_table(f.ftoptions) x "
											 "WHERE s.srvname OPERATOR(pg_catalog.=) %s AND x.option_name OPERATOR(pg_catalog.=) 'table_name' "
											 "AND x.option_value OPERATOR(pg_catalog.=) (pg_catalog.parse_ident(%s))"
											 "[pg_catalog.array_length(pg_catalog.parse_ident(%s), 1)]",
											 quote_literal_cstr(o->src_name), quote_literal_cstr(name), quote_literal_cstr(name))),
				   "0") != 0)
		{
			MoveNote(o, o->src_name, object, "kept: a partition of the router reads it");
			continue;
		}
		o->token = token;
		if (strcmp(kind, "prepared transaction") == 0)
		{
			/* it holds its table for ever: the record decides, or presumed abort */
			RemoteCommand(rc, psprintf("%s PREPARED %s", switched ? "COMMIT" : "ROLLBACK", quote_literal_cstr(name)),
						  "resolve the prepared transaction");
			MoveNote(o, o->src_name, object, switched ? "committed" : "rolled back");
			continue;
		}
		if (strcmp(kind, "replication slot") == 0)
		{
			MoveDropSlotNamed(rc, name);
			MoveNote(o, o->src_name, object, psprintf("dropped (it kept %s of WAL)", wal));
			continue;
		}
		if (strcmp(kind, "publication") == 0)
			RemoteCommand(rc, psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(name)), "drop the publication");
		else if (strcmp(kind, "subscription") == 0)
		{
			o->dst_name = o->src_name;
			o->dst = o->src;
			MoveDropSubscription(o);
			o->dst = NULL;
		}
		else if (strcmp(kind, "view") == 0)
			RemoteCommand(rc, psprintf("DROP VIEW IF EXISTS %s", name), "drop the view of the rows that stayed");
		else
			RemoteCommand(rc, psprintf("DROP TABLE IF EXISTS %s", name), "drop the half copy");
		MoveNote(o, o->src_name, object, "dropped");
	}
	PQclear(res);
}

/* Look for leftovers of moves on every server that moves have used. */
void
CleanupOrphans(Move *collect)
{
	List	   *servers = NIL;
	ListCell   *lc;
	char	   *node = MoveLocalNode(collect);

	SpiRun(psprintf("SELECT DISTINCT x.s FROM (SELECT source_server s FROM %s UNION SELECT dest_server FROM %s) x "
					"WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_foreign_server f WHERE f.srvname OPERATOR(pg_catalog.=) x.s) ORDER BY 1",
					MoveExt(collect, "snowseq_moves"), MoveExt(collect, "snowseq_moves")), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
		servers = lappend(servers, MemoryContextStrdup(collect->cxt,
													   SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)));
	foreach(lc, servers)
	{
		Move	   *o = MoveNew(collect->ext);
		ErrorData  *err;

		o->src_name = lfirst(lc);
		o->node = node;
		err = MoveTry(o, CleanupOrphansOn);
		if (err != NULL)
		{
			o->id = 0;
			MoveNote(o, o->src_name, "server", psprintf("not checked: %s", err->message));
		}
		MoveCloseSessions(o);
		MoveReportCopy(collect, o);
		MemoryContextDelete(o->cxt);
	}
}
