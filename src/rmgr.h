/*
 * rmgr.h
 *		snowseq's WAL resource manager (rmgr.c): the records of reservation
 *		advances and of the keyring, and their redo.
 */
#ifndef SNOWSEQ_RMGR_H
#define SNOWSEQ_RMGR_H

#include "access/xlogdefs.h"
#include "lib/stringinfo.h"
#include "utils/timestamp.h"

#include "statefile.h"

/* snowseq's own resource manager ID (1.2 on); 1.0 and 1.1 used 128 */
#define RM_SNOWSEQ_ID				184
#define RM_SNOWSEQ_ID_1_1			RM_EXPERIMENTAL_ID
#define XLOG_SNOWSEQ_RESERVE_V1		0x10	/* 1.0: the clock and the segment counter */
#define XLOG_SNOWSEQ_RESERVE		0x20	/* one reservation */
#define XLOG_SNOWSEQ_WRAP_KEY		0x30	/* 1.2: a wrap key of the keyring (1.3: the own one) */
#define XLOG_SNOWSEQ_KEY_VERSION	0x40	/* 1.2: the highest key version made */
#define XLOG_SNOWSEQ_WRAP_KEYS		0x50	/* 1.3: an import: wrap keys and a version mark */
#define XLOG_SNOWSEQ_BACKFILL		0x60	/* 1.3: the durable map of a backfill space */

/*
 * A record kind whose redo and description belong to a part above the
 * reservations (backfill.c): registered by its owner at preload, so that
 * rmgr.c calls no part that calls back into the reservations.
 */
typedef void (*RmgrRedoFn) (const char *data, size_t len);
typedef void (*RmgrDescFn) (StringInfo buf, const char *data, size_t len);

extern void RmgrInit(void);
extern void RmgrRegisterKind(uint8 info, const char *name, RmgrRedoFn redo, RmgrDescFn desc);
extern XLogRecPtr RmgrLogAdvance(const SavedSlot *slot, uint64 end, TimestampTz at,
								 uint64 rate);

#endif							/* SNOWSEQ_RMGR_H */
