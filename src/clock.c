/*
 * clock.c
 *		The snowflake generator: one lock-free logical clock for the whole
 *		cluster, and the SQL functions that issue, parse and bound its IDs.
 *
 * The clock is one 64-bit counter, (time << seq_bits) | seq.  The next
 * value is max(counter + 1, now << seq_bits), installed with compare-and-
 * swap: a sequence overflow or a clock that goes back simply borrows the
 * next time unit, and the wall clock catches up later.  The counter never
 * passes its reservation (reserve.c), whose ceiling keeps the logical clock
 * within snowseq.max_lead_ms of a reference clock: the wall clock, made
 * monotonic, so that a clock stepped back does not count as lead.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "common/int.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "clock.h"
#include "guc.h"
#include "reserve.h"
#include "timeutil.h"

/* the clock's statistics and reference clock, in shared memory */
typedef struct ClockShared
{
	pg_atomic_uint64 last_wall_ms;	/* detects a clock that goes back */
	pg_atomic_uint64 backward_events;
	pg_atomic_uint64 overflow_borrows;
	pg_atomic_uint64 lead_waits;
	pg_atomic_uint64 ref_offset_ms; /* reference clock = monotonic + this */
} ClockShared;

static ClockShared *ClockState = NULL;

static void ClockSpec(ReserveSpec *spec);
static uint64 ClockResetFloor(const ReserveResetArgs *args);
static void ClockResetRaise(Reservation *r, uint64 floor, const ReserveResetArgs *args);
static const ReserveResetRule clock_reset = {ClockResetFloor, ClockResetRaise};

/* The layout, derived once at preload (the settings are fixed from then on). */
static int	seq_bits;
static int	node_bits;
static uint64 seq_mask;
static uint64 time_limit;		/* first time field value past the end */
static uint64 counter_limit;	/* first counter value past the time field */

/*
 * An ID is ((counter & high_mask) << node_bits) | node_part | (counter &
 * low_mask), whatever the field order: with the sequence below the node
 * (time | node | seq) the high part is the time field and the low part the
 * sequence; with the sequence above it (time | seq | node) the whole
 * counter moves up and the node id fills the bottom.  Same operations
 * either way.
 */
static uint64 high_mask;
static uint64 low_mask;
static int	node_shift;			/* where the node field starts */
static int	seq_shift;			/* where the sequence field starts */
static uint64 node_part;		/* node id << node_shift */
static uint64 backfill_node_part;	/* backfill node id << node_shift */

/* Derive the hot-path constants from the settings; called at preload. */
void
ClockInit(void)
{
	seq_bits = snowseq_seq_bits;
	node_bits = snowseq_node_bits;
	seq_mask = ((uint64) 1 << seq_bits) - 1;
	time_limit = (uint64) 1 << snowseq_time_bits;
	counter_limit = time_limit << seq_bits;
	if (snowseq_seq_before_node)
	{
		high_mask = ~UINT64CONST(0);
		low_mask = 0;
		node_shift = 0;
		seq_shift = node_bits;
	}
	else
	{
		high_mask = ~seq_mask;
		low_mask = seq_mask;
		node_shift = seq_bits;
		seq_shift = 0;
	}
	node_part = snowseq_node_id < 0 ? 0 : (uint64) snowseq_node_id << node_shift;
	backfill_node_part = snowseq_backfill_node_id < 0 ? 0 :
		(uint64) snowseq_backfill_node_id << node_shift;
	ReserveRegisterOwner(RESERVE_CLOCK, ClockSpec, &clock_reset);
}

/*
 * Where the clock resumes after a reset: its saved bound under the same
 * configuration; else above every ID the old configuration could have
 * issued, with its node id or any other (IDs for past instants carry the
 * backfill node id).
 */
static uint64
ClockResetFloor(const ReserveResetArgs *args)
{
	uint64		bound = ReserveSavedBound(args->old, RESERVE_TAG_CLOCK);
	SavedConfig any;

	if (args->old == NULL)
		return 0;
	if (args->same_config)
		return bound;
	any = args->old->config;
	any.node_id = -1;
	return Max(ClockFloorAfterReset(&args->old->config, bound), ClockFloorAfterReset(&any, bound));
}

/* Raise the clock for a reset, refusing a lead past snowseq.max_lead_ms in another configuration. */
static void
ClockResetRaise(Reservation *r, uint64 floor, const ReserveResetArgs *args)
{
	SavedSlot	raised;

	ClockRaiseForReset(floor, !args->same_config, &raised);
}

/* Bytes of the clock's shared memory. */
Size
ClockShmemSize(void)
{
	return MAXALIGN(sizeof(ClockShared));
}

/* Create (or attach to) the clock's shared memory; caller holds AddinShmemInitLock. */
void
ClockShmemInit(void)
{
	bool		found;

	ClockState = ShmemInitStruct("snowseq clock", ClockShmemSize(), &found);
	if (found)
		return;
	pg_atomic_init_u64(&ClockState->last_wall_ms, 0);
	pg_atomic_init_u64(&ClockState->backward_events, 0);
	pg_atomic_init_u64(&ClockState->overflow_borrows, 0);
	pg_atomic_init_u64(&ClockState->lead_waits, 0);
	pg_atomic_init_u64(&ClockState->ref_offset_ms, 0);
}

/* The clock's event counts, for snowseq_status. */
void
ClockStats(uint64 *backward_events, uint64 *overflow_borrows, uint64 *lead_waits)
{
	*backward_events = pg_atomic_read_u64(&ClockState->backward_events);
	*overflow_borrows = pg_atomic_read_u64(&ClockState->overflow_borrows);
	*lead_waits = pg_atomic_read_u64(&ClockState->lead_waits);
}

/* First counter value past the end of the time field. */
uint64
ClockCounterLimit(void)
{
	return counter_limit;
}

/*
 * Time units since the epoch as ms since 1970, or false when that is
 * beyond int64 (wide time fields with long units).
 */
bool
ClockUnitsToMs(uint64 units, int64 *ms)
{
	int64		span;

	if (units > (uint64) PG_INT64_MAX ||
		pg_mul_s64_overflow((int64) units, snowseq_time_unit_ms, &span) ||
		pg_add_s64_overflow(SnowseqEpochMs, span, ms))
		return false;
	return true;
}

/* The instant of a time field value; with saturate, infinity past the timestamp range. */
static TimestampTz
ClockUnitsToTimestamptz(uint64 units, bool saturate)
{
	int64		ms;
	int64		us;

	if (ClockUnitsToMs(units, &ms) &&
		!pg_sub_s64_overflow(ms, SNOWSEQ_UNIX_TO_PG_MS, &us) &&
		!pg_mul_s64_overflow(us, 1000, &us) && IS_VALID_TIMESTAMP(us))
		return us;
	if (saturate)
		return DT_NOEND;
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
			 errmsg("snowseq time field value %llu is beyond the timestamp range",
					(unsigned long long) units),
			 errdetail("snowseq.time_unit_ms = %d from snowseq.epoch reaches past the year 294276.",
					   snowseq_time_unit_ms)));
	return 0;					/* keep compiler quiet */
}

/*
 * The wall clock in time units since the epoch, noting a clock that went
 * back; at most the end of the time field.  Each backend remembers its last
 * millisecond: while the clock stays in it, the reading costs one
 * clock_gettime and a compare.  On a new millisecond the last reading of
 * the cluster is loaded before the clock was read, so a reading below it
 * means the clock really stepped back; the CAS that installs the lower
 * value counts the step once, whichever backend sees it first.
 */
static inline uint64
ClockNowUnits(void)
{
	static int64 cached_ms = -1;
	static uint64 cached_units = 0;
	uint64		last;
	int64		ms = TimeWallMs();

	if (likely(ms == cached_ms))
		return cached_units;

	/* a new millisecond: load the cluster's last reading, then read again */
	last = pg_atomic_read_u64(&ClockState->last_wall_ms);
	pg_read_barrier();
	ms = TimeWallMs();
	if ((uint64) ms != last)
	{
		if ((uint64) ms < last)
		{
			if (pg_atomic_compare_exchange_u64(&ClockState->last_wall_ms, &last, (uint64) ms))
				pg_atomic_fetch_add_u64(&ClockState->backward_events, 1);
		}
		else
			pg_atomic_compare_exchange_u64(&ClockState->last_wall_ms, &last, (uint64) ms);
	}
	cached_ms = ms;
	if (ms <= SnowseqEpochMs)
		cached_units = 0;
	else
		cached_units = Min((uint64) (ms - SnowseqEpochMs) / (uint64) snowseq_time_unit_ms,
						   time_limit);
	return cached_units;
}

/* Time units since the epoch of an instant in ms, at most the end of the field. */
static uint64
ClockMsToUnitsSince(int64 ms)
{
	if (ms <= SnowseqEpochMs)
		return 0;
	return Min((uint64) (ms - SnowseqEpochMs) / (uint64) snowseq_time_unit_ms, time_limit);
}

/* A duration in ms as counter values (whole time units). */
static uint64
ClockMsToCounter(int64 ms)
{
	return (uint64) (ms / snowseq_time_unit_ms) << seq_bits;
}

/*
 * The reference clock, in ms since 1970: the wall clock, but never going
 * back (a monotonic clock plus an offset that only rises).  It starts at
 * the logical clock as it stands, so a restart with the wall clock behind,
 * or a promotion above the replayed reservation, is no lead.
 */
static int64
ClockReferenceMs(void)
{
	int64		mono = TimeMonotonicMs();
	int64		wall = TimeWallMs();
	int64		from = wall;

	if (pg_atomic_read_u64(&ClockState->ref_offset_ms) == 0)
	{
		uint64		units = pg_atomic_read_u64(&SnowseqRes[RESERVE_CLOCK].counter) >> seq_bits;
		int64		ms;

		if (ClockUnitsToMs(units, &ms))
			from = Max(from, ms);
	}
	return mono + (int64) AtomicRaise(&ClockState->ref_offset_ms, (uint64) (from - mono));
}

/* How the clock's reservation may advance now. */
static void
ClockSpec(ReserveSpec *spec)
{
	uint64		ref = ClockMsToUnitsSince(ClockReferenceMs());
	uint64		lead = (uint64) (snowseq_max_lead_ms / snowseq_time_unit_ms);

	spec->floor = ClockNowUnits() << seq_bits;
	spec->ceiling = Min(counter_limit, (ref + lead + 1) << seq_bits) - 1;
	spec->end = counter_limit;
	spec->block_min = Max(ClockMsToCounter(snowseq_clock_block_min_ms), (uint64) 1 << seq_bits);
	spec->block_max = Max(ClockMsToCounter(snowseq_clock_block_max_ms), spec->block_min);
	spec->margin_min = ClockMsToCounter(snowseq_promote_margin_ms);
	/* the wall clock moving the counter uses up the reservation too */
	spec->jumps_are_use = true;
}

/*
 * The counter needs `need` but the clock would lead the reference clock by
 * more than snowseq.max_lead_ms: wait for the reference clock to move on,
 * until there is room for a block above need (or half the lead), so that
 * a clock held at its lead advances its reservation in blocks, not once
 * per time unit.
 */
static void
ClockWaitForLead(uint64 need, const ReserveSpec *spec)
{
	uint64		lead = (uint64) (snowseq_max_lead_ms / snowseq_time_unit_ms) << seq_bits;
	uint64		room = Min(spec->block_min, lead / 2);
	int64		ms = (int64) (((need + room) >> seq_bits) - (spec->ceiling >> seq_bits)) *
		snowseq_time_unit_ms;

	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Min(Max(ms, 1), 1000), PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* The time unit the wall clock is in now (for what is left of the time field). */
uint64
ClockWallUnits(void)
{
	return ClockNowUnits();
}

/* The instant the time field runs out (infinity if past the timestamp range). */
TimestampTz
ClockEndOfTime(void)
{
	return ClockUnitsToTimestamptz(time_limit, true);
}

/* ERROR: the time field has run out. */
static void
ClockRanOut(void)
{
	char		end[MAXDATELEN + 1];

	strlcpy(end, timestamptz_to_str(ClockEndOfTime()), sizeof(end));
	ereport(ERROR,
			(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
			 errmsg("snowseq time field ran out at %s", end),
			 errdetail("snowseq.time_bits = %d with snowseq.time_unit_ms = %d from snowseq.epoch last until then.",
					   snowseq_time_bits, snowseq_time_unit_ms),
			 errhint("Choose a later snowseq.epoch or more time bits; IDs never wrap.")));
}

/*
 * Take n consecutive counter values and return the first.  Lock-free: one
 * clock read, one CAS; waits only for a durable reservation or at the
 * bound on the lead.
 */
uint64
ClockNext(uint64 n)
{
	Reservation *r = &SnowseqRes[RESERVE_CLOCK];
	uint64		now = ClockNowUnits() << seq_bits;
	uint64		first;
	uint64		last;
	bool		waited = false;
	ReserveSpec spec;

	for (;;)
	{
		ReserveResult rr = ReserveTake(r, now, n, counter_limit, &first, &last);

		if (likely(rr == RESERVE_OK))
			break;
		if (rr == RESERVE_LOW)
		{
			ClockSpec(&spec);
			ReserveRequestAdvance(r, &spec);
			break;
		}
		if (rr == RESERVE_LIMIT)
			ClockRanOut();
		/* RESERVE_BOUND: the reservation, or the lead, must move first */
		ClockSpec(&spec);
		if (last > spec.ceiling)
		{
			if (!waited)
				pg_atomic_fetch_add_u64(&ClockState->lead_waits, 1);
			waited = true;
			ClockWaitForLead(last, &spec);
		}
		else
			ReserveWait(r, &spec, last);
	}

	/* started in a time unit the wall clock has not reached: borrowed */
	if (unlikely((last >> seq_bits) > (now >> seq_bits) &&
				 ((first - 1) >> seq_bits) < (last >> seq_bits)))
		pg_atomic_fetch_add_u64(&ClockState->overflow_borrows, 1);
	return first;
}

/*
 * The largest batch one call may take: what the lead allows, for a batch
 * never waits for itself.
 */
static uint64
ClockMaxBatch(void)
{
	uint64		lead = (uint64) (snowseq_max_lead_ms / snowseq_time_unit_ms);

	return Min((uint64) 1 << (seq_bits + 10), (lead + 1) << seq_bits);
}

/* Splice the node id into a counter value: [0][time][node][seq] or [0][time][seq][node]. */
int64
ClockComposeId(uint64 counter)
{
	return (int64) (((counter & high_mask) << node_bits) | node_part | (counter & low_mask));
}

/* The same for a value of the backfill clock, with the backfill node id. */
int64
ClockComposeBackfillId(uint64 counter)
{
	return (int64) (((counter & high_mask) << node_bits) | backfill_node_part | (counter & low_mask));
}

/* The instant of a clock counter value's time field (infinity past the range). */
TimestampTz
ClockCounterInstant(uint64 counter)
{
	return ClockUnitsToTimestamptz(counter >> seq_bits, true);
}

/*
 * Where the clock must resume after a reset from an old configuration:
 * every ID it issues then is greater than every ID the old configuration
 * could have issued, which is its durable bound composed in its own layout
 * with its own node id.  The first time unit whose IDs all lie above that
 * one; ERROR if the new time field has none.
 */
uint64
ClockFloorAfterReset(const SavedConfig *old, uint64 old_bound)
{
	int			old_shift = old->node_bits + old->seq_bits;
	uint64		old_limit;
	uint64		old_node;
	uint64		b;
	uint64		max_old;
	uint64		t;

	if (old->time_bits < 1 || old->seq_bits < 0 || old->node_bits < 0 ||
		old->time_bits + old_shift > 63 || old_bound == 0)
		return 0;
	old_limit = (uint64) 1 << (old->time_bits + old->seq_bits);
	b = Min(old_bound, old_limit - 1);
	old_node = old->node_id < 0 ? ((uint64) 1 << old->node_bits) - 1 : (uint64) old->node_id;
	if (old->seq_before_node)
		max_old = (b << old->node_bits) | old_node;
	else
		max_old = ((b >> old->seq_bits) << old_shift) | (old_node << old->seq_bits) |
			(b & (((uint64) 1 << old->seq_bits) - 1));
	t = (max_old >> (node_bits + seq_bits)) + 1;

	/*
	 * and, so that their times do not go back either, not before the
	 * instant the old bound stands for, as far as the lead allows: the IDs
	 * the old clock issued stood at most that far ahead
	 */
	if (old->time_unit_ms > 0)
	{
		int64		old_ms;
		int64		span;

		if (!pg_mul_s64_overflow((int64) (b >> old->seq_bits) + 1, old->time_unit_ms, &span) &&
			!pg_add_s64_overflow(old->epoch_ms, span, &old_ms))
		{
			old_ms = Min(old_ms, TimeWallMs() + snowseq_max_lead_ms);
			if (old_ms > SnowseqEpochMs)
				t = Max(t, ((uint64) (old_ms - SnowseqEpochMs) + snowseq_time_unit_ms - 1) /
						(uint64) snowseq_time_unit_ms);
		}
	}
	if (t >= time_limit)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the new snowseq layout cannot issue IDs above those of the old one"),
				 errdetail("The old configuration may have issued IDs up to %llu; the new time field ends below that.",
						   (unsigned long long) max_old),
				 errhint("Restore the previous settings, or choose a layout with a wider time field.")));
	return t << seq_bits;
}

/* The lead the clock would have standing at counter, in ms (0 if none). */
static int64
ClockLeadAt(uint64 counter)
{
	int64		ms;
	int64		ref = ClockReferenceMs();

	if (!ClockUnitsToMs(counter >> seq_bits, &ms))
		return PG_INT64_MAX;
	return Max(ms - ref, 0);
}

/*
 * Raise the clock to floor for a reset; with check_lead, refuse when that
 * would put it further ahead of the reference clock than
 * snowseq.max_lead_ms allows.  Caller holds Snowseq->lock.
 */
void
ClockRaiseForReset(uint64 floor, bool check_lead, SavedSlot *slot)
{
	Reservation *r = &SnowseqRes[RESERVE_CLOCK];
	uint64		now = ClockNowUnits() << seq_bits;
	int64		lead;

	floor = Max(floor, now);
	lead = ClockLeadAt(floor) - snowseq_time_unit_ms;
	if (check_lead && lead > snowseq_max_lead_ms)
	{
		char		until[MAXDATELEN + 1];
		char		epoch[MAXDATELEN + 1];
		int64		earlier = lead == PG_INT64_MAX ? 0 :
			(SnowseqEpochMs - (lead - snowseq_max_lead_ms) - snowseq_time_unit_ms) / 1000 * 1000;

		strlcpy(until, timestamptz_to_str(ClockCounterInstant(floor)), sizeof(until));
		strlcpy(epoch, timestamptz_to_str(TimeMsToTimestamptz(earlier)), sizeof(epoch));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the new snowseq configuration would issue IDs below those of the old one until %s", until),
				 errdetail("To stay above every ID the old configuration could have issued, the clock would have to lead the wall clock by %lld ms, more than snowseq.max_lead_ms = %d.",
						   (long long) lead, snowseq_max_lead_ms),
				 errhint("Restore the previous settings; or set snowseq.epoch to '%s' or earlier and restart; or reset again after %s.",
						 epoch, until)));
	}
	memset(slot, 0, sizeof(*slot));
	slot->tag = RESERVE_TAG_CLOCK;
	slot->bound = floor;
	ReservationRaise(r, floor, slot);
}

/* ERROR for an ID no layout can produce; decoding needs preload. */
static void
CheckId(int64 id)
{
	ShmemCheckPreloaded();
	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowseq ID must not be negative: %lld", (long long) id),
				 errhint("snowseq IDs are positive 63-bit numbers.")));
}

/* Time field of the instant ts, or -1 before the epoch; ERROR past the end. */
int64
ClockTimeFieldOf(TimestampTz ts)
{
	int64		ms;
	uint64		units;

	ShmemCheckPreloaded();
	ms = TimeTimestamptzToMs(ts);
	if (ms < SnowseqEpochMs)
		return -1;
	units = (uint64) (ms - SnowseqEpochMs) / (uint64) snowseq_time_unit_ms;
	if (units >= time_limit)
	{
		char		when[MAXDATELEN + 1];
		char		end[MAXDATELEN + 1];

		strlcpy(when, timestamptz_to_str(ts), sizeof(when));
		strlcpy(end, timestamptz_to_str(ClockEndOfTime()), sizeof(end));
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp %s is past the end of the snowseq time field at %s", when, end)));
	}
	return (int64) units;
}

PG_FUNCTION_INFO_V1(snowseq_next);
PG_FUNCTION_INFO_V1(snowseq_next_n);
PG_FUNCTION_INFO_V1(snowseq_parse);
PG_FUNCTION_INFO_V1(snowseq_time);
PG_FUNCTION_INFO_V1(snowseq_node);
PG_FUNCTION_INFO_V1(snowseq_min_id);
PG_FUNCTION_INFO_V1(snowseq_max_id);

/* snowseq_next() -> bigint: the next ID of this node. */
Datum
snowseq_next(PG_FUNCTION_ARGS)
{
	SnowseqCheckUsable();
	PG_RETURN_INT64(ClockComposeId(ClockNext(1)));
}

/* snowseq_next_n(n) -> setof bigint: n consecutive IDs taken in one step. */
Datum
snowseq_next_n(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	uint64	   *first;

	if (SRF_IS_FIRSTCALL())
	{
		int32		n = PG_GETARG_INT32(0);
		int64		max_n;

		SnowseqCheckUsable();
		max_n = (int64) ClockMaxBatch();
		if (n < 0 || n > max_n)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("count must be between 0 and %lld, not %d",
							(long long) max_n, n),
					 errhint("Take larger batches in several calls: one batch may take at most 2^(snowseq.seq_bits + 10) IDs, and no more than snowseq.max_lead_ms of logical time.")));
		funcctx = SRF_FIRSTCALL_INIT();
		first = MemoryContextAlloc(funcctx->multi_call_memory_ctx, sizeof(uint64));
		*first = n > 0 ? ClockNext(n) : 0;
		funcctx->user_fctx = first;
		funcctx->max_calls = n;
	}
	funcctx = SRF_PERCALL_SETUP();
	first = funcctx->user_fctx;
	if (funcctx->call_cntr < funcctx->max_calls)
	{
		/* SRF_RETURN_NEXT advances call_cntr before it evaluates its result */
		int64		id = ClockComposeId(*first + funcctx->call_cntr);

		SRF_RETURN_NEXT(funcctx, Int64GetDatum(id));
	}
	SRF_RETURN_DONE(funcctx);
}

/* The instant of an ID's time field under the configured layout. */
static TimestampTz
IdInstant(int64 id)
{
	return ClockUnitsToTimestamptz((uint64) id >> (node_bits + seq_bits), false);
}

/* snowseq_parse(id) -> (ts, node, seq) under the configured layout. */
Datum
snowseq_parse(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	uint64		u;

	CheckId(id);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	u = (uint64) id;
	values[0] = TimestampTzGetDatum(IdInstant(id));
	values[1] = Int32GetDatum((int32) ((u >> node_shift) & (((uint64) 1 << node_bits) - 1)));
	values[2] = Int32GetDatum((int32) ((u >> seq_shift) & seq_mask));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* snowseq_time(id) -> timestamptz: the instant an ID was issued at. */
Datum
snowseq_time(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);

	CheckId(id);
	PG_RETURN_TIMESTAMPTZ(IdInstant(id));
}

/* snowseq_node(id) -> int: the node that issued an ID. */
Datum
snowseq_node(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);

	CheckId(id);
	PG_RETURN_INT32((int32) (((uint64) id >> node_shift) & (((uint64) 1 << node_bits) - 1)));
}

/* snowseq_min_id(ts) -> bigint: the smallest ID any node issues at or after ts. */
Datum
snowseq_min_id(PG_FUNCTION_ARGS)
{
	int64		t = ClockTimeFieldOf(PG_GETARG_TIMESTAMPTZ(0));

	if (t < 0)
		PG_RETURN_INT64(0);
	PG_RETURN_INT64((int64) ((uint64) t << (node_bits + seq_bits)));
}

/* snowseq_max_id(ts) -> bigint: the largest ID any node issues in ts's time unit or before. */
Datum
snowseq_max_id(PG_FUNCTION_ARGS)
{
	int64		t = ClockTimeFieldOf(PG_GETARG_TIMESTAMPTZ(0));

	if (t < 0)
		PG_RETURN_INT64(0);
	PG_RETURN_INT64((int64) ((((uint64) t + 1) << (node_bits + seq_bits)) - 1));
}
