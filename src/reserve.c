/*
 * reserve.c
 *		The reservation protocol: advance a counter's durable bound ahead of
 *		need, and wait for it when a caller reaches it.  One code path for
 *		every counter; what differs between counters comes from their owner
 *		in a ReserveSpec.
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

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "reserve.h"

/*
 * Block size: the observed rate times the buffer, within the spec's bounds.
 * The rate is of values handed out: unless the spec says jumps are use
 * (the clock, whose counter the wall clock moves), what the counter jumped
 * (a serial's new period, a raise) is not traffic.
 */
static uint64
ReserveBlock(Reservation *r, const ReserveSpec *spec, uint64 counter, uint64 jumped,
			 TimestampTz now)
{
	uint64		block = spec->block_min;
	uint64		used = counter > r->rate_counter ? counter - r->rate_counter : 0;

	if (!spec->jumps_are_use)
	{
		uint64		skipped = jumped - r->rate_jumped;

		used = used > skipped ? used - skipped : 0;
	}
	if (r->rate_time != 0 && now > r->rate_time && used > 0)
	{
		double		per_ms = (double) used / ((double) (now - r->rate_time) / 1000.0);
		double		want = per_ms * snowseq_reserve_buffer_ms;

		if (want > (double) block)
			block = want >= (double) spec->block_max ? spec->block_max : (uint64) want;
	}
	return Max(block, 1);
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
	uint64		block = ReserveBlock(r, spec, counter, jumped, GetCurrentTimestamp());
	uint64		bound = pg_atomic_read_u64(&r->bound);

	block = Min(block, spec->ceiling - Min(base, spec->ceiling));
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
	uint64		block = ReserveBlock(r, spec, counter, jumped, now);
	SavedSlot	slot;
	XLogRecPtr	lsn;

	Assert(LWLockHeldByMeInMode(Snowseq->lock, LW_EXCLUSIVE));
	block = Min(block, spec->ceiling - Min(base, spec->ceiling));
	if (base + block <= pg_atomic_read_u64(&r->bound))
		return false;

	ReservationSlot(r, &slot);
	slot.bound = base + block;
	slot.block = block;
	slot.margin = Max(spec->margin_min,
					  block + block * (uint64) snowseq_promote_margin_ms /
					  (uint64) snowseq_reserve_buffer_ms);

	/* 1. WAL, flushed, confirmed by a synchronous standby if there is one */
	lsn = RmgrLogAdvance(&slot);
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
