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

#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

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
 * Step (on a Move that stands for one recorded object: o->src_name its
 * server, o->obj_kind and o->obj_name the object, o->token the token of
 * its move, o->parent_q the token of its move's lead, o->state the lead's
 * state, which is over): drop an object a move recorded, if it is there.
 * A prepared transaction commits if its move switched (done, or reverted
 * since), else it rolls back; a table is dropped only if it is the move's
 * (its mark says so); the caller decided on a keep view.
 */
static void
CleanupRecordedOne(Move *o)
{
	RemoteConn *rc = MoveSrc(o);
	const char *name = o->obj_name;
	char	   *object = psprintf("%s %s", MoveObjectName(o->obj_kind), name);
	char	   *action = "dropped";
	char	   *v;

	if (!CleanupObjectThere(rc, o->obj_kind, name))
		action = NULL;
	else if (o->obj_kind == MOVE_OBJECT_PUBLICATION)
		RemoteCommand(rc, psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(name)), "drop the publication");
	else if (o->obj_kind == MOVE_OBJECT_SLOT)
	{
		v = RemoteValueParams(rc, "SELECT coalesce(pg_catalog.pg_size_pretty(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), "
							  "restart_lsn)), '?') FROM pg_catalog.pg_replication_slots "
							  "WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name",
							  SQL_ARGS(name), "read the replication slot");
		MoveDropSlotNamed(rc, name);
		action = psprintf("dropped (it kept %s of WAL)", v ? v : "?");
	}
	else if (o->obj_kind == MOVE_OBJECT_SUBSCRIPTION)
		(void) MoveDropSubscriptionNamed(rc, name, false);
	else if (o->obj_kind == MOVE_OBJECT_FENCE)
	{
		v = RemoteValueParams(rc, psprintf("SELECT %s($1::pg_catalog.text)", MoveRemoteExt(rc, "snowseq_fence_drop")),
							  SQL_ARGS(name), "remove the fence");
		action = strcmp(v, "t") == 0 ? "removed" : NULL;
	}
	else if (o->obj_kind == MOVE_OBJECT_PREPARED)
	{
		/* it holds its table for ever: the record decides, or presumed abort */
		bool		commit = o->state == MOVE_STATE_DONE || o->state == MOVE_STATE_REVERTED;

		/* COMMIT PREPARED takes no parameters: the name is quoted */
		RemoteCommand(rc, commit ? psprintf("COMMIT PREPARED %s", quote_literal_cstr(name)) :
					  psprintf("ROLLBACK PREPARED %s", quote_literal_cstr(name)),
					  "resolve the prepared transaction");
		action = commit ? "committed" : "rolled back";
	}
	else if (o->obj_kind == MOVE_OBJECT_VIEW)
		RemoteCommand(rc, psprintf("DROP VIEW IF EXISTS %s", name), "drop the view of the rows that stayed");
	else if (o->obj_kind == MOVE_OBJECT_COPY)
	{
		/* the move's half copy only: its mark names the move */
		v = RemoteValueParams(rc, "SELECT pg_catalog.obj_description(pg_catalog.to_regclass($1::pg_catalog.text), 'pg_class') "
							  "OPERATOR(pg_catalog.=) $2::pg_catalog.text", SQL_ARGS(name, MoveCopyMark(o)),
							  "look up the copy");
		if (v != NULL && strcmp(v, "t") == 0)
			RemoteCommand(rc, psprintf("DROP TABLE IF EXISTS %s", name), "drop the half copy");
		else
			action = NULL;
	}
	else if (o->obj_kind == MOVE_OBJECT_TABLE)
	{
		/* marked after the move's leading token */
		Move	   *lead = MoveNew(o->ext);

		lead->token = o->parent_q;
		MoveBackDropTable(rc, name, MoveBackMark(lead));
		MemoryContextDelete(lead->cxt);
	}
	MoveForgetObject(o, o->src_name, o->obj_kind, name);
	if (action != NULL)
		MoveNote(o, o->src_name, object, action);
}

/*
 * Whether a keep view on a server must stay: a partition of the router
 * reads it, or its move finished in this transaction (the router's
 * partitions read the tables again only once it commits).
 */
static char *
CleanupViewKept(Move *o, bool finished_now)
{
	if (finished_now)
		return "kept: its move finished in this transaction (the next cleanup drops it)";
	if (strcmp(SpiValueParams(o->cxt, "SELECT pg_catalog.count(*) FROM pg_catalog.pg_foreign_table f "
							  "JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) f.ftserver, "
							  "pg_catalog.pg_options_to_table(f.ftoptions) x "
							  "WHERE s.srvname OPERATOR(pg_catalog.=) $1::pg_catalog.name "
							  "AND x.option_name OPERATOR(pg_catalog.=) 'table_name' "
							  "AND x.option_value OPERATOR(pg_catalog.=) (pg_catalog.parse_ident($2::pg_catalog.text))"
							  "[pg_catalog.array_length(pg_catalog.parse_ident($2::pg_catalog.text), 1)]",
							  SQL_ARGS(o->src_name, o->obj_name)), "0") != 0)
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
CleanupRecorded(Move *collect)
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
					MoveExt(collect, "snowseq_move_objects"), MoveExt(collect, "snowseq_moves"), MoveExt(collect, "snowseq_moves")),
		   SQL_ARGS(MoveObjectName(MOVE_OBJECT_PREPARED),
					MoveStateArray(MOVE_STATE_DONE, MOVE_STATE_FAILED, MOVE_STATE_ROLLBACK, MOVE_STATE_REVERTED, MOVE_STATE_NONE)),
		   SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		Move	   *o = MoveNew(collect->ext);
		bool		isnull;
		bool		finished_now;
		char	   *kept = NULL;
		ErrorData  *err;
		MemoryContext old = MemoryContextSwitchTo(o->cxt);

		o->id = DatumGetInt64(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull));
		o->src_name = SPI_getvalue(rows->vals[i], rows->tupdesc, 2);
		o->obj_kind = MoveObjectFromName(SPI_getvalue(rows->vals[i], rows->tupdesc, 3));
		o->obj_name = SPI_getvalue(rows->vals[i], rows->tupdesc, 4);
		o->parent_q = SPI_getvalue(rows->vals[i], rows->tupdesc, 5);
		o->state = MoveStateFromName(SPI_getvalue(rows->vals[i], rows->tupdesc, 6));
		finished_now = DatumGetBool(SPI_getbinval(rows->vals[i], rows->tupdesc, 7, &isnull));
		o->token = SPI_getvalue(rows->vals[i], rows->tupdesc, 8);
		o->parent = DatumGetObjectId(SPI_getbinval(rows->vals[i], rows->tupdesc, 9, &isnull));
		o->first = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 10, &isnull));
		o->last = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 11, &isnull));
		MemoryContextSwitchTo(old);
		if (o->token == NULL)
			o->token = "";
		if (o->obj_kind == MOVE_OBJECT_COPY && o->state == MOVE_STATE_ROLLBACK)
			kept = "kept: its move was undone with leftovers";
		else if (o->obj_kind == MOVE_OBJECT_VIEW)
			kept = CleanupViewKept(o, finished_now);
		if (kept != NULL)
			MoveNote(o, o->src_name, psprintf("%s %s", MoveObjectName(o->obj_kind), o->obj_name), kept);
		else if (GetForeignServerByName(o->src_name, true) == NULL)
			MoveNote(o, o->src_name, psprintf("%s %s", MoveObjectName(o->obj_kind), o->obj_name),
					 "kept: the server is not known here");
		else if ((err = MoveTry(o, CleanupRecordedOne)) != NULL)
			MoveNote(o, o->src_name, psprintf("%s %s", MoveObjectName(o->obj_kind), o->obj_name),
					 psprintf("left: %s", err->message));
		MoveCloseSessions(o);
		MoveReportCopy(collect, o);
		MemoryContextDelete(o->cxt);
	}
}
