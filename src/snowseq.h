/*
 * snowseq.h
 *		What every file of snowseq shares: its constants, and the module's
 *		own function (snowseq.c).  Each file declares its API in the header
 *		named after it: the settings in guc.h, then shmem.h, reserve.h,
 *		statefile.h, rmgr.h, clock.h, segment.h, ...
 */
#ifndef SNOWSEQ_H
#define SNOWSEQ_H

#include "fmgr.h"


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

/* snowseq.c: the module */
extern Size SnowseqShmemSize(void);

#endif							/* SNOWSEQ_H */
