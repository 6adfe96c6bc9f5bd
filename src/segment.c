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
	uint64		limit = (uint64) 1 << (SNOWSEQ_SEGMENT_BITS - snowseq_node_bits);
	uint64		next;
	uint64		last;

	if (unlikely(!ReserveTake(RESERVE_SEGMENT, 0, 1, limit, &next, &last)))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq gene segment counter ran out after " UINT64_FORMAT " segments", limit - 1),
				 errdetail("A segment holds %d counter bits and %d node bits.",
						   SNOWSEQ_SEGMENT_BITS - snowseq_node_bits, snowseq_node_bits),
				 errhint("Fewer snowseq.node_bits leave more segments per node.")));
	return (next << snowseq_node_bits) | (uint64) snowseq_node_id;
}
