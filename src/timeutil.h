/*
 * timeutil.h
 *		Time conversions and the real-time clock (timeutil.c): ms since
 *		1970-01-01 UTC, as the settings and the state file count time, and
 *		PostgreSQL's timestamptz.
 */
#ifndef SNOWSEQ_TIMEUTIL_H
#define SNOWSEQ_TIMEUTIL_H

#include "datatype/timestamp.h"

/* ms since 1970-01-01 UTC and timestamptz (us since 2000-01-01) */
#define SNOWSEQ_UNIX_TO_PG_MS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

extern int64 TimeWallMs(void);
extern int64 TimeMonotonicMs(void);
extern TimestampTz TimeMsToTimestamptz(int64 ms);
extern int64 TimeTimestamptzToMs(TimestampTz ts);

#endif							/* SNOWSEQ_TIMEUTIL_H */
