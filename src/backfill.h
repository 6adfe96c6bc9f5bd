/*
 * backfill.h
 *		IDs for past instants (backfill.c).
 */
#ifndef SNOWSEQ_BACKFILL_H
#define SNOWSEQ_BACKFILL_H

#include "fmgr.h"
#include "utils/timestamp.h"

extern void BackfillInit(void);
extern Size BackfillShmemSize(void);
extern void BackfillShmemInit(void);
extern uint64 BackfillNext(TimestampTz ts);
extern void BackfillCheckInstant(FunctionCallInfo fcinfo);
extern void BackfillCloseLap(void);

#endif							/* SNOWSEQ_BACKFILL_H */
