/*
 * segment.c
 *		The gene segment counter: the low 48 bits of a gene ID.
 *
 * One counter per node, bounded by a durable reservation like the clock.
 * A segment is (counter << node_bits) | node_id: nodes interleave, as
 * ticket servers do with offset and increment, so gene IDs from different
 * nodes never collide, and within one node they increase.
 */
#include "postgres.h"

#include "guc.h"
#include "reserve.h"
#include "segment.h"
#include "shmem.h"

/* First counter value past what a segment holds. */
static uint64
SegmentLimit(void)
{
	return (uint64) 1 << (SNOWSEQ_SEGMENT_BITS - snowseq_node_bits);
}

/* How a segment reservation may advance, within a space that ends at end. */
static void
SegmentSpecTo(ReserveSpec *spec, uint64 end)
{
	spec->floor = 0;
	spec->ceiling = PG_UINT64_MAX;
	spec->end = end;
	spec->block_min = snowseq_segment_block_min;
	spec->block_max = snowseq_segment_block_max;
	spec->margin_min = 0;
	spec->jumps_are_use = false;
}

/* How the segment counter of 64-bit gene IDs may advance. */
static void
SegmentSpec(ReserveSpec *spec)
{
	SegmentSpecTo(spec, SegmentLimit());
}

/* How the segment counter of 128-bit gene IDs may advance. */
static void
SegmentWideSpec(ReserveSpec *spec)
{
	SegmentSpecTo(spec, (uint64) 1 << SNOWSEQ_WIDE_COUNTER_BITS);
}

/*
 * Where the segment counter resumes after a reset: its saved bound under the
 * same configuration, else above every segment the old one could have
 * issued; at least above the caller's segment_floor.  Without a readable
 * state and with nothing issued since start, only the caller can say.
 */
static uint64
SegmentResetFloor(const ReserveResetArgs *args)
{
	uint64		floor = 0;
	uint64		limit = SegmentLimit();

	if (args->old == NULL && !args->segment_floor_given &&
		pg_atomic_read_u64(&SnowseqRes[RESERVE_SEGMENT].counter) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot tell where the gene segment counter stood: no readable state file or copy"),
				 errhint("Pass the highest segment counter this node issued, snowseq_reset_state(segment_floor => (SELECT max((id & (2^48 - 1)::bigint) >> %d) FROM your_table)), or 0 if it never issued gene IDs.",
						 snowseq_node_bits)));
	if (args->old != NULL)
	{
		uint64		bound = ReserveSavedBound(args->old, RESERVE_TAG_SEGMENT);

		floor = args->same_config ? bound : SegmentFloorAfterReset(&args->old->config, bound);
	}
	if (args->segment_floor_given)
		floor = Max(floor, (uint64) args->segment_floor + 1);
	if (floor >= limit)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the gene segment counter would have to resume at %llu, past its end at %llu",
						(unsigned long long) floor, (unsigned long long) limit),
				 errhint("Restore the previous settings, or use fewer snowseq.node_bits.")));
	return floor;
}

/* Where the 128-bit segment counter resumes after a reset: its bound (its layout never changes). */
static uint64
SegmentWideResetFloor(const ReserveResetArgs *args)
{
	return ReserveSavedBound(args->old, RESERVE_TAG_WIDE_SEGMENT);
}

static const ReserveResetRule segment_reset = {SegmentResetFloor, ReserveResetRaise};
static const ReserveResetRule wide_segment_reset = {SegmentWideResetFloor, ReserveResetRaise};

/* Register the segment counters' advance and reset rules; at preload. */
void
SegmentInit(void)
{
	ReserveRegisterOwner(RESERVE_SEGMENT, SegmentSpec, &segment_reset);
	ReserveRegisterOwner(RESERVE_WIDE_SEGMENT, SegmentWideSpec, &wide_segment_reset);
}

/*
 * The next value of a segment counter below limit, advancing its
 * reservation as every counter does; false when the counter ran out.
 */
static bool
SegmentTake(Reservation *r, uint64 limit, ReserveSpecFn spec_of, uint64 *value)
{
	uint64		last;
	ReserveSpec spec;

	for (;;)
	{
		ReserveResult rr = ReserveTake(r, 0, 1, limit, value, &last);

		if (likely(rr == RESERVE_OK))
			return true;
		spec_of(&spec);
		if (rr == RESERVE_LOW)
		{
			ReserveRequestAdvance(r, &spec);
			return true;
		}
		if (rr == RESERVE_LIMIT)
			return false;
		ReserveWait(r, &spec, last);
	}
}

/* The next segment of this node. */
uint64
SegmentNext(void)
{
	uint64		limit = SegmentLimit();
	uint64		next;

	if (!SegmentTake(&SnowseqRes[RESERVE_SEGMENT], limit, SegmentSpec, &next))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq gene segment counter ran out after %llu segments",
						(unsigned long long) (limit - 1)),
				 errdetail("A segment holds %d counter bits and %d node bits.",
						   SNOWSEQ_SEGMENT_BITS - snowseq_node_bits, snowseq_node_bits),
				 errhint("Fewer snowseq.node_bits leave more segments per node.")));
	return (next << snowseq_node_bits) | (uint64) snowseq_node_id;
}

/*
 * The counter of the next segment of a 128-bit gene ID: its own reservation,
 * advanced like the 64-bit one.  The segment is (counter << 30) | node id,
 * 79 bits, whatever snowseq.node_bits is (a node id has at most 30 bits).
 */
uint64
WideSegmentNext(void)
{
	uint64		limit = (uint64) 1 << SNOWSEQ_WIDE_COUNTER_BITS;
	uint64		next;

	if (!SegmentTake(&SnowseqRes[RESERVE_WIDE_SEGMENT], limit, SegmentWideSpec, &next))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq 128-bit gene segment counter ran out after %llu segments",
						(unsigned long long) (limit - 1)),
				 errhint("Move new rows of this node to another node id.")));
	return next;
}

/*
 * Where the segment counter must resume after a reset from an old
 * configuration: every segment issued then is greater than every segment
 * the old configuration could have issued (its bound, interleaved with its
 * node bits and node id).
 */
uint64
SegmentFloorAfterReset(const SavedConfig *old, uint64 old_bound)
{
	uint64		old_node;
	uint64		max_old;

	if (old->node_bits < 0 || old->node_bits > 30 || old_bound == 0)
		return 0;
	old_node = old->node_id < 0 ? ((uint64) 1 << old->node_bits) - 1 : (uint64) old->node_id;
	old_bound = Min(old_bound, ((uint64) 1 << (SNOWSEQ_SEGMENT_BITS - old->node_bits)) - 1);
	max_old = (old_bound << old->node_bits) | old_node;
	return (max_old >> snowseq_node_bits) + 1;
}
