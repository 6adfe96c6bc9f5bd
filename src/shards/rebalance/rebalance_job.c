/*
 * rebalance_job.c
 *		Background rebalances: snowseq_rebalance_start records a run and
 *		starts a dynamic background worker that drives it
 *		(snowseq_rebalance_job_run, which CALLs snowseq_rebalance as a
 *		session would), in the caller's database, as the caller's role; the
 *		move resolver starts one again for each background run still
 *		running after a restart of the router (RebalanceJobsResume).
 *
 * The worker runs the CALL as a top-level statement of its own portal, as
 * a client's CALL runs: not atomic, so the procedure's COMMITs between
 * steps work.  It waits first for the transaction that started it (a run
 * that transaction rolled back is not there).  An error that ends the
 * worker is written into the run (snowseq_rebalance_job_failed), where
 * snowseq_rebalance_status and snowseq_rebalance_wait read it.  The
 * throttle max_lag_bytes reads the lag of the servers' standbys here too
 * (snowseq_shard_standby_lag).
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_server.h"
#include "nodes/makefuncs.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "parser/analyze.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "compat.h"
#include "rebalance_job.h"
#include "remote.h"
#include "sqlrun.h"

PGDLLEXPORT void snowseq_rebalance_job_main(Datum arg);

/* What a worker is given (bgw_extra). */
typedef struct RebalanceJobArgs
{
	int64		run_id;
	Oid			database;
	Oid			role;
	TransactionId starter;		/* to wait for; invalid: none */
} RebalanceJobArgs;

/*
 * The schema of snowseq in this database, quoted, in TopMemoryContext, or
 * NULL; in a transaction.
 */
static char *
RebalanceJobSchema(void)
{
	char	   *schema;

	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	schema = ExtSchemaInstalled();
	if (schema != NULL)
		schema = MemoryContextStrdup(TopMemoryContext, schema);
	SPI_finish();
	PopActiveSnapshot();
	return schema;
}

/*
 * Register a worker for run_id as role; 0 if it could not be.  notify: this
 * backend waits for the start, and the worker's process id is returned.
 */
static pid_t
RebalanceJobLaunch(int64 run_id, Oid role, TransactionId starter, bool notify, int elevel)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	RebalanceJobArgs args;
	pid_t		pid = 0;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "snowseq", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "snowseq_rebalance_job_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "snowseq rebalance job " INT64_FORMAT, run_id);
	strlcpy(worker.bgw_type, "snowseq rebalance job", BGW_MAXLEN);
	args.run_id = run_id;
	args.database = MyDatabaseId;
	args.role = role;
	args.starter = starter;
	memcpy(worker.bgw_extra, &args, sizeof(args));
	worker.bgw_notify_pid = notify ? MyProcPid : 0;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no background worker slot to run rebalance job " INT64_FORMAT, run_id),
				 errhint("Raise max_worker_processes, or run the rebalance with CALL snowseq_rebalance in a session.")));
		return 0;
	}
	if (!notify)
		return 1;
	if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
	{
		ereport(elevel,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the background worker of rebalance job " INT64_FORMAT " did not start", run_id),
				 errhint("The server log says why.")));
		return 0;
	}
	return pid;
}

static void RebalanceJobLaunchable(Oid fn_oid, int64 run_id, Oid role);

PG_FUNCTION_INFO_V1(snowseq_rebalance_job_launch);

/*
 * snowseq_rebalance_job_launch(run_id): start the worker of a run, as the
 * current role (the rights of the job are the caller's, as its CALL's
 * would be); its process id.  The worker waits for this transaction.
 */
Datum
snowseq_rebalance_job_launch(PG_FUNCTION_ARGS)
{
	int64		run_id = PG_GETARG_INT64(0);
	Oid			role = GetUserId();
	HeapTuple	tup;
	bool		canlogin;

	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for role %u", role);
	canlogin = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
	ReleaseSysCache(tup);
	if (!canlogin)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" cannot start a background rebalance: it cannot log in",
						GetUserNameFromId(role, false)),
				 errdetail("The job's worker connects as the role that starts it."),
				 errhint("Start it as a role with LOGIN, or run CALL snowseq_rebalance in a session.")));
	RebalanceJobLaunchable(fcinfo->flinfo->fn_oid, run_id, role);
	PG_RETURN_INT32((int32) RebalanceJobLaunch(run_id, role, GetTopTransactionId(), true, ERROR));
}

/* The runs this transaction started a worker for (in TopMemoryContext), and the transaction. */
static List *LaunchedRuns = NIL;
static TransactionId LaunchedXid = InvalidTransactionId;

/*
 * A worker is started for a run not over of a table whose owner's
 * privileges role has, once per transaction: a role granted the launch
 * takes no worker slot for a run not its own, nor one slot after another
 * in one open transaction (each worker waits for it).  A run stays listed
 * when the subtransaction that launched it rolls back: its worker was
 * started all the same, and waits for this transaction.
 */
static void
RebalanceJobLaunchable(Oid fn_oid, int64 run_id, Oid role)
{
	char	   *id = psprintf(INT64_FORMAT, run_id);
	char	   *owner;
	TransactionId xid = GetTopTransactionId();
	ListCell   *lc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	owner = SpiValueParams(CurrentMemoryContext,
						   psprintf("SELECT c.relowner FROM %s r JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.parent "
									"WHERE r.run_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 AND NOT %s(r.state)",
									ExtObject(fn_oid, "snowseq_rebalance_runs"), ExtObject(fn_oid, "snowseq_rebalance_is_over")),
						   SQL_ARGS(id));
	SPI_finish();
	if (owner == NULL || !has_privs_of_role(role, (Oid) strtoul(owner, NULL, 10)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("rebalance job " INT64_FORMAT " is not an open run of a table of role \"%s\"", run_id,
						GetUserNameFromId(role, false)),
				 errhint("snowseq_rebalance_start records the run and starts its worker.")));
	if (LaunchedXid != xid)
	{
		list_free_deep(LaunchedRuns);
		LaunchedRuns = NIL;
		LaunchedXid = xid;
	}
	foreach(lc, LaunchedRuns)
		if (*(int64 *) lfirst(lc) == run_id)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("this transaction started a worker for rebalance job " INT64_FORMAT " already", run_id),
					 errhint("Commit, then start it again: its worker waits for this transaction.")));
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		int64	   *v = palloc(sizeof(int64));

		*v = run_id;
		LaunchedRuns = lappend(LaunchedRuns, v);
		MemoryContextSwitchTo(old);
	}
}

PG_FUNCTION_INFO_V1(snowseq_shard_standby_lag);

/*
 * snowseq_shard_standby_lag(server): how many bytes of WAL the standbys of a
 * shard server (its physical walsenders) have yet to replay, the most of
 * them (NULL: no standby), read there with the current user's mapping;
 * the throttle max_lag_bytes waits on it.  A mapping whose user cannot read
 * the standbys' positions (pg_read_all_stats) is refused: it would see no
 * lag at all.
 */
Datum
snowseq_shard_standby_lag(PG_FUNCTION_ARGS)
{
	const char *name = NameStr(*PG_GETARG_NAME(0));
	ForeignServer *srv = GetForeignServerByName(name, false);
	RemoteConn *rc;
	AclResult	aclresult = SnowseqForeignServerAclcheck(srv->serverid, GetUserId(), ACL_USAGE);
	char	   *hidden;
	char	   *lag;

	/* the server's user mapping is used as a foreign table's would be: with USAGE on it */
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, srv->servername);
	rc = RemoteConnect(srv->serverid);

	hidden = RemoteValue(rc, "SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_replication r"
						 " JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) r.pid"
						 " WHERE a.datid IS NULL AND r.state IS NULL", "read its standbys");
	if (hidden != NULL && strcmp(hidden, "0") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the user of the mapping for server \"%s\" cannot read the positions of its standbys", name),
				 errhint("Grant pg_read_all_stats to that user on the server, or start the rebalance without max_lag_bytes.")));
	lag = RemoteValue(rc, "SELECT pg_catalog.max(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), r.replay_lsn))::pg_catalog.int8"
					  " FROM pg_catalog.pg_stat_replication r"
					  " JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) r.pid"
					  " WHERE a.datid IS NULL", "read the lag of its standbys");
	RemoteClose(rc);
	if (lag == NULL)
		PG_RETURN_NULL();
	PG_RETURN_INT64(pg_strtoint64(lag));
}

/*
 * Run one statement as a client's would run at top level: its own portal,
 * so that a CALL is not atomic and its procedure may commit.  Its parse
 * tree and plan live in a context of their own, as a client's statement
 * lives in MessageContext: the procedure's COMMITs end the transaction the
 * statement began in, and with it the transaction's memory, while the
 * portal still runs that plan.
 */
static void
RebalanceJobRunStatement(const char *sql)
{
	MemoryContext stmt_cxt = AllocSetContextCreate(TopMemoryContext, "snowseq rebalance job statement",
												   ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(stmt_cxt);
	List	   *raws = pg_parse_query(sql);
	RawStmt    *raw = linitial_node(RawStmt, raws);
	bool		snap = analyze_requires_snapshot(raw);
	List	   *queries;
	List	   *plans;
	Portal		portal;
	DestReceiver *receiver;
	QueryCompletion qc;

	if (snap)
		PushActiveSnapshot(GetTransactionSnapshot());
	queries = pg_analyze_and_rewrite_fixedparams(raw, sql, NULL, 0, NULL);
	plans = pg_plan_queries(queries, sql, CURSOR_OPT_PARALLEL_OK, NULL);
	if (snap)
		PopActiveSnapshot();
	portal = CreatePortal("", true, true);
	portal->visible = false;
	PortalDefineQuery(portal, NULL, sql, CreateCommandTag(raw->stmt), plans, NULL);
	PortalStart(portal, NULL, 0, InvalidSnapshot);
	receiver = CreateDestReceiver(DestNone);
	InitializeQueryCompletion(&qc);
	(void) SnowseqPortalRunAll(portal, receiver, &qc);
	receiver->rDestroy(receiver);
	PortalDrop(portal, false);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(stmt_cxt);
}

/* Write the error that ended the job into its run. */
static void
RebalanceJobRecordError(const char *schema, int64 run_id, const char *message)
{
	StringInfoData sql;
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2];

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s.snowseq_rebalance_job_failed($1, $2)", schema);
	values[0] = Int64GetDatum(run_id);
	values[1] = CStringGetTextDatum(message);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql.data, 2, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "recording the error of rebalance job " INT64_FORMAT " failed", run_id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* Entry point of the worker of a background rebalance. */
void
snowseq_rebalance_job_main(Datum arg)
{
	RebalanceJobArgs args;
	MemoryContext cxt;
	char	   *schema;
	char	   *sql;
	char	   *volatile failure = NULL;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(args.database, args.role, 0);
	SetConfigOption("application_name", "snowseq rebalance job", PGC_USERSET, PGC_S_SESSION);
	pgstat_report_appname("snowseq rebalance job");

	/* the transaction that started the job first ends */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (TransactionIdIsValid(args.starter))
		XactLockTableWait(args.starter, NULL, NULL, XLTW_None);
	schema = RebalanceJobSchema();
	CommitTransactionCommand();
	if (schema == NULL)
		proc_exit(0);

	sql = psprintf("CALL %s.snowseq_rebalance_job_run(" INT64_FORMAT ")", schema, args.run_id);
	cxt = CurrentMemoryContext;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		pgstat_report_activity(STATE_RUNNING, sql);
		RebalanceJobRunStatement(sql);
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		failure = edata->message;
	}
	PG_END_TRY();
	if (failure != NULL)
		RebalanceJobRecordError(schema, args.run_id, failure);
	proc_exit(0);
}

/*
 * At the router's start (the resolver, after it resolved the moves of this
 * database): a worker for each background run still running, as the role
 * that runs it.  Errors are logged (elevel), not raised.
 */
void
RebalanceJobsResume(int elevel)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *volatile runs = NIL;
	List	   *volatile roles = NIL;
	ListCell   *lr;
	ListCell   *lo;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		char	   *schema = RebalanceJobSchema();
		bool		has_jobs = false;

		PushActiveSnapshot(GetTransactionSnapshot());
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		/* a database whose snowseq is older has no background runs */
		if (schema != NULL)
		{
			const char *rel = psprintf("%s.snowseq_rebalance_runs", schema);

			has_jobs = strcmp(SpiValueParams(CurrentMemoryContext,
											 "SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a"
											 " WHERE a.attrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)"
											 " AND a.attname OPERATOR(pg_catalog.=) 'job_role' AND NOT a.attisdropped",
											 1, &rel), "1") == 0;
		}
		if (has_jobs)
		{
			char	   *sql = psprintf("SELECT run_id, CAST(job_role AS pg_catalog.oid) FROM %s.snowseq_rebalance_runs"
									   " WHERE %s.snowseq_rebalance_is_running(state) AND job_role IS NOT NULL"
									   " ORDER BY run_id", schema, schema);

			if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
				elog(ERROR, "reading the background rebalances failed");
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				bool		isnull;
				int64		run_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
				Oid			roleid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
				MemoryContext old;

				/* the role by its OID: renamed, it is the same role; dropped, none */
				if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(roleid)))
				{
					ereport(elevel,
							(errmsg("snowseq: rebalance job " INT64_FORMAT " is not resumed: its role (OID %u) no longer exists", run_id, roleid),
							 errhint("Resume it with CALL snowseq_rebalance, or give it up with snowseq_rebalance_stop(abandon => true).")));
					continue;
				}
				old = MemoryContextSwitchTo(TopMemoryContext);
				runs = lappend(runs, psprintf(INT64_FORMAT, run_id));
				roles = lappend_oid(roles, roleid);
				MemoryContextSwitchTo(old);
			}
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		return;
	}
	PG_END_TRY();
	forboth(lr, runs, lo, roles)
	{
		int64		run_id = pg_strtoint64((char *) lfirst(lr));

		if (RebalanceJobLaunch(run_id, lfirst_oid(lo), InvalidTransactionId, false, elevel) == 0)
			continue;
		ereport(LOG,
				(errmsg("snowseq: rebalance job " INT64_FORMAT " resumes in a background worker", run_id)));
	}
}
