/*
 * worker.c
 *		The reservation worker: advances reservations ahead of need, so that
 *		in steady state no caller waits for WAL or fsync.
 *
 * Callers that pass a low-water mark set the worker's latch once; the
 * worker sleeps on that latch and nothing else, so an idle server does not
 * wake it.  It advances what the counters' owners registered with the
 * reservations (ReserveAdvanceAllDue), without knowing what each counts.
 * Without the worker callers advance for themselves.  Named
 * counters advance in a backend of their database instead (counter.c),
 * which writes the counter's floor sequence before the new bound.
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
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "reserve.h"
#include "worker.h"

PGDLLEXPORT void snowseq_worker_main(Datum arg);

/* Forget our latch when we exit, so callers fall back to advancing themselves. */
static void
WorkerExit(int code, Datum arg)
{
	if (Snowseq != NULL)
		Snowseq->worker_latch = NULL;
}

/* Entry point of the reservation worker. */
void
snowseq_worker_main(Datum arg)
{
	bool		at_start = true;

	/*
	 * die(), not a flag: an advance may be waiting for a synchronous
	 * standby, and only ProcDiePending ends that wait at shutdown.
	 */
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	on_shmem_exit(WorkerExit, (Datum) 0);
	Snowseq->worker_latch = &MyProc->procLatch;
	pg_atomic_write_u32(&Snowseq->advance_requested, 0);

	for (;;)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (at_start || pg_atomic_exchange_u32(&Snowseq->advance_requested, 0) != 0)
		{
			(void) ReserveAdvanceAllDue(at_start);
			at_start = false;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, PG_WAIT_EXTENSION);
	}
}

/* Register the reservation worker at preload: it runs on a primary, never on a standby. */
void
WorkerRegister(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "snowseq", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "snowseq_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "snowseq reservation worker", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "snowseq reservation worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);

}
