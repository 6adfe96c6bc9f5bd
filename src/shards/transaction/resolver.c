/*
 * resolver.c
 *		The move resolver: at every start of the server (crash restarts
 *		included) it visits each database, and where snowseq is installed it
 *		resolves the moves and merges interrupted in their switch
 *		(MoveResolveSwitches, move_cleanup.c; MergeResolveSwitches,
 *		merge_cleanup.c), and the schema changes of sharded tables whose
 *		servers went down before they committed (ShardDdlResolveAtStart,
 *		shard_ddl_xact.c), so the prepared transactions they left on shard
 *		servers commit or roll back as the router's record (or its own
 *		transaction's outcome) says, without anyone running
 *		snowseq_move_cleanup().  Then it starts a worker again for each
 *		background rebalance still running there (rebalance_job.c).
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "merge_cleanup.h"
#include "move_cleanup.h"
#include "rebalance_job.h"
#include "resolver.h"
#include "shard_ddl_xact.h"

#define RESOLVE_TRIES			30	/* per database, RESOLVE_RETRY_MS apart */
#define RESOLVE_RETRY_MS		2000

PGDLLEXPORT void snowseq_resolver_main(Datum arg);
PGDLLEXPORT void snowseq_resolver_db_main(Datum arg);

/*
 * One pass over a database: resolve its interrupted switches; how many are
 * left (-1: the pass failed, and said why in the log).
 */
static int
ResolverPass(void)
{
	volatile int left = -1;
	MemoryContext cxt = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		left = MoveResolveSwitches(LOG);
		left += MergeResolveSwitches(LOG);
		left += ShardDdlResolveAtStart(LOG);
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		/* report it and try again later, as after an unreachable server */
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		left = -1;
	}
	PG_END_TRY();
	return left;
}

/* Entry point of a resolver for one database (main_arg: its oid). */
void
snowseq_resolver_db_main(Datum arg)
{
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* as the bootstrap superuser; each move is resolved as the role that ran it */
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), InvalidOid, 0);
	SetConfigOption("application_name", "snowseq move resolver", PGC_USERSET, PGC_S_SESSION);
	for (int i = 1;; i++)
	{
		int			left = ResolverPass();

		if (left == 0)
			break;
		if (i == RESOLVE_TRIES)
		{
			ereport(WARNING,
					(errmsg("snowseq: interrupted moves of database \"%s\" are not resolved",
							get_database_name(MyDatabaseId)),
					 errhint("Their source tables wait for it: run SELECT * FROM snowseq_move_cleanup(); once their servers are reachable.")));
			break;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 RESOLVE_RETRY_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	/* the background rebalances the restart cut go on (a step cut is resolved first) */
	RebalanceJobsResume(WARNING);
	proc_exit(0);
}

/* The databases a resolver may connect to. */
static List *
ResolverDatabases(void)
{
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext old;

		if (!db->datallowconn || db->datistemplate)
			continue;
		old = MemoryContextSwitchTo(TopMemoryContext);
		dbs = lappend_oid(dbs, db->oid);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return dbs;
}

/*
 * Entry point of the move resolver: one resolver per database, one after
 * the other; then it idles, so that only a restart of the server (or a
 * crash restart, which starts it again) runs it again.
 */
void
snowseq_resolver_main(Datum arg)
{
	ListCell   *lc;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	foreach(lc, ResolverDatabases())
	{
		BackgroundWorker worker;
		BackgroundWorkerHandle *handle;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = BGW_NEVER_RESTART;
		strlcpy(worker.bgw_library_name, "snowseq", BGW_MAXLEN);
		strlcpy(worker.bgw_function_name, "snowseq_resolver_db_main", BGW_MAXLEN);
		snprintf(worker.bgw_name, BGW_MAXLEN, "snowseq move resolver for database %u", lfirst_oid(lc));
		strlcpy(worker.bgw_type, "snowseq move resolver", BGW_MAXLEN);
		worker.bgw_main_arg = ObjectIdGetDatum(lfirst_oid(lc));
		worker.bgw_notify_pid = MyProcPid;
		if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		{
			ereport(WARNING,
					(errmsg("snowseq: no background worker slot to resolve interrupted moves"),
					 errhint("Raise max_worker_processes, or run SELECT * FROM snowseq_move_cleanup(); in each database with snowseq.")));
			break;
		}
		(void) WaitForBackgroundWorkerShutdown(handle);
	}
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Register the resolver at preload: it runs on a primary after recovery,
 * never on a standby.
 */
void
ResolverRegister(void)
{
	BackgroundWorker worker;

	/* pg_upgrade's servers hold no moves, and want no other sessions */
	if (IsBinaryUpgrade)
		return;
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	strlcpy(worker.bgw_library_name, "snowseq", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "snowseq_resolver_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "snowseq move resolver", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "snowseq move resolver", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}
