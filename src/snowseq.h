/*
 * snowseq.h
 *		What the files of snowseq share: the settings, the shared state and
 *		the generators' entry points.  The durability machinery has its own
 *		header, reserve.h.
 */
#ifndef SNOWSEQ_H
#define SNOWSEQ_H

#include "fmgr.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#define SNOWSEQ_CACHE_LINE		64
#define SNOWSEQ_STATE_FILE		"snowseq.state"
#define SNOWSEQ_GENE_BITS		15
#define SNOWSEQ_SEGMENT_BITS	48
#define SNOWSEQ_MAX_GENE		((1 << SNOWSEQ_GENE_BITS) - 1)

/*
 * 128-bit gene IDs (uuid), from the most significant bit on: gene 23 bits
 * (the 64-bit gene, then 8 more bits of the same hash), key version 20,
 * segment 5, version 4 (1000: RFC 9562 version 8), segment 12, variant 2
 * (10), segment 62.  The 79-bit segment is (counter << 30) | node id.
 */
#define SNOWSEQ_WIDE_GENE_BITS	23
#define SNOWSEQ_WIDE_EXTRA_BITS (SNOWSEQ_WIDE_GENE_BITS - SNOWSEQ_GENE_BITS)
#define SNOWSEQ_WIDE_NODE_BITS	30
#define SNOWSEQ_WIDE_COUNTER_BITS 49
#define SNOWSEQ_WIDE_VERSION_BITS 20
#define SNOWSEQ_WIDE_SEGMENT_BITS 79

/* The fields of a 128-bit gene ID; the segment as its top 15 bits and its low 64. */
typedef struct WideId
{
	uint32		gene;			/* 23 bits */
	uint32		key_version;	/* 20 bits: 0 for a private ID */
	uint64		seg_hi;			/* segment bits 78..64 */
	uint64		seg_lo;			/* segment bits 63..0 */
} WideId;

/* ms since 1970-01-01 UTC and timestamptz (us since 2000-01-01) */
#define SNOWSEQ_UNIX_TO_PG_MS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

/* ---- settings (guc.c) ---- */
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
extern int	snowseq_max_lead_ms;
extern int	snowseq_max_counters;
extern int64 SnowseqEpochMs;	/* snowseq.epoch in ms since 1970-01-01 UTC */
extern int	snowseq_backfill_node_id;
extern bool snowseq_seq_before_node;	/* snowseq.layout: time | seq | node */

extern void GucInit(void);
extern void GucDefineInt(const char *name, const char *desc, int *var,
						 int boot, int min, int max, int flags);
extern void GucDefineBool(const char *name, const char *desc, bool *var,
						  bool boot, int flags);
extern void GucReservePrefix(void);
extern void GucValidate(void);
extern void GucLayoutNoteExplicit(void);
extern void GucLayoutInit(void);
extern void GucLayoutApply(void);

/* ---- time ---- */
extern TimestampTz SnowseqMsToTimestamptz(int64 ms);
extern int64 SnowseqTimestamptzToMs(TimestampTz ts);
extern int64 SnowseqWallMs(void);

/* ---- shared state (shmem.c) ---- */

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
	/* the logical clock's statistics and reference (clock.c) */
	pg_atomic_uint64 last_wall_ms;	/* detects a clock that goes back */
	pg_atomic_uint64 backward_events;
	pg_atomic_uint64 overflow_borrows;
	pg_atomic_uint64 lead_waits;
	pg_atomic_uint64 ref_offset_ms; /* reference clock = monotonic + this */
	pg_atomic_uint32 advance_requested;
	char		pad[SNOWSEQ_CACHE_LINE];

	LWLock	   *lock;			/* serialises advances and state file writes */
	ConditionVariable advanced; /* broadcast after every advance */
	Latch	   *worker_latch;	/* the reservation worker, if running */
	int			state_error;	/* SnowseqStateError */
	char		state_message[512];
	bool		state_file_found;

	/* the lap of the backfill clock (backfill.c), under backfill_mutex */
	slock_t		backfill_mutex;
	bool		backfill_lap_open;
	uint64		backfill_floor; /* lowest sequence value of the lap */
	uint64		backfill_after; /* the last value handed out + 1, or 0 */

	int			nslots;
	IssuedSlot	issued[FLEXIBLE_ARRAY_MEMBER];
} SnowseqShared;

extern SnowseqShared *Snowseq;

extern void ShmemInit(void);
extern Size ShmemSize(void);
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

/* ---- generators ---- */
struct SavedConfig;
struct SavedSlot;

/* clock.c */
extern void ClockInit(void);
extern uint64 ClockNext(uint64 n);
extern int64 ClockComposeId(uint64 counter);
extern int64 ClockComposeBackfillId(uint64 counter);
extern int64 ClockTimeFieldOf(TimestampTz ts);
extern TimestampTz ClockCounterInstant(uint64 counter);
extern TimestampTz ClockEndOfTime(void);
extern uint64 ClockCounterLimit(void);
extern bool ClockUnitsToMs(uint64 units, int64 *ms);
extern bool ClockAdvanceDue(bool in_use);
extern uint64 ClockFloorAfterReset(const struct SavedConfig *old, uint64 old_bound);
extern void ClockRaiseForReset(uint64 floor, bool check_lead, struct SavedSlot *slot);

/* segment.c */
extern uint64 SegmentNext(void);
extern bool SegmentAdvanceDue(bool in_use);
extern uint64 SegmentFloorAfterReset(const struct SavedConfig *old, uint64 old_bound);
extern uint64 WideSegmentNext(void);

/* backfill.c */
extern uint64 BackfillNext(TimestampTz ts);
extern bool BackfillAdvanceDue(bool in_use);
extern void BackfillCheckInstant(FunctionCallInfo fcinfo);

/* counter.c */

/* gene.c */
struct pg_uuid_t;
extern int	GeneOfBytes(const char *data, size_t len);
extern void WideIdToUuid(const WideId *w, struct pg_uuid_t *uuid);
extern bool WideIdFromUuid(const struct pg_uuid_t *uuid, WideId *w);

/* nodes.c */
extern void NodesRefuseCollision(const char *server, const char *what);

/* worker.c */
extern void WorkerRegister(void);

#endif							/* SNOWSEQ_H */
