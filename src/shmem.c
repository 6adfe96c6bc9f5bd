/*
 * shmem.c
 *		snowseq's shared memory: requested at preload, set up at startup,
 *		the same size for the whole life of the server.
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "compat.h"
#include "snowseq.h"

SnowseqShared *Snowseq = NULL;
bool		snowseq_backend_ready = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Number of per-process slots: one per PGPROC. */
static int
ShmemSlotCount(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

/* Bytes of shared memory snowseq uses; fixed once the server has started. */
Size
ShmemSize(void)
{
	return add_size(offsetof(SnowseqShared, issued),
					mul_size(ShmemSlotCount(), sizeof(IssuedSlot)));
}

/* Ask for the shared memory and the lock. */
static void
ShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(ShmemSize());
	RequestNamedLWLockTranche("snowseq", 1);
}

/* Create (or attach to) the shared state and load the state file. */
static void
ShmemStartup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	Snowseq = ShmemInitStruct("snowseq", ShmemSize(), &found);
	if (!found)
	{
		memset(Snowseq, 0, ShmemSize());
		for (int k = 0; k < RESERVE_COUNT; k++)
		{
			Reservation *r = &Snowseq->res[k];

			pg_atomic_init_u64(&r->counter, 0);
			pg_atomic_init_u64(&r->bound, 0);
			pg_atomic_init_u64(&r->low_water, 0);
			pg_atomic_init_u64(&r->advances, 0);
			pg_atomic_init_u64(&r->waits, 0);
		}
		pg_atomic_init_u64(&Snowseq->last_wall_ms, 0);
		pg_atomic_init_u64(&Snowseq->backward_events, 0);
		pg_atomic_init_u64(&Snowseq->overflow_borrows, 0);
		pg_atomic_init_u32(&Snowseq->advance_requested, 0);
		Snowseq->lock = &(GetNamedLWLockTranche("snowseq"))->lock;
		ConditionVariableInit(&Snowseq->advanced);
		Snowseq->nslots = ShmemSlotCount();
		for (int i = 0; i < Snowseq->nslots; i++)
			pg_atomic_init_u64(&Snowseq->issued[i].ids, 0);

		/* the postmaster (or a standalone backend) reads the saved state */
		ReserveLoadStateFile();
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Install the shared memory hooks; called from _PG_init at preload. */
void
ShmemInit(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = ShmemRequest;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = ShmemStartup;
}

/*
 * The slow half of SnowseqCheckUsable: say precisely why no ID can be
 * generated, or remember that this backend may generate.
 */
void
ShmemCheckUsableSlow(void)
{
	if (Snowseq == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq must be loaded via shared_preload_libraries"),
				 errhint("Add snowseq to shared_preload_libraries in postgresql.conf and restart the server.")));
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
				 errhint("Restore the previous settings, or call snowseq_reset_state() as a superuser to adopt the new ones.")));
	if (Snowseq->state_error == STATE_CORRUPT)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowseq state file \"%s\" is corrupt", SNOWSEQ_STATE_FILE),
				 errdetail("%s", Snowseq->state_message),
				 errhint("Restore the file from a backup, or call snowseq_reset_state() as a superuser after checking that the clock has not gone back.")));
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
