/*
 * move_switch.h
 *		move_switch.c: the switch: fences and their trigger, holding
 *		writes back, the router's new partition (the keep view of a split
 *		is move_keep.h's).
 */
#ifndef SNOWSEQ_MOVE_SWITCH_H
#define SNOWSEQ_MOVE_SWITCH_H

#include "move_common.h"

#define MOVE_SWITCH_BUDGET_MS	60000	/* the router's lock on the parent: give up after */

extern void MoveResolvePrepared(Move *m, bool commit);
extern void MoveFenceTrigger(RemoteConn *rc, const char *table, const char *col);
extern void MoveTriggerDdl(RemoteConn *rc, const char *ddl, const char *what);
extern void MoveBlock(Move *m);
extern void MoveGroupForeignKeys(Move *m);
extern void MoveValidateGroupKeys(Move *m);
extern void MoveSwitchRouter(Move *m);
extern bool MoveLockParent(Move *m, bool check_stuck);
extern void MoveHoldParent(Move *m);
extern void MoveReleaseParent(Move *m);
extern void MoveSwitch(Move *m);

#endif							/* SNOWSEQ_MOVE_SWITCH_H */
