/*
 * shard_ddl_xact.h
 *		The shard servers' remote transactions of a schema change carried
 *		from the router, their two-phase end with the router's, and
 *		deciding those left prepared (shard_ddl_xact.c).
 */
#ifndef SNOWSEQ_SHARD_DDL_XACT_H
#define SNOWSEQ_SHARD_DDL_XACT_H

#include "nodes/pg_list.h"

#include "remote.h"

struct MoveOp;

extern void ShardDdlXactInit(void);
extern RemoteConn *ShardDdlSession(Oid serverid);
extern void ShardDdlRun(List *servers, List *sqls);
extern int	ShardDdlResolveAll(const char *ext, int elevel, int unreachable_elevel, List **decided,
							   MemoryContext cxt);
extern int	ShardDdlResolveAtStart(int elevel);
extern void ShardDdlReportResolved(struct MoveOp *collect);

#endif							/* SNOWSEQ_SHARD_DDL_XACT_H */
