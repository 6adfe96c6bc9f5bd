/*
 * status.c
 *		snowseq_status() and snowseq_reservations(): what the generator and
 *		its reservations are doing, for psql administration and monitoring.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "snowseq.h"


/* Interval of ms milliseconds. */
static Datum
MsInterval(int64 ms)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = ms * 1000;
	return IntervalPGetDatum(iv);
}

/* Require preload (status reads shared memory). */
static void
StatusCheckPreloaded(void)
{
	if (Snowseq == NULL)
		ShmemCheckUsableSlow();
}

PG_FUNCTION_INFO_V1(snowseq_status);

/* snowseq_status() -> one row describing the generator. */
Datum
snowseq_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		v[18];
	bool		n[18];
	int			i = 0;
	Reservation *clock;
	uint64		counter;
	int64		wall_ms;
	int64		logical_ms;

	StatusCheckPreloaded();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	memset(n, 0, sizeof(n));

	clock = &Snowseq->res[RESERVE_CLOCK];
	counter = pg_atomic_read_u64(&clock->counter);
	wall_ms = GetCurrentTimestamp() / 1000 + SNOWSEQ_UNIX_TO_PG_MS;
	logical_ms = ClockUnitsToMs(counter >> snowseq_seq_bits);

	n[i] = snowseq_node_id < 0;
	v[i++] = Int32GetDatum(snowseq_node_id);
	v[i++] = Int32GetDatum(snowseq_time_bits);
	v[i++] = Int32GetDatum(snowseq_node_bits);
	v[i++] = Int32GetDatum(snowseq_seq_bits);
	v[i++] = Int32GetDatum(snowseq_time_unit_ms);
	v[i++] = TimestampTzGetDatum(SnowseqMsToTimestamptz(SnowseqEpochMs));
	n[i] = counter == 0;
	v[i++] = TimestampTzGetDatum(ClockCounterInstant(counter));
	v[i++] = TimestampTzGetDatum(GetCurrentTimestamp());
	v[i++] = MsInterval(counter == 0 ? 0 : Max(0, logical_ms - wall_ms));
	v[i++] = Int64GetDatum((int64) ShmemIssuedTotal());
	v[i++] = Int64GetDatum((int64) pg_atomic_read_u64(&Snowseq->backward_events));
	v[i++] = Int64GetDatum((int64) pg_atomic_read_u64(&Snowseq->overflow_borrows));
	n[i] = pg_atomic_read_u64(&clock->bound) == 0;
	v[i++] = TimestampTzGetDatum(ClockCounterInstant(pg_atomic_read_u64(&clock->bound)));
	{
		int64		adv = 0,
					waits = 0;

		for (int k = 0; k < RESERVE_COUNT; k++)
		{
			adv += pg_atomic_read_u64(&Snowseq->res[k].advances);
			waits += pg_atomic_read_u64(&Snowseq->res[k].waits);
		}
		v[i++] = Int64GetDatum(adv);
		v[i++] = Int64GetDatum(waits);
	}
	v[i++] = CStringGetTextDatum(Snowseq->state_error == STATE_OK ? "ok" :
								 Snowseq->state_error == STATE_MISMATCH ? "mismatch" : "corrupt");
	v[i++] = BoolGetDatum(Snowseq->worker_latch != NULL);
	v[i++] = Int64GetDatum((int64) ShmemSize());
	Assert(i == tupdesc->natts);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, v, n)));
}

PG_FUNCTION_INFO_V1(snowseq_reservations);

/* snowseq_reservations() -> one row per reservation. */
Datum
snowseq_reservations(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	StatusCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	for (int k = 0; k < RESERVE_COUNT; k++)
	{
		Reservation *r = &Snowseq->res[k];
		Datum		v[8];
		bool		n[8] = {false};

		v[0] = CStringGetTextDatum(ReserveKindName(k));
		v[1] = Int64GetDatum((int64) pg_atomic_read_u64(&r->counter));
		v[2] = Int64GetDatum((int64) pg_atomic_read_u64(&r->bound));
		v[3] = Int64GetDatum((int64) pg_atomic_read_u64(&r->low_water));
		v[4] = Int64GetDatum((int64) r->block);
		v[5] = Int64GetDatum((int64) pg_atomic_read_u64(&r->advances));
		v[6] = Int64GetDatum((int64) pg_atomic_read_u64(&r->waits));
		n[7] = r->rate_time == 0;
		v[7] = TimestampTzGetDatum(r->rate_time);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	return (Datum) 0;
}
