/*
 * merge.h
 *		merge.c: merges of neighbouring partitions of one server, their
 *		cleanup and the resolver's part.
 */
#ifndef SNOWSEQ_MERGE_H
#define SNOWSEQ_MERGE_H

#include "move_common.h"

extern int	MergeCleanup(const char *ext, Oid parent, Move *collect, bool at_start, int elevel);
extern int	MergeResolveSwitches(int elevel);

#endif							/* SNOWSEQ_MERGE_H */
