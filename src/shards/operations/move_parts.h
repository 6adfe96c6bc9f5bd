/*
 * move_parts.h
 *		move_parts.c: a parent's partitions, their bounds and genes, its
 *		key and columns, and what a foreign partition reads.
 */
#ifndef SNOWSEQ_MOVE_PARTS_H
#define SNOWSEQ_MOVE_PARTS_H

#include "foreign/foreign.h"

#include "move_common.h"

extern List *MovePartBounds(Oid parent);
extern void MovePartGenes(Move *m, MovePartBound *b, int *first, int *last);
extern char *MoveParentColumns(Move *m);
extern char *MoveParentKey(Move *m);
extern void MoveForeignNames(Oid part, const char *key, char **schema, char **table, char **col);
extern ForeignServer *MovePartitionServer(Oid part, const char *part_name);
extern void MoveForeignOptions(Move *m, Oid rel, char **opts, char **colopts);
extern void MoveForeignChecks(const char *parent_q, const char *new_part_q);

#endif							/* SNOWSEQ_MOVE_PARTS_H */
