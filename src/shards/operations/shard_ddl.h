/*
 * shard_ddl.h
 *		Schema changes of gene-sharded tables carried to their shard
 *		servers: the utility hook (shard_ddl.c).  Their remote transactions
 *		and deciding the prepared ones: shard_ddl_xact.h.
 */
#ifndef SNOWSEQ_SHARD_DDL_H
#define SNOWSEQ_SHARD_DDL_H

extern void ShardDdlInit(void);

#endif							/* SNOWSEQ_SHARD_DDL_H */
