/*
 * gene.h
 *		Genes: the hash of a sharding key (gene.c).
 */
#ifndef SNOWSEQ_GENE_H
#define SNOWSEQ_GENE_H

#include "snowseq.h"

extern int	GeneOfBytes(const char *data, size_t len);

/* the layout of a 128-bit gene ID (WideId, snowseq.h) in a uuid */
struct pg_uuid_t;
extern void WideIdToUuid(const WideId *w, struct pg_uuid_t *uuid);
extern bool WideIdFromUuid(const struct pg_uuid_t *uuid, WideId *w);

#endif							/* SNOWSEQ_GENE_H */
