/*
 * move_plan.h
 *		move_plan.c: planning a move: the partitions and bounds, the
 *		checks before it starts, its record and the placement group.
 */
#ifndef SNOWSEQ_MOVE_PLAN_H
#define SNOWSEQ_MOVE_PLAN_H

#include "foreign/foreign.h"

#include "move_common.h"

extern List *MovePartBounds(Oid parent);
extern void MovePartGenes(Move *m, MovePartBound *b, int *first, int *last);
extern char *MoveParentColumns(Move *m);
extern char *MoveParentKey(Move *m);
extern void MoveForeignNames(Oid part, const char *key, char **schema, char **table, char **col);
extern ForeignServer *MovePartitionServer(Oid part, const char *part_name);
extern void MoveForeignOptions(Move *m, Oid rel, char **opts, char **colopts);
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

#endif							/* SNOWSEQ_MOVE_PLAN_H */
