/*
 * reserve.h
 *		Durable reservations: one mechanism for every counter snowseq hands
 *		out values from (the snowflake clock, the gene segment counter, named
 *		counters).
 *
 * A reservation is a durable upper bound on a counter: no value above it is
 * handed out.  The owner of a counter takes values with ReserveTake(); when
 * the bound is reached, or a low-water mark passed, it describes the counter
 * in a ReserveSpec (its floor, ceiling and block sizes) and asks reserve.c to
 * advance the bound, which writes a WAL record (rmgr.c), waits for a
 * synchronous standby (syncrep.c) and rewrites the state file (statefile.c)
 * before the new bound is published.  reserve.c knows nothing of what a
 * counter counts.
 */
#ifndef SNOWSEQ_RESERVE_H
#define SNOWSEQ_RESERVE_H

#include "access/xlogdefs.h"
#include "port/atomics.h"

#include "snowseq.h"

/* what a reservation belongs to; saved with it */
typedef enum ReserveTag
{
	RESERVE_TAG_CLOCK = 1,		/* the snowflake logical clock */
	RESERVE_TAG_SEGMENT = 2,	/* the gene segment counter */
	RESERVE_TAG_COUNTER = 3,	/* a named counter of one database */
	RESERVE_TAG_BACKFILL = 4,	/* the clock of IDs for past instants */
	RESERVE_TAG_WIDE_SEGMENT = 5	/* the segment counter of 128-bit gene IDs */
} ReserveTag;

/* the fixed reservations come first in the array */
#define RESERVE_CLOCK			0
#define RESERVE_SEGMENT			1
#define RESERVE_BACKFILL		2
#define RESERVE_WIDE_SEGMENT	3
#define RESERVE_FIXED			4

typedef struct ReserveId
{
	uint32		tag;			/* ReserveTag */
	Oid			dboid;			/* named counters: their database */
	NameData	name;			/* named counters: their name */
} ReserveId;

typedef struct Reservation
{
	/* the counter itself: the highest value handed out; hot, own cache line */
	pg_atomic_uint64 counter;
	/* how far the counter moved without handing values out (floors, raises) */
	pg_atomic_uint64 jumped;
	char		pad1[SNOWSEQ_CACHE_LINE - 2 * sizeof(pg_atomic_uint64)];

	/* read by every caller, written once per advance */
	pg_atomic_uint64 bound;		/* durable: no value above it is handed out */
	pg_atomic_uint64 low_water; /* passing it asks for the next advance */
	char		pad2[SNOWSEQ_CACHE_LINE - 2 * sizeof(pg_atomic_uint64)];

	pg_atomic_uint64 advances;
	pg_atomic_uint64 waits;

	/* under Snowseq->lock */
	bool		in_use;
	ReserveId	id;
	uint64		block;			/* size of the last advance */
	uint64		margin;			/* skipped above the bound after a promotion */
	uint64		rate_counter;	/* counter at the last advance */
	uint64		rate_jumped;	/* jumped at the last advance */
	TimestampTz rate_time;		/* when the last advance happened */
	/*
	 * The owner's own marks, not saved, 0 in a new slot (named counters:
	 * the floor the reservation covers + 1, and of which definition).
	 */
	uint64		owner_mark;
	uint64		owner_tag;
	/* bumped when the place is freed: a holder of a stale pointer notices */
	pg_atomic_uint64 generation;
} Reservation;

/*
 * How a counter may advance, given by its owner at each advance: reserve.c
 * applies these and nothing else.
 */
typedef struct ReserveSpec
{
	uint64		floor;			/* the counter stands at least here now */
	uint64		ceiling;		/* no bound above this: values above it wait */
	uint64		block_min;		/* an advance covers at least this many values */
	uint64		block_max;		/* and at most this many */
	uint64		margin_min;		/* skipped after a promotion, at least */
	bool		jumps_are_use;	/* the rate counts jumps of the counter too */
} ReserveSpec;

/* what ReserveTake did */
typedef enum ReserveResult
{
	RESERVE_OK,					/* values taken */
	RESERVE_LOW,				/* values taken, past the low-water mark */
	RESERVE_BOUND,				/* nothing taken: the bound must advance first */
	RESERVE_LIMIT				/* nothing taken: the counter has run out */
} ReserveResult;

extern Reservation *SnowseqRes; /* RESERVE_FIXED + snowseq_max_counters */
extern int	SnowseqResCount;

/*
 * Take n consecutive values, the first at least floor and every one below
 * limit: one compare-and-swap.  Returns the first value in *first and the
 * last in *last; on RESERVE_BOUND, *last is the value the bound must
 * cover.  Counted as issued.  A floor above the counter is a jump, not
 * use: it is added to r->jumped before the counter moves (and taken back
 * if it does not), so a rate computed from both never overcounts.
 */
static inline ReserveResult
ReserveTake(Reservation *r, uint64 floor, uint64 n, uint64 limit,
			uint64 *first, uint64 *last)
{
	uint64		old = pg_atomic_read_u64(&r->counter);

	for (;;)
	{
		uint64		jump;

		*first = Max(old + 1, floor);
		*last = *first + n - 1;
		if (unlikely(*last >= limit || *last < *first))
			return RESERVE_LIMIT;
		if (unlikely(*last > pg_atomic_read_u64(&r->bound)))
			return RESERVE_BOUND;
		jump = *first - (old + 1);
		if (jump != 0)
			pg_atomic_fetch_add_u64(&r->jumped, jump);
		if (pg_atomic_compare_exchange_u64(&r->counter, &old, *last))
			break;
		if (jump != 0)
			pg_atomic_fetch_sub_u64(&r->jumped, jump);
	}
	ShmemCountIssued(n);
	if (unlikely(*last > pg_atomic_read_u64(&r->low_water)))
		return RESERVE_LOW;
	return RESERVE_OK;
}

/* Raise an atomic to at least to; returns the value it holds then. */
static inline uint64
AtomicRaise(pg_atomic_uint64 *v, uint64 to)
{
	uint64		cur = pg_atomic_read_u64(v);

	while (cur < to && !pg_atomic_compare_exchange_u64(v, &cur, to))
		;
	return Max(cur, to);
}

/* reserve.c: the advance and wait protocol */
extern uint64 ReserveNextBound(Reservation *r, const ReserveSpec *spec, uint64 need);
extern bool ReserveAdvance(Reservation *r, const ReserveSpec *spec, uint64 need);
extern void ReserveRaise(Reservation *r, uint64 to);
extern void ReserveWait(Reservation *r, const ReserveSpec *spec, uint64 need);
extern void ReserveRequestAdvance(Reservation *r, const ReserveSpec *spec);
extern bool ReserveAdvanceIfDue(Reservation *r, const ReserveSpec *spec, bool in_use);

/* statefile.c: the state file and its copy */
typedef struct SavedConfig
{
	int32		node_id;
	int32		time_bits;
	int32		node_bits;
	int32		seq_bits;
	int32		time_unit_ms;
	int32		seq_before_node;	/* field order: 0 time|node|seq, 1 time|seq|node */
	int64		epoch_ms;
} SavedConfig;

typedef struct SavedSlot
{
	uint32		tag;
	Oid			dboid;
	NameData	name;
	uint64		bound;
	uint64		block;
	uint64		margin;
} SavedSlot;

typedef struct SavedState
{
	SavedConfig config;
	int			nslots;
	SavedSlot  *slots;
} SavedState;

typedef enum StateRead
{
	STATE_READ_OK,
	STATE_READ_MISSING,
	STATE_READ_CORRUPT
} StateRead;

#define SNOWSEQ_STATE_COPY		SNOWSEQ_STATE_FILE ".copy"

extern void StateConfigCurrent(SavedConfig *c);
extern bool StateConfigDiffers(const SavedConfig *c, char *buf, size_t len);
extern StateRead StateReadFile(const char *path, SavedState *s, char *msg, size_t len);
extern void StateWriteFiles(const SavedState *s);
extern SavedSlot *StateFindSlot(const SavedState *s, const ReserveId *id);

/* shmem.c: the reservations in shared memory, saved and restored */
extern Reservation *ReservationFind(const ReserveId *id, bool create);
extern Reservation *ReservationOfSlot(const SavedSlot *slot, bool create);
extern void ReservationRaise(Reservation *r, uint64 counter, const SavedSlot *saved);
extern void ReservationSave(Reservation *r, const SavedSlot *update);
extern void ReservationSlot(Reservation *r, SavedSlot *slot);
extern const char *ReservationName(const Reservation *r);

/* rmgr.c: snowseq's WAL resource manager */
extern void RmgrInit(void);
extern XLogRecPtr RmgrLogAdvance(const SavedSlot *slot);

/* syncrep.c: waiting for a synchronous standby */
extern void SyncRepWaitReservation(XLogRecPtr lsn);

#endif							/* SNOWSEQ_RESERVE_H */
