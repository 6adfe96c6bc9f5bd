/*
 * move_switch.h
 *		move_switch.c: the switch: fences and their trigger, holding
 *		writes back, the router's new partition, the keep view.
 */
#ifndef SNOWSEQ_MOVE_SWITCH_H
#define SNOWSEQ_MOVE_SWITCH_H

#include "move_common.h"

extern void MoveResolvePrepared(Move *m, bool commit);
extern void MoveFenceTrigger(RemoteConn *rc, const char *table, const char *col);
extern void MoveBlock(Move *m);
extern void MoveGroupForeignKeys(Move *m);
extern void MoveValidateGroupKeys(Move *m);
extern void MoveSwitchRouter(Move *m);
extern bool MoveLockParent(Move *m, bool check_stuck);
extern void MoveReleaseParent(Move *m);
extern void MoveSwitch(Move *m);
extern char *MoveKeepView(Move *m);
extern void MovePointBack(Move *m);
extern bool MoveDropKeepView(Move *m);
extern void MoveDropKeepViewOf(Move *m);

#endif							/* SNOWSEQ_MOVE_SWITCH_H */
