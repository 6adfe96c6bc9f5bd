/*
 * timeutil.c
 *		Time conversions and the real-time clock: the bottom layer that the
 *		clock, the state file and the SQL functions share, so that none of
 *		them reaches into another for a unit conversion.
 */
#include "postgres.h"

#include <time.h>

#include "common/int.h"
#include "utils/timestamp.h"

#include "timeutil.h"

/* Milliseconds since 1970-01-01 UTC from the real-time clock. */
int64
TimeWallMs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds of a clock that never steps. */
int64
TimeMonotonicMs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ms since 1970-01-01 UTC as a timestamptz; ERROR beyond its range. */
TimestampTz
TimeMsToTimestamptz(int64 ms)
{
	int64		us;

	if (pg_sub_s64_overflow(ms, SNOWSEQ_UNIX_TO_PG_MS, &us) ||
		pg_mul_s64_overflow(us, 1000, &us) || !IS_VALID_TIMESTAMP(us))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range"),
				 errdetail("The instant %lld ms after 1970-01-01 cannot be represented as a timestamp.",
						   (long long) ms)));
	return us;
}

/* A finite timestamptz as ms since 1970 (floor). */
int64
TimeTimestamptzToMs(TimestampTz ts)
{
	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp must be finite")));
	return (ts >= 0 ? ts / 1000 : -((-ts + 999) / 1000)) + SNOWSEQ_UNIX_TO_PG_MS;
}
