/*
 * gene.h
 *		Genes: the hash of a sharding key and the layout of a 128-bit gene
 *		ID (gene.c), and the arithmetic between genes and ID ranges, in one
 *		place.
 *
 * A gene ID is gene << SNOWSEQ_SEGMENT_BITS | segment: gene g holds the
 * IDs [g << 48, (g + 1) << 48), and the last gene, SNOWSEQ_MAX_GENE, runs
 * to the top of bigint (no finite exclusive bound).  Gene-range partitions
 * are bounded on gene boundaries, MINVALUE and MAXVALUE standing for the
 * first and the last gene.  Every file that turns genes into IDs or back
 * (routing, moves, fences, conversion) uses these.
 */
#ifndef SNOWSEQ_GENE_H
#define SNOWSEQ_GENE_H

#include "snowseq.h"

extern int	GeneOfBytes(const char *data, size_t len);

/* the layout of a 128-bit gene ID (WideId, snowseq.h) in a uuid */
struct pg_uuid_t;
extern void WideIdToUuid(const WideId *w, struct pg_uuid_t *uuid);
extern bool WideIdFromUuid(const struct pg_uuid_t *uuid, WideId *w);

/* The first ID of gene g: g << 48. */
static inline int64
GeneFirstId(int gene)
{
	return (int64) gene << SNOWSEQ_SEGMENT_BITS;
}

/* The gene of an ID (of a non-negative one: the top bits). */
static inline int
GeneFromId(int64 id)
{
	return (int) (id >> SNOWSEQ_SEGMENT_BITS);
}

/*
 * The exclusive upper bound of the IDs of genes up to last, into *end;
 * false for the last gene, whose IDs run to the top of bigint.
 */
static inline bool
GeneEndId(int last, int64 *end)
{
	if (last >= SNOWSEQ_MAX_GENE)
		return false;
	*end = GeneFirstId(last + 1);
	return true;
}

/*
 * The genes first..last of an ID range [lo, hi) on gene boundaries (has_lo
 * or has_hi false: unbounded on that side, as MINVALUE and MAXVALUE are);
 * false if a bound is not on a gene boundary or the range holds no gene.
 */
static inline bool
GenesOfAlignedIds(bool has_lo, int64 lo, bool has_hi, int64 hi, int *first, int *last)
{
	int64		mask = ((int64) 1 << SNOWSEQ_SEGMENT_BITS) - 1;

	if ((has_lo && (lo < 0 || (lo & mask) != 0)) || (has_hi && (hi <= 0 || (hi & mask) != 0)))
		return false;
	*first = has_lo ? GeneFromId(lo) : 0;
	*last = has_hi ? GeneFromId(hi) - 1 : SNOWSEQ_MAX_GENE;
	return *first <= *last;
}

/* The genes first..last that an ID range [lo, hi) touches, aligned or not. */
static inline void
GenesOfIds(bool has_lo, int64 lo, bool has_hi, int64 hi, int *first, int *last)
{
	*first = has_lo ? GeneFromId(lo) : 0;
	*last = has_hi ? GeneFromId(hi - 1) : SNOWSEQ_MAX_GENE;
}

#endif							/* SNOWSEQ_GENE_H */
