/*
 * move_group.h
 *		move_group.c: the placement group of a move, the foreign keys
 *		within it, the order its rows are deleted in.
 */
#ifndef SNOWSEQ_MOVE_GROUP_H
#define SNOWSEQ_MOVE_GROUP_H

#include "move_common.h"

extern bool PartitionOfGene(Oid parent, int gene, int *first, int *last, char **server);
extern List *MoveGeneShardedTables(const char *ext);
extern List *MovePlacementGroup(Move *m, const char *to_server);
extern void MoveCheckGroupKeys(Move *m, RemoteConn *rc, bool lock);
extern List *MoveDeleteOrder(Move *m, RemoteConn *rc);

#endif							/* SNOWSEQ_MOVE_GROUP_H */
