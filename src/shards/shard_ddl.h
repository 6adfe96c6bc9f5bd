/*
 * shard_ddl.h
 *		Schema changes of gene-sharded tables carried to their shard
 *		servers (shard_ddl.c).
 */
#ifndef SNOWSEQ_SHARD_DDL_H
#define SNOWSEQ_SHARD_DDL_H

#include "nodes/pg_list.h"

struct MoveOp;

extern void ShardDdlInit(void);
extern int	ShardDdlResolveAll(const char *ext, int elevel, int unreachable_elevel, List **decided,
							   MemoryContext cxt);
extern int	ShardDdlResolveAtStart(int elevel);
extern void ShardDdlReportResolved(struct MoveOp *collect);

#endif							/* SNOWSEQ_SHARD_DDL_H */
