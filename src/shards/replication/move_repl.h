/*
 * move_repl.h
 *		move_repl.c: replication of a move: publication, slot and
 *		subscription, the copy's progress, and the replication back to the
 *		source after the switch.
 */
#ifndef SNOWSEQ_MOVE_REPL_H
#define SNOWSEQ_MOVE_REPL_H

#include "move_common.h"

extern void MoveCreatePublication(Move *m);
extern void MoveBackPrepare(Move *m);
extern void MoveBackAttach(Move *m);
extern void MoveBackSubscribe(Move *m, bool advance);
extern void MoveBackDetach(Move *m);
extern void MoveBackDrop(Move *m);
extern char *MoveBackMark(Move *m);
extern void MoveBackDropTable(RemoteConn *dst, const char *table, const char *mark);
extern void MoveCreateSubscription(Move *m);
extern void MoveRecordSyncSlots(Move *m);
extern void MoveEnableSubscription(Move *m);
extern bool MoveCopyState(Move *m, char **rows);
extern char *MoveCopySize(Move *m);
extern char *MoveLagBytes(Move *m);
extern void MoveCheckSubscription(Move *m, const char *errors);
extern char *MoveSourceLsn(Move *m);
extern char *MoveSubErrorsSql(RemoteConn *rc, const char *alias);
extern bool MoveWaitApplied(Move *m, const char *lsn, int timeout_ms);
extern void MoveDropSubscription(Move *m);
extern char *MoveDropSubscriptionNamed(RemoteConn *rc, const char *name, bool keep_slot);
extern char *MoveSubscriptionOid(RemoteConn *rc, const char *name);
extern void MoveDropSlotNamed(RemoteConn *rc, const char *name);
extern void MoveDropSlots(Move *m);
extern void MoveDropPublication(Move *m);

#endif							/* SNOWSEQ_MOVE_REPL_H */
