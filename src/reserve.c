/*
 * reserve.c
 *		The reservations and their protocol: the reservation objects in
 *		shared memory, loaded from the state file at start and saved to it;
 *		advancing a counter's durable bound ahead of need, and waiting for it
 *		when a caller reaches it.  One code path for every counter; what
 *		differs between counters comes from their owner in a ReserveSpec, by
 *		a rule the owner registers (ReserveRegisterOwner).
 *
 * An advance, always under Snowseq->lock, in this order:
 *	 1. a WAL record with the new bound, flushed (and, when synchronous
 *		replication is configured, confirmed by the synchronous standby);
 *	 2. the state file, written, fsynced and durably renamed;
 *	 3. the new bound in shared memory.
 * At start the counters begin at the saved bounds; redo moves them up,
 * never down.  A crash can only skip values, never repeat one.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "guc.h"
#include "reserve.h"
#include "rmgr.h"
#include "syncrep.h"
#include "testpoint.h"

Reservation *SnowseqRes = NULL; /* RESERVE_FIXED + snowseq.max_counters */
int			SnowseqResCount = 0;

/* the advance and reset rules of each fixed reservation, registered by its owner */
static ReserveSpecFn reserve_owners[RESERVE_FIXED];
static const ReserveResetRule *reserve_resets[RESERVE_FIXED];

/* Bytes of the reservations in shared memory; fixed once the server has started. */
Size
ReserveShmemSize(void)
{
	return mul_size(RESERVE_FIXED + snowseq_max_counters, sizeof(Reservation));
}

/*
 * Create (or attach to) the reservations, the fixed ones in place; returns
 * whether they existed.  Caller holds AddinShmemInitLock.
 */
bool
ReserveShmemInit(void)
{
	bool		found;

	SnowseqResCount = RESERVE_FIXED + snowseq_max_counters;
	SnowseqRes = ShmemInitStruct("snowseq reservations", ReserveShmemSize(), &found);
	if (found)
		return true;
	memset(SnowseqRes, 0, ReserveShmemSize());
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
	return false;
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
	free_slot->promote_rate = 0;
	free_slot->space_end = 0;
	free_slot->promote_full = false;
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

/*
 * Load the saved state at server start (postmaster, also after a crash
 * reset): every reservation starts at its saved bound.  A lost state file
 * is replaced by its copy.
 */
void
ReserveLoadState(void)
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
			ShmemSetStateError(STATE_CORRUPT, msg,
							psprintf("snowseq state file \"%s\" is corrupt", SNOWSEQ_STATE_FILE));
			return;
		case STATE_READ_OK:
			break;
	}
	Snowseq->state_file_found = true;
	if (StateConfigDiffers(&s.config, msg, sizeof(msg)))
	{
		ShmemSetStateError(STATE_MISMATCH, msg,
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
			ShmemSetStateError(STATE_MISMATCH, msg, "snowseq state file does not fit in shared memory");
			return;
		}
		ReservationRaise(r, slot->bound, slot);
	}
	pfree(s.slots);
}


/*
 * The counter's rate since the last advance, in values a millisecond (0:
 * none measured yet); jumps count as use only when the spec says so.
 */
static double
ReserveRate(Reservation *r, const ReserveSpec *spec, uint64 counter, uint64 jumped,
			TimestampTz now)
{
	uint64		used = counter > r->rate_counter ? counter - r->rate_counter : 0;

	if (!spec->jumps_are_use)
	{
		uint64		skipped = jumped - r->rate_jumped;

		used = used > skipped ? used - skipped : 0;
	}
	if (r->rate_time == 0 || now <= r->rate_time || used == 0)
		return 0;
	return (double) used / ((double) (now - r->rate_time) / 1000.0);
}

/*
 * Block size: the observed rate times the buffer, within the spec's bounds.
 * The rate is of values handed out: unless the spec says jumps are use
 * (the clock, whose counter the wall clock moves), what the counter jumped
 * (a serial's new period, a raise) is not traffic.
 */
static uint64
ReserveBlock(const ReserveSpec *spec, double per_ms)
{
	uint64		block = spec->block_min;
	double		want = per_ms * snowseq_reserve_buffer_ms;

	if (want > (double) block)
		block = want >= (double) spec->block_max ? spec->block_max : (uint64) want;
	return Max(block, 1);
}

/*
 * A block above base as the space allows: not past the spec's ceiling, and
 * at most 1/RESERVE_SHARE of what is left of the space above base (at
 * least one value), so that what a restart skips is a small share of what
 * is left, however fast the counter ran.
 */
static uint64
ReserveClampBlock(const ReserveSpec *spec, uint64 base, uint64 block)
{
	uint64		end = spec->end != 0 ? spec->end : PG_UINT64_MAX;

	block = Min(block, spec->ceiling - Min(base, spec->ceiling));
	if (base < end)
		block = Min(block, Max((end - base) / RESERVE_SHARE, 1));
	return block;
}

/*
 * The bound an advance would write now so that at least `need` may be
 * handed out, plus a block, within the spec's ceiling; the current bound
 * when none is due.  Caller holds Snowseq->lock.  An owner that must record
 * something before a bound is published asks this first, records, then
 * advances with the answer as its ceiling.
 */
uint64
ReserveNextBound(Reservation *r, const ReserveSpec *spec, uint64 need)
{
	/* counter first: a jump in flight then counts as less use, never more */
	uint64		counter = Max(pg_atomic_read_u64(&r->counter), spec->floor);
	uint64		jumped = pg_atomic_read_u64(&r->jumped);
	uint64		base = Max(counter, need);
	uint64		block = ReserveBlock(spec, ReserveRate(r, spec, counter, jumped, GetCurrentTimestamp()));
	uint64		bound = pg_atomic_read_u64(&r->bound);

	block = ReserveClampBlock(spec, base, block);
	return Max(bound, base + block);
}

/*
 * Raise a reservation's counter to at least `to` without handing values
 * out (a floor carried from elsewhere): a jump, not traffic.
 */
void
ReserveRaise(Reservation *r, uint64 to)
{
	uint64		cur = pg_atomic_read_u64(&r->counter);

	while (cur < to)
	{
		uint64		jump = to - cur;

		pg_atomic_fetch_add_u64(&r->jumped, jump);
		if (pg_atomic_compare_exchange_u64(&r->counter, &cur, to))
			break;
		pg_atomic_fetch_sub_u64(&r->jumped, jump);
	}
}

/*
 * Advance a reservation so that at least `need` may be handed out, plus a
 * block, but not past the spec's ceiling.  Caller holds Snowseq->lock
 * exclusively.  Returns whether a new bound was written.
 */
bool
ReserveAdvance(Reservation *r, const ReserveSpec *spec, uint64 need)
{
	/* counter first: a jump in flight then counts as less use, never more */
	uint64		counter = Max(pg_atomic_read_u64(&r->counter), spec->floor);
	uint64		jumped = pg_atomic_read_u64(&r->jumped);
	uint64		base = Max(counter, need);
	TimestampTz now = GetCurrentTimestamp();
	double		per_ms = ReserveRate(r, spec, counter, jumped, now);
	uint64		block = ReserveBlock(spec, per_ms);
	SavedSlot	slot;
	XLogRecPtr	lsn;

	Assert(LWLockHeldByMeInMode(Snowseq->lock, LW_EXCLUSIVE));
	block = ReserveClampBlock(spec, base, block);
	if (base + block <= pg_atomic_read_u64(&r->bound))
		return false;

	ReservationSlot(r, &slot);
	slot.bound = base + block;
	slot.block = block;
	slot.margin = Max(spec->margin_min,
					  block + block * (uint64) snowseq_promote_margin_ms /
					  (uint64) snowseq_reserve_buffer_ms);

	/* 1. WAL, flushed, confirmed by a synchronous standby if there is one */
	lsn = RmgrLogAdvance(&slot, spec->end, now, (uint64) ceil(per_ms * 1000.0));
	SyncRepWaitReservation(lsn);

	/* 2. the state file */
	ReservationSave(r, &slot);

	/* 3. publish */
	r->block = block;
	r->margin = slot.margin;
	r->rate_counter = counter;
	r->rate_jumped = jumped;
	r->rate_time = now;
	pg_atomic_write_u64(&r->low_water, slot.bound - block / 2);
	pg_write_barrier();
	pg_atomic_write_u64(&r->bound, slot.bound);
	pg_atomic_fetch_add_u64(&r->advances, 1);
	return true;
}

/*
 * Advance a reservation past its low-water mark, or, with in_use, any that
 * was ever used.  Caller holds Snowseq->lock exclusively.
 */
bool
ReserveAdvanceIfDue(Reservation *r, const ReserveSpec *spec, bool in_use)
{
	uint64		counter = pg_atomic_read_u64(&r->counter);

	if (counter > pg_atomic_read_u64(&r->low_water) || (in_use && counter > 0))
		return ReserveAdvance(r, spec, 0);
	return false;
}

/*
 * Wait until `need` is within the reservation, advancing it ourselves if
 * nobody else is.  need must not be above spec->ceiling.  Sleeps on a
 * condition variable, so the wait can be cancelled, and re-checks on a
 * timer in case an advancer failed.
 */
void
ReserveWait(Reservation *r, const ReserveSpec *spec, uint64 need)
{
	pg_atomic_fetch_add_u64(&r->waits, 1);
	while (pg_atomic_read_u64(&r->bound) < need)
	{
		if (LWLockConditionalAcquire(Snowseq->lock, LW_EXCLUSIVE))
		{
			if (pg_atomic_read_u64(&r->bound) < need)
				ReserveAdvance(r, spec, need);
			LWLockRelease(Snowseq->lock);
			ConditionVariableBroadcast(&Snowseq->advanced);
			break;
		}
		ConditionVariablePrepareToSleep(&Snowseq->advanced);
		if (pg_atomic_read_u64(&r->bound) < need)
			ConditionVariableTimedSleep(&Snowseq->advanced, 10, PG_WAIT_EXTENSION);
		ConditionVariableCancelSleep();
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * A counter passed its low-water mark: wake the reservation worker once.
 * Without a worker, advance here if nobody else is doing it.
 */
void
ReserveRequestAdvance(Reservation *r, const ReserveSpec *spec)
{
	Latch	   *latch = Snowseq->worker_latch;

	if (latch != NULL)
	{
		if (pg_atomic_read_u32(&Snowseq->advance_requested) == 0 &&
			pg_atomic_exchange_u32(&Snowseq->advance_requested, 1) == 0)
			SetLatch(latch);
		return;
	}
	if (LWLockConditionalAcquire(Snowseq->lock, LW_EXCLUSIVE))
	{
		bool		did = ReserveAdvanceIfDue(r, spec, false);

		LWLockRelease(Snowseq->lock);
		if (did)
			ConditionVariableBroadcast(&Snowseq->advanced);
	}
}

/*
 * Register the advance rule of a fixed reservation (RESERVE_CLOCK...);
 * called by its owner at preload.
 */
void
ReserveRegisterOwner(int index, ReserveSpecFn spec, const ReserveResetRule *reset)
{
	Assert(index >= 0 && index < RESERVE_FIXED);
	reserve_owners[index] = spec;
	reserve_resets[index] = reset;
}

/* A reset rule's raise for a counter that only has to stand at floor (and its bound with it). */
void
ReserveResetRaise(Reservation *r, uint64 floor, const ReserveResetArgs *args)
{
	SavedSlot	raised;

	memset(&raised, 0, sizeof(raised));
	raised.tag = r->id.tag;
	raised.bound = floor;
	ReservationRaise(r, floor, &raised);
}

/* The bound a saved state holds for the fixed reservation of tag (0 if none). */
uint64
ReserveSavedBound(const SavedState *old, uint32 tag)
{
	for (int i = 0; old != NULL && i < old->nslots; i++)
		if (old->slots[i].tag == tag)
			return old->slots[i].bound;
	return 0;
}

/*
 * A reset: where each fixed reservation must resume, by its owner's rule,
 * every one known before any is raised (a rule that refuses refuses the
 * whole reset); then each raised, in order.  Named counters keep their
 * bounds.  Caller holds Snowseq->lock exclusively and saves the state.
 */
void
ReserveResetAll(const ReserveResetArgs *args)
{
	uint64		floors[RESERVE_FIXED] = {0};

	for (int i = 0; i < RESERVE_FIXED; i++)
		if (reserve_resets[i] != NULL)
			floors[i] = reserve_resets[i]->floor(args);

	/*
	 * isolation tests pause here: the floors are known and the lock is
	 * held, nothing is raised yet (generation goes on lock-free below the
	 * durable bounds; test/specs/reset_race.spec)
	 */
	SNOWSEQ_TESTPOINT("reset_locked");

	for (int i = 0; i < RESERVE_FIXED; i++)
		if (reserve_resets[i] != NULL)
			reserve_resets[i]->raise(&SnowseqRes[i], floors[i], args);
	for (int i = 0; args->old != NULL && i < args->old->nslots; i++)
	{
		const SavedSlot *slot = &args->old->slots[i];
		Reservation *r;

		if (slot->tag != RESERVE_TAG_COUNTER)
			continue;
		r = ReservationOfSlot(slot, true);
		if (r == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the saved state holds more named counters than snowseq.max_counters = %d allows",
							snowseq_max_counters),
					 errhint("Raise snowseq.max_counters and restart the server.")));
		ReservationRaise(r, slot->bound, slot);
	}
}

/*
 * Advance every registered reservation that is past its low-water mark; at
 * start, every one ever used, to get ahead of its first caller.  Named
 * counters advance in a backend of their database instead (counter.c),
 * which writes the counter's floor sequence before the new bound.  Returns
 * whether any advanced.
 */
bool
ReserveAdvanceAllDue(bool at_start)
{
	bool		did = false;

	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	if (Snowseq->state_error == STATE_OK && snowseq_node_id >= 0)
	{
		bool		in_use = at_start && Snowseq->state_file_found;

		for (int i = 0; i < RESERVE_FIXED; i++)
		{
			ReserveSpec spec;

			if (reserve_owners[i] == NULL)
				continue;
			memset(&spec, 0, sizeof(spec));
			reserve_owners[i] (&spec);
			did |= ReserveAdvanceIfDue(&SnowseqRes[i], &spec, in_use);
		}
	}
	LWLockRelease(Snowseq->lock);
	if (did)
		ConditionVariableBroadcast(&Snowseq->advanced);
	return did;
}
