/*
 * merge_switch.h
 *		merge_switch.c: the switch of a merge and its finish.
 */
#ifndef SNOWSEQ_MERGE_SWITCH_H
#define SNOWSEQ_MERGE_SWITCH_H

#include "move_common.h"
#include "remote.h"

extern char *MergeTriggers(Move *m, RemoteConn *rc);
extern void MergeSwitch(Move *m);
extern void MergeFinish(Move *m);

#endif							/* SNOWSEQ_MERGE_SWITCH_H */
