/*
 * move_orphans.h
 *		move_orphans.c: what moves and merges of this router left on the
 *		servers, found by their records (snowseq_move_objects), and removed as
 *		their policies say.
 */
#ifndef SNOWSEQ_MOVE_ORPHANS_H
#define SNOWSEQ_MOVE_ORPHANS_H

#include "move_common.h"

extern void CleanupRecorded(MoveOp *collect);
extern int	CleanupRecordedMerge(Move *m, char **error);

#endif							/* SNOWSEQ_MOVE_ORPHANS_H */
