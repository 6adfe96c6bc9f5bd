/*
 * backfill.h
 *		IDs for past instants (backfill.c).
 */
#ifndef SNOWSEQ_BACKFILL_H
#define SNOWSEQ_BACKFILL_H

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/timestamp.h"

/* the spaces of values per time unit */
#define BACKFILL_BIGINT		0	/* sequence values of a bigint ID's time unit */
#define BACKFILL_UUID		1	/* counter values of a UUID's millisecond */
#define BACKFILL_SPACES		2

extern void BackfillInit(void);
extern Size BackfillShmemSize(void);
extern void BackfillShmemInit(void);
extern void BackfillLoadState(void);
extern uint64 BackfillNext(TimestampTz ts);
extern uint64 BackfillNextUuid(TimestampTz ts, int64 *ms);
extern int	BackfillUuidExtraBits(void);
extern void BackfillCheckInstant(FunctionCallInfo fcinfo);
extern void BackfillRedo(const char *data, size_t len);
extern void BackfillDescribe(StringInfo buf, const char *data, size_t len);
extern void BackfillCapacity(int space, uint64 *per_unit, uint64 *fullest, uint64 *writes);

#endif							/* SNOWSEQ_BACKFILL_H */
