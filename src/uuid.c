/*
 * uuid.c
 *		RFC 9562 version 7 UUIDs drawn from the snowflake clock: each UUID
 *		takes one value of the same cluster-wide counter as snowseq_next(),
 *		so UUIDs increase across every backend of the server and, through
 *		the clock's durable reservation, never repeat after a restart, a
 *		crash or a clock step.
 *
 * A clock value (time << seq_bits) | seq becomes, from the most significant
 * bit on:
 *
 *	 unix_ts_ms  48 bits	epoch + time * time_unit_ms (the start of its time unit)
 *	 ver		  4 bits	0111
 *	 counter	 C bits		seq, C = max(12, seq_bits): rand_a, then the
 *							leftmost C - 12 bits of rand_b (RFC 9562 section
 *							6.2, Method 1, a fixed bit-length dedicated counter)
 *	 var		  2 bits	10, between rand_a and rand_b
 *	 node		node_bits	snowseq.node_id
 *	 random		the rest	pg_strong_random()
 *
 * Within a time unit the counter orders the UUIDs; the next time unit has a
 * larger unix_ts_ms.  So UUIDs compare (as uuid, bytewise) exactly as the
 * clock values they were made from.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "backfill.h"
#include "clock.h"
#include "guc.h"
#include "shmem.h"
#include "timeutil.h"

#define UUID_MAX_UNIX_MS	((INT64CONST(1) << 48) - 1)
#define UUID_RANDOM_BYTES	4096

/*
 * Random bytes from pg_strong_random(), drawn in blocks, used once each.
 * Filled only by the backend that uses them (never by the postmaster), so
 * no two processes ever hold the same bytes.
 */
static uint8 random_bytes[UUID_RANDOM_BYTES];
static int	random_used = UUID_RANDOM_BYTES;

/*
 * 64 random bits from a cryptographically strong source.  One call of
 * pg_strong_random() fills 512 UUIDs' worth, so its cost per call (about
 * a microsecond) is shared; every byte is handed out once.
 */
static uint64
UuidRandomBits(void)
{
	uint64		r;

	if (random_used > UUID_RANDOM_BYTES - (int) sizeof(r))
	{
		if (!pg_strong_random(random_bytes, sizeof(random_bytes)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random values")));
		random_used = 0;
	}
	memcpy(&r, random_bytes + random_used, sizeof(r));
	random_used += sizeof(r);
	return r;
}

/* The low n bits set, 0 <= n < 64. */
static inline uint64
LowBits(int n)
{
	return ((uint64) 1 << n) - 1;
}

/* Store v big-endian in 8 bytes. */
static void
PutBigEndian(unsigned char *p, uint64 v)
{
	for (int i = 7; i >= 0; i--)
	{
		p[i] = (unsigned char) v;
		v >>= 8;
	}
}

/* The version 7 UUID of a clock value and a node id (see the top of this file). */
static void
UuidCompose(uint64 counter, int node, pg_uuid_t *uuid)
{
	int			seq_bits = snowseq_seq_bits;
	int			extra = Max(seq_bits, 12) - 12; /* counter bits in rand_b */
	int			random_bits = 62 - extra - snowseq_node_bits;
	uint64		seq = counter & LowBits(seq_bits);
	uint64		units = counter >> seq_bits;
	int64		ms;
	uint64		hi;
	uint64		lo;

	if (!ClockUnitsToMs(units, &ms) || ms < 0 || ms > UUID_MAX_UNIX_MS)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("snowseq time field value %llu is outside the range of UUIDv7 timestamps",
						(unsigned long long) units),
				 errdetail("A version 7 UUID holds milliseconds since 1970-01-01 in 48 bits, up to the year 10889.")));

	hi = ((uint64) ms << 16) | (UINT64CONST(7) << 12) | (seq >> extra);
	lo = (UINT64CONST(2) << 62) |
		((seq & LowBits(extra)) << (62 - extra)) |
		((uint64) node << random_bits) |
		(UuidRandomBits() & LowBits(random_bits));
	PutBigEndian(uuid->data, hi);
	PutBigEndian(uuid->data + 8, lo);
}

/*
 * The version 7 UUID of a past millisecond ms and counter c of the backfill
 * UUID space: the counter's high C bits where snowseq_uuid() has the clock's
 * sequence (rand_a, then the leftmost C - 12 bits of rand_b), then the
 * backfill node id, at the very place of the node id of snowseq_uuid() (so
 * no such UUID equals one of the clock's), then the counter's low
 * BackfillUuidExtraBits() bits, then random bits.  Within a millisecond the
 * UUIDs sort as their counters.
 */
static void
UuidComposeAt(int64 ms, uint64 c, pg_uuid_t *uuid)
{
	int			seq_bits = Max(snowseq_seq_bits, 12);
	int			extra = seq_bits - 12;
	int			low = BackfillUuidExtraBits();
	int			random_bits = 62 - extra - snowseq_node_bits - low;
	uint64		c_hi = c >> low;
	uint64		hi;
	uint64		lo;

	if (ms > UUID_MAX_UNIX_MS)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("millisecond %lld is outside the range of UUIDv7 timestamps", (long long) ms),
				 errdetail("A version 7 UUID holds milliseconds since 1970-01-01 in 48 bits, up to the year 10889.")));
	hi = ((uint64) ms << 16) | (UINT64CONST(7) << 12) | (c_hi >> extra);
	lo = (UINT64CONST(2) << 62) |
		((c_hi & LowBits(extra)) << (62 - extra)) |
		((uint64) snowseq_backfill_node_id << (low + random_bits)) |
		((c & LowBits(low)) << random_bits) |
		(UuidRandomBits() & LowBits(random_bits));
	PutBigEndian(uuid->data, hi);
	PutBigEndian(uuid->data + 8, lo);
}

PG_FUNCTION_INFO_V1(snowseq_uuid);
PG_FUNCTION_INFO_V1(snowseq_uuid_time);
PG_FUNCTION_INFO_V1(snowseq_uuid_at);
PG_FUNCTION_INFO_V1(snowseq_uuid_min);
PG_FUNCTION_INFO_V1(snowseq_uuid_max);

/* snowseq_uuid() -> uuid: a version 7 UUID from the cluster-wide clock. */
Datum
snowseq_uuid(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));

	SnowseqCheckUsable();
	UuidCompose(ClockNext(1), snowseq_node_id, uuid);
	PG_RETURN_UUID_P(uuid);
}

/*
 * snowseq_uuid_time(uuid) -> timestamptz: the unix_ts_ms of any version 7
 * UUID (snowseq's or another generator's); an ERROR for other UUIDs.
 */
Datum
snowseq_uuid_time(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *uuid = PG_GETARG_UUID_P(0);
	int			version = uuid->data[6] >> 4;
	bool		rfc_variant = (uuid->data[8] & 0xC0) == 0x80;
	int64		ms = 0;

	if (!rfc_variant || version != 7)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a version 7 UUID",
						DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(uuid)))),
				 rfc_variant ?
				 errdetail("Its version is %d.", version) :
				 errdetail("Its variant is not the one RFC 9562 defines (the first hex digit of its fourth group is not 8, 9, a or b)."),
				 errhint("Only version 7 UUIDs carry a Unix time in milliseconds.")));
	for (int i = 0; i < 6; i++)
		ms = (ms << 8) | uuid->data[i];
	PG_RETURN_TIMESTAMPTZ(TimeMsToTimestamptz(ms));
}

/*
 * snowseq_uuid_at(ts) -> uuid: a new version 7 UUID whose time is the
 * millisecond of ts, from the backfill UUID space (2^32 and more UUIDs a
 * millisecond), with the backfill node id where snowseq_uuid() has the
 * node id: never equal to one of the clock's UUIDs, nor to another.
 */
Datum
snowseq_uuid_at(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));
	int64		ms;
	uint64		c;

	BackfillCheckInstant(fcinfo);
	c = BackfillNextUuid(PG_GETARG_TIMESTAMPTZ(0), &ms);
	UuidComposeAt(ms, c, uuid);
	PG_RETURN_UUID_P(uuid);
}

/*
 * A UUID bound: unix_ts_ms ms, every other bit zero (fill false) or one
 * (fill true); a nil UUID when ms is before 1970.
 */
static pg_uuid_t *
UuidBound(int64 ms, bool fill)
{
	pg_uuid_t  *uuid = palloc0(sizeof(pg_uuid_t));

	if (ms < 0)
		return uuid;
	PutBigEndian(uuid->data, ((uint64) ms << 16) | (fill ? 0xFFFF : 0));
	PutBigEndian(uuid->data + 8, fill ? PG_UINT64_MAX : 0);
	return uuid;
}

/* The unix_ts_ms of the start of time unit t; ERROR beyond 48 bits. */
static int64
UuidUnitMs(uint64 t)
{
	int64		ms;

	if (!ClockUnitsToMs(t, &ms) || ms > UUID_MAX_UNIX_MS)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("snowseq time field value %llu is outside the range of UUIDv7 timestamps",
						(unsigned long long) t),
				 errdetail("A version 7 UUID holds milliseconds since 1970-01-01 in 48 bits, up to the year 10889.")));
	return ms;
}

/*
 * snowseq_uuid_min(ts) -> uuid: the smallest UUID of the time unit of ts,
 * below every version 7 UUID made in it or after: WHERE id >=
 * snowseq_uuid_min(...) uses the index.  The nil UUID before the epoch.
 */
Datum
snowseq_uuid_min(PG_FUNCTION_ARGS)
{
	int64		t = ClockTimeFieldOf(PG_GETARG_TIMESTAMPTZ(0));

	if (t < 0)
		PG_RETURN_UUID_P(UuidBound(-1, false));
	PG_RETURN_UUID_P(UuidBound(UuidUnitMs((uint64) t), false));
}

/*
 * snowseq_uuid_max(ts) -> uuid: the largest UUID of the time unit of ts,
 * above every version 7 UUID made in it or before.  The nil UUID before
 * the epoch.
 */
Datum
snowseq_uuid_max(PG_FUNCTION_ARGS)
{
	int64		t = ClockTimeFieldOf(PG_GETARG_TIMESTAMPTZ(0));
	int64		next_ms;
	int64		end = UUID_MAX_UNIX_MS;

	if (t < 0)
		PG_RETURN_UUID_P(UuidBound(-1, false));
	(void) UuidUnitMs((uint64) t);
	/* the last ms of the unit, at most the last a UUID holds */
	if (ClockUnitsToMs((uint64) t + 1, &next_ms))
		end = Min(next_ms - 1, UUID_MAX_UNIX_MS);
	PG_RETURN_UUID_P(UuidBound(end, true));
}
