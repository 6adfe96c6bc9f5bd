/*
 * shard_ddl_xact.c
 *		The shard servers' part of a schema change carried from the router
 *		(shard_ddl.c, the utility hook, says what each server runs): one
 *		remote transaction on each server, at the router's savepoint
 *		nesting, prepared before the router commits and committed or rolled
 *		back after it; and deciding the prepared ones left behind.
 *
 * Before the router commits, each remote transaction is prepared (PREPARE
 * TRANSACTION), after a WAL record of the router's transaction id is
 * flushed; a server that refuses or cannot be reached makes the router's
 * transaction fail, and every prepared one is rolled back.  Once the router
 * committed, each is committed; one that cannot be (its server went down)
 * stays prepared and is decided later by its name, which carries the
 * router's system identifier and transaction id: committed where that
 * transaction committed, rolled back where it did not (ShardDdlResolveAll,
 * run by the resolver at the router's start and by snowseq_move_cleanup()).
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "move_common.h"
#include "move_group.h"
#include "remote.h"
#include "rmgr.h"
#include "shard_ddl_xact.h"
#include "sqlrun.h"
#include "twophase.h"
#include "testpoint.h"

#define SHARD_DDL_GID_PREFIX "snowseq_ddl_"
#define XLOG_SNOWSEQ_SHARD_DDL	0x80	/* the router's transaction id, before shards prepare */
#define DDL_END_TIMEOUT_MS		30000	/* to end a server's part in a commit or abort */

/* the router's session settings the shard servers parse and wait under */
static const char *const DdlCopiedSettings[] = {
	"search_path", "standard_conforming_strings", "DateStyle", "IntervalStyle", "TimeZone",
	"lock_timeout", "statement_timeout"
};

/* one shard server's part of the router's transaction */
typedef struct DdlServer
{
	Oid			serverid;
	RemoteConn *rc;
	int			depth;			/* transaction nesting it is at: 1 after BEGIN, one
								 * more for each SAVEPOINT */
	bool		broken;			/* a savepoint could not be ended there */
	bool		prepared;
	char		gid[96];
} DdlServer;

static List *ddl_servers = NIL;	/* of DdlServer *, in ddl_cxt */
static MemoryContext ddl_cxt = NULL;	/* the servers' parts and sessions, for
										 * one transaction of the router */
static bool ddl_callbacks = false;

static void DdlXactCallback(XactEvent event, void *arg);
static void DdlSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
							   SubTransactionId parentSubid, void *arg);

/* The open remote transaction on a server, opened on first need. */
static DdlServer *
DdlServerFor(Oid serverid)
{
	ListCell   *lc;
	DdlServer  *s;
	MemoryContext old;

	foreach(lc, ddl_servers)
	{
		s = lfirst(lc);
		if (s->serverid == serverid)
			return s;
	}
	if (!ddl_callbacks)
	{
		RegisterXactCallback(DdlXactCallback, NULL);
		RegisterSubXactCallback(DdlSubXactCallback, NULL);
		ddl_callbacks = true;
	}
	if (ddl_cxt == NULL)
		ddl_cxt = AllocSetContextCreate(TopMemoryContext, "snowseq shard DDL", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(ddl_cxt);
	s = palloc0(sizeof(DdlServer));
	s->serverid = serverid;
	ddl_servers = lappend(ddl_servers, s);
	s->rc = RemoteConnect(serverid);
	MemoryContextSwitchTo(old);
	RemoteCommand(s->rc, "BEGIN", "begin the change of the shard tables");
	for (int i = 0; i < lengthof(DdlCopiedSettings); i++)
		RemoteCommandParams(s->rc, "SELECT pg_catalog.set_config($1, $2, true)",
							SQL_ARGS(DdlCopiedSettings[i], GetConfigOption(DdlCopiedSettings[i], false, false)),
							"take the router session's settings");
	s->depth = 1;
	return s;
}

/* A server's remote transaction at the router's nesting: savepoints as here. */
static DdlServer *
DdlServerAt(Oid serverid)
{
	DdlServer  *s = DdlServerFor(serverid);

	while (s->depth < GetCurrentTransactionNestLevel())
	{
		s->depth++;
		RemoteCommand(s->rc, psprintf("SAVEPOINT s%d", s->depth), "mark a savepoint on the shard server");
	}
	return s;
}

/* The session of a server's remote transaction, at the router's nesting. */
RemoteConn *
ShardDdlSession(Oid serverid)
{
	return DdlServerAt(serverid)->rc;
}

/* Run one statement in the remote transaction of each server in turn. */
void
ShardDdlRun(List *servers, List *sqls)
{
	ListCell   *ls;
	ListCell   *lq;

	forboth(ls, servers, lq, sqls)
	{
		DdlServer  *s = DdlServerAt(lfirst_oid(ls));

		RemoteCommandSingle(s->rc, lfirst(lq), "change the shard table");
	}
}

/* The name of the prepared remote transaction of a server. */
static void
DdlGid(DdlServer *s)
{
	snprintf(s->gid, sizeof(s->gid), SHARD_DDL_GID_PREFIX UINT64_FORMAT "_" UINT64_FORMAT "_%u_%u",
			 GetSystemIdentifier(), U64FromFullTransactionId(GetTopFullTransactionId()),
			 GetUserId(), s->serverid);
}

/* The router's record of its transaction id: nothing to redo. */
static void
DdlRedoMark(const char *data, size_t len)
{
}

static void
DdlDescribeMark(StringInfo buf, const char *data, size_t len)
{
	appendStringInfoString(buf, "a schema change of shard tables is about to be prepared");
}

/* Forget every server's part: close the sessions, free what they kept. */
static void
DdlForget(void)
{
	ListCell   *lc;

	foreach(lc, ddl_servers)
		RemoteClose(((DdlServer *) lfirst(lc))->rc);
	ddl_servers = NIL;
	if (ddl_cxt != NULL)
		MemoryContextDelete(ddl_cxt);
	ddl_cxt = NULL;
}

/*
 * Run one command on a server's session without raising, within
 * DDL_END_TIMEOUT_MS (a commit or an abort must end, whatever the network
 * does); NULL on success, else what went wrong (the session is then
 * dropped).
 */
static char *
DdlExecBounded(DdlServer *s, const char *sql)
{
	PGconn	   *conn = s->rc ? s->rc->conn : NULL;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DDL_END_TIMEOUT_MS);
	char	   *error = NULL;
	PGresult   *res;

	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
		return pstrdup("the connection was lost");
	if (!PQsendQuery(conn, sql))
		error = pchomp(PQerrorMessage(conn));
	while (error == NULL)
	{
		while (error == NULL && PQisBusy(conn))
		{
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			int			rc;

			if (left <= 0)
			{
				error = psprintf("no answer within %d s", DDL_END_TIMEOUT_MS / 1000);
				break;
			}
			rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								   PQsocket(conn), left, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(conn))
				error = pchomp(PQerrorMessage(conn));
		}
		if (error != NULL)
			break;
		res = PQgetResult(conn);
		if (res == NULL)
			break;
		if (PQresultStatus(res) != PGRES_COMMAND_OK && error == NULL)
			error = pchomp(PQresultErrorMessage(res));
		PQclear(res);
	}
	if (error != NULL && PQisBusy(conn))
		RemoteClose(s->rc);
	return error;
}

/* End a server's part without raising: committed or rolled back. */
static void
DdlFinish(DdlServer *s, bool commit)
{
	char	   *sql;
	char	   *error;

	if (!s->prepared)
	{
		if (s->rc != NULL)
			(void) DdlExecBounded(s, "ROLLBACK");
		return;
	}
	sql = TwoPhaseStatement(commit ? TWOPHASE_COMMIT : TWOPHASE_ROLLBACK, s->gid);
	error = DdlExecBounded(s, sql);
	if (error != NULL)
		ereport(WARNING,
				(errmsg("the change of the shard table on server \"%s\" is prepared and not yet %s",
						s->rc ? s->rc->server : "?", commit ? "committed" : "rolled back"),
				 errdetail("%s; its prepared transaction is \"%s\".", error, s->gid),
				 errhint("Once the server is back, run SELECT * FROM snowseq_move_cleanup(); on this router.")));
}

static void
DdlXactCallback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (ddl_servers == NIL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			SNOWSEQ_TESTPOINT("shard_ddl_prepare");

			/*
			 * The router's transaction id names each prepared part and
			 * decides it after a crash: a record carrying it is flushed
			 * first, so that after any crash that id is known here and is
			 * never given to another transaction.
			 */
			{
				char		mark = 0;

				(void) GetTopTransactionId();
				XLogBeginInsert();
				XLogRegisterData(&mark, sizeof(mark));
				XLogFlush(XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_SHARD_DDL));
			}
			foreach(lc, ddl_servers)
			{
				DdlServer  *s = lfirst(lc);

				/* a server whose part began in a savepoint rolled back */
				if (s->rc == NULL || s->depth == 0)
					continue;
				if (s->broken)
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_FAILURE),
							 errmsg("the change of the shard table on server \"%s\" lost track of a savepoint", s->rc->server),
							 errhint("Run the change again.")));
				DdlGid(s);
				TwoPhasePrepare(s->rc, s->gid, "prepare the change of the shard table");
				s->prepared = true;
			}
			SNOWSEQ_TESTPOINT("shard_ddl_prepared");
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
			foreach(lc, ddl_servers)
				DdlFinish(lfirst(lc), event == XACT_EVENT_COMMIT);
			DdlForget();
			break;
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that changed the tables of shard servers")));
			break;
		default:
			break;
	}
}

/*
 * A savepoint of the router's transaction ends on each shard server too:
 * released with it, or rolled back to.  Nothing is raised here; a server
 * where it fails is marked, and the router's commit fails.
 */
static void
DdlSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
				   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	foreach(lc, ddl_servers)
	{
		DdlServer  *s = lfirst(lc);
		char	   *sql;

		if (s->depth < level || s->rc == NULL)
			continue;
		sql = event == SUBXACT_EVENT_PRE_COMMIT_SUB ?
			psprintf("RELEASE SAVEPOINT s%d", level) :
			psprintf("ROLLBACK TO SAVEPOINT s%d; RELEASE SAVEPOINT s%d", level, level);
		if (DdlExecBounded(s, sql) != NULL)
			s->broken = true;
		s->depth = level - 1;
	}
}

/* What deciding the prepared changes on one server gave. */
typedef struct DdlDecide
{
	int			elevel;
	int			left;			/* prepared changes that could not be decided */
	List	   *decided;		/* "server|gid|action" */
	List	   *others;			/* roles whose prepared changes were seen (Oid) */
	MemoryContext cxt;			/* for decided and others */
} DdlDecide;

/*
 * The parts of one of this router's prepared names: the router's full
 * transaction id, the role and the server; false for any other name.
 */
static bool
DdlParseGid(const char *gid, const char *prefix, uint64 *xid, Oid *role, Oid *server)
{
	const char *p = gid + strlen(prefix);
	char	   *end;
	unsigned long long v[3];

	if (strncmp(gid, prefix, strlen(prefix)) != 0)
		return false;
	for (int i = 0; i < 3; i++)
	{
		if (!isdigit((unsigned char) *p))
			return false;
		errno = 0;
		v[i] = strtoull(p, &end, 10);
		if (errno != 0 || *end != (i < 2 ? '_' : '\0'))
			return false;
		p = end + (i < 2 ? 1 : 0);
	}
	if (v[1] > PG_UINT32_MAX || v[2] > PG_UINT32_MAX)
		return false;
	*xid = v[0];
	*role = (Oid) v[1];
	*server = (Oid) v[2];
	return true;
}

/*
 * Decide the prepared changes this router's current role made on a server:
 * commit those whose router transaction committed, roll back those whose
 * did not (a superuser decides every role's).
 */
static void
DdlDecideOn(RemoteConn *rc, void *arg)
{
	DdlDecide  *d = arg;
	PGresult   *res;
	char	   *prefix = psprintf(SHARD_DDL_GID_PREFIX UINT64_FORMAT "_", GetSystemIdentifier());

	res = TwoPhaseList(rc, "list the prepared transactions");
	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *gid = PQgetvalue(res, i, 0);
		uint64		xid;
		Oid			role;
		Oid			server;
		char	   *status;
		bool		commit;
		char		sqlstate[6];
		char	   *decide;
		MemoryContext old;

		if (!DdlParseGid(gid, prefix, &xid, &role, &server) || server != rc->serverid)
			continue;
		if (role != GetUserId() && !superuser())
		{
			old = MemoryContextSwitchTo(d->cxt);
			d->others = list_append_unique_oid(d->others, role);
			MemoryContextSwitchTo(old);
			continue;
		}
		/* NULL: too old to be known here, or not yet given (never flushed) */
		status = SpiValueParams(CurrentMemoryContext,
								"SELECT CASE WHEN $1::pg_catalog.xid8 OPERATOR(pg_catalog.<) "
								"pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()) "
								"THEN pg_catalog.pg_xact_status($1::pg_catalog.xid8) END",
								SQL_ARGS(psprintf(UINT64_FORMAT, xid)));
		if (status == NULL || strcmp(status, "in progress") == 0)
		{
			if (status == NULL)
				ereport(d->elevel,
						(errmsg("the change of a shard table prepared as \"%s\" on server \"%s\" is left: this router does not know its transaction",
								gid, rc->server),
						 errhint("Commit it there if the router's table has the change, else roll it back.")));
			d->left++;
			continue;
		}
		commit = strcmp(status, "committed") == 0;
		decide = TwoPhaseStatement(commit ? TWOPHASE_COMMIT : TWOPHASE_ROLLBACK, gid);
		if (!RemoteTry(rc, decide, "decide the prepared change of the shard table", sqlstate))
		{
			d->left++;
			continue;
		}
		old = MemoryContextSwitchTo(d->cxt);
		d->decided = lappend(d->decided, psprintf("%s|%s|%s", rc->server, gid,
												  commit ? "committed" : "rolled back"));
		MemoryContextSwitchTo(old);
	}
	PQclear(res);
}

/*
 * Decide, as the current user, the prepared changes of shard tables this
 * router left on every server of its shard map (SPI connected).  Returns
 * how many are left; a server that cannot be asked is reported at
 * unreachable_elevel, and counted only when that is elevel.  *decided gets
 * "server|gid|action" of each decided, *others the roles whose changes were
 * seen and left to them, in cxt.
 */
static int
DdlResolveAs(const char *ext, int elevel, int unreachable_elevel, List **decided,
			 List **others, MemoryContext cxt)
{
	DdlDecide	d = {elevel, 0, NIL, NIL, cxt};
	List	   *servers = NIL;

	SpiRun(psprintf("SELECT DISTINCT s.oid FROM pg_catalog.pg_foreign_server s "
					"JOIN %s.snowseq_shard_map m ON m.shard OPERATOR(pg_catalog.=) s.srvname "
					"WHERE pg_catalog.has_server_privilege(s.oid, 'USAGE') ORDER BY s.oid", ext),
		   SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		servers = lappend_oid(servers, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																	 SPI_tuptable->tupdesc, 1, &isnull)));
	}
	for (int i = 0; i < list_length(servers); i++)
	{
		char	   *problem = RemoteAsk(list_nth_oid(servers, i), DdlDecideOn, &d);

		if (problem != NULL)
		{
			ereport(unreachable_elevel,
					(errmsg("could not look for prepared changes of shard tables on server \"%s\": %s",
							GetForeignServer(list_nth_oid(servers, i))->servername, problem)));
			if (unreachable_elevel == elevel)
				d.left++;
		}
	}
	if (decided)
		*decided = d.decided;
	if (others)
		*others = d.others;
	return d.left;
}

int
ShardDdlResolveAll(const char *ext, int elevel, int unreachable_elevel, List **decided,
				   MemoryContext cxt)
{
	return DdlResolveAs(ext, elevel, unreachable_elevel, decided, NULL, cxt);
}

/*
 * At the router's start (the resolver): decide the prepared changes of shard
 * tables as the roles that made them (named in them), reached through the
 * owners of the gene-sharded tables first.  Returns how many are left.
 */
int
ShardDdlResolveAtStart(int elevel)
{
	char	   *ext;
	List	   *roles = NIL;
	int			left = 0;
	ListCell   *lc;

	SPI_connect();
	ext = ExtSchemaInstalled();
	if (ext != NULL)
	{
		foreach(lc, MoveGeneShardedTables(ext))
		{
			HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(lfirst_oid(lc)));

			if (HeapTupleIsValid(tup))
			{
				roles = list_append_unique_oid(roles, ((Form_pg_class) GETSTRUCT(tup))->relowner);
				ReleaseSysCache(tup);
			}
		}
		/* roles grows with those seen in the names */
		for (int i = 0; i < list_length(roles); i++)
		{
			Oid			role = list_nth_oid(roles, i);
			List	   *others = NIL;
			Oid			save_user;
			int			save_sec;

			if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
				continue;
			ExtBecome(role, &save_user, &save_sec);
			left += DdlResolveAs(ext, elevel, DEBUG1, NULL, &others, CurrentMemoryContext);
			SetUserIdAndSecContext(save_user, save_sec);
			foreach(lc, others)
				roles = list_append_unique_oid(roles, lfirst_oid(lc));
		}
	}
	SPI_finish();
	return left;
}

/*
 * snowseq_move_cleanup's part: decide the prepared changes of shard tables,
 * one row of its result for each.
 */
void
ShardDdlReportResolved(MoveOp *collect)
{
	List	   *decided = NIL;
	ListCell   *lc;

	(void) ShardDdlResolveAll(collect->ext, NOTICE, NOTICE, &decided, collect->cxt);
	foreach(lc, decided)
	{
		char	   *line = lfirst(lc);
		char	   *gid = strchr(line, '|');
		char	   *action = strrchr(line, '|');
		MemoryContext old = MemoryContextSwitchTo(collect->cxt);
		MoveReport *r = palloc0(sizeof(MoveReport));

		r->server = pnstrdup(line, gid - line);
		r->object = psprintf("prepared transaction %s", pnstrdup(gid + 1, action - gid - 1));
		r->action = pstrdup(action + 1);
		collect->report = lappend(collect->report, r);
		MemoryContextSwitchTo(old);
	}
}

/* The WAL record of the router's transaction id, before servers prepare. */
void
ShardDdlXactInit(void)
{
	RmgrRegisterKind(XLOG_SNOWSEQ_SHARD_DDL, "SHARD_DDL", DdlRedoMark, DdlDescribeMark);
}
