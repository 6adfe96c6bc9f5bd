/*
 * segment.h
 *		The gene segment counters (segment.c): the per-node counter of gene
 *		IDs and that of 128-bit gene IDs.
 */
#ifndef SNOWSEQ_SEGMENT_H
#define SNOWSEQ_SEGMENT_H

#include "statefile.h"

extern void SegmentInit(void);
extern uint64 SegmentNext(void);
extern uint64 WideSegmentNext(void);
extern uint64 SegmentFloorAfterReset(const SavedConfig *old, uint64 old_bound);

#endif							/* SNOWSEQ_SEGMENT_H */
