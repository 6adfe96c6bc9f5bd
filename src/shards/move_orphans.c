/*
 * move_orphans.c
 *		Elastic shards: the orphans of moves, on every server.
 *
 * What moves of this router left on the servers after they ended, as their
 * records list them (snowseq_move_objects): every object a move makes is
 * recorded in a router transaction that commits before it is made, so a
 * record whose object is absent is one that was never made or is already
 * gone, and an object no record names is not this router's (another
 * router's, or nobody's): it is never touched.  No name is parsed back.
 */
#include "postgres.h"

#include "access/xact.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "move_cleanup.h"
#include "move_common.h"
#include "move_orphans.h"
#include "move_plan.h"
#include "move_repl.h"
#include "sqlrun.h"

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
			sql = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_xacts WHERE gid OPERATOR(pg_catalog.=) $1::pg_catalog.text "
				"AND database OPERATOR(pg_catalog.=) pg_catalog.current_database())";
			break;
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
		bool		commit = o->lead_state == MOVE_STATE_DONE || o->lead_state == MOVE_STATE_REVERTED;

		/* COMMIT PREPARED takes no parameters: the name is quoted */
		RemoteCommand(rc, commit ? psprintf("COMMIT PREPARED %s", quote_literal_cstr(name)) :
					  psprintf("ROLLBACK PREPARED %s", quote_literal_cstr(name)),
					  "resolve the prepared transaction");
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

/*
 * Drop the objects moves recorded whose move is over (done, failed,
 * reverted, undone with leftovers, or its record gone): what a failure, a
 * crash, an interrupted finish or a server that was down left behind.
 * Objects of moves still under way, or to be resolved (CleanupMoves runs
 * first), are kept, and so is the copy of a move undone with leftovers:
 * its undo kept it, the copy may be all there is of the rows.
 */
void
CleanupRecorded(MoveOp *collect)
{
	SPITupleTable *rows;
	uint64		n;

	if (!MoveObjectsRecorded(collect->ext))
		return;
	/* prepared transactions first: they hold the tables the others depend on */
	MoveRecordsRunParams(collect->ext, psprintf("SELECT o.move_id, o.server, o.kind::pg_catalog.text, o.name, lead.token, lead.state, "
					"coalesce(lead.finished_at OPERATOR(pg_catalog.>=) pg_catalog.transaction_timestamp(), false), m.token, "
					"m.parent, m.first_gene, m.last_gene "
					"FROM %s o LEFT JOIN %s m ON m.move_id OPERATOR(pg_catalog.=) o.move_id "
					"LEFT JOIN %s lead ON lead.move_id OPERATOR(pg_catalog.=) coalesce(m.group_move, m.move_id) "
					"WHERE lead.move_id IS NULL OR lead.state::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]) "
					"ORDER BY o.move_id, o.kind::pg_catalog.text OPERATOR(pg_catalog.=) $1::pg_catalog.text DESC, o.kind DESC",
					MoveOpExt(collect, "snowseq_move_objects"), MoveOpExt(collect, "snowseq_moves"), MoveOpExt(collect, "snowseq_moves")),
		   SQL_ARGS(MoveObjectName(MOVE_OBJECT_PREPARED),
					MoveStateArray(MOVE_STATE_DONE, MOVE_STATE_FAILED, MOVE_STATE_ROLLBACK, MOVE_STATE_REVERTED, MOVE_STATE_NONE)),
		   SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		Move	   *m = MoveNew(collect->ext);
		MoveCleanupItem item;
		MoveCleanupItem *o = &item;
		bool		isnull;
		bool		finished_now;
		char	   *kept = NULL;
		ErrorData  *err;
		MemoryContext old = MemoryContextSwitchTo(m->op.cxt);
		char	   *object;

		memset(o, 0, sizeof(MoveCleanupItem));
		o->move = m;
		m->op.id = DatumGetInt64(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull));
		m->src_name = SPI_getvalue(rows->vals[i], rows->tupdesc, 2);
		o->kind = MoveObjectFromName(SPI_getvalue(rows->vals[i], rows->tupdesc, 3));
		o->name = SPI_getvalue(rows->vals[i], rows->tupdesc, 4);
		o->lead_token = SPI_getvalue(rows->vals[i], rows->tupdesc, 5);
		o->lead_state = MoveStateFromName(SPI_getvalue(rows->vals[i], rows->tupdesc, 6));
		m->op.state = o->lead_state;
		finished_now = DatumGetBool(SPI_getbinval(rows->vals[i], rows->tupdesc, 7, &isnull));
		m->op.token = SPI_getvalue(rows->vals[i], rows->tupdesc, 8);
		m->parent = DatumGetObjectId(SPI_getbinval(rows->vals[i], rows->tupdesc, 9, &isnull));
		m->first = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 10, &isnull));
		m->last = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 11, &isnull));
		object = psprintf("%s %s", MoveObjectName(o->kind), o->name);
		MemoryContextSwitchTo(old);
		if (m->op.token == NULL)
			m->op.token = "";
		if (o->kind == MOVE_OBJECT_COPY && o->lead_state == MOVE_STATE_ROLLBACK)
			kept = "kept: its move was undone with leftovers";
		else if (o->kind == MOVE_OBJECT_VIEW)
			kept = CleanupViewKept(o, finished_now);
		if (kept != NULL)
			MoveNote(m, m->src_name, object, kept);
		else if (GetForeignServerByName(m->src_name, true) == NULL)
			MoveNote(m, m->src_name, object, "kept: the server is not known here");
		else if ((err = CleanupRecordedTry(o)) != NULL)
			MoveNote(m, m->src_name, object, psprintf("left: %s", err->message));
		MoveCloseSessions(m);
		MoveReportCopy(collect, &m->op);
		MemoryContextDelete(m->op.cxt);
	}
}
