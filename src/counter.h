/*
 * counter.h
 *		Named counters' places and values (counter.c), for the definitions'
 *		functions (counter_def.c).
 */
#ifndef SNOWSEQ_COUNTER_H
#define SNOWSEQ_COUNTER_H

#include "counter_cache.h"
#include "reserve.h"

extern Reservation *CounterReservation(const NameData *name);
extern void CounterNoRoom(const NameData *name);
extern bool CounterHasRoom(const NameData *name, const char *table, Oid floor_nsp);
extern uint64 CounterTaken(const NameData *name);
extern int64 CounterRecordOf(const CounterEntry *e, uint64 c);

#endif							/* SNOWSEQ_COUNTER_H */
