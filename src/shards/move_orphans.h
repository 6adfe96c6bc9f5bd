/*
 * move_orphans.h
 *		move_orphans.c: what moves of this router left on the servers after
 *		they ended, found by their records (snowseq_move_objects), and removed.
 */
#ifndef SNOWSEQ_MOVE_ORPHANS_H
#define SNOWSEQ_MOVE_ORPHANS_H

#include "move_common.h"

extern void CleanupRecorded(MoveOp *collect);

#endif							/* SNOWSEQ_MOVE_ORPHANS_H */
