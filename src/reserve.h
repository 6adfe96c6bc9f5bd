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
 * counter counts: the owners of the fixed reservations register their
 * advance rule (ReserveRegisterOwner), and the worker advances whatever is
 * due through it.  The reservations themselves (ReservationX) live in
 * reserve.c's shared memory, loaded from the state file at start.
 */
#ifndef SNOWSEQ_RESERVE_H
#define SNOWSEQ_RESERVE_H

#include "port/atomics.h"
#include "utils/timestamp.h"

#include "shmem.h"
#include "statefile.h"

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
	 * Replayed from the last reservation record of 1.3 (not saved): the
	 * counter's rate then in values a second (0: unknown) and the end of its
	 * space (0: none).  promote_full: a promotion's jump took what was left
	 * of the space.
	 */
	uint64		promote_rate;
	uint64		space_end;
	bool		promote_full;
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
	uint64		end;			/* the space ends here: no value at or above it,
								 * ever (0: at the end of uint64) */
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

/*
 * An advance takes at most this share of what is left of a counter's space
 * (from the value it advances for to spec->end): a restart or a crash,
 * which skips what the bound covers beyond the last value handed out,
 * never costs more than 1/RESERVE_SHARE of what was left.
 */
#define RESERVE_SHARE			32

/* reserve.c: the advance and wait protocol */
extern uint64 ReserveNextBound(Reservation *r, const ReserveSpec *spec, uint64 need);
extern bool ReserveAdvance(Reservation *r, const ReserveSpec *spec, uint64 need);
extern void ReserveRaise(Reservation *r, uint64 to);
extern void ReserveWait(Reservation *r, const ReserveSpec *spec, uint64 need);
extern void ReserveRequestAdvance(Reservation *r, const ReserveSpec *spec);
extern bool ReserveAdvanceIfDue(Reservation *r, const ReserveSpec *spec, bool in_use);

/* the reservations in shared memory, saved and restored */
extern Reservation *ReservationFind(const ReserveId *id, bool create);
extern Reservation *ReservationOfSlot(const SavedSlot *slot, bool create);
extern void ReservationRaise(Reservation *r, uint64 counter, const SavedSlot *saved);
extern void ReservationSave(Reservation *r, const SavedSlot *update);
extern void ReservationSlot(Reservation *r, SavedSlot *slot);
extern const char *ReservationName(const Reservation *r);


/* the shared memory of the reservations, and the saved state they start from */
extern Size ReserveShmemSize(void);
extern bool ReserveShmemInit(void);
extern void ReserveLoadState(void);

/*
 * The advance rule of a fixed reservation, registered by the counter that
 * owns it (at preload): how it may advance now.  The worker advances every
 * registered reservation that is due without knowing what it counts.
 */
typedef void (*ReserveSpecFn) (ReserveSpec *spec);

/* What a reset (snowseq_reset_state) tells each owner. */
typedef struct ReserveResetArgs
{
	const SavedState *old;		/* the state it converts; NULL: none readable */
	bool		same_config;	/* the old state's configuration is the current one */
	bool		segment_floor_given;
	int64		segment_floor;	/* the caller's highest segment counter issued */
} ReserveResetArgs;

/*
 * The reset rule of a fixed reservation, registered with its advance rule:
 * floor says where the counter must resume (ERROR when it cannot, before
 * anything is raised), raise raises it there (in the order of the
 * reservations: the clock first, since it may still refuse).
 */
typedef struct ReserveResetRule
{
	uint64		(*floor) (const ReserveResetArgs *args);
	void		(*raise) (Reservation *r, uint64 floor, const ReserveResetArgs *args);
} ReserveResetRule;

extern void ReserveRegisterOwner(int index, ReserveSpecFn spec, const ReserveResetRule *reset);
extern bool ReserveAdvanceAllDue(bool at_start);
extern void ReserveResetAll(const ReserveResetArgs *args);
extern uint64 ReserveSavedBound(const SavedState *old, uint32 tag);
extern void ReserveResetRaise(Reservation *r, uint64 floor, const ReserveResetArgs *args);

#endif							/* SNOWSEQ_RESERVE_H */
