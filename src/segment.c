/*
 * segment.c
 *		The gene segment counter: the low 48 bits of a gene ID.
 *
 * One counter per node, bounded by the durable reservation like the clock.
 * A segment is (counter << node_bits) | node_id: nodes interleave, as
 * ticket servers do with offset and increment, so gene IDs from different
 * nodes never collide, and within one node they increase.
 */
#include "postgres.h"

#include "snowseq.h"

/* The next segment of this node. */
uint64
SegmentNext(void)
{
	Reservation *r = &Snowseq->res[RESERVE_SEGMENT];
	uint64		limit = (uint64) 1 << (SNOWSEQ_SEGMENT_BITS - snowseq_node_bits);
	uint64		old = pg_atomic_read_u64(&r->counter);
	uint64		next;

	for (;;)
	{
		next = old + 1;
		if (unlikely(next >= limit))
			ereport(ERROR,
					(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
					 errmsg("snowseq gene segment counter ran out after " UINT64_FORMAT " segments", limit - 1),
					 errdetail("A segment holds %d counter bits and %d node bits.",
							   SNOWSEQ_SEGMENT_BITS - snowseq_node_bits, snowseq_node_bits),
					 errhint("Fewer snowseq.node_bits leave more segments per node.")));
		if (unlikely(next > pg_atomic_read_u64(&r->bound)))
		{
			ReserveWait(RESERVE_SEGMENT, next);
			old = pg_atomic_read_u64(&r->counter);
			continue;
		}
		if (pg_atomic_compare_exchange_u64(&r->counter, &old, next))
			break;
	}
	if (unlikely(next > pg_atomic_read_u64(&r->low_water)))
		ReserveRequestAdvance();
	ShmemCountIssued(1);
	return (next << snowseq_node_bits) | (uint64) snowseq_node_id;
}
