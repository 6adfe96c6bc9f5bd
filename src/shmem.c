/*
 * shmem.c
 *		snowseq's shared memory: requested at preload, set up at startup,
 *		the same size for the whole life of the server.  It holds the shared
 *		state and the reservations, which start from the state file.
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "compat.h"
#include "reserve.h"

SnowseqShared *Snowseq = NULL;
Reservation *SnowseqRes = NULL;
int			SnowseqResCount = 0;
bool		snowseq_backend_ready = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Number of per-process slots: one per PGPROC. */
static int
ShmemSlotCount(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

/* Bytes of the shared state, without the reservations. */
static Size
ShmemStateSize(void)
{
	return add_size(offsetof(SnowseqShared, issued),
					mul_size(ShmemSlotCount(), sizeof(IssuedSlot)));
}

/* Bytes of shared memory snowseq uses; fixed once the server has started. */
Size
ShmemSize(void)
{
	return add_size(ShmemStateSize(),
					mul_size(RESERVE_FIXED + snowseq_max_counters, sizeof(Reservation)));
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

/* The name a reservation shows in snowseq_reservations. */
const char *
ReservationName(const Reservation *r)
{
	switch (r->id.tag)
	{
		case RESERVE_TAG_CLOCK:
			return "clock";
		case RESERVE_TAG_SEGMENT:
			return "segment";
		case RESERVE_TAG_BACKFILL:
			return "backfill";
		case RESERVE_TAG_WIDE_SEGMENT:
			return "wide segment";
		default:
			return NameStr(r->id.name);
	}
}

/*
 * The reservation with this identity; with create, a free one is taken for
 * it, or NULL when none is left.  Caller holds Snowseq->lock (exclusively
 * to create), or is the postmaster at startup.
 */
Reservation *
ReservationFind(const ReserveId *id, bool create)
{
	Reservation *free_slot = NULL;

	for (int i = 0; i < SnowseqResCount; i++)
	{
		Reservation *r = &SnowseqRes[i];

		if (!r->in_use)
		{
			if (free_slot == NULL && i >= RESERVE_FIXED)
				free_slot = r;
			continue;
		}
		if (r->id.tag == id->tag && r->id.dboid == id->dboid &&
			strcmp(NameStr(r->id.name), NameStr(id->name)) == 0)
			return r;
	}
	if (!create || free_slot == NULL)
		return NULL;
	free_slot->id = *id;
	free_slot->block = 0;
	free_slot->margin = 0;
	free_slot->rate_counter = 0;
	free_slot->rate_jumped = 0;
	free_slot->rate_time = 0;
	free_slot->owner_mark = 0;
	free_slot->owner_tag = 0;
	pg_atomic_write_u64(&free_slot->counter, 0);
	pg_atomic_write_u64(&free_slot->jumped, 0);
	pg_atomic_write_u64(&free_slot->bound, 0);
	pg_atomic_write_u64(&free_slot->low_water, 0);
	pg_write_barrier();
	free_slot->in_use = true;
	return free_slot;
}

/* The reservation a saved slot belongs to; with create, taken if new. */
Reservation *
ReservationOfSlot(const SavedSlot *slot, bool create)
{
	ReserveId	id;

	memset(&id, 0, sizeof(id));
	id.tag = slot->tag;
	id.dboid = slot->dboid;
	id.name = slot->name;
	return ReservationFind(&id, create);
}

/*
 * Raise a reservation to what was saved or replayed: its counter to at
 * least counter, its bound to at least the saved bound.  Never lowers
 * anything, so it is safe while values are being taken.
 */
void
ReservationRaise(Reservation *r, uint64 counter, const SavedSlot *saved)
{
	AtomicRaise(&r->counter, counter);
	AtomicRaise(&r->low_water, saved->bound);
	AtomicRaise(&r->bound, saved->bound);
	if (saved->block != 0)
		r->block = saved->block;
	if (saved->margin != 0)
		r->margin = saved->margin;
}

/* A reservation as it is saved. */
void
ReservationSlot(Reservation *r, SavedSlot *slot)
{
	memset(slot, 0, sizeof(*slot));
	slot->tag = r->id.tag;
	slot->dboid = r->id.dboid;
	slot->name = r->id.name;
	slot->bound = pg_atomic_read_u64(&r->bound);
	slot->block = r->block;
	slot->margin = r->margin;
}

/*
 * Write the state file with every reservation as it stands, r as update
 * says (a bound about to be published).  Caller holds Snowseq->lock
 * exclusively.
 */
void
ReservationSave(Reservation *r, const SavedSlot *update)
{
	SavedState s;
	int			n = 0;

	StateConfigCurrent(&s.config);
	s.slots = palloc0(SnowseqResCount * sizeof(SavedSlot));
	for (int i = 0; i < SnowseqResCount; i++)
	{
		Reservation *x = &SnowseqRes[i];

		if (!x->in_use)
			continue;
		if (x == r && update != NULL)
			s.slots[n++] = *update;
		else
			ReservationSlot(x, &s.slots[n++]);
	}
	s.nslots = n;
	StateWriteFiles(&s);
	pfree(s.slots);
	Snowseq->state_file_found = true;
}

/* Record why nothing may be generated, and log it. */
static void
ShmemStateError(SnowseqStateError err, const char *message, const char *what)
{
	Snowseq->state_error = err;
	strlcpy(Snowseq->state_message, message, sizeof(Snowseq->state_message));
	ereport(LOG,
			(errmsg("%s, no ID will be generated", what),
			 errdetail("%s", message)));
}

/*
 * Load the saved state at server start (postmaster, also after a crash
 * reset): every reservation starts at its saved bound.  A lost state file
 * is replaced by its copy.
 */
static void
ShmemLoadState(void)
{
	SavedState s;
	char		msg[sizeof(Snowseq->state_message)];
	StateRead	rr = StateReadFile(SNOWSEQ_STATE_FILE, &s, msg, sizeof(msg));

	if (rr == STATE_READ_MISSING &&
		StateReadFile(SNOWSEQ_STATE_COPY, &s, msg, sizeof(msg)) == STATE_READ_OK)
	{
		ereport(LOG,
				(errmsg("snowseq state file \"%s\" not found, using its copy \"%s\"",
						SNOWSEQ_STATE_FILE, SNOWSEQ_STATE_COPY)));
		rr = STATE_READ_OK;
	}
	switch (rr)
	{
		case STATE_READ_MISSING:
			ereport(LOG,
					(errmsg("snowseq state file \"%s\" not found, starting from the clock and any WAL replayed",
							SNOWSEQ_STATE_FILE)));
			Snowseq->state_file_found = false;
			return;
		case STATE_READ_CORRUPT:
			ShmemStateError(STATE_CORRUPT, msg,
							psprintf("snowseq state file \"%s\" is corrupt", SNOWSEQ_STATE_FILE));
			return;
		case STATE_READ_OK:
			break;
	}
	Snowseq->state_file_found = true;
	if (StateConfigDiffers(&s.config, msg, sizeof(msg)))
	{
		ShmemStateError(STATE_MISMATCH, msg,
						psprintf("snowseq configuration does not match state file \"%s\"",
								 SNOWSEQ_STATE_FILE));
		return;
	}
	for (int i = 0; i < s.nslots; i++)
	{
		SavedSlot  *slot = &s.slots[i];
		Reservation *r = ReservationOfSlot(slot, true);

		if (r == NULL)
		{
			snprintf(msg, sizeof(msg),
					 "The state file holds %d reservations, more than the %d that snowseq.max_counters = %d leaves room for.",
					 s.nslots, SnowseqResCount, snowseq_max_counters);
			ShmemStateError(STATE_MISMATCH, msg, "snowseq state file does not fit in shared memory");
			return;
		}
		ReservationRaise(r, slot->bound, slot);
	}
	pfree(s.slots);
}

/* Create (or attach to) the shared state and load the state file. */
static void
ShmemStartup(void)
{
	bool		found;
	bool		found_res;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	Snowseq = ShmemInitStruct("snowseq", ShmemStateSize(), &found);
	SnowseqResCount = RESERVE_FIXED + snowseq_max_counters;
	SnowseqRes = ShmemInitStruct("snowseq reservations",
								 mul_size(SnowseqResCount, sizeof(Reservation)), &found_res);
	if (!found)
	{
		memset(Snowseq, 0, ShmemStateSize());
		memset(SnowseqRes, 0, mul_size(SnowseqResCount, sizeof(Reservation)));
		for (int k = 0; k < SnowseqResCount; k++)
		{
			Reservation *r = &SnowseqRes[k];

			pg_atomic_init_u64(&r->counter, 0);
			pg_atomic_init_u64(&r->jumped, 0);
			pg_atomic_init_u64(&r->bound, 0);
			pg_atomic_init_u64(&r->low_water, 0);
			pg_atomic_init_u64(&r->advances, 0);
			pg_atomic_init_u64(&r->waits, 0);
			pg_atomic_init_u64(&r->generation, 0);
		}
		SnowseqRes[RESERVE_CLOCK].id.tag = RESERVE_TAG_CLOCK;
		SnowseqRes[RESERVE_CLOCK].in_use = true;
		SnowseqRes[RESERVE_SEGMENT].id.tag = RESERVE_TAG_SEGMENT;
		SnowseqRes[RESERVE_SEGMENT].in_use = true;
		SnowseqRes[RESERVE_BACKFILL].id.tag = RESERVE_TAG_BACKFILL;
		SnowseqRes[RESERVE_BACKFILL].in_use = true;
		SnowseqRes[RESERVE_WIDE_SEGMENT].id.tag = RESERVE_TAG_WIDE_SEGMENT;
		SnowseqRes[RESERVE_WIDE_SEGMENT].in_use = true;
		pg_atomic_init_u64(&Snowseq->last_wall_ms, 0);
		pg_atomic_init_u64(&Snowseq->backward_events, 0);
		pg_atomic_init_u64(&Snowseq->overflow_borrows, 0);
		pg_atomic_init_u64(&Snowseq->lead_waits, 0);
		pg_atomic_init_u64(&Snowseq->ref_offset_ms, 0);
		pg_atomic_init_u32(&Snowseq->advance_requested, 0);
		SpinLockInit(&Snowseq->backfill_mutex);
		Snowseq->lock = &(GetNamedLWLockTranche("snowseq"))->lock;
		ConditionVariableInit(&Snowseq->advanced);
		Snowseq->nslots = ShmemSlotCount();
		for (int i = 0; i < Snowseq->nslots; i++)
			pg_atomic_init_u64(&Snowseq->issued[i].ids, 0);

		/* the postmaster (or a standalone backend) reads the saved state */
		ShmemLoadState();
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
