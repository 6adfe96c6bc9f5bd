/*
 * clock.h
 *		The snowflake generator (clock.c): the logical clock, the layout of
 *		its IDs, and the conversions between counters, IDs and instants.
 */
#ifndef SNOWSEQ_CLOCK_H
#define SNOWSEQ_CLOCK_H

#include "utils/timestamp.h"

#include "statefile.h"

extern void ClockInit(void);
extern Size ClockShmemSize(void);
extern void ClockShmemInit(void);
extern uint64 ClockNext(uint64 n);
extern int64 ClockComposeId(uint64 counter);
extern int64 ClockComposeBackfillId(uint64 counter);
extern int64 ClockTimeFieldOf(TimestampTz ts);
extern TimestampTz ClockCounterInstant(uint64 counter);
extern TimestampTz ClockEndOfTime(void);
extern uint64 ClockCounterLimit(void);
extern uint64 ClockWallUnits(void);
extern bool ClockUnitsToMs(uint64 units, int64 *ms);
extern uint64 ClockFloorAfterReset(const SavedConfig *old, uint64 old_bound);
extern void ClockRaiseForReset(uint64 floor, bool check_lead, SavedSlot *slot);
extern void ClockStats(uint64 *backward_events, uint64 *overflow_borrows,
					   uint64 *lead_waits);

#endif							/* SNOWSEQ_CLOCK_H */
