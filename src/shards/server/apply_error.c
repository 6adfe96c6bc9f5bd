/*
 * apply_error.c
 *		The destination side of a gene-range move: the last error of each
 *		subscription's workers, with its text.
 *
 * PostgreSQL counts the errors of a subscription's apply and table
 * synchronisation workers (pg_stat_subscription_stats) and restarts a
 * worker that failed, but the text of the error goes to the server log
 * only.  A move rides out the errors that PostgreSQL's retry heals (a
 * walsender or worker that was terminated, a connection that broke) and
 * fails on one that persists; to say which error that is, snowseq keeps
 * the last error of each subscription's workers in shared memory: an
 * emit_log_hook, active only in logical replication workers, copies its
 * SQLSTATE and message there, and snowseq_subscription_error(oid) reads
 * it, for the subscriptions of the caller's database only.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "replication/worker_internal.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "apply_error.h"

#define APPLY_ERROR_SLOTS		64	/* subscriptions remembered at once */
#define APPLY_ERROR_MESSAGE_LEN 512 /* bytes of message kept */

/* The last error of one subscription's workers. */
typedef struct ApplyErrorSlot
{
	Oid			subid;			/* InvalidOid: free */
	Oid			dbid;
	int			sqlerrcode;
	uint64		errors;			/* errors recorded for it */
	TimestampTz at;
	char		message[APPLY_ERROR_MESSAGE_LEN];
} ApplyErrorSlot;

typedef struct ApplyErrorShared
{
	slock_t		mutex;
	ApplyErrorSlot slots[APPLY_ERROR_SLOTS];
} ApplyErrorShared;

static ApplyErrorShared *apply_errors = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

/* Bytes of shared memory for the errors. */
Size
ApplyErrorShmemSize(void)
{
	return sizeof(ApplyErrorShared);
}

/* Create or attach to the errors (under AddinShmemInitLock). */
void
ApplyErrorShmemInit(void)
{
	bool		found;

	apply_errors = ShmemInitStruct("snowseq apply errors", sizeof(ApplyErrorShared), &found);
	if (!found)
	{
		memset(apply_errors, 0, sizeof(ApplyErrorShared));
		SpinLockInit(&apply_errors->mutex);
	}
}

/*
 * emit_log_hook: in a logical replication worker, keep an error it reports
 * as its subscription's last.  A worker stopped on purpose (terminated,
 * its subscription changed) is not an error of the subscription.  Runs in
 * error handling: copies into shared memory, raises nothing.
 */
static void
ApplyErrorRecord(ErrorData *edata)
{
	if (MyLogicalRepWorker != NULL && apply_errors != NULL && edata->elevel >= ERROR &&
		OidIsValid(MyLogicalRepWorker->subid) && edata->sqlerrcode != ERRCODE_ADMIN_SHUTDOWN &&
		edata->message != NULL)
	{
		ApplyErrorSlot *slot = NULL;
		TimestampTz now = GetCurrentTimestamp();

		SpinLockAcquire(&apply_errors->mutex);
		for (int i = 0; i < APPLY_ERROR_SLOTS; i++)
		{
			ApplyErrorSlot *s = &apply_errors->slots[i];

			if (s->subid == MyLogicalRepWorker->subid && s->dbid == MyDatabaseId)
			{
				slot = s;
				break;
			}
			/* else the free slot, or the one written longest ago */
			if (slot == NULL || (OidIsValid(slot->subid) && (!OidIsValid(s->subid) || s->at < slot->at)))
				slot = s;
		}
		if (slot->subid != MyLogicalRepWorker->subid || slot->dbid != MyDatabaseId)
		{
			slot->subid = MyLogicalRepWorker->subid;
			slot->dbid = MyDatabaseId;
			slot->errors = 0;
		}
		slot->sqlerrcode = edata->sqlerrcode;
		slot->errors++;
		slot->at = now;
		strlcpy(slot->message, edata->message, APPLY_ERROR_MESSAGE_LEN);
		SpinLockRelease(&apply_errors->mutex);
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/* Install the hook (at preload). */
void
ApplyErrorInit(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = ApplyErrorRecord;
}

PG_FUNCTION_INFO_V1(snowseq_subscription_error);

/*
 * snowseq_subscription_error(subscription oid) -> (sqlstate, message,
 * errors, at): the last error the subscription's workers reported since
 * the server started, or no row.
 */
Datum
snowseq_subscription_error(PG_FUNCTION_ARGS)
{
	Oid			subid = PG_GETARG_OID(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ApplyErrorSlot copy;
	bool		found = false;

	InitMaterializedSRF(fcinfo, 0);
	if (apply_errors == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq is not loaded by shared_preload_libraries"),
				 errhint("Add snowseq to shared_preload_libraries and restart the server.")));
	SpinLockAcquire(&apply_errors->mutex);
	for (int i = 0; i < APPLY_ERROR_SLOTS; i++)
		if (apply_errors->slots[i].subid == subid && apply_errors->slots[i].dbid == MyDatabaseId)
		{
			copy = apply_errors->slots[i];
			found = true;
			break;
		}
	SpinLockRelease(&apply_errors->mutex);
	if (found)
	{
		Datum		v[4];
		bool		n[4] = {false, false, false, false};

		v[0] = CStringGetTextDatum(unpack_sql_state(copy.sqlerrcode));
		v[1] = CStringGetTextDatum(copy.message);
		v[2] = Int64GetDatum((int64) copy.errors);
		v[3] = TimestampTzGetDatum(copy.at);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	return (Datum) 0;
}
