/*
 * merge_records.h
 *		merge_records.c: the records of merges (snowseq_merges) and the
 *		router's lock of a merge.
 */
#ifndef SNOWSEQ_MERGE_RECORDS_H
#define SNOWSEQ_MERGE_RECORDS_H

#include "merge.h"

extern const Machine MergeMachine;
extern bool MergeLock(int64 id, bool wait);
extern void MergeUnlock(int64 id);
extern void MergeRecordSet(Move *m, const char *sets, int nargs, const char *const *values);
extern void MergeRecordStep(Move *m, MergeStep step, const char *sets, const char *arg);
extern MoveStateId MergeStateRead(Move *m);
extern bool MergeStateOver(MoveStateId state);
extern char *MergeStatesOver(void);
extern char *MergeMark(Move *m);
extern void MergeRecordNew(Move *m);

#endif							/* SNOWSEQ_MERGE_RECORDS_H */
