/*
 * backfill.c
 *		IDs for a past instant: snowseq_id_at(ts) and snowseq_uuid_at(ts)
 *		give a new ID whose time field is that of ts, for backfilling rows
 *		that must sort by their original time.
 *
 * They never equal an ID the clock issued or will issue: they carry a node
 * id of their own, snowseq.backfill_node_id, that no server's clock uses
 * (the fleet spends one node id per server that backfills).  Within that
 * node id they come from a second logical clock, a counter (time << seq_bits)
 * | seq like the snowflake clock's, made durable by the same reservation
 * machinery: a request for the time unit t takes the next value at or above
 * t << seq_bits and below (t + 1) << seq_bits.  So they are unique across
 * backends, restarts and crashes, and increase in the order they are taken;
 * the price is that one server backfills in ascending order of time (an
 * instant before the last one backfilled is refused, as is a time unit
 * whose seq values are all taken).  The reservation never reaches past the
 * time unit being filled, and advances by at most 1/16 of it, so a restart
 * skips little of it.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "reserve.h"

/* The last counter value of the time unit that holds counter. */
static uint64
BackfillUnitEnd(uint64 counter)
{
	return (((counter >> snowseq_seq_bits) + 1) << snowseq_seq_bits) - 1;
}

/*
 * How the backfill reservation may advance: never past the time unit being
 * filled, in blocks of 1/256 to 1/16 of a time unit, so that a restart
 * skips little of the unit a backfill is in.
 */
static void
BackfillSpec(ReserveSpec *spec, uint64 floor)
{
	uint64		per_unit = (uint64) 1 << snowseq_seq_bits;

	spec->floor = floor;
	spec->ceiling = BackfillUnitEnd(Max(pg_atomic_read_u64(&SnowseqRes[RESERVE_BACKFILL].counter), floor));
	spec->block_min = Max(per_unit / 256, 1);
	spec->block_max = Max(per_unit / 16, 1);
	spec->margin_min = 0;
}

/* ERROR: the backfill clock cannot give an ID in the time unit t of ts. */
static void
BackfillRefuse(TimestampTz ts, uint64 t)
{
	uint64		counter = pg_atomic_read_u64(&SnowseqRes[RESERVE_BACKFILL].counter);
	char		when[MAXDATELEN + 1];

	strlcpy(when, timestamptz_to_str(ts), sizeof(when));
	if ((counter >> snowseq_seq_bits) == t)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("all %llu IDs for the time unit of %s are taken",
						(unsigned long long) ((uint64) 1 << snowseq_seq_bits), when),
				 errdetail("IDs for a past instant hold snowseq.seq_bits = %d sequence bits per time unit of %d ms.",
						   snowseq_seq_bits, snowseq_time_unit_ms),
				 errhint("Give the rows of one instant distinct timestamps, or backfill the rest on a server with another snowseq.backfill_node_id.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot make an ID for %s: this server has backfilled up to %s already",
					when, timestamptz_to_str(ClockCounterInstant(counter))),
			 errdetail("A server hands out IDs for past instants in ascending order of time."),
			 errhint("Backfill in ascending order of time (ORDER BY the timestamp), or backfill earlier instants on a server with another snowseq.backfill_node_id.")));
}

/*
 * The next value of the backfill clock in the time unit of ts: unique,
 * durable, above every value taken before.
 */
uint64
BackfillNext(TimestampTz ts)
{
	Reservation *r = &SnowseqRes[RESERVE_BACKFILL];
	int64		t;
	uint64		floor;
	uint64		first;
	uint64		last;
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
	if (SnowseqTimestamptzToMs(ts) > SnowseqWallMs())
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

	floor = (uint64) t << snowseq_seq_bits;
	for (;;)
	{
		ReserveResult rr = ReserveTake(r, floor, 1, floor + ((uint64) 1 << snowseq_seq_bits),
									   &first, &last);

		if (likely(rr == RESERVE_OK))
			break;
		if (rr == RESERVE_LIMIT)
			BackfillRefuse(ts, (uint64) t);
		BackfillSpec(&spec, floor);
		if (rr == RESERVE_LOW)
		{
			ReserveRequestAdvance(r, &spec);
			break;
		}
		ReserveWait(r, &spec, last);
	}
	return first;
}

/* Advance the backfill reservation if it is due (the worker, holding the lock). */
bool
BackfillAdvanceDue(bool in_use)
{
	ReserveSpec spec;

	BackfillSpec(&spec, 0);
	return ReserveAdvanceIfDue(&SnowseqRes[RESERVE_BACKFILL], &spec, in_use);
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
