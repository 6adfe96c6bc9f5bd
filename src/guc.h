/*
 * guc.h
 *		snowseq's settings (guc.c): the variables the server's configuration
 *		sets, and the helpers that define, check and apply them.
 */
#ifndef SNOWSEQ_GUC_H
#define SNOWSEQ_GUC_H

#include "snowseq.h"

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

#endif							/* SNOWSEQ_GUC_H */
