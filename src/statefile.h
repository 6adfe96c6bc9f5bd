/*
 * statefile.h
 *		The state file and its copy (statefile.c): the configuration snowseq
 *		issued under and the durable bound of every reservation, read and
 *		written; what the state means is for the callers.
 */
#ifndef SNOWSEQ_STATEFILE_H
#define SNOWSEQ_STATEFILE_H

#include <sys/types.h>

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
extern void StateWriteDurably(const char *buf, size_t len, const char *path, const char *tmp,
							  mode_t mode);

#endif							/* SNOWSEQ_STATEFILE_H */
