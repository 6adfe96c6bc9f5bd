/*
 * reserve.c
 *		Durable reservations: the upper bound a counter may reach before
 *		anything else is written, made durable through snowseq's own WAL
 *		resource manager and a state file in the data directory.
 *
 * An advance, always under Snowseq->lock, in this order:
 *	 1. a WAL record with the new bounds, flushed (and, when synchronous
 *		replication is configured, confirmed by the synchronous standby);
 *	 2. the state file, written, fsynced and durably renamed;
 *	 3. the new bound in shared memory.
 * At start the counters begin at the saved bounds; redo moves them up,
 * never down.  A crash can only skip values, never repeat one.
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "snowseq.h"

/* RM_EXPERIMENTAL_ID until snowseq has an ID of its own on the wiki list */
#define RM_SNOWSEQ_ID				RM_EXPERIMENTAL_ID
#define XLOG_SNOWSEQ_RESERVE		0x10

#define SNOWSEQ_STATE_MAGIC			0x53455153	/* "SQES" */
#define SNOWSEQ_STATE_VERSION		1
#define SNOWSEQ_STATE_TMP			SNOWSEQ_STATE_FILE ".tmp"
/* a second copy, written after the first and before a bound is published */
#define SNOWSEQ_STATE_COPY			SNOWSEQ_STATE_FILE ".copy"
#define SNOWSEQ_STATE_COPY_TMP		SNOWSEQ_STATE_COPY ".tmp"

/* What is saved, in the WAL record and in the state file alike. */
typedef struct SnowseqSaved
{
	int32		node_id;
	int32		time_bits;
	int32		node_bits;
	int32		seq_bits;
	int32		time_unit_ms;
	int32		pad;
	int64		epoch_ms;
	uint64		bound[RESERVE_COUNT];
	uint64		block[RESERVE_COUNT];
} SnowseqSaved;

typedef struct SnowseqStateFile
{
	uint32		magic;
	uint32		version;
	SnowseqSaved saved;
	pg_crc32c	crc;			/* over everything above */
} SnowseqStateFile;

/* Name of a reservation, as the status view shows it. */
const char *
ReserveKindName(ReserveKind kind)
{
	return kind == RESERVE_CLOCK ? "clock" : "segment";
}

/* The configuration as it would be saved, bounds from shared memory. */
static void
SavedFromConfig(SnowseqSaved *s)
{
	memset(s, 0, sizeof(*s));
	s->node_id = snowseq_node_id;
	s->time_bits = snowseq_time_bits;
	s->node_bits = snowseq_node_bits;
	s->seq_bits = snowseq_seq_bits;
	s->time_unit_ms = snowseq_time_unit_ms;
	s->epoch_ms = SnowseqEpochMs;
	for (int k = 0; k < RESERVE_COUNT; k++)
	{
		s->bound[k] = pg_atomic_read_u64(&Snowseq->res[k].bound);
		s->block[k] = Snowseq->res[k].block;
	}
}

/* Describe how saved settings differ from the configuration; false if equal. */
static bool
SavedDiffers(const SnowseqSaved *s, char *buf, size_t len)
{
	if (s->time_bits != snowseq_time_bits || s->node_bits != snowseq_node_bits ||
		s->seq_bits != snowseq_seq_bits || s->time_unit_ms != snowseq_time_unit_ms)
		snprintf(buf, len,
				 "The layout was %d/%d/%d bits at %d ms and is now %d/%d/%d bits at %d ms.",
				 s->time_bits, s->node_bits, s->seq_bits, s->time_unit_ms,
				 snowseq_time_bits, snowseq_node_bits, snowseq_seq_bits, snowseq_time_unit_ms);
	else if (s->epoch_ms != SnowseqEpochMs)
	{
		/* timestamptz_to_str() returns a static buffer: copy the first */
		char		was[MAXDATELEN + 1];

		strlcpy(was, timestamptz_to_str(SnowseqMsToTimestamptz(s->epoch_ms)), sizeof(was));
		snprintf(buf, len, "snowseq.epoch was %s and is now %s.", was,
				 timestamptz_to_str(SnowseqMsToTimestamptz(SnowseqEpochMs)));
	}
	else if (s->node_id != snowseq_node_id)
		snprintf(buf, len, "snowseq.node_id was %d and is now %d.", s->node_id, snowseq_node_id);
	else
		return false;
	return true;
}

/* Write one copy durably: temporary file, fsync, durable rename. */
static void
WriteStateFileAt(const SnowseqSaved *s, const char *path, const char *tmp)
{
	SnowseqStateFile f;
	int			fd;

	memset(&f, 0, sizeof(f));
	f.magic = SNOWSEQ_STATE_MAGIC;
	f.version = SNOWSEQ_STATE_VERSION;
	f.saved = *s;
	INIT_CRC32C(f.crc);
	COMP_CRC32C(f.crc, &f, offsetof(SnowseqStateFile, crc));
	FIN_CRC32C(f.crc);

	fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", tmp)));
	errno = 0;
	if (write(fd, &f, sizeof(f)) != sizeof(f))
	{
		if (errno == 0)
			errno = ENOSPC;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", tmp)));
	}
	if (CloseTransientFile(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", tmp)));
	/* fsyncs the file, renames, fsyncs the directory */
	durable_rename(tmp, path, ERROR);
}

/*
 * Write the state file, then its copy.  Both are durable before the caller
 * publishes a bound, so either copy that verifies bounds everything handed
 * out: a crash between the two leaves the copy with the previous bounds,
 * above which nothing was handed out yet.  The copy lets a reset after a
 * corrupt state file, and a start after a lost one, find the gene segment
 * counter, which has no clock to fall back on.
 */
static void
WriteStateFile(const SnowseqSaved *s)
{
	WriteStateFileAt(s, SNOWSEQ_STATE_FILE, SNOWSEQ_STATE_TMP);
	WriteStateFileAt(s, SNOWSEQ_STATE_COPY, SNOWSEQ_STATE_COPY_TMP);
}

typedef enum ReadResult
{
	READ_OK,
	READ_MISSING,
	READ_CORRUPT
} ReadResult;

/* Read and verify one copy of the state; on corruption say why in buf. */
static ReadResult
ReadStateFileAt(const char *path, SnowseqSaved *s, char *buf, size_t len)
{
	SnowseqStateFile f;
	pg_crc32c	crc;
	int			fd;
	int			n;

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return READ_MISSING;
		snprintf(buf, len, "could not open file \"%s\": %s", path, strerror(errno));
		return READ_CORRUPT;
	}
	n = read(fd, &f, sizeof(f));
	CloseTransientFile(fd);
	if (n != sizeof(f))
	{
		snprintf(buf, len, "The file has %d bytes, expected %d.", n, (int) sizeof(f));
		return READ_CORRUPT;
	}
	if (f.magic != SNOWSEQ_STATE_MAGIC || f.version != SNOWSEQ_STATE_VERSION)
	{
		snprintf(buf, len, "The file has magic %08x version %u, expected %08x version %u.",
				 f.magic, f.version, SNOWSEQ_STATE_MAGIC, SNOWSEQ_STATE_VERSION);
		return READ_CORRUPT;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &f, offsetof(SnowseqStateFile, crc));
	FIN_CRC32C(crc);
	if (!EQ_CRC32C(crc, f.crc))
	{
		snprintf(buf, len, "The checksum is %08x, expected %08x.", f.crc, crc);
		return READ_CORRUPT;
	}
	*s = f.saved;
	return READ_OK;
}

/* Raise an atomic to at least v. */
static void
AtomicRaise(pg_atomic_uint64 *a, uint64 v)
{
	uint64		cur = pg_atomic_read_u64(a);

	while (cur < v && !pg_atomic_compare_exchange_u64(a, &cur, v))
		;
}

/*
 * Load the saved state at server start (postmaster, also after a crash
 * reset): the counters start at the saved bounds.
 */
void
ReserveLoadStateFile(void)
{
	SnowseqSaved s;
	char		msg[sizeof(Snowseq->state_message)];

	ReadResult	rr = ReadStateFileAt(SNOWSEQ_STATE_FILE, &s, msg, sizeof(msg));

	if (rr == READ_MISSING &&
		ReadStateFileAt(SNOWSEQ_STATE_COPY, &s, msg, sizeof(msg)) == READ_OK)
	{
		ereport(LOG,
				(errmsg("snowseq state file \"%s\" not found, using its copy \"%s\"",
						SNOWSEQ_STATE_FILE, SNOWSEQ_STATE_COPY)));
		rr = READ_OK;
	}
	switch (rr)
	{
		case READ_MISSING:
			ereport(LOG,
					(errmsg("snowseq state file \"%s\" not found, starting from the clock and any WAL replayed",
							SNOWSEQ_STATE_FILE)));
			Snowseq->state_file_found = false;
			return;
		case READ_CORRUPT:
			Snowseq->state_error = STATE_CORRUPT;
			strlcpy(Snowseq->state_message, msg, sizeof(Snowseq->state_message));
			ereport(LOG,
					(errmsg("snowseq state file \"%s\" is corrupt, no ID will be generated", SNOWSEQ_STATE_FILE),
					 errdetail("%s", msg)));
			return;
		case READ_OK:
			break;
	}
	Snowseq->state_file_found = true;
	if (SavedDiffers(&s, msg, sizeof(msg)))
	{
		Snowseq->state_error = STATE_MISMATCH;
		strlcpy(Snowseq->state_message, msg, sizeof(Snowseq->state_message));
		ereport(LOG,
				(errmsg("snowseq configuration does not match state file \"%s\", no ID will be generated",
						SNOWSEQ_STATE_FILE),
				 errdetail("%s", msg)));
		return;
	}
	for (int k = 0; k < RESERVE_COUNT; k++)
	{
		pg_atomic_write_u64(&Snowseq->res[k].counter, s.bound[k]);
		pg_atomic_write_u64(&Snowseq->res[k].bound, s.bound[k]);
		pg_atomic_write_u64(&Snowseq->res[k].low_water, s.bound[k]);
		Snowseq->res[k].block = s.block[k];
	}
}

/* Block size: the observed rate times the buffer, within the set bounds. */
static uint64
ReserveBlock(Reservation *r, ReserveKind kind, uint64 counter, TimestampTz now)
{
	uint64		min,
				max,
				block;

	if (kind == RESERVE_CLOCK)
	{
		min = ClockMsToUnits(snowseq_clock_block_min_ms);
		max = ClockMsToUnits(snowseq_clock_block_max_ms);
		min = Max(min, (uint64) 1 << snowseq_seq_bits);
		max = Max(max, min);
	}
	else
	{
		min = snowseq_segment_block_min;
		max = snowseq_segment_block_max;
	}
	block = min;
	if (r->rate_time != 0 && now > r->rate_time && counter > r->rate_counter)
	{
		double		per_ms = (double) (counter - r->rate_counter) /
			((double) (now - r->rate_time) / 1000.0);
		double		want = per_ms * snowseq_reserve_buffer_ms;

		if (want > (double) min)
			block = want >= (double) max ? max : (uint64) want;
	}
	return block;
}

/*
 * Wait until the synchronous standby has flushed lsn, whatever this
 * session's synchronous_commit says; ERROR if the wait was cancelled.
 */
static void
ReserveWaitForStandby(XLogRecPtr lsn)
{
	int			saved = synchronous_commit;
	bool		confirmed;

	if (max_wal_senders == 0 || SyncRepStandbyNames == NULL || SyncRepStandbyNames[0] == '\0')
		return;
	/*
	 * SyncRepWaitForLSN waits in the mode the assign hook of
	 * synchronous_commit derives, not in the variable: run the hook too, or
	 * a session (or server) with synchronous_commit = off, local or
	 * remote_write would not wait for the standby's flush.
	 */
	synchronous_commit = SYNCHRONOUS_COMMIT_REMOTE_FLUSH;
	assign_synchronous_commit(SYNCHRONOUS_COMMIT_REMOTE_FLUSH, NULL);
	PG_TRY();
	{
		SyncRepWaitForLSN(lsn, false);
	}
	PG_FINALLY();
	{
		synchronous_commit = saved;
		assign_synchronous_commit(saved, NULL);
	}
	PG_END_TRY();

	LWLockAcquire(SyncRepLock, LW_SHARED);
	confirmed = !SnowseqSyncStandbysDefined() ||
		WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH] >= lsn;
	LWLockRelease(SyncRepLock);
	if (!confirmed)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("snowseq reservation was not confirmed by the synchronous standby"),
				 errdetail("The wait for the standby was cancelled; no ID was issued under the new reservation."),
				 errhint("Check that the synchronous standby is connected, then retry.")));
}

/*
 * Advance one reservation so that at least `need` may be handed out, plus
 * a block.  Caller holds Snowseq->lock exclusively.
 */
void
ReserveAdvance(ReserveKind kind, uint64 need)
{
	Reservation *r = &Snowseq->res[kind];
	uint64		counter = pg_atomic_read_u64(&r->counter);
	uint64		base;
	TimestampTz now = GetCurrentTimestamp();
	uint64		block;
	SnowseqSaved s;
	XLogRecPtr	lsn;

	Assert(LWLockHeldByMeInMode(Snowseq->lock, LW_EXCLUSIVE));
	/* the clock stands at least at the wall clock, also before first use */
	if (kind == RESERVE_CLOCK)
		counter = Max(counter, ClockNowUnits() << snowseq_seq_bits);
	base = Max(counter, need);
	block = ReserveBlock(r, kind, counter, now);
	if (kind == RESERVE_CLOCK)
	{
		/* never reserve past the end of the time field */
		uint64		limit = ((uint64) 1 << (snowseq_time_bits + snowseq_seq_bits)) - 1;

		block = Min(block, limit - Min(base, limit));
	}

	SavedFromConfig(&s);
	s.bound[kind] = base + block;
	s.block[kind] = block;

	/* 1. WAL, flushed, confirmed by a synchronous standby if there is one */
	XLogBeginInsert();
	XLogRegisterData((char *) &s, sizeof(s));
	XLogSetRecordFlags(XLOG_MARK_UNIMPORTANT);
	lsn = XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_RESERVE);
	XLogFlush(lsn);
	ReserveWaitForStandby(lsn);

	/* 2. the state file */
	WriteStateFile(&s);
	Snowseq->state_file_found = true;

	/* 3. publish */
	r->block = block;
	r->rate_counter = counter;
	r->rate_time = now;
	pg_atomic_write_u64(&r->low_water, s.bound[kind] - block / 2);
	pg_write_barrier();
	pg_atomic_write_u64(&r->bound, s.bound[kind]);
	pg_atomic_fetch_add_u64(&r->advances, 1);
}

/*
 * Advance every reservation past its low-water mark, and with in_use every
 * counter that was ever used.  Caller holds Snowseq->lock exclusively.
 * Returns whether anything advanced.
 */
bool
ReserveAdvanceAllDue(bool in_use)
{
	bool		did = false;

	for (int k = 0; k < RESERVE_COUNT; k++)
	{
		Reservation *r = &Snowseq->res[k];
		uint64		counter = pg_atomic_read_u64(&r->counter);

		if (counter > pg_atomic_read_u64(&r->low_water) || (in_use && counter > 0))
		{
			ReserveAdvance(k, 0);
			did = true;
		}
	}
	return did;
}

/*
 * Wait until `need` is within the reservation, advancing it ourselves if
 * nobody else is.  Sleeps on a condition variable, so the wait can be
 * cancelled, and re-checks on a timer in case an advancer failed.
 */
void
ReserveWait(ReserveKind kind, uint64 need)
{
	Reservation *r = &Snowseq->res[kind];

	pg_atomic_fetch_add_u64(&r->waits, 1);
	while (pg_atomic_read_u64(&r->bound) < need)
	{
		if (LWLockConditionalAcquire(Snowseq->lock, LW_EXCLUSIVE))
		{
			if (pg_atomic_read_u64(&r->bound) < need)
				ReserveAdvance(kind, need);
			LWLockRelease(Snowseq->lock);
			ConditionVariableBroadcast(&Snowseq->advanced);
			break;
		}
		ConditionVariablePrepareToSleep(&Snowseq->advanced);
		if (pg_atomic_read_u64(&r->bound) < need)
			ConditionVariableTimedSleep(&Snowseq->advanced, 10, PG_WAIT_EXTENSION);
		ConditionVariableCancelSleep();
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * A counter passed its low-water mark: wake the reservation worker once.
 * Without a worker, advance here if nobody else is doing it.
 */
void
ReserveRequestAdvance(void)
{
	Latch	   *latch = Snowseq->worker_latch;

	if (latch != NULL)
	{
		if (pg_atomic_read_u32(&Snowseq->advance_requested) == 0 &&
			pg_atomic_exchange_u32(&Snowseq->advance_requested, 1) == 0)
			SetLatch(latch);
		return;
	}
	if (LWLockConditionalAcquire(Snowseq->lock, LW_EXCLUSIVE))
	{
		bool		did = ReserveAdvanceAllDue(false);

		LWLockRelease(Snowseq->lock);
		if (did)
			ConditionVariableBroadcast(&Snowseq->advanced);
	}
}

/*
 * Raise the counters and bounds to what a WAL record or the promotion
 * margin says may have been handed out, and keep the state file current.
 * Runs in the startup process.
 */
static void
ReserveApplyFloor(const SnowseqSaved *s, const uint64 *floor)
{
	char		msg[sizeof(Snowseq->state_message)];

	if (SavedDiffers(s, msg, sizeof(msg)))
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
	for (int k = 0; k < RESERVE_COUNT; k++)
	{
		AtomicRaise(&Snowseq->res[k].counter, floor[k]);
		AtomicRaise(&Snowseq->res[k].bound, s->bound[k]);
		AtomicRaise(&Snowseq->res[k].low_water, s->bound[k]);
		if (s->block[k] != 0)
			Snowseq->res[k].block = s->block[k];
	}
	{
		SnowseqSaved cur;

		SavedFromConfig(&cur);
		for (int k = 0; k < RESERVE_COUNT; k++)
			cur.bound[k] = Max(cur.bound[k], floor[k]);
		WriteStateFile(&cur);
		Snowseq->state_file_found = true;
	}
	LWLockRelease(Snowseq->lock);
}

/* Redo: a reservation record moves the floors up. */
static void
snowseq_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	SnowseqSaved s;

	if (info != XLOG_SNOWSEQ_RESERVE)
		elog(PANIC, "snowseq_redo: unknown op code %u", info);
	memcpy(&s, XLogRecGetData(record), sizeof(s));
	if (Snowseq != NULL)
		ReserveApplyFloor(&s, s.bound);
}

/*
 * End of redo.  After archive recovery (promotion of a standby, or
 * point-in-time recovery) the old primary may have handed out values under
 * a reservation this server never received, so start above what was
 * replayed by snowseq.promote_margin_ms of logical time (and the matching
 * number of segments), and save that before any ID is issued.  Crash
 * recovery needs no margin: the state file and the WAL are complete.  The
 * signal files are still there when rm_cleanup runs.
 */
static void
snowseq_cleanup(void)
{
	SnowseqSaved s;
	uint64		floor[RESERVE_COUNT];
	uint64		seg_block;

	if (Snowseq == NULL || Snowseq->state_error != STATE_OK)
		return;
	if (access(STANDBY_SIGNAL_FILE, F_OK) != 0 && access(RECOVERY_SIGNAL_FILE, F_OK) != 0)
		return;
	SavedFromConfig(&s);
	floor[RESERVE_CLOCK] = s.bound[RESERVE_CLOCK] + ClockMsToUnits(snowseq_promote_margin_ms);
	seg_block = Max(s.block[RESERVE_SEGMENT], (uint64) snowseq_segment_block_min);
	floor[RESERVE_SEGMENT] = s.bound[RESERVE_SEGMENT] == 0 ? 0 :
		s.bound[RESERVE_SEGMENT] + seg_block +
		seg_block * (uint64) snowseq_promote_margin_ms / (uint64) snowseq_reserve_buffer_ms;
	if (s.bound[RESERVE_CLOCK] == 0)
		floor[RESERVE_CLOCK] = 0;
	ReserveApplyFloor(&s, floor);
	ereport(LOG,
			(errmsg("snowseq resumes above the replayed reservations: clock " UINT64_FORMAT ", segment " UINT64_FORMAT,
					floor[RESERVE_CLOCK], floor[RESERVE_SEGMENT])));
}

/* pg_waldump and friends: describe a record. */
static void
snowseq_desc(StringInfo buf, XLogReaderState *record)
{
	SnowseqSaved s;

	if ((XLogRecGetInfo(record) & ~XLR_INFO_MASK) != XLOG_SNOWSEQ_RESERVE)
		return;
	memcpy(&s, XLogRecGetData(record), sizeof(s));
	appendStringInfo(buf, "node %d layout %d/%d/%d@%dms clock bound " UINT64_FORMAT " segment bound " UINT64_FORMAT,
					 s.node_id, s.time_bits, s.node_bits, s.seq_bits, s.time_unit_ms,
					 s.bound[RESERVE_CLOCK], s.bound[RESERVE_SEGMENT]);
}

/* pg_waldump and friends: name a record type. */
static const char *
snowseq_identify(uint8 info)
{
	return (info & ~XLR_INFO_MASK) == XLOG_SNOWSEQ_RESERVE ? "RESERVE" : NULL;
}

static RmgrData snowseq_rmgr = {
	.rm_name = "snowseq",
	.rm_redo = snowseq_redo,
	.rm_desc = snowseq_desc,
	.rm_identify = snowseq_identify,
	.rm_cleanup = snowseq_cleanup,
};

/* Register the WAL resource manager; at preload only. */
void
ReserveInit(void)
{
	RegisterCustomRmgr(RM_SNOWSEQ_ID, &snowseq_rmgr);
}

PG_FUNCTION_INFO_V1(snowseq_reset_state);

/*
 * snowseq_reset_state(segment_floor) -> text: adopt the current
 * configuration after a deliberate change, or start over after a corrupt
 * state file.  Counters start above anything the old state (or its copy)
 * could have issued; with neither readable, the gene segment counter needs
 * segment_floor, the highest counter value issued.
 */
Datum
snowseq_reset_state(PG_FUNCTION_ARGS)
{
	SnowseqSaved old;
	SnowseqSaved cur;
	char		msg[512];
	ReadResult	rr;
	bool		from_copy = false;
	bool		segment_floor_given = !PG_ARGISNULL(0);
	int64		segment_floor = segment_floor_given ? PG_GETARG_INT64(0) : 0;
	uint64		clock_floor;
	uint64		seg_floor;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only a superuser may reset the snowseq state")));
	if (segment_floor < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("segment_floor must not be negative")));
	if (Snowseq == NULL)
		ShmemCheckUsableSlow();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot reset the snowseq state during recovery")));

	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	clock_floor = Max(pg_atomic_read_u64(&Snowseq->res[RESERVE_CLOCK].counter),
					  ClockNowUnits() << snowseq_seq_bits);
	seg_floor = pg_atomic_read_u64(&Snowseq->res[RESERVE_SEGMENT].counter);
	rr = ReadStateFileAt(SNOWSEQ_STATE_FILE, &old, msg, sizeof(msg));
	if (rr != READ_OK &&
		ReadStateFileAt(SNOWSEQ_STATE_COPY, &old, msg, sizeof(msg)) == READ_OK)
	{
		from_copy = true;
		rr = READ_OK;
	}
	if (rr != READ_OK && !segment_floor_given && seg_floor == 0)
	{
		LWLockRelease(Snowseq->lock);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot tell where the gene segment counter stood: no readable state file or copy"),
				 errhint("Pass the highest segment counter this node issued, snowseq_reset_state(segment_floor => (SELECT max((id & (2^48 - 1)::bigint) >> %d) FROM your_table)), or 0 if it never issued gene IDs.",
						 snowseq_node_bits)));
	}
	if (segment_floor_given)
		seg_floor = Max(seg_floor, (uint64) segment_floor + 1);
	if (rr == READ_OK && old.time_bits + old.node_bits + old.seq_bits == 63 &&
		old.time_unit_ms > 0)
	{
		/* the old clock bound as an instant, then in the new layout */
		uint64		old_units = (old.bound[RESERVE_CLOCK] >> old.seq_bits) + 1;
		int64		ms = old.epoch_ms + (int64) old_units * old.time_unit_ms;
		uint64		units = ms <= SnowseqEpochMs ? 0 :
			(uint64) (ms - SnowseqEpochMs + snowseq_time_unit_ms - 1) / snowseq_time_unit_ms;

		clock_floor = Max(clock_floor, units << snowseq_seq_bits);
		/* the old segments, re-interleaved for the new node bits */
		if (old.bound[RESERVE_SEGMENT] > 0)
			seg_floor = Max(seg_floor,
							(((old.bound[RESERVE_SEGMENT] + 1) << old.node_bits) >> snowseq_node_bits) + 1);
	}
	for (int k = 0; k < RESERVE_COUNT; k++)
	{
		uint64		f = k == RESERVE_CLOCK ? clock_floor : seg_floor;

		pg_atomic_write_u64(&Snowseq->res[k].counter, f);
		pg_atomic_write_u64(&Snowseq->res[k].bound, f);
		pg_atomic_write_u64(&Snowseq->res[k].low_water, f);
		Snowseq->res[k].rate_time = 0;
	}
	SavedFromConfig(&cur);
	WriteStateFile(&cur);
	Snowseq->state_file_found = true;
	Snowseq->state_error = STATE_OK;
	Snowseq->state_message[0] = '\0';
	LWLockRelease(Snowseq->lock);

	snprintf(msg, sizeof(msg), "snowseq state reset: %s; clock resumes at %s, segment counter at " UINT64_FORMAT,
			 from_copy ? "previous state file unreadable, its copy converted" :
			 rr == READ_OK ? "previous state converted" :
			 rr == READ_MISSING ? "no previous state file" : "previous state file unreadable",
			 timestamptz_to_str(ClockCounterInstant(clock_floor)),
			 seg_floor);
	PG_RETURN_TEXT_P(cstring_to_text(msg));
}
