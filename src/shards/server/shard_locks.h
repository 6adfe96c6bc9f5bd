/*
 * shard_locks.h
 *		The advisory lock classes of elastic shards, shared by the router
 *		side (src/shards/) and the shard-server side (src/shards/server/).
 */
#ifndef SNOWSEQ_SHARD_LOCKS_H
#define SNOWSEQ_SHARD_LOCKS_H

#include "storage/lock.h"

/*
 * The locks of moves: advisory lock tags whose fourth field is
 * SNOWSEQ_LOCK_FIELD4.  pg_advisory_lock() and its kin set it to 1 (one
 * bigint key) or 2 (two int4 keys), so no SQL role can take, wait for or
 * squat on these; snowseq takes them in C only: on the router for a move's
 * record (move_common.c), on the source for its fences (fence.c, through
 * snowseq_fence_hold, which is not for PUBLIC).  The classes (the second
 * field):  a move holds SNOWSEQ_LOCK_MOVE with its id on the router for its
 * whole life, so a record whose lock is free belongs to a move that ended
 * or died (with id 0, a transaction lock, it orders the start of moves).
 * On the source, the mover's session holds SNOWSEQ_LOCK_ALIVE with the
 * fence id from the first block to the end, and SNOWSEQ_LOCK_BLOCK while
 * writers of the fenced range must wait.  A merge of partitions holds
 * SNOWSEQ_LOCK_MERGE with its id on the router as a move holds its lock
 * (merge_records.c), and also orders its start with SNOWSEQ_LOCK_MOVE 0.
 * pg_locks shows them as advisory locks with classid the class, objid the
 * id and objsubid 21326.
 */
#define SNOWSEQ_LOCK_FIELD4		0x534E
#define SNOWSEQ_LOCK_MOVE		0x534E4D31
#define SNOWSEQ_LOCK_BLOCK		0x534E4D32
#define SNOWSEQ_LOCK_ALIVE		0x534E4D33
#define SNOWSEQ_LOCK_MERGE		0x534E4D34

/* The lock tag of a lock of moves in this database (storage/lock.h). */
#define SET_LOCKTAG_SNOWSEQ(tag, cls, id) \
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (cls), (uint32) (id), SNOWSEQ_LOCK_FIELD4)

#endif							/* SNOWSEQ_SHARD_LOCKS_H */
