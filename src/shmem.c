/*
 * shmem.c
 *		The shared state every part of snowseq uses: the lock, the
 *		condition variable, the worker's latch, why nothing may be generated,
 *		and the per-process counts of IDs issued.  Each subsystem owns the
 *		rest of its shared memory (XxxShmemSize/XxxShmemInit); snowseq.c
 *		requests and creates them all, this first.
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "compat.h"
#include "guc.h"
#include "shmem.h"

SnowseqShared *Snowseq = NULL;
bool		snowseq_backend_ready = false;

/* Number of per-process slots: one per PGPROC. */
static int
ShmemSlotCount(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

/* Bytes of the shared state; fixed once the server has started. */
Size
ShmemSize(void)
{
	return add_size(offsetof(SnowseqShared, issued),
					mul_size(ShmemSlotCount(), sizeof(IssuedSlot)));
}

/*
 * Create (or attach to) the shared state; returns whether it existed.
 * Caller holds AddinShmemInitLock (snowseq.c's startup hook).
 */
bool
ShmemInit(void)
{
	bool		found;

	Snowseq = ShmemInitStruct("snowseq", ShmemSize(), &found);
	if (!found)
	{
		memset(Snowseq, 0, ShmemSize());
		pg_atomic_init_u32(&Snowseq->advance_requested, 0);
		Snowseq->lock = &(GetNamedLWLockTranche("snowseq"))->lock;
		ConditionVariableInit(&Snowseq->advanced);
		Snowseq->nslots = ShmemSlotCount();
		for (int i = 0; i < Snowseq->nslots; i++)
			pg_atomic_init_u64(&Snowseq->issued[i].ids, 0);
	}
	return found;
}

/* Record why nothing may be generated, and log it. */
void
ShmemSetStateError(SnowseqStateError err, const char *message, const char *what)
{
	Snowseq->state_error = err;
	strlcpy(Snowseq->state_message, message, sizeof(Snowseq->state_message));
	ereport(LOG,
			(errmsg("%s, no ID will be generated", what),
			 errdetail("%s", message)));
}

/* ERROR unless snowseq is preloaded (its settings and shared memory exist). */
void
ShmemCheckPreloaded(void)
{
	if (Snowseq == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq must be loaded via shared_preload_libraries"),
				 errhint("Add snowseq to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * The slow half of SnowseqCheckUsable: say precisely why no ID can be
 * generated, or remember that this backend may generate.
 */
void
ShmemCheckUsableSlow(void)
{
	ShmemCheckPreloaded();
	if (snowseq_node_id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq.node_id is not set"),
				 errhint("Set snowseq.node_id in postgresql.conf to a number from 0 to %lld that no other server uses, and restart the server.",
						 (long long) (((int64) 1 << snowseq_node_bits) - 1))));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot generate snowseq IDs during recovery"),
				 errdetail("A standby shares the node id of its primary; its IDs would duplicate the primary's."),
				 errhint("Generate IDs on the primary, or promote this standby first.")));
	if (Snowseq->state_error == STATE_MISMATCH)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq configuration does not match its saved state"),
				 errdetail("%s", Snowseq->state_message),
				 errhint("Restore the previous settings, or call snowseq_reset_state() to adopt the new ones.")));
	if (Snowseq->state_error == STATE_CORRUPT)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowseq state file \"%s\" is corrupt", SNOWSEQ_STATE_FILE),
				 errdetail("%s", Snowseq->state_message),
				 errhint("Restore the file from a backup, or call snowseq_reset_state() after checking that the clock has not gone back.")));
	snowseq_backend_ready = true;
}

/* Add to this process's count of IDs issued: a plain store to its own slot. */
void
ShmemCountIssued(uint64 n)
{
	static pg_atomic_uint64 *slot = NULL;

	if (unlikely(slot == NULL))
		slot = &Snowseq->issued[SnowseqMyProcNumber()].ids;
	pg_atomic_write_u64(slot, pg_atomic_read_u64(slot) + n);
}

/* Sum of the per-process counts. */
uint64
ShmemIssuedTotal(void)
{
	uint64		total = 0;

	for (int i = 0; i < Snowseq->nslots; i++)
		total += pg_atomic_read_u64(&Snowseq->issued[i].ids);
	return total;
}
