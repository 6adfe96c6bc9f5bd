/*
 * move_plan.h
 *		move_plan.c: planning a move: the checks before it starts, its
 *		record and the placement group.
 */
#ifndef SNOWSEQ_MOVE_PLAN_H
#define SNOWSEQ_MOVE_PLAN_H

#include "move_common.h"

extern void MovePlan(Move *m, const char *to_server);
extern char *MoveLocalNode(Move *m);
extern void MoveRecordNew(Move *m);
extern Move *MoveRevertNew(Move *o);
extern void MoveCheckServer(RemoteConn *rc);
extern char *MoveRemoteColumns(RemoteConn *rc, const char *table);
extern char *MoveRemotePkey(RemoteConn *rc, const char *table);
extern char *MoveTableReadBy(Move *m, const char *server, const char *nsp, const char *rel);
extern char *MoveCopyMark(Move *m);
extern void MoveRefuseReferenced(Move *m, RemoteConn *rc);
extern void MovePrepareChecks(Move *m);

extern void MoveArgsGiven(FunctionCallInfo fcinfo, const char *what, const char *const *names);

#endif							/* SNOWSEQ_MOVE_PLAN_H */
