/*
 * gene.h
 *		Genes: the hash of a sharding key (gene.c).
 */
#ifndef SNOWSEQ_GENE_H
#define SNOWSEQ_GENE_H

extern int	GeneOfBytes(const char *data, size_t len);

#endif							/* SNOWSEQ_GENE_H */
