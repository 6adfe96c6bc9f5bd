/*
 * move_cleanup.h
 *		move_cleanup.c: the end of a move: finishing, finalizing and
 *		resolving it, and cleanup of what moves left.
 */
#ifndef SNOWSEQ_MOVE_CLEANUP_H
#define SNOWSEQ_MOVE_CLEANUP_H

#include "move_common.h"

extern void MoveFinish(Move *m);
extern void MoveFinishSource(Move *m);
extern void MoveFinalize(Move *m);
extern void MoveRevertFinish(Move *m);
extern Move *MoveLoadById(const char *ext, int64 id);
extern void MoveResolve(Move *m, const char *error);
extern int	CleanupMoves(const char *ext, Oid parent, MoveOp *collect, bool at_start, int elevel);
extern void MoveReportCopy(MoveOp *collect, MoveOp *op);

/* for the move resolver (worker.c) */
extern int	MoveResolveSwitches(int elevel);

#endif							/* SNOWSEQ_MOVE_CLEANUP_H */
