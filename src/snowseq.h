/*
 * snowseq.h
 *		Shared declarations of the snowseq extension.
 *
 * snowseq hands out 64-bit IDs from counters kept in shared memory.  Two
 * counters exist: the snowflake logical clock and the gene segment counter.
 * Both are bounded by a durable reservation (reserve.c), so that no value is
 * ever handed out twice, whatever happens to the server or its clock.
 */
#ifndef SNOWSEQ_H
#define SNOWSEQ_H

#include "fmgr.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#define SNOWSEQ_CACHE_LINE		64
#define SNOWSEQ_STATE_FILE		"snowseq.state"
#define SNOWSEQ_GENE_BITS		15
#define SNOWSEQ_SEGMENT_BITS	48
#define SNOWSEQ_MAX_GENE		((1 << SNOWSEQ_GENE_BITS) - 1)

/* ms since 1970-01-01 UTC and timestamptz (us since 2000-01-01) */
#define SNOWSEQ_UNIX_TO_PG_MS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

static inline TimestampTz
SnowseqMsToTimestamptz(int64 ms)
{
	return (ms - SNOWSEQ_UNIX_TO_PG_MS) * 1000;
}

/* ---- configuration (guc.c) ---- */
extern int	snowseq_node_id;
extern int	snowseq_time_bits;
extern int	snowseq_node_bits;
extern int	snowseq_seq_bits;
extern int	snowseq_time_unit_ms;
extern int	snowseq_reserve_buffer_ms;
extern int	snowseq_clock_block_min_ms;
extern int	snowseq_clock_block_max_ms;
extern int	snowseq_segment_block_min;
extern int	snowseq_segment_block_max;
extern int	snowseq_promote_margin_ms;
extern int64 SnowseqEpochMs;	/* snowseq.epoch in ms since 1970-01-01 UTC */

extern void GucInit(void);
extern void GucValidate(void);

/* ---- the durable reservation, one per counter (reserve.c) ---- */
typedef enum ReserveKind
{
	RESERVE_CLOCK = 0,			/* snowflake logical clock: (time << seq_bits) | seq */
	RESERVE_SEGMENT = 1,		/* gene segment counter of this node */
	RESERVE_COUNT
} ReserveKind;

typedef struct Reservation
{
	/* the counter itself: the highest value handed out; hot, own cache line */
	pg_atomic_uint64 counter;
	char		pad1[SNOWSEQ_CACHE_LINE - sizeof(pg_atomic_uint64)];

	/* read by every caller, written once per advance */
	pg_atomic_uint64 bound;		/* durable: no value above it is handed out */
	pg_atomic_uint64 low_water; /* passing it asks for the next advance */
	char		pad2[SNOWSEQ_CACHE_LINE - 2 * sizeof(pg_atomic_uint64)];

	/* statistics and rate tracking */
	pg_atomic_uint64 advances;
	pg_atomic_uint64 waits;
	uint64		block;			/* size of the last advance; under the lock */
	uint64		rate_counter;	/* counter at the last advance; under the lock */
	TimestampTz rate_time;		/* when the last advance happened */
} Reservation;

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
	Reservation res[RESERVE_COUNT];

	/* last wall clock reading in ms; detects a clock that goes back */
	pg_atomic_uint64 last_wall_ms;
	pg_atomic_uint64 backward_events;
	pg_atomic_uint64 overflow_borrows;
	pg_atomic_uint32 advance_requested;
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

/* shmem.c */
extern void ShmemInit(void);
extern Size ShmemSize(void);
extern void ShmemCountIssued(uint64 n);
extern uint64 ShmemIssuedTotal(void);

/* clock.c */
extern void ClockInit(void);
extern uint64 ClockNowUnits(void);
extern uint64 ClockMsToUnits(int64 ms);
extern int64 ClockUnitsToMs(uint64 units);
extern TimestampTz ClockCounterInstant(uint64 counter);
extern uint64 ClockNext(uint64 n);
extern int64 ClockComposeId(uint64 state);

/* reserve.c */
extern void ReserveInit(void);
extern void ReserveLoadStateFile(void);
extern void ReserveWait(ReserveKind kind, uint64 need);
extern void ReserveRequestAdvance(void);
extern bool ReserveAdvanceAllDue(bool in_use);
extern void ReserveAdvance(ReserveKind kind, uint64 need);
extern const char *ReserveKindName(ReserveKind kind);

/* worker.c */
extern void WorkerRegister(void);

/* segment.c */
extern uint64 SegmentNext(void);

/* gene.c */
extern int	GeneOfBytes(const char *data, size_t len);

/*
 * The hot-path check of every generating function: snowseq is preloaded,
 * the node id is set, this is not a standby and the saved state matches.
 * Inline so the common case is a few loads.
 */
extern bool snowseq_backend_ready;
extern void ShmemCheckUsableSlow(void);

static inline void
SnowseqCheckUsable(void)
{
	if (likely(snowseq_backend_ready && Snowseq->state_error == STATE_OK))
		return;
	ShmemCheckUsableSlow();
}

/*
 * Take n consecutive values of a reserved counter, the first at least
 * floor: one compare-and-swap, a wait only when the durable bound is
 * reached (the floor is not read again after a wait: the values are still
 * above every value taken before).  Returns the first value, and in *last
 * the last one; false instead when the values would reach limit, which the
 * caller reports.  The generators of clock.c and segment.c share it.
 */
static inline bool
ReserveTake(ReserveKind kind, uint64 floor, uint64 n, uint64 limit,
			uint64 *first, uint64 *last)
{
	Reservation *r = &Snowseq->res[kind];
	uint64		old = pg_atomic_read_u64(&r->counter);

	for (;;)
	{
		*first = Max(old + 1, floor);
		*last = *first + n - 1;
		if (unlikely(*last >= limit))
			return false;
		if (unlikely(*last > pg_atomic_read_u64(&r->bound)))
		{
			ReserveWait(kind, *last);
			old = pg_atomic_read_u64(&r->counter);
			continue;
		}
		if (pg_atomic_compare_exchange_u64(&r->counter, &old, *last))
			break;
	}
	if (unlikely(*last > pg_atomic_read_u64(&r->low_water)))
		ReserveRequestAdvance();
	ShmemCountIssued(n);
	return true;
}

#endif							/* SNOWSEQ_H */
