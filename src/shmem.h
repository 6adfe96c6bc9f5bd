/*
 * shmem.h
 *		The shared state every part of snowseq uses (shmem.c): the lock that
 *		serialises advances, the condition variable callers wait on, the
 *		reservation worker's latch, why nothing may be generated, and the
 *		per-process counts of IDs issued.  Each subsystem owns the rest of
 *		its shared memory (XxxShmemSize/XxxShmemInit).
 */
#ifndef SNOWSEQ_SHMEM_H
#define SNOWSEQ_SHMEM_H

#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

#include "snowseq.h"


/* what the state file or redo said about the saved configuration */
typedef enum SnowseqStateError
{
	STATE_OK = 0,
	STATE_MISMATCH,				/* layout, epoch or node id changed */
	STATE_CORRUPT				/* checksum or format wrong */
} SnowseqStateError;

/* one slot per PGPROC, so counting IDs costs no shared cache line */
typedef struct IssuedSlot
{
	pg_atomic_uint64 ids;
	char		pad[SNOWSEQ_CACHE_LINE - sizeof(pg_atomic_uint64)];
} IssuedSlot;

typedef struct SnowseqShared
{
	pg_atomic_uint32 advance_requested; /* the worker's latch was set */
	char		pad[SNOWSEQ_CACHE_LINE];

	LWLock	   *lock;			/* serialises advances and state file writes */
	ConditionVariable advanced; /* broadcast after every advance */
	Latch	   *worker_latch;	/* the reservation worker, if running */
	int			state_error;	/* SnowseqStateError */
	char		state_message[512];
	bool		state_file_found;

	int			nslots;
	IssuedSlot	issued[FLEXIBLE_ARRAY_MEMBER];
} SnowseqShared;

extern SnowseqShared *Snowseq;

extern Size ShmemSize(void);
extern bool ShmemInit(void);
extern void ShmemSetStateError(SnowseqStateError err, const char *message,
							   const char *what);
extern void ShmemCountIssued(uint64 n);
extern uint64 ShmemIssuedTotal(void);
extern void ShmemCheckUsableSlow(void);
extern void ShmemCheckPreloaded(void);

/*
 * The hot-path check of every generating function: snowseq is preloaded,
 * the node id is set, this is not a standby and the saved state matches.
 * Inline so the common case is a few loads.
 */
extern bool snowseq_backend_ready;

static inline void
SnowseqCheckUsable(void)
{
	if (likely(snowseq_backend_ready && Snowseq->state_error == STATE_OK))
		return;
	ShmemCheckUsableSlow();
}

#endif							/* SNOWSEQ_SHMEM_H */
