/*
 * status.c
 *		snowseq_status() and snowseq_reservations(): what the generator and
 *		its reservations are doing, for psql administration and monitoring.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "backfill.h"
#include "clock.h"
#include "counter_cache.h"
#include "guc.h"
#include "keystore.h"
#include "keyring.h"
#include "reserve.h"
#include "timeutil.h"

/* the result shapes of snowseq_status() by extension version */
#define STATUS_COLS_1_0		18
#define STATUS_COLS_1_1		22

/* Interval of ms milliseconds. */
static Datum
MsInterval(int64 ms)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = ms * 1000;
	return IntervalPGetDatum(iv);
}

/*
 * One row describing the generator, in the shape of the SQL definition of
 * the extension version that calls it: an old definition never meets a
 * row it does not expect.
 */
static Datum
StatusRow(FunctionCallInfo fcinfo, int ncols)
{
	TupleDesc	tupdesc;
	Datum		v[STATUS_COLS_1_1];
	bool		n[STATUS_COLS_1_1];
	int			i = 0;
	Reservation *clock;
	uint64		counter;
	uint64		bound;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz logical;
	TimestampTz end;
	int64		adv = 0,
				waits = 0;
	uint64		backward_events;
	uint64		overflow_borrows;
	uint64		lead_waits;

	ShmemCheckPreloaded();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != ncols)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("snowseq_status() returns %d columns in this version of the library, its SQL definition %d",
						ncols, tupdesc->natts),
				 errhint("Run ALTER EXTENSION snowseq UPDATE.")));
	tupdesc = BlessTupleDesc(tupdesc);
	memset(n, 0, sizeof(n));

	clock = &SnowseqRes[RESERVE_CLOCK];
	counter = pg_atomic_read_u64(&clock->counter);
	bound = pg_atomic_read_u64(&clock->bound);
	logical = ClockCounterInstant(counter);
	end = ClockEndOfTime();
	ClockStats(&backward_events, &overflow_borrows, &lead_waits);
	for (int k = 0; k < SnowseqResCount; k++)
	{
		adv += pg_atomic_read_u64(&SnowseqRes[k].advances);
		waits += pg_atomic_read_u64(&SnowseqRes[k].waits);
	}

	n[i] = snowseq_node_id < 0;
	v[i++] = Int32GetDatum(snowseq_node_id);
	v[i++] = Int32GetDatum(snowseq_time_bits);
	v[i++] = Int32GetDatum(snowseq_node_bits);
	v[i++] = Int32GetDatum(snowseq_seq_bits);
	v[i++] = Int32GetDatum(snowseq_time_unit_ms);
	v[i++] = TimestampTzGetDatum(TimeMsToTimestamptz(SnowseqEpochMs));
	n[i] = counter == 0;
	v[i++] = TimestampTzGetDatum(logical);
	v[i++] = TimestampTzGetDatum(now);
	v[i++] = MsInterval(counter == 0 || logical <= now ? 0 : (logical - now) / 1000);
	v[i++] = Int64GetDatum((int64) ShmemIssuedTotal());
	v[i++] = Int64GetDatum((int64) backward_events);
	v[i++] = Int64GetDatum((int64) overflow_borrows);
	n[i] = bound == 0;
	v[i++] = TimestampTzGetDatum(ClockCounterInstant(bound));
	v[i++] = Int64GetDatum(adv);
	v[i++] = Int64GetDatum(waits);
	v[i++] = CStringGetTextDatum(Snowseq->state_error == STATE_OK ? "ok" :
								 Snowseq->state_error == STATE_MISMATCH ? "mismatch" : "corrupt");
	v[i++] = BoolGetDatum(Snowseq->worker_latch != NULL);
	v[i++] = Int64GetDatum((int64) SnowseqShmemSize());
	if (ncols >= STATUS_COLS_1_1)
	{
		v[i++] = MsInterval(snowseq_max_lead_ms);
		v[i++] = Int64GetDatum((int64) lead_waits);
		n[i] = TIMESTAMP_NOT_FINITE(end);
		v[i++] = TimestampTzGetDatum(end);
		/* from the logical clock when it leads, else from the wall clock */
		n[i] = TIMESTAMP_NOT_FINITE(end);
		v[i++] = MsInterval(TIMESTAMP_NOT_FINITE(end) ? 0 :
							Max(end - Max(now, counter == 0 ? now : logical), 0) / 1000);
	}
	Assert(i == ncols);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, v, n)));
}

PG_FUNCTION_INFO_V1(snowseq_status);
PG_FUNCTION_INFO_V1(snowseq_status_1_1);

/* snowseq_status() of extension version 1.0. */
Datum
snowseq_status(PG_FUNCTION_ARGS)
{
	return StatusRow(fcinfo, STATUS_COLS_1_0);
}

/* snowseq_status() of extension version 1.1: with the lead and the lifetime. */
Datum
snowseq_status_1_1(PG_FUNCTION_ARGS)
{
	return StatusRow(fcinfo, STATUS_COLS_1_1);
}

PG_FUNCTION_INFO_V1(snowseq_reservations);
PG_FUNCTION_INFO_V1(snowseq_reservations_1_3);

/*
 * May the caller see the reservation of a named counter?  Roles with the
 * privileges of pg_read_all_stats see every database's (as
 * pg_stat_statements shows them every query); others only counters of this
 * database that they may use.
 */
static bool
StatusMaySeeCounter(Oid fn_oid, const ReserveId *id, bool all)
{
	if (all)
		return true;
	return id->dboid == MyDatabaseId && CounterCacheMayUseName(fn_oid, &id->name);
}

/*
 * One row per reservation in use: the fixed ones, and the named counters
 * the caller may see (StatusMaySeeCounter); with_database: and the
 * database of each named counter (1.3).
 */
static Datum
StatusReservations(FunctionCallInfo fcinfo, bool with_database)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

	ShmemCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	for (int k = 0; k < SnowseqResCount; k++)
	{
		Reservation *r = &SnowseqRes[k];
		Datum		v[9];
		bool		n[9] = {false};
		ReserveId	id = r->id;
		char	   *db = NULL;

		if (!r->in_use)
			continue;
		if (id.tag == RESERVE_TAG_COUNTER &&
			!StatusMaySeeCounter(fcinfo->flinfo->fn_oid, &id, all))
			continue;
		v[0] = CStringGetTextDatum(ReservationName(r));
		v[1] = Int64GetDatum((int64) pg_atomic_read_u64(&r->counter));
		v[2] = Int64GetDatum((int64) pg_atomic_read_u64(&r->bound));
		v[3] = Int64GetDatum((int64) pg_atomic_read_u64(&r->low_water));
		v[4] = Int64GetDatum((int64) r->block);
		v[5] = Int64GetDatum((int64) pg_atomic_read_u64(&r->advances));
		v[6] = Int64GetDatum((int64) pg_atomic_read_u64(&r->waits));
		n[7] = r->rate_time == 0;
		v[7] = TimestampTzGetDatum(r->rate_time);
		if (with_database && id.tag == RESERVE_TAG_COUNTER)
			db = get_database_name(id.dboid);
		n[8] = db == NULL;
		v[8] = db ? DirectFunctionCall1(namein, CStringGetDatum(db)) : (Datum) 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	return (Datum) 0;
}

/* snowseq_reservations() of 1.0 to 1.2: without the database */
Datum
snowseq_reservations(PG_FUNCTION_ARGS)
{
	return StatusReservations(fcinfo, false);
}

/* snowseq_reservations() of 1.3: with the database of each named counter */
Datum
snowseq_reservations_1_3(PG_FUNCTION_ARGS)
{
	return StatusReservations(fcinfo, true);
}

PG_FUNCTION_INFO_V1(snowseq_capacity_fixed);

/* One row of snowseq_capacity_fixed: a space, what it holds and how much of it is used. */
static void
StatusCapacityRow(ReturnSetInfo *rsinfo, const char *kind, const char *name, uint64 capacity,
				  uint64 used)
{
	Datum		v[4];
	bool		n[4] = {false, false, false, false};

	v[0] = CStringGetTextDatum(kind);
	v[1] = CStringGetTextDatum(name);
	v[2] = DirectFunctionCall1(int8_numeric, Int64GetDatum((int64) Min(capacity, (uint64) PG_INT64_MAX)));
	v[3] = DirectFunctionCall1(int8_numeric, Int64GetDatum((int64) Min(Min(used, capacity), (uint64) PG_INT64_MAX)));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
}

/*
 * snowseq_capacity_fixed() -> setof (kind, name, capacity, used): what is
 * left of each bounded space of the cluster: the time field (time units),
 * the gene segment counters, the backfill spaces (values of the fullest
 * time unit) and the key versions.  Named counters are in
 * snowseq_counter_status; the view snowseq_capacity shows both.
 */
Datum
snowseq_capacity_fixed(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	uint64		counter;
	uint64		per_unit,
				fullest,
				writes;

	ShmemCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	counter = pg_atomic_read_u64(&SnowseqRes[RESERVE_CLOCK].counter);
	StatusCapacityRow(rsinfo, "clock", "time units of the time field",
					  (uint64) 1 << snowseq_time_bits,
					  Max(counter >> snowseq_seq_bits, ClockWallUnits()));
	StatusCapacityRow(rsinfo, "gene segment", "segments of this node",
					  ((uint64) 1 << (SNOWSEQ_SEGMENT_BITS - snowseq_node_bits)) - 1,
					  pg_atomic_read_u64(&SnowseqRes[RESERVE_SEGMENT].counter));
	StatusCapacityRow(rsinfo, "wide gene segment", "segments of 128-bit gene IDs of this node",
					  ((uint64) 1 << SNOWSEQ_WIDE_COUNTER_BITS) - 1,
					  pg_atomic_read_u64(&SnowseqRes[RESERVE_WIDE_SEGMENT].counter));
	BackfillCapacity(BACKFILL_BIGINT, &per_unit, &fullest, &writes);
	StatusCapacityRow(rsinfo, "backfill", "IDs for past instants in the fullest time unit",
					  per_unit, fullest);
	BackfillCapacity(BACKFILL_UUID, &per_unit, &fullest, &writes);
	StatusCapacityRow(rsinfo, "backfill uuid", "UUIDs for past instants in the fullest millisecond",
					  per_unit, fullest);
	StatusCapacityRow(rsinfo, "key version", "key versions of this cluster",
					  ((uint64) 1 << snowseq_public_version_bits) - 1, KeyringVersionMark());
	return (Datum) 0;
}
