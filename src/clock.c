/*
 * clock.c
 *		The snowflake generator: one lock-free logical clock for the whole
 *		cluster, and the SQL functions that issue, parse and bound its IDs.
 *
 * The clock is one 64-bit counter, (time << seq_bits) | seq.  The next
 * value is max(counter + 1, now << seq_bits), installed with compare-and-
 * swap: a sequence overflow or a clock that goes back simply borrows the
 * next time unit, and the wall clock catches up later.  The counter never
 * passes the durable reservation (reserve.c).
 */
#include "postgres.h"

#include <time.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "snowseq.h"


/* The layout, derived once at preload (the settings are fixed from then on). */
static int	seq_bits;
static int	node_bits;
static uint64 seq_mask;
static uint64 counter_limit;	/* first counter value past the time field */
static uint64 node_part;		/* node id << seq_bits */

/* Derive the hot-path constants from the settings; called at preload. */
void
ClockInit(void)
{
	seq_bits = snowseq_seq_bits;
	node_bits = snowseq_node_bits;
	seq_mask = ((uint64) 1 << seq_bits) - 1;
	counter_limit = (uint64) 1 << (snowseq_time_bits + seq_bits);
	node_part = snowseq_node_id < 0 ? 0 : (uint64) snowseq_node_id << seq_bits;
}

/* Milliseconds since 1970-01-01 UTC from the real-time clock. */
static inline int64
WallMs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The wall clock in time units since the epoch, noting a clock that went
 * back.  Each backend remembers its last millisecond: while the clock stays
 * in it, the reading costs one clock_gettime and a compare.  On a new
 * millisecond the last reading of the cluster is loaded before the clock
 * was read, so a reading below it means the clock really stepped back; the
 * CAS that installs the lower value counts the step once, whichever
 * backend sees it first.
 */
uint64
ClockNowUnits(void)
{
	static int64 cached_ms = -1;
	static uint64 cached_units = 0;
	uint64		last;
	int64		ms = WallMs();

	if (likely(ms == cached_ms))
		return cached_units;

	/* a new millisecond: load the cluster's last reading, then read again */
	last = pg_atomic_read_u64(&Snowseq->last_wall_ms);
	pg_read_barrier();
	ms = WallMs();
	if ((uint64) ms != last)
	{
		if ((uint64) ms < last)
		{
			if (pg_atomic_compare_exchange_u64(&Snowseq->last_wall_ms, &last, (uint64) ms))
				pg_atomic_fetch_add_u64(&Snowseq->backward_events, 1);
		}
		else
			pg_atomic_compare_exchange_u64(&Snowseq->last_wall_ms, &last, (uint64) ms);
	}
	cached_ms = ms;
	if (ms <= SnowseqEpochMs)
		cached_units = 0;
	else
		cached_units = (uint64) (ms - SnowseqEpochMs) / (uint64) snowseq_time_unit_ms;
	return cached_units;
}

/* A duration in ms as clock counter units (whole time units). */
uint64
ClockMsToUnits(int64 ms)
{
	return (uint64) (ms / snowseq_time_unit_ms) << snowseq_seq_bits;
}

/* Time units since the epoch to ms since 1970-01-01 UTC. */
int64
ClockUnitsToMs(uint64 units)
{
	return SnowseqEpochMs + (int64) units * snowseq_time_unit_ms;
}

/* The instant of a clock counter value's time field. */
TimestampTz
ClockCounterInstant(uint64 counter)
{
	return SnowseqMsToTimestamptz(ClockUnitsToMs(counter >> snowseq_seq_bits));
}

/* The instant the time field runs out. */
static TimestampTz
ClockEndOfTime(void)
{
	return SnowseqMsToTimestamptz(ClockUnitsToMs((uint64) 1 << snowseq_time_bits));
}

/*
 * Take n consecutive counter values and return the first.  Lock-free: one
 * clock read, one CAS; waits only when the durable reservation is reached.
 */
uint64
ClockNext(uint64 n)
{
	uint64		now = ClockNowUnits() << seq_bits;
	uint64		first;
	uint64		last;

	if (unlikely(!ReserveTake(RESERVE_CLOCK, now, n, counter_limit, &first, &last)))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq time field ran out at %s",
						timestamptz_to_str(ClockEndOfTime())),
				 errdetail("snowseq.time_bits = %d with snowseq.time_unit_ms = %d from snowseq.epoch last until then.",
						   snowseq_time_bits, snowseq_time_unit_ms),
				 errhint("Choose a later snowseq.epoch or more time bits; IDs never wrap.")));

	/* started in a time unit the wall clock has not reached: borrowed */
	if (unlikely((last >> seq_bits) > (now >> seq_bits) &&
				 ((first - 1) >> seq_bits) < (last >> seq_bits)))
		pg_atomic_fetch_add_u64(&Snowseq->overflow_borrows, 1);
	return first;
}

/* Splice the node id into a counter value: [0][time][node][seq]. */
int64
ClockComposeId(uint64 state)
{
	return (int64) (((state & ~seq_mask) << node_bits) | node_part | (state & seq_mask));
}

/* Reject an ID no layout can produce; the layout needs preload. */
static void
CheckId(int64 id)
{
	if (Snowseq == NULL)
		ShmemCheckUsableSlow();
	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowseq ID must not be negative: " INT64_FORMAT, id),
				 errhint("snowseq IDs are positive 63-bit numbers.")));
}

/* Instant of a timestamptz as ms since 1970 (floor). */
static int64
TimestamptzToMs(TimestampTz ts)
{
	int64		us = ts;

	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp must be finite")));
	return (us >= 0 ? us / 1000 : -((-us + 999) / 1000)) + SNOWSEQ_UNIX_TO_PG_MS;
}

/* Time field of the instant ts, or -1 before the epoch; ERROR past the end. */
static int64
TimeFieldOf(TimestampTz ts)
{
	int64		ms;
	int64		units;

	if (Snowseq == NULL)
		ShmemCheckUsableSlow();
	ms = TimestamptzToMs(ts);
	if (ms < SnowseqEpochMs)
		return -1;
	units = (ms - SnowseqEpochMs) / snowseq_time_unit_ms;
	if (units >= ((int64) 1 << snowseq_time_bits))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp %s is past the end of the snowseq time field (%s)",
						timestamptz_to_str(ts), timestamptz_to_str(ClockEndOfTime()))));
	return units;
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
		int64		max_n = (int64) 1 << (snowseq_seq_bits + 10);

		if (n < 0 || n > max_n)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snowseq_next_n count must be between 0 and " INT64_FORMAT ", not %d",
							max_n, n),
					 errhint("Take larger batches in several calls.")));
		SnowseqCheckUsable();
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
	values[0] = TimestampTzGetDatum(SnowseqMsToTimestamptz(
								ClockUnitsToMs(u >> (snowseq_node_bits + snowseq_seq_bits))));
	values[1] = Int32GetDatum((int32) ((u >> snowseq_seq_bits) &
									   (((uint64) 1 << snowseq_node_bits) - 1)));
	values[2] = Int32GetDatum((int32) (u & (((uint64) 1 << snowseq_seq_bits) - 1)));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* snowseq_time(id) -> timestamptz: the instant an ID was issued at. */
Datum
snowseq_time(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);

	CheckId(id);
	PG_RETURN_TIMESTAMPTZ(SnowseqMsToTimestamptz(
								ClockUnitsToMs((uint64) id >> (snowseq_node_bits + snowseq_seq_bits))));
}

/* snowseq_node(id) -> int: the node that issued an ID. */
Datum
snowseq_node(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);

	CheckId(id);
	PG_RETURN_INT32((int32) (((uint64) id >> snowseq_seq_bits) &
							 (((uint64) 1 << snowseq_node_bits) - 1)));
}

/* snowseq_min_id(ts) -> bigint: the smallest ID any node issues at or after ts. */
Datum
snowseq_min_id(PG_FUNCTION_ARGS)
{
	int64		t = TimeFieldOf(PG_GETARG_TIMESTAMPTZ(0));

	if (t < 0)
		PG_RETURN_INT64(0);
	PG_RETURN_INT64(t << (snowseq_node_bits + snowseq_seq_bits));
}

/* snowseq_max_id(ts) -> bigint: the largest ID any node issues in ts's time unit or before. */
Datum
snowseq_max_id(PG_FUNCTION_ARGS)
{
	int64		t = TimeFieldOf(PG_GETARG_TIMESTAMPTZ(0));

	if (t < 0)
		PG_RETURN_INT64(0);
	PG_RETURN_INT64(((t + 1) << (snowseq_node_bits + snowseq_seq_bits)) - 1);
}
