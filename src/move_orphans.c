/*
 * move_orphans.c
 *		Elastic shards: the orphans of moves, on every server.
 *
 * What moves of this router left on the servers after they ended: objects
 * their records list (snowseq_move_objects), and replication slots,
 * publications, subscriptions, half copies and keep views of moves that
 * are over or unknown (snowseq_move_cleanup() and the resolver call it).
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

#include "move_cleanup.h"
#include "move_common.h"
#include "move_group.h"
#include "move_orphans.h"
#include "move_plan.h"
#include "move_repl.h"
#include "move_switch.h"
#include "snowseq.h"
#include "sqlrun.h"
#include "testpoint.h"

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
		/* recorded objects are a move's (CleanupRecorded drops those of moves that are over) */
		if (MoveObjectsRecorded(o->ext) &&
			SpiValue(o->cxt, psprintf("SELECT move_id FROM %s WHERE server OPERATOR(pg_catalog.=) %s "
									  "AND kind::pg_catalog.text OPERATOR(pg_catalog.=) %s AND name OPERATOR(pg_catalog.=) %s",
									  MoveExt(o, "snowseq_move_objects"), quote_literal_cstr(o->src_name),
									  quote_literal_cstr(kind), quote_literal_cstr(name))) != NULL)
			continue;
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

/*
 * Step (on a Move that stands for one recorded object: o->src_name its
 * server, o->node its kind, o->token its name, o->parent_q the token of
 * its move's lead): drop an object a move recorded.  Each kind is dropped
 * only if it is there and, for a table, only if it is the partitioned
 * table of a way back that the move marked.
 */
static void
CleanupRecordedOne(Move *o)
{
	RemoteConn *rc = MoveSrc(o);
	const char *kind = o->node;
	const char *name = o->token;
	char	   *v;

	if (strcmp(kind, MoveObjectName(MOVE_OBJECT_PUBLICATION)) == 0)
		RemoteCommand(rc, psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(name)), "drop the publication");
	else if (strcmp(kind, MoveObjectName(MOVE_OBJECT_SLOT)) == 0)
	{
		v = RemoteValue(rc, psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_replication_slots "
									 "WHERE slot_name OPERATOR(pg_catalog.=) %s", quote_literal_cstr(name)),
						"look up the replication slot");
		if (strcmp(v, "0") != 0)
			MoveDropSlotNamed(rc, name);
	}
	else if (strcmp(kind, MoveObjectName(MOVE_OBJECT_SUBSCRIPTION)) == 0)
		(void) MoveDropSubscriptionNamed(rc, name, false);
	else if (strcmp(kind, MoveObjectName(MOVE_OBJECT_FENCE)) == 0)
		RemoteCommand(rc, psprintf("SELECT %s(%s)", MoveRemoteExt(rc, "snowseq_fence_drop"), quote_literal_cstr(name)),
					  "remove the fence");
	else if (strcmp(kind, MoveObjectName(MOVE_OBJECT_TABLE)) == 0)
	{
		/* marked after the move's leading token */
		Move	   *lead = MoveNew(o->ext);

		lead->token = o->parent_q;
		MoveBackDropTable(rc, name, MoveBackMark(lead));
		MemoryContextDelete(lead->cxt);
	}
	SpiRun(psprintf("DELETE FROM %s WHERE server OPERATOR(pg_catalog.=) %s AND kind::pg_catalog.text OPERATOR(pg_catalog.=) %s "
					"AND name OPERATOR(pg_catalog.=) %s", MoveExt(o, "snowseq_move_objects"), quote_literal_cstr(o->src_name),
					quote_literal_cstr(kind), quote_literal_cstr(name)), SPI_OK_DELETE);
	MoveNote(o, o->src_name, psprintf("%s %s", kind, name), "dropped");
}

/*
 * Drop the objects moves recorded whose move is over (done, failed,
 * reverted, or its record gone): what a failure, a crash or a server that
 * was down left of the replication back to the source and of reverts.
 */
void
CleanupRecorded(Move *collect)
{
	SPITupleTable *rows;
	uint64		n;

	if (!MoveObjectsRecorded(collect->ext))
		return;
	SpiRun(psprintf("SELECT o.move_id, o.server, o.kind::pg_catalog.text, o.name, lead.token "
					"FROM %s o LEFT JOIN %s m ON m.move_id OPERATOR(pg_catalog.=) o.move_id "
					"LEFT JOIN %s lead ON lead.move_id OPERATOR(pg_catalog.=) coalesce(m.group_move, m.move_id) "
					"WHERE lead.move_id IS NULL OR lead.state OPERATOR(pg_catalog.=) ANY (%s) ORDER BY o.move_id, o.kind DESC",
					MoveExt(collect, "snowseq_move_objects"), MoveExt(collect, "snowseq_moves"), MoveExt(collect, "snowseq_moves"),
					MoveStateList(MOVE_STATE_DONE, MOVE_STATE_FAILED, MOVE_STATE_ROLLBACK, MOVE_STATE_REVERTED, MOVE_STATE_NONE)),
		   SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		Move	   *o = MoveNew(collect->ext);
		bool		isnull;
		ErrorData  *err;
		MemoryContext old = MemoryContextSwitchTo(o->cxt);

		o->id = DatumGetInt64(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull));
		o->src_name = SPI_getvalue(rows->vals[i], rows->tupdesc, 2);
		o->node = SPI_getvalue(rows->vals[i], rows->tupdesc, 3);
		o->token = SPI_getvalue(rows->vals[i], rows->tupdesc, 4);
		o->parent_q = SPI_getvalue(rows->vals[i], rows->tupdesc, 5);
		MemoryContextSwitchTo(old);
		if (GetForeignServerByName(o->src_name, true) == NULL)
			MoveNote(o, o->src_name, psprintf("%s %s", o->node, o->token), "kept: the server is not known here");
		else if ((err = MoveTry(o, CleanupRecordedOne)) != NULL)
			MoveNote(o, o->src_name, psprintf("%s %s", o->node, o->token), psprintf("left: %s", err->message));
		MoveCloseSessions(o);
		MoveReportCopy(collect, o);
		MemoryContextDelete(o->cxt);
	}
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
