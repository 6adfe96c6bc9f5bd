/*
 * backfill.c
 *		IDs for a past instant: snowseq_id_at(ts) and snowseq_uuid_at(ts)
 *		give a new ID whose time field is that of ts, for backfilling rows
 *		that must sort by their original time.
 *
 * They never equal an ID the clock issued or will issue: they carry a node
 * id of their own, snowseq.backfill_node_id, that no server's clock uses
 * (the fleet spends one node id per server that backfills).
 *
 * Among themselves they are kept apart by laps.  A lap hands out values
 * (time << seq_bits) | seq in ascending order, each at or above
 * (ts's time unit << seq_bits) | the lap's floor: many rows of one instant
 * take consecutive sequence values, rows of later instants start again at
 * the floor.  A request for an instant before the last one starts a new
 * lap, whose floor lies above every sequence value handed out so far; so
 * does every server start, above the durable bound.  Laps use disjoint
 * ranges of sequence values, so no two values are equal whatever the order
 * of the instants.  The durable part is one reservation (the same machinery
 * as every counter) on the highest sequence value used, +1: it advances
 * only when one instant takes more rows than any before, so a backfill of
 * distinct instants writes nothing.  The cost: each step back in time and
 * each restart uses up at least one of the 2^seq_bits sequence values of
 * every time unit, and a time unit holds 2^seq_bits minus the floor values.
 */
#include "postgres.h"

#include "fmgr.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "backfill.h"
#include "clock.h"
#include "reserve.h"
#include "timeutil.h"

/* the lap of the backfill clock, in shared memory, under mutex */
typedef struct BackfillShared
{
	slock_t		mutex;
	bool		lap_open;
	uint64		floor;			/* lowest sequence value of the lap */
	uint64		after;			/* the last value handed out + 1, or 0 */
} BackfillShared;

static BackfillShared *BackfillState = NULL;

/*
 * How the backfill reservation may advance: up to 2^seq_bits (the highest
 * sequence value + 1), in blocks of 1 up to 1/16 of a time unit.
 */
static void
BackfillSpec(ReserveSpec *spec)
{
	uint64		per_unit = (uint64) 1 << snowseq_seq_bits;

	spec->floor = 0;
	spec->ceiling = per_unit;
	spec->end = per_unit;
	spec->block_min = 1;
	spec->block_max = Max(per_unit / 16, 1);
	spec->margin_min = 0;
}

/* Register the backfill clock's advance rule; at preload. */
void
BackfillInit(void)
{
	ReserveRegisterOwner(RESERVE_BACKFILL, BackfillSpec);
}

/* Bytes of the backfill clock's shared memory. */
Size
BackfillShmemSize(void)
{
	return MAXALIGN(sizeof(BackfillShared));
}

/* Create (or attach to) the lap in shared memory; caller holds AddinShmemInitLock. */
void
BackfillShmemInit(void)
{
	bool		found;

	BackfillState = ShmemInitStruct("snowseq backfill", BackfillShmemSize(), &found);
	if (found)
		return;
	memset(BackfillState, 0, sizeof(BackfillShared));
	SpinLockInit(&BackfillState->mutex);
}

/* Close the lap: the next value starts a new one (after a reset of the state). */
void
BackfillCloseLap(void)
{
	SpinLockAcquire(&BackfillState->mutex);
	BackfillState->lap_open = false;
	SpinLockRelease(&BackfillState->mutex);
}

/* ERROR: no sequence value is left for the time unit of ts in this lap. */
static void
BackfillRefuse(TimestampTz ts, uint64 floor)
{
	uint64		per_unit = (uint64) 1 << snowseq_seq_bits;
	char		when[MAXDATELEN + 1];

	strlcpy(when, timestamptz_to_str(ts), sizeof(when));
	if (floor >= per_unit)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("the sequence values for IDs for past instants are used up"),
				 errdetail("Every restart and every step back in time uses up sequence values of every time unit, %llu in all with snowseq.seq_bits = %d.",
						   (unsigned long long) per_unit, snowseq_seq_bits),
				 errhint("Backfill the rest on a server with another snowseq.backfill_node_id.")));
	ereport(ERROR,
			(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
			 errmsg("all IDs for the time unit of %s are taken", when),
			 errdetail("This server has used sequence values %llu to %llu of that time unit of %d ms.",
					   (unsigned long long) floor, (unsigned long long) (per_unit - 1),
					   snowseq_time_unit_ms),
			 errhint("Give the rows of one instant distinct timestamps, or backfill the rest on a server with another snowseq.backfill_node_id.")));
}

/*
 * The next value of the backfill clock in the time unit of ts:
 * (time << seq_bits) | seq, never handed out before, durable.
 */
uint64
BackfillNext(TimestampTz ts)
{
	Reservation *r = &SnowseqRes[RESERVE_BACKFILL];
	uint64		per_unit = (uint64) 1 << snowseq_seq_bits;
	int64		t;
	uint64		v;
	uint64		floor;
	uint64		need = 0;
	uint64		last;
	bool		full = false;
	ReserveSpec spec;

	SnowseqCheckUsable();
	if (snowseq_backfill_node_id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq.backfill_node_id is not set"),
				 errdetail("IDs for a past instant carry a node id of their own, which no server's clock uses."),
				 errhint("Set snowseq.backfill_node_id in postgresql.conf to a node id no server uses, and restart the server.")));
	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp must be finite"),
				 errhint("Pass the instant the row was created at, such as its created_at column.")));
	if (TimeTimestamptzToMs(ts) > TimeWallMs())
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp %s is not in the past", timestamptz_to_str(ts)),
				 errhint("snowseq_id_at() and snowseq_uuid_at() are for past instants; use snowseq_next() or snowseq_uuid() for the present.")));
	t = ClockTimeFieldOf(ts);
	if (t < 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp %s is before snowseq.epoch", timestamptz_to_str(ts)),
				 errhint("IDs exist from snowseq.epoch on; an earlier epoch needs a reset of the layout.")));

	/* take the value: a few loads and stores under a spinlock */
	SpinLockAcquire(&BackfillState->mutex);
	last = BackfillState->after;
	if (!BackfillState->lap_open || (last != 0 && ((last - 1) >> snowseq_seq_bits) > (uint64) t))
	{
		/* a new lap, above every sequence value used (counter = highest + 1) */
		BackfillState->floor = pg_atomic_read_u64(&r->counter);
		BackfillState->lap_open = true;
		BackfillState->after = last = 0;
	}
	floor = BackfillState->floor;
	if (last != 0 && ((last - 1) >> snowseq_seq_bits) == (uint64) t)
		v = last;
	else
		v = ((uint64) t << snowseq_seq_bits) | floor;
	if (floor >= per_unit || (v >> snowseq_seq_bits) != (uint64) t)
		full = true;
	else
	{
		BackfillState->after = v + 1;
		need = (v & (per_unit - 1)) + 1;
		AtomicRaise(&r->counter, need);
	}
	SpinLockRelease(&BackfillState->mutex);
	if (full)
		BackfillRefuse(ts, floor);

	/* hand it out only once the durable bound covers its sequence value */
	if (unlikely(need > pg_atomic_read_u64(&r->bound)))
	{
		BackfillSpec(&spec);
		ReserveWait(r, &spec, need);
	}
	else if (unlikely(need > pg_atomic_read_u64(&r->low_water)))
	{
		BackfillSpec(&spec);
		ReserveRequestAdvance(r, &spec);
	}
	ShmemCountIssued(1);
	return v;
}

/* ERROR for a NULL instant: a row without a time gets no ID. */
void
BackfillCheckInstant(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the instant of %s() must not be NULL", get_func_name(fcinfo->flinfo->fn_oid)),
				 errhint("Pass the instant the row was created at, such as its created_at column.")));
}

PG_FUNCTION_INFO_V1(snowseq_id_at);

/* snowseq_id_at(ts) -> bigint: a new ID whose time field is that of ts. */
Datum
snowseq_id_at(PG_FUNCTION_ARGS)
{
	BackfillCheckInstant(fcinfo);
	PG_RETURN_INT64(ClockComposeBackfillId(BackfillNext(PG_GETARG_TIMESTAMPTZ(0))));
}
