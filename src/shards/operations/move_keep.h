/*
 * move_keep.h
 *		move_keep.c: the keep view of a split, and the router's partitions
 *		pointed at it and back.
 */
#ifndef SNOWSEQ_MOVE_KEEP_H
#define SNOWSEQ_MOVE_KEEP_H

#include "move_common.h"

extern char *MoveKeepView(Move *m);
extern void MovePointBack(Move *m);
extern bool MoveDropKeepView(Move *m);
extern void MoveDropKeepViewOf(Move *m);
extern void MoveRecordKeepView(Move *m);
extern void MoveCreateKeepView(Move *m, RemoteConn *rc);
extern void MovePointPartition(Move *m, bool to_view);

#endif							/* SNOWSEQ_MOVE_KEEP_H */
