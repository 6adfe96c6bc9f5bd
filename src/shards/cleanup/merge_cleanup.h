/*
 * merge_cleanup.h
 *		merge_cleanup.c: the undo of a merge, its cleanup and the
 *		resolver's part.
 */
#ifndef SNOWSEQ_MERGE_CLEANUP_H
#define SNOWSEQ_MERGE_CLEANUP_H

#include "move_common.h"

extern void MergeUndo(Move *m, const char *error);
extern int	MergeCleanup(const char *ext, Oid parent, MoveOp *collect, bool at_start, int elevel);
extern int	MergeResolveSwitches(int elevel);

#endif							/* SNOWSEQ_MERGE_CLEANUP_H */
