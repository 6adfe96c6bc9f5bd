/*
 * move_orphans.c
 *		Elastic shards: the orphans of moves, on every server.
 *
 * What moves and merges of this router left on the servers, as their
 * records list them (snowseq_move_objects): every object a move or a merge
 * makes is recorded, with its cleanup policy, in a router transaction that
 * commits before it is made, so a record whose object is absent is one that
 * was never made or is already gone, and an object no record names is not
 * this router's (another router's, or nobody's): it is never touched.  No
 * name is parsed back.  Once the operation is over (or, for a merge, as
 * its undo or its finish), each object is removed if its policy says so for
 * the way the operation ended, and its record forgotten; one that could not
 * be removed (a table another one's foreign key needs) is tried again after
 * the others, so that one pass removes all it can.
 */
#include "postgres.h"

#include "access/xact.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "merge_records.h"
#include "move_cleanup.h"
#include "move_common.h"
#include "move_orphans.h"
#include "move_plan.h"
#include "move_repl.h"
#include "move_switch.h"
#include "sqlrun.h"
#include "twophase.h"

/* Whether an object of a kind is there, on the server of a Move (rc). */
static bool
CleanupObjectThere(RemoteConn *rc, MoveObjectKind kind, const char *name)
{
	const char *sql;

	switch (kind)
	{
		case MOVE_OBJECT_PUBLICATION:
			sql = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname OPERATOR(pg_catalog.=) $1::pg_catalog.name)";
			break;
		case MOVE_OBJECT_SLOT:
			sql = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name)";
			break;
		case MOVE_OBJECT_SUBSCRIPTION:
			sql = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_subscription WHERE subname OPERATOR(pg_catalog.=) $1::pg_catalog.name "
				"AND subdbid OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_database "
				"WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()))";
			break;
		case MOVE_OBJECT_PREPARED:
			return TwoPhaseExists(rc, name, "look up an object of a move");
		case MOVE_OBJECT_FENCE:
			return true;		/* snowseq_fence_drop says */
		default:
			sql = "SELECT pg_catalog.to_regclass($1::pg_catalog.text) IS NOT NULL";
			break;
	}
	return strcmp(RemoteValueParams(rc, sql, SQL_ARGS(name), "look up an object of a move"), "t") == 0;
}

/*
 * Step (on one recorded object: o->move->src_name its server, o->kind and
 * o->name the object, o->move->op.token the token of its move,
 * o->lead_token the token of its move's lead, o->lead_state the lead's
 * state, which is over): drop an object a move recorded, if it is there.
 * A prepared transaction commits if its move switched (done, or reverted
 * since), else it rolls back; a table is dropped only if it is the move's
 * (its mark says so); the caller decided on a keep view.
 */
static void
CleanupRecordedOne(MoveCleanupItem *o)
{
	Move	   *m = o->move;
	RemoteConn *rc = MoveSrc(m);
	const char *name = o->name;
	char	   *object = psprintf("%s %s", MoveObjectName(o->kind), name);
	char	   *action = "dropped";
	char	   *v;

	if (!CleanupObjectThere(rc, o->kind, name))
		action = NULL;
	else if (o->kind == MOVE_OBJECT_PUBLICATION)
		RemoteCommand(rc, psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(name)), "drop the publication");
	else if (o->kind == MOVE_OBJECT_SLOT)
	{
		v = RemoteValueParams(rc, "SELECT coalesce(pg_catalog.pg_size_pretty(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), "
							  "restart_lsn)), '?') FROM pg_catalog.pg_replication_slots "
							  "WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name",
							  SQL_ARGS(name), "read the replication slot");
		MoveDropSlotNamed(rc, name);
		action = psprintf("dropped (it kept %s of WAL)", v ? v : "?");
	}
	else if (o->kind == MOVE_OBJECT_SUBSCRIPTION)
		(void) MoveDropSubscriptionNamed(rc, name, false);
	else if (o->kind == MOVE_OBJECT_FENCE)
	{
		v = RemoteValueParams(rc, psprintf("SELECT %s($1::pg_catalog.text)", MoveRemoteExt(rc, "snowseq_fence_drop")),
							  SQL_ARGS(name), "remove the fence");
		action = strcmp(v, "t") == 0 ? "removed" : NULL;
	}
	else if (o->kind == MOVE_OBJECT_PREPARED)
	{
		/* it holds its table for ever: the record decides, or presumed abort */
		bool		commit = o->lead_state == MOVE_STATE_DONE || o->lead_state == MOVE_STATE_REVERTED ||
			o->lead_state == MOVE_STATE_SWITCHED;

		TwoPhaseEnd(rc, name, commit, "resolve the prepared transaction");
		action = commit ? "committed" : "rolled back";
	}
	else if (o->kind == MOVE_OBJECT_VIEW)
		RemoteCommand(rc, psprintf("DROP VIEW IF EXISTS %s", name), "drop the view of the rows that stayed");
	else if (o->kind == MOVE_OBJECT_COPY)
	{
		/* the move's half copy only: its mark names the move */
		v = RemoteValueParams(rc, "SELECT pg_catalog.obj_description(pg_catalog.to_regclass($1::pg_catalog.text), 'pg_class') "
							  "OPERATOR(pg_catalog.=) $2::pg_catalog.text", SQL_ARGS(name, MoveCopyMark(m)),
							  "look up the copy");
		if (v != NULL && strcmp(v, "t") == 0)
			RemoteCommand(rc, psprintf("DROP TABLE IF EXISTS %s", name), "drop the half copy");
		else
			action = NULL;
	}
	else if (o->kind == MOVE_OBJECT_MERGED)
	{
		/* the merge's table only while its mark names the merge (the switch removes it) */
		Move	   *lead = MoveNew(m->op.ext);

		lead->op.token = o->lead_token;
		object = psprintf("table %s", name);
		v = RemoteValueParams(rc, "SELECT pg_catalog.obj_description(pg_catalog.to_regclass($1::pg_catalog.text), 'pg_class') "
							  "OPERATOR(pg_catalog.=) $2::pg_catalog.text", SQL_ARGS(name, MergeMark(lead)),
							  "look up the merged table");
		MemoryContextDelete(lead->op.cxt);
		if (v != NULL && strcmp(v, "t") == 0)
			RemoteCommand(rc, psprintf("DROP TABLE %s", name), "drop the merged table");
		else
			action = NULL;
	}
	else if (o->kind == MOVE_OBJECT_MERGE_TRIGGER)
	{
		/* the record names the table the triggers are on */
		object = psprintf("trigger snowseq_merge on %s", name);
		v = RemoteValueParams(rc, "SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger WHERE tgrelid "
							  "OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text) "
							  "AND tgname OPERATOR(pg_catalog.=) ANY ('{snowseq_merge,snowseq_merge_truncate}')",
							  SQL_ARGS(name), "look up the merge trigger");
		if (strcmp(v, "0") != 0)
			MoveTriggerDdl(rc, psprintf("DROP TRIGGER IF EXISTS snowseq_merge ON %s; "
										"DROP TRIGGER IF EXISTS snowseq_merge_truncate ON %s", name, name),
						   "drop the merge trigger");
		else
			action = NULL;
	}
	else if (o->kind == MOVE_OBJECT_TABLE)
	{
		/* marked after the move's leading token */
		Move	   *lead = MoveNew(m->op.ext);

		lead->op.token = o->lead_token;
		MoveBackDropTable(rc, name, MoveBackMark(lead));
		MemoryContextDelete(lead->op.cxt);
	}
	MoveForgetObject(m, m->src_name, o->kind, name);
	if (action != NULL)
		MoveNote(m, m->src_name, object, action);
}

/*
 * Run CleanupRecordedOne in a subtransaction, as MoveTry runs a step of a
 * move: the error it raised, in the move's memory, or NULL.
 */
static ErrorData *
CleanupRecordedTry(MoveCleanupItem *o)
{
	MemoryContext old = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(old);
	PG_TRY();
	{
		CleanupRecordedOne(o);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(old);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(o->move->op.cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(old);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	return edata;
}

/*
 * Whether a keep view on a server must stay: a partition of the router
 * reads it, or its move finished in this transaction (the router's
 * partitions read the tables again only once it commits).
 */
static char *
CleanupViewKept(MoveCleanupItem *o, bool finished_now)
{
	if (finished_now)
		return "kept: its move finished in this transaction (the next cleanup drops it)";
	if (strcmp(SpiValueParams(o->move->op.cxt, "SELECT pg_catalog.count(*) FROM pg_catalog.pg_foreign_table f "
							  "JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) f.ftserver, "
							  "pg_catalog.pg_options_to_table(f.ftoptions) x "
							  "WHERE s.srvname OPERATOR(pg_catalog.=) $1::pg_catalog.name "
							  "AND x.option_name OPERATOR(pg_catalog.=) 'table_name' "
							  "AND x.option_value OPERATOR(pg_catalog.=) (pg_catalog.parse_ident($2::pg_catalog.text))"
							  "[pg_catalog.array_length(pg_catalog.parse_ident($2::pg_catalog.text), 1)]",
							  SQL_ARGS(o->move->src_name, o->name)), "0") != 0)
		return "kept: a partition of the router reads it";
	return NULL;
}

/* The columns both queries of records return, in CleanupRecordedRow's order. */
#define CLEANUP_COLUMNS "o.server, o.kind::pg_catalog.text AS kind, o.name, o.policy::pg_catalog.text, "
/*
 * The rows of a query of records (its last column the kind, as the type
 * orders it), by operation, prepared transactions first (they hold the
 * tables the others depend on), then by kind, last first (a merge's
 * triggers before its merged table).
 */
#define CLEANUP_ORDERED(q) psprintf("SELECT * FROM (%s) r ORDER BY r.merge, r.id, r.kind OPERATOR(pg_catalog.=) $1::pg_catalog.text DESC, " \
									"r.kind_order DESC", q)

/* Whether a recorded object's policy removes it, after its operation ended so (done: done, or switched). */
static bool
CleanupPolicyDrops(const char *policy, bool done)
{
	if (strcmp(policy, MoveCleanupPolicyName(MOVE_CLEANUP_ON_FAILURE)) == 0)
		return !done;
	if (strcmp(policy, MoveCleanupPolicyName(MOVE_CLEANUP_ON_SUCCESS)) == 0)
		return done;
	return true;
}

/*
 * One record of CleanupRecorded's or CleanupRecordedMerge's query (columns:
 * operation id, whether a merge's, server, kind, name, policy, the lead's
 * token and state, whether it finished in this transaction, its own token,
 * parent, first and last gene): removed as its policy says, or kept, and
 * the record forgotten once the object is gone, with a line in the report
 * of its Move (use, a merge's, or one made for it and reported into
 * collect).  Returns false if removing it failed, and, unless final (the
 * last try: the error goes into the report), leaves it for another try.
 */
static bool
CleanupRecordedRow(MoveOp *collect, Move *use, SPITupleTable *rows, uint64 i, bool final, char **error)
{
	Move	   *m = use != NULL ? use : MoveNew(collect->ext);
	MoveCleanupItem item;
	MoveCleanupItem *o = &item;
	bool		isnull;
	bool		finished_now;
	bool		merge;
	bool		done;
	char	   *policy;
	char	   *kept = NULL;
	ErrorData  *err = NULL;
	MemoryContext old = MemoryContextSwitchTo(m->op.cxt);
	char	   *object;
	char	   *server;

	memset(o, 0, sizeof(MoveCleanupItem));
	o->move = m;
	merge = DatumGetBool(SPI_getbinval(rows->vals[i], rows->tupdesc, 2, &isnull));
	server = SPI_getvalue(rows->vals[i], rows->tupdesc, 3);
	o->kind = MoveObjectFromName(SPI_getvalue(rows->vals[i], rows->tupdesc, 4));
	o->name = SPI_getvalue(rows->vals[i], rows->tupdesc, 5);
	policy = SPI_getvalue(rows->vals[i], rows->tupdesc, 6);
	o->lead_token = SPI_getvalue(rows->vals[i], rows->tupdesc, 7);
	o->lead_state = MoveStateFromName(SPI_getvalue(rows->vals[i], rows->tupdesc, 8));
	finished_now = DatumGetBool(SPI_getbinval(rows->vals[i], rows->tupdesc, 9, &isnull));
	if (use == NULL)
	{
		m->op.id = DatumGetInt64(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull));
		m->src_name = server;
		m->op.state = o->lead_state;
		m->op.token = SPI_getvalue(rows->vals[i], rows->tupdesc, 10);
		m->parent = DatumGetObjectId(SPI_getbinval(rows->vals[i], rows->tupdesc, 11, &isnull));
		m->first = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 12, &isnull));
		m->last = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 13, &isnull));
		if (m->op.token == NULL)
			m->op.token = "";
	}
	object = psprintf("%s %s", MoveObjectName(o->kind), o->name);
	MemoryContextSwitchTo(old);
	/* a record gone (no state) is an operation that did not end done */
	done = o->lead_state == MOVE_STATE_DONE || (merge && o->lead_state == MOVE_STATE_SWITCHED);
	if (o->kind == MOVE_OBJECT_COPY && o->lead_state == MOVE_STATE_ROLLBACK)
		kept = "kept: its move was undone with leftovers";
	else if (o->kind == MOVE_OBJECT_VIEW)
		kept = CleanupViewKept(o, finished_now);
	if (kept != NULL)
		MoveNote(m, server, object, kept);
	else if (!CleanupPolicyDrops(policy, done))
		MoveForgetObject(m, server, o->kind, o->name);	/* it stays: its operation's outcome keeps it */
	else if (GetForeignServerByName(server, true) == NULL)
		MoveNote(m, server, object, "kept: the server is not known here");
	else if ((err = CleanupRecordedTry(o)) != NULL && final)
	{
		MoveNote(m, server, object, psprintf("left: %s", err->message));
		if (error != NULL)
			*error = err->message;
	}
	if (use == NULL)
	{
		MoveCloseSessions(m);
		if (err == NULL || final)
			MoveReportCopy(collect, &m->op);
		MemoryContextDelete(m->op.cxt);
	}
	return err == NULL;
}

/*
 * Run CleanupRecordedRow on each row of a query of records, passes after
 * passes over those that failed while a pass removes something (a table
 * that another's foreign key needs goes once that one is gone), the last
 * try of each reporting its error (the last one into *error, if error is
 * not NULL).  Returns how many could not be removed.
 */
static int
CleanupRecordedRows(MoveOp *collect, Move *use, SPITupleTable *rows, uint64 n, char **error)
{
	bool	   *pending = palloc(sizeof(bool) * (n + 1));
	uint64		left = n;

	for (uint64 i = 0; i < n; i++)
		pending[i] = true;
	while (left > 0)
	{
		uint64		before = left;

		for (uint64 i = 0; i < n; i++)
			if (pending[i] && CleanupRecordedRow(collect, use, rows, i, false, error))
			{
				pending[i] = false;
				left--;
			}
		if (left == before)
		{
			/* no progress: a last try of each, which reports what stops it */
			left = 0;
			for (uint64 i = 0; i < n; i++)
				if (pending[i] && !CleanupRecordedRow(collect, use, rows, i, true, error))
					left++;
			break;
		}
	}
	pfree(pending);
	return (int) left;
}

/*
 * Drop the objects moves and merges recorded whose operation is over, as
 * their policies say: a move done, failed, reverted, undone with leftovers,
 * or its record gone; a merge done or failed, or its record gone (one
 * undone with leftovers is undone again by MergeCleanup, which runs
 * first): what a failure, a crash, an interrupted finish or a server that
 * was down left behind.  Objects of operations still under way, or to be
 * resolved (CleanupMoves runs first), are kept, and so is the copy of a
 * move undone with leftovers: its undo kept it, the copy may be all there
 * is of the rows.
 */
void
CleanupRecorded(MoveOp *collect)
{
	if (!MoveObjectsRecorded(collect->ext))
		return;
	MoveRecordsRunParams(collect->ext, CLEANUP_ORDERED(psprintf("SELECT o.move_id AS id, false AS merge, " CLEANUP_COLUMNS "lead.token, lead.state::pg_catalog.text, "
					"coalesce(lead.finished_at OPERATOR(pg_catalog.>=) pg_catalog.transaction_timestamp(), false), m.token, "
					"m.parent, m.first_gene, m.last_gene, o.kind AS kind_order "
					"FROM %s o LEFT JOIN %s m ON m.move_id OPERATOR(pg_catalog.=) o.move_id "
					"LEFT JOIN %s lead ON lead.move_id OPERATOR(pg_catalog.=) coalesce(m.group_move, m.move_id) "
					"WHERE o.move_id IS NOT NULL AND (lead.move_id IS NULL "
					"OR lead.state::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])) "
					"UNION ALL "
					"SELECT o.merge_id, true, " CLEANUP_COLUMNS "lead.token, lead.state::pg_catalog.text, false, g.token, "
					"g.parent, g.first_gene, g.last_gene, o.kind "
					"FROM %s o LEFT JOIN %s g ON g.merge_id OPERATOR(pg_catalog.=) o.merge_id "
					"LEFT JOIN %s lead ON lead.merge_id OPERATOR(pg_catalog.=) coalesce(g.group_merge, g.merge_id) "
					"WHERE o.merge_id IS NOT NULL AND (lead.merge_id IS NULL "
					"OR lead.state::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.text[]))",
					MoveOpExt(collect, "snowseq_move_objects"), MoveOpExt(collect, "snowseq_moves"), MoveOpExt(collect, "snowseq_moves"),
					MoveOpExt(collect, "snowseq_move_objects"), MoveOpExt(collect, "snowseq_merges"), MoveOpExt(collect, "snowseq_merges"))),
		   SQL_ARGS(MoveObjectName(MOVE_OBJECT_PREPARED),
					MoveStateArray(MOVE_STATE_DONE, MOVE_STATE_FAILED, MOVE_STATE_ROLLBACK, MOVE_STATE_REVERTED, MOVE_STATE_NONE),
					MergeStatesOver()),
		   SPI_OK_SELECT);
	(void) CleanupRecordedRows(collect, NULL, SPI_tuptable, SPI_processed, NULL);
}

/*
 * Remove the objects a merge recorded (m: its lead, whose session and
 * report serve), as their policies say for the way the merge ends, which
 * its committed state tells: switched (its finish: the prepared
 * transaction commits, the merged tables and triggers stay or went with
 * the tables merged) or not (its undo: the prepared transaction rolls
 * back, the triggers and the merged tables still marked as the merge's
 * are dropped).  The same code as CleanupRecorded, on the merge's records
 * alone.  Returns how many could not be removed (*error: the last error,
 * in m->op.cxt).
 */
int
CleanupRecordedMerge(Move *m, char **error)
{
	StringInfoData ids;
	ListCell   *lc;

	if (!MoveObjectsRecorded(m->op.ext))
		return 0;
	initStringInfo(&ids);
	foreach(lc, MoveGroup(m))
		appendStringInfo(&ids, "%s" INT64_FORMAT, ids.len ? ", " : "", ((Move *) lfirst(lc))->op.id);
	MoveRecordsRunParams(m->op.ext, CLEANUP_ORDERED(psprintf("SELECT o.merge_id AS id, true AS merge, " CLEANUP_COLUMNS
														  "lead.token, lead.state::pg_catalog.text, false, o.kind AS kind_order "
														  "FROM %s o, %s lead WHERE lead.merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT " "
														  "AND o.merge_id OPERATOR(pg_catalog.=) ANY (ARRAY[%s]::pg_catalog.int8[])",
														  MoveExt(m, "snowseq_move_objects"), MoveExt(m, "snowseq_merges"), m->op.id, ids.data)),
						 SQL_ARGS(MoveObjectName(MOVE_OBJECT_PREPARED)), SPI_OK_SELECT);
	return CleanupRecordedRows(NULL, m, SPI_tuptable, SPI_processed, error);
}
