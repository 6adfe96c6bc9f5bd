/*
 * nodes.c
 *		Node ids across a fleet: two servers with the same snowseq.node_id
 *		issue the same IDs, and nothing in either server alone can see it.
 *		A router asks every postgres_fdw server it has a user mapping for.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "guc.h"
#include "nodes.h"
#include "remote.h"
#include "shmem.h"
#include "timeutil.h"

/* What one server says about itself. */
typedef struct NodeInfo
{
	char	   *server;			/* NULL: this server */
	int			node_id;		/* -1: unset */
	bool		known;			/* node id and layout were read */
	int			backfill_id;	/* snowseq.backfill_node_id, -1: off */
	char	   *layout;			/* "t/n/s@unit ms", and the field order */
	int64		epoch_ms;
	char	   *version;		/* snowseq's extension version there */
	char	   *cluster;		/* system identifier: the same for one cluster */
	char	   *problem;
	char	   *clash;			/* its collisions, naming it, or NULL */
} NodeInfo;

/*
 * A layout as the result shows it: the widths of time, node and seq, the
 * unit, and the field order when seq lies above node.
 */
static char *
NodeLayout(const char *t, const char *nb, const char *sb, const char *unit, bool seq_before_node)
{
	return psprintf("%s/%s/%s@%sms%s", t, nb, sb, unit, seq_before_node ? " seq above node" : "");
}

/*
 * Whether a snowseq.layout value puts seq above node: empty or NULL (a
 * server without the setting) is time | node | seq.
 */
static bool
NodeSeqBeforeNode(const char *layout)
{
	char	   *l;
	char	   *seq;
	char	   *node;

	if (layout == NULL || layout[0] == '\0')
		return false;
	l = asc_tolower(layout, strlen(layout));
	seq = strstr(l, "seq");
	node = strstr(l, "node");
	return seq != NULL && node != NULL && seq < node;
}

/* This server, as the others are described. */
static NodeInfo *
NodeLocal(void)
{
	NodeInfo   *n = palloc0(sizeof(NodeInfo));

	n->node_id = snowseq_node_id;
	n->backfill_id = snowseq_backfill_node_id;
	n->known = true;
	n->layout = NodeLayout(psprintf("%d", snowseq_time_bits), psprintf("%d", snowseq_node_bits),
						   psprintf("%d", snowseq_seq_bits), psprintf("%d", snowseq_time_unit_ms),
						   snowseq_seq_before_node);
	n->epoch_ms = SnowseqEpochMs;
	n->cluster = psprintf(UINT64_FORMAT, GetSystemIdentifier());
	if (snowseq_node_id < 0)
		n->problem = pstrdup("snowseq.node_id is not set");
	return n;
}

/* Read what one foreign server says of its node id and layout (RemoteAsk). */
static void
NodeAsk(RemoteConn *rc, void *arg)
{
	NodeInfo   *n = arg;
	PGresult   *res;

	if (rc->extschema == NULL)
	{
		n->problem = pstrdup("snowseq is not installed in its database");
		return;
	}
	n->version = pstrdup(rc->extversion);
	res = RemoteExec(rc, psprintf("SELECT node_id, time_bits, node_bits, seq_bits, time_unit_ms, "
								  "(pg_catalog.date_part('epoch', epoch) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8, "
								  "(SELECT system_identifier FROM pg_catalog.pg_control_system()), "
								  "pg_catalog.current_setting('snowseq.layout', true), "
								  "pg_catalog.current_setting('snowseq.backfill_node_id', true) "
								  "FROM %s.snowseq_status", rc->extschema),
					 "read the node id and layout");
	if (PQgetisnull(res, 0, 0))
		n->problem = pstrdup("snowseq.node_id is not set there");
	else
		n->node_id = atoi(PQgetvalue(res, 0, 0));
	/* a server of 1.1 has neither setting: time | node | seq, no backfill */
	n->layout = NodeLayout(PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
						   PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4),
						   !PQgetisnull(res, 0, 7) && NodeSeqBeforeNode(PQgetvalue(res, 0, 7)));
	if (!PQgetisnull(res, 0, 8) && PQgetvalue(res, 0, 8)[0] != '\0')
		n->backfill_id = atoi(PQgetvalue(res, 0, 8));
	n->epoch_ms = strtoll(PQgetvalue(res, 0, 5), NULL, 10);
	n->cluster = pstrdup(PQgetvalue(res, 0, 6));
	n->known = true;
	PQclear(res);
}

/* Ask one foreign server; what goes wrong becomes its problem, not an ERROR. */
static NodeInfo *
NodeRemote(Oid serverid, const char *name)
{
	NodeInfo   *n = palloc0(sizeof(NodeInfo));
	char	   *problem;

	n->server = pstrdup(name);
	n->node_id = -1;
	n->backfill_id = -1;
	problem = RemoteAsk(serverid, NodeAsk, n);
	if (problem != NULL)
	{
		/* what was read before the failure does not count */
		n->known = false;
		n->problem = psprintf("cannot be asked: %s", problem);
	}
	return n;
}

/* This server and every postgres_fdw server, checked against each other. */
static List *
NodesCheck(void)
{
	List	   *nodes = list_make1(NodeLocal());
	List	   *servers = NIL;
	ListCell   *lc;
	ListCell   *lc2;

	SPI_connect();
	if (SPI_execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'snowseq'",
					true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		((NodeInfo *) linitial(nodes))->version =
			MemoryContextStrdup(CurTransactionContext, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	if (SPI_execute("SELECT s.oid, s.srvname FROM pg_catalog.pg_foreign_server s "
					"JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid OPERATOR(pg_catalog.=) s.srvfdw "
					"WHERE w.fdwname OPERATOR(pg_catalog.=) 'postgres_fdw' ORDER BY s.srvname",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list the foreign servers");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			oid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		MemoryContext old = MemoryContextSwitchTo(CurTransactionContext);

		servers = lappend(servers, list_make2(makeInteger((int) oid), makeString(pstrdup(name))));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();

	foreach(lc, servers)
	{
		List	   *s = lfirst(lc);

		nodes = lappend(nodes, NodeRemote((Oid) intVal(linitial(s)), strVal(lsecond(s))));
	}

	/*
	 * the same node id in two clusters (two databases, or two server
	 * objects, of one cluster share its clock), a backfill node id that is
	 * another cluster's node id or backfill node id, or a layout (widths,
	 * unit and field order) or epoch unlike this server's
	 */
	foreach(lc, nodes)
	{
		NodeInfo   *a = lfirst(lc);
		NodeInfo   *local = linitial(nodes);
		const char *who = a->server ? quote_identifier(a->server) : "this server";
		StringInfoData others;
		StringInfoData problem;
		StringInfoData clash;

		if (!a->known)
			continue;
		initStringInfo(&problem);
		initStringInfo(&clash);
		/* four kinds: my node id or my backfill node id is their node id or theirs */
		for (int kind = 0; kind < 4; kind++)
		{
			int			mine = kind < 2 ? a->node_id : a->backfill_id;
			static const char *const what[4] = {
				"node id", "node id", "backfill node id", "backfill node id"
			};
			static const char *const used[4] = {
				"is also used by", "is also the backfill node id of",
				"is also the node id of", "is also the backfill node id of"
			};

			if (mine < 0)
				continue;
			initStringInfo(&others);
			foreach(lc2, nodes)
			{
				NodeInfo   *b = lfirst(lc2);
				int			theirs = kind % 2 == 0 ? b->node_id : b->backfill_id;

				if (b != a && b->known && theirs == mine && strcmp(b->cluster, a->cluster) != 0)
					appendStringInfo(&others, "%s%s", others.len ? ", " : "",
									 b->server ? quote_identifier(b->server) : "this server");
			}
			if (others.len == 0)
				continue;
			appendStringInfo(&problem, "%s", problem.len ? "; " : "");
			appendStringInfo(&problem, "%s %d %s %s", what[kind], mine, used[kind], others.data);
			appendStringInfo(&clash, "%s", clash.len ? "; " : "");
			appendStringInfo(&clash, "%s %d of %s %s %s", what[kind], mine, who, used[kind], others.data);
		}
		if (problem.len > 0)
		{
			a->clash = clash.data;
			a->problem = psprintf("%s: their IDs collide", problem.data);
		}
		else if (a->node_id < 0)
			continue;
		else if (a != local && strcmp(a->layout, local->layout) != 0)
			a->problem = psprintf("layout %s differs from this server's %s: IDs of different layouts can collide",
								  a->layout, local->layout);
		else if (a != local && a->epoch_ms != local->epoch_ms)
			a->problem = pstrdup("snowseq.epoch differs from this server's: IDs of different epochs can collide");
	}
	return nodes;
}

/*
 * ERROR when a node id collision (of node ids or backfill node ids)
 * involves this server (server == NULL) or the named server: what would
 * issue colliding IDs does not proceed.
 * Servers that cannot be asked are left out with a WARNING.
 */
void
NodesRefuseCollision(const char *server, const char *what)
{
	List	   *nodes = NodesCheck();
	ListCell   *lc;

	foreach(lc, nodes)
	{
		NodeInfo   *n = lfirst(lc);

		if (!n->known && n->server != NULL && n->problem != NULL)
			ereport(WARNING,
					(errmsg("server \"%s\": %s", n->server, n->problem),
					 errdetail("Its node id was not compared with the others'.")));
	}
	foreach(lc, nodes)
	{
		NodeInfo   *n = lfirst(lc);
		bool		concerned = server == NULL ? n->server == NULL :
			(n->server != NULL && strcmp(n->server, server) == 0);

		if (concerned && n->clash != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot %s: %s", what, n->clash),
					 errdetail("Servers with the same node id issue the same IDs, and IDs for past instants carry the backfill node id."),
					 errhint("Give every server its own snowseq.node_id and snowseq.backfill_node_id, none equal to another's; SELECT * FROM snowseq_check_nodes() lists them all.")));
	}
}

PG_FUNCTION_INFO_V1(snowseq_check_nodes);

/*
 * snowseq_check_nodes() -> (server, node_id, layout, epoch, version,
 * cluster, problem): this server (server NULL) and every postgres_fdw
 * server, what each says of its node id and layout, and what is wrong.
 */
Datum
snowseq_check_nodes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *lc;

	ShmemCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, NodesCheck())
	{
		NodeInfo   *n = lfirst(lc);
		Datum		v[7];
		bool		isnull[7] = {false};

		isnull[0] = n->server == NULL;
		v[0] = isnull[0] ? (Datum) 0 : CStringGetTextDatum(n->server);
		isnull[1] = !n->known || n->node_id < 0;
		v[1] = Int32GetDatum(n->node_id);
		isnull[2] = !n->known;
		v[2] = isnull[2] ? (Datum) 0 : CStringGetTextDatum(n->layout);
		isnull[3] = !n->known;
		v[3] = isnull[3] ? (Datum) 0 : TimestampTzGetDatum(TimeMsToTimestamptz(n->epoch_ms));
		isnull[4] = n->version == NULL;
		v[4] = isnull[4] ? (Datum) 0 : CStringGetTextDatum(n->version);
		isnull[5] = n->cluster == NULL;
		v[5] = isnull[5] ? (Datum) 0 : CStringGetTextDatum(n->cluster);
		isnull[6] = n->problem == NULL;
		v[6] = isnull[6] ? (Datum) 0 : CStringGetTextDatum(n->problem);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, isnull);
	}
	return (Datum) 0;
}
