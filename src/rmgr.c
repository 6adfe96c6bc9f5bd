/*
 * rmgr.c
 *		snowseq's WAL resource manager: a record for every reservation
 *		advance, redone on crash recovery and on standbys, so that replay
 *		raises the reservations and a promoted standby starts above them.
 *
 * Since 1.2 the records are written under an ID of snowseq's own,
 * RM_SNOWSEQ_ID, one that the list of custom resource managers on
 * PostgreSQL's wiki (CustomWALResourceManagers) does not name.  1.0 and
 * 1.1 wrote them under RM_EXPERIMENTAL_ID (128), which PostgreSQL keeps for
 * extensions in development: two extensions on it cannot be loaded
 * together.  WAL of those versions may still have to be replayed after an
 * update (crash recovery from a checkpoint taken before it, a standby or an
 * archive behind it), so 128 is registered as well, for redo only, under
 * the name "snowseq_1.1", while snowseq.replay_rmgr_128 is on (the
 * default).  Once no such WAL is left, turning it off frees 128 for other
 * extensions; WAL that still holds a record under 128 then stops recovery
 * with PostgreSQL's "resource manager with ID 128 not registered".
 *
 * The keyring logs its own records (keyring.c) and is called here to redo
 * them; the reservation records are logged by reserve.c and redone here
 * into the reservations: the WAL log/redo pair, the one cycle among the
 * files.
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "access/xlogrecovery.h"
#include "common/controldata_utils.h"
#include "utils/timestamp.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "guc.h"
#include "keyring.h"
#include "reserve.h"
#include "rmgr.h"

/* A version 1.0 record: the configuration and both fixed reservations. */
typedef struct RecordV1
{
	SavedConfig config;
	uint64		bound[2];
	uint64		block[2];
} RecordV1;

/*
 * What a record of 1.3 adds to one of 1.2 (which ends before it, and is
 * read with a zero tail): what a standby promoted after replaying it needs
 * to know how far the primary may have gone beyond it.
 */
typedef struct RecordTail
{
	TimestampTz at;				/* the primary's clock at the advance */
	uint64		end;			/* the end of the counter's space (0: none) */
	uint64		rate;			/* values a second since the advance before (0:
								 * none measured) */
} RecordTail;

typedef struct Record
{
	SavedConfig config;
	SavedSlot	slot;
	RecordTail	tail;
} Record;

/*
 * The primary's clock in the latest reservation record replayed (startup
 * process, which redoes and then ends recovery; 0: none since start).
 */
static TimestampTz rmgr_heard_at = 0;

/* record kinds registered by their owners (RmgrRegisterKind) */
typedef struct RmgrKind
{
	uint8		info;
	const char *name;
	RmgrRedoFn	redo;
	RmgrDescFn	desc;
} RmgrKind;

#define RMGR_MAX_KINDS	8
static RmgrKind rmgr_kinds[RMGR_MAX_KINDS];
static int	rmgr_nkinds = 0;

/* Register the redo and description of a record kind; at preload. */
void
RmgrRegisterKind(uint8 info, const char *name, RmgrRedoFn redo, RmgrDescFn desc)
{
	if (rmgr_nkinds == RMGR_MAX_KINDS)
		elog(ERROR, "too many snowseq WAL record kinds");
	rmgr_kinds[rmgr_nkinds++] = (RmgrKind) {info, name, redo, desc};
}

/* The registered kind of a record, or NULL. */
static const RmgrKind *
RmgrKindOf(uint8 info)
{
	for (int i = 0; i < rmgr_nkinds; i++)
		if (rmgr_kinds[i].info == info)
			return &rmgr_kinds[i];
	return NULL;
}

/* snowseq.replay_rmgr_128: replay WAL of 1.0 and 1.1 (ID 128) */
static bool rmgr_replay_128 = true;

/* snowseq.test_write_rmgr_128: write under 128 as 1.1 did (tests only) */
static bool rmgr_test_write_128 = false;

/*
 * Log an advance and flush it; returns the record's end.  The record says
 * under which configuration the bound was taken, so a standby configured
 * otherwise notices, and, for a promotion, when (at), the end of the
 * counter's space then and its rate (values a second).
 */
XLogRecPtr
RmgrLogAdvance(const SavedSlot *slot, uint64 end, TimestampTz at, uint64 rate)
{
	Record		rec;
	XLogRecPtr	lsn;

	memset(&rec, 0, sizeof(rec));
	StateConfigCurrent(&rec.config);
	rec.slot = *slot;
	rec.tail.at = at;
	rec.tail.end = end;
	rec.tail.rate = rate;
	XLogBeginInsert();
	XLogRegisterData((char *) &rec, sizeof(rec));
	XLogSetRecordFlags(XLOG_MARK_UNIMPORTANT);
	lsn = XLogInsert(unlikely(rmgr_test_write_128) ? RM_SNOWSEQ_ID_1_1 : RM_SNOWSEQ_ID,
					 XLOG_SNOWSEQ_RESERVE);
	XLogFlush(lsn);
	return lsn;
}

/*
 * Raise one reservation to a replayed bound (counter to at least floor) and
 * keep the state file current; with tail (a replayed record of 1.3), keep
 * what a promotion needs of it.  A record of another configuration marks
 * the state mismatched instead.
 */
static void
RmgrApply(const SavedConfig *config, const SavedSlot *slot, uint64 floor,
		  const RecordTail *tail)
{
	char		msg[sizeof(Snowseq->state_message)];
	Reservation *r;
	SavedSlot	raised;

	if (StateConfigDiffers(config, msg, sizeof(msg)))
	{
		if (Snowseq->state_error == STATE_OK)
		{
			Snowseq->state_error = STATE_MISMATCH;
			snprintf(Snowseq->state_message, sizeof(Snowseq->state_message),
					 "A replayed WAL record differs: %s", msg);
		}
		return;
	}
	if (Snowseq->state_error != STATE_OK)
		return;

	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	r = ReservationOfSlot(slot, true);
	if (r == NULL)
	{
		LWLockRelease(Snowseq->lock);
		Snowseq->state_error = STATE_MISMATCH;
		snprintf(Snowseq->state_message, sizeof(Snowseq->state_message),
				 "A replayed WAL record names counter \"%s\", for which snowseq.max_counters = %d leaves no room.",
				 NameStr(slot->name), snowseq_max_counters);
		return;
	}
	raised = *slot;
	raised.bound = Max(slot->bound, floor);
	ReservationRaise(r, floor, &raised);
	if (tail != NULL && tail->at != 0)
	{
		r->promote_rate = tail->rate;
		r->space_end = tail->end;
	}
	ReservationSave(r, NULL);
	LWLockRelease(Snowseq->lock);
}

/* Redo: a reservation record moves the bounds up. */
static void
snowseq_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;

	if (Snowseq == NULL)
		return;
	if (info == XLOG_SNOWSEQ_RESERVE)
	{
		Record		rec;

		memset(&rec, 0, sizeof(rec));
		memcpy(&rec, XLogRecGetData(record), Min(XLogRecGetDataLen(record), sizeof(rec)));
		rmgr_heard_at = Max(rmgr_heard_at, rec.tail.at);
		RmgrApply(&rec.config, &rec.slot, rec.slot.bound, &rec.tail);
	}
	else if (info == XLOG_SNOWSEQ_RESERVE_V1)
	{
		RecordV1	v1;
		SavedSlot	slot;

		memcpy(&v1, XLogRecGetData(record), sizeof(v1));
		for (int k = 0; k < 2; k++)
		{
			memset(&slot, 0, sizeof(slot));
			slot.tag = k == 0 ? RESERVE_TAG_CLOCK : RESERVE_TAG_SEGMENT;
			slot.bound = v1.bound[k];
			slot.block = v1.block[k];
			RmgrApply(&v1.config, &slot, slot.bound, NULL);
		}
	}
	else if (RmgrKindOf(info) != NULL)
		RmgrKindOf(info)->redo(XLogRecGetData(record), XLogRecGetDataLen(record));
	else
		elog(PANIC, "snowseq_redo: unknown op code %u", info);
}

/*
 * When this server last heard from the primary, by the primary's clock: the
 * latest reservation record or commit replayed, or the checkpoint recovery
 * started from (0: none known).  Everything the primary logged before then
 * was replayed.
 */
static TimestampTz
RmgrHeardAt(void)
{
	TimestampTz heard = Max(rmgr_heard_at, GetLatestXTime());
	ControlFileData *control;
	bool		crc_ok;

	control = get_controlfile(DataDir, &crc_ok);
	if (crc_ok && control->checkPointCopy.time != 0)
		heard = Max(heard, time_t_to_timestamptz(control->checkPointCopy.time));
	pfree(control);
	return heard;
}

/*
 * How far a counter's reservation resumes above its replayed bound after a
 * promotion: its margin (one block and promote_margin_ms at its rate), and
 * what the old primary could have issued in the time it was unheard, at its
 * rate in the last record replayed (or, without one, the rate its block was
 * sized for), whichever is higher.
 */
static uint64
RmgrResumeAbove(const Reservation *r, const SavedSlot *slot, int64 unheard_ms)
{
	double		per_s = (double) slot->block * 1000.0 / (double) snowseq_reserve_buffer_ms;
	double		above;

	if (slot->tag != RESERVE_TAG_COUNTER || unheard_ms <= 0)
		return slot->margin;
	per_s = Max(per_s, (double) r->promote_rate);
	above = (double) slot->margin + per_s * (double) unheard_ms / 1000.0;
	return above >= (double) (PG_UINT64_MAX - slot->bound) ?
		PG_UINT64_MAX - slot->bound : (uint64) above;
}

/*
 * End of redo.  After archive recovery (promotion of a standby, or
 * point-in-time recovery) the old primary may have handed out values under
 * a reservation this server never received, so every reservation resumes
 * above what was replayed, saved before any value is issued: the clock by
 * promote_margin_ms of logical time (it restarts at wall time anyway),
 * counters and serials by one block, promote_margin_ms at their last rate,
 * and the time the primary was unheard (from its clock in the last record
 * replayed to this server's now) at that rate.  A counter whose space that
 * jump passes resumes at its end, with a WARNING: the old primary may have
 * issued every value left.  Crash recovery needs no margin: the state file
 * and the WAL are complete.  The signal files are still there when
 * rm_cleanup runs.
 */
static void
snowseq_cleanup(void)
{
	SavedConfig config;
	StringInfoData floors;
	TimestampTz heard;
	int64		unheard_ms = 0;

	if (Snowseq == NULL || Snowseq->state_error != STATE_OK)
		return;
	if (access(STANDBY_SIGNAL_FILE, F_OK) != 0 && access(RECOVERY_SIGNAL_FILE, F_OK) != 0)
		return;
	StateConfigCurrent(&config);
	heard = RmgrHeardAt();
	if (heard != 0 && GetCurrentTimestamp() > heard)
		unheard_ms = (GetCurrentTimestamp() - heard) / 1000;
	initStringInfo(&floors);
	for (int i = 0; i < SnowseqResCount; i++)
	{
		Reservation *r = &SnowseqRes[i];
		SavedSlot	slot;
		uint64		above;
		uint64		floor;

		if (!r->in_use)
			continue;
		ReservationSlot(r, &slot);
		if (slot.bound == 0)
			continue;
		above = RmgrResumeAbove(r, &slot, unheard_ms);
		floor = slot.bound + above;
		if (r->space_end != 0 && floor >= r->space_end && slot.bound < r->space_end)
		{
			floor = r->space_end;
			r->promote_full = true;
			ereport(WARNING,
					(errmsg("snowseq serial or counter \"%s\" resumes at the end of its space: the old primary may have issued every value left",
							ReservationName(r)),
					 errdetail("It was unheard for %lld ms, in which at its last rate it could have issued more than the %llu values left above the replayed bound.",
							   (long long) unheard_ms,
							   (unsigned long long) (r->space_end - slot.bound)),
					 errhint("Values resume with its next period, if its format has one; otherwise create a counter or serial under a new name.  Synchronous replication keeps promotions from skipping values.")));
		}
		RmgrApply(&config, &slot, floor, NULL);
		if (slot.tag == RESERVE_TAG_COUNTER)
			appendStringInfo(&floors, "%s%s %llu (%llu above, %lld ms unheard)",
							 floors.len > 0 ? ", " : "", ReservationName(r),
							 (unsigned long long) floor,
							 (unsigned long long) (floor - slot.bound), (long long) unheard_ms);
		else
			appendStringInfo(&floors, "%s%s %llu", floors.len > 0 ? ", " : "",
							 ReservationName(r), (unsigned long long) floor);
	}
	ereport(LOG,
			(errmsg("snowseq resumes above the replayed reservations: %s",
					floors.len > 0 ? floors.data : "none in use")));
}

/* pg_walinspect and friends: describe a record. */
static void
snowseq_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;

	if (info == XLOG_SNOWSEQ_RESERVE)
	{
		Record		rec;
		const char *what;

		memset(&rec, 0, sizeof(rec));
		memcpy(&rec, XLogRecGetData(record), Min(XLogRecGetDataLen(record), sizeof(rec)));
		what = rec.slot.tag == RESERVE_TAG_CLOCK ? "clock" :
			rec.slot.tag == RESERVE_TAG_SEGMENT ? "segment" : "counter";
		appendStringInfo(buf, "node %d layout %d/%d/%d@%dms %s",
						 rec.config.node_id, rec.config.time_bits, rec.config.node_bits,
						 rec.config.seq_bits, rec.config.time_unit_ms, what);
		if (rec.slot.tag == RESERVE_TAG_COUNTER)
			appendStringInfo(buf, " \"%s\" of database %u", NameStr(rec.slot.name), rec.slot.dboid);
		appendStringInfo(buf, " bound %llu block %llu",
						 (unsigned long long) rec.slot.bound, (unsigned long long) rec.slot.block);
	}
	else if (info == XLOG_SNOWSEQ_RESERVE_V1)
	{
		RecordV1	v1;

		memcpy(&v1, XLogRecGetData(record), sizeof(v1));
		appendStringInfo(buf, "node %d layout %d/%d/%d@%dms clock bound %llu segment bound %llu",
						 v1.config.node_id, v1.config.time_bits, v1.config.node_bits,
						 v1.config.seq_bits, v1.config.time_unit_ms,
						 (unsigned long long) v1.bound[0], (unsigned long long) v1.bound[1]);
	}
	else if (RmgrKindOf(info) != NULL)
		RmgrKindOf(info)->desc(buf, XLogRecGetData(record), XLogRecGetDataLen(record));
}

/* pg_walinspect and friends: name a record type. */
static const char *
snowseq_identify(uint8 info)
{
	switch (info & ~XLR_INFO_MASK)
	{
		case XLOG_SNOWSEQ_RESERVE:
		case XLOG_SNOWSEQ_RESERVE_V1:
			return "RESERVE";
	}
	return RmgrKindOf(info & ~XLR_INFO_MASK) ? RmgrKindOf(info & ~XLR_INFO_MASK)->name : NULL;
}

static RmgrData snowseq_rmgr = {
	.rm_name = "snowseq",
	.rm_redo = snowseq_redo,
	.rm_desc = snowseq_desc,
	.rm_identify = snowseq_identify,
	.rm_cleanup = snowseq_cleanup,
};

/* The records of 1.0 and 1.1, under 128: the same redo, no end-of-redo step. */
static RmgrData snowseq_rmgr_1_1 = {
	.rm_name = "snowseq_1.1",
	.rm_redo = snowseq_redo,
	.rm_desc = snowseq_desc,
	.rm_identify = snowseq_identify,
};

/* Define the settings and register the WAL resource managers; at preload only. */
void
RmgrInit(void)
{
	GucDefineBool("snowseq.replay_rmgr_128",
				  "Replays WAL written by snowseq 1.0 and 1.1 under resource manager ID 128; turn off once none is left, to leave 128 to other extensions.",
				  &rmgr_replay_128, true, 0);
	GucDefineBool("snowseq.test_write_rmgr_128",
				  "Writes reservation records under resource manager ID 128, as snowseq 1.0 and 1.1 did (testing only).",
				  &rmgr_test_write_128, false, GUC_NOT_IN_SAMPLE);

	if (rmgr_test_write_128 && !rmgr_replay_128)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowseq.test_write_rmgr_128 needs snowseq.replay_rmgr_128"),
				 errhint("Turn snowseq.test_write_rmgr_128 off.")));
	RegisterCustomRmgr(RM_SNOWSEQ_ID, &snowseq_rmgr);
	if (!rmgr_replay_128)
		return;
	if (RmgrTable[RM_SNOWSEQ_ID_1_1].rm_name != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("WAL resource manager ID %d is taken by \"%s\"",
						RM_SNOWSEQ_ID_1_1, RmgrTable[RM_SNOWSEQ_ID_1_1].rm_name),
				 errdetail("snowseq 1.0 and 1.1 wrote their WAL under ID %d; snowseq.replay_rmgr_128 keeps it replayable.",
						   RM_SNOWSEQ_ID_1_1),
				 errhint("Once no WAL written by snowseq 1.0 or 1.1 is left to replay (after a checkpoint, with every standby past it), set snowseq.replay_rmgr_128 = off.")));
	RegisterCustomRmgr(RM_SNOWSEQ_ID_1_1, &snowseq_rmgr_1_1);
}
