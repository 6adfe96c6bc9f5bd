/*
 * backfill.c
 *		IDs for a past instant: snowseq_id_at(ts) and snowseq_uuid_at(ts)
 *		give a new ID whose time is that of ts, for backfilling rows that
 *		must sort by their original time.
 *
 * They never equal an ID the clock issued or will issue: they carry a node
 * id of their own, snowseq.backfill_node_id, that no server's clock uses
 * (the fleet spends one node id per server that backfills).  Among
 * themselves, each time unit has a space of values (a bigint ID's 2^seq_bits
 * sequence values; a UUID's counter, 2^32 and more per millisecond), and a
 * value is taken at most once.
 *
 * What was taken is kept as a height map per space: for each time unit,
 * every value below its height may have been handed out.  The map is a
 * sorted list of at most BACKFILL_REGIONS regions (a range of time units
 * and a height) under a table of units (BACKFILL_SLOTS, open addressing)
 * that holds the exact height of every unit used since the table last
 * folded.  A value for an instant is its unit's height, which then rises
 * by one in the table.  When the table is three quarters full it folds
 * into the regions, in the order of the units: a unit that would make a
 * region too many merges two neighbours where that wastes fewest values
 * (the merged region takes the higher height: it may over-state, never
 * under-state, what was taken).  Any order of instants works: rows of one
 * instant, or of instants in ascending order, fold into a few regions at
 * their own heights; instants in random order cost a value or so of each
 * unit per fold, one fold per 12,288 units used.  (The first map of 1.3,
 * regions alone, merged at every new unit and lost 890 values of its
 * fullest unit for 50,000 rows in random order; 1.2's laps spent a value
 * of every time unit at each step back in time, and ran out after 4,096
 * of them.)
 *
 * Two maps per space.  The durable one (regions alone) is a promise: no
 * value at or above it was handed out.  Before a value is handed out at
 * or above the durable height of its unit, the durable map is raised,
 * written to the WAL (flushed) and to the file snowseq.backfill (durably
 * renamed): at the unit by a block, twice the values the unit took since
 * the last fold, at most 1/RESERVE_SHARE of what is left in it, and over
 * BACKFILL_WINDOW time units either side to the regions' height plus the
 * same block.  So a burst at one instant writes a number of times that
 * grows with the logarithm of its size, instants of a few rows each write
 * once in a while, and a restart or a crash, which starts over from the
 * durable map, costs a unit at most twice what it took since the last
 * fold and at most 1/32 of what was left in it.  Redo raises both maps'
 * regions, never lowers them; a promoted standby starts from what it
 * replayed.
 *
 * A file of 1.2 (no snowseq.backfill) is read from its one reservation,
 * the highest sequence value any lap used: every time unit is taken up to
 * it, for both spaces.  A reset to another layout takes every unit up to
 * the clock's instant after the reset (IDs of those units could equal IDs
 * of the old layout); later instants work.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "common/file_perm.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "backfill.h"
#include "clock.h"
#include "guc.h"
#include "reserve.h"
#include "rmgr.h"
#include "statefile.h"
#include "timeutil.h"

#define BACKFILL_FILE		"snowseq.backfill"
#define BACKFILL_TMP		"snowseq.backfill.tmp"
#define BACKFILL_MAGIC		"SNSQBF01"
#define BACKFILL_REGIONS	128
#define BACKFILL_WINDOW		65536	/* time units either side made durable at once */
#define BACKFILL_UUID_EXTRA	20		/* counter bits of a UUID past its clock field */
#define BACKFILL_SLOTS		16384	/* units the taken map holds exactly (a power of two) */
#define BACKFILL_SLOTS_FULL (BACKFILL_SLOTS / 4 * 3)	/* then they fold into its regions */

/* A range of time units and the height every one of them is taken up to. */
typedef struct BackfillRegion
{
	uint64		lo;				/* first time unit */
	uint64		hi;				/* last time unit */
	uint64		height;			/* values below it may have been taken */
} BackfillRegion;

typedef struct BackfillMap
{
	int			n;
	BackfillRegion r[BACKFILL_REGIONS];
} BackfillMap;

/* A time unit and its exact height, in the taken map's table. */
typedef struct BackfillUnit
{
	uint64		unit;
	uint64		height;			/* 0: a free slot */
} BackfillUnit;

/*
 * A space of values per time unit, and its two maps.  The taken map is
 * regions under a table: the height of a unit in the table is exact, that
 * of any other unit is its region's.
 */
typedef struct BackfillSpace
{
	uint64		per_unit;		/* values a time unit holds */
	BackfillMap taken;			/* values taken since start, and before (the start's durable) */
	int			nunits;			/* slots used in units */
	BackfillUnit units[BACKFILL_SLOTS]; /* units taken since the last fold */
	BackfillMap durable;		/* no value at or above it was ever handed out */
	uint64		writes;			/* durable advances since start */
	uint64		folds;			/* times the table folded into the regions */
} BackfillSpace;

/* In shared memory, under its own lock. */
typedef struct BackfillShared
{
	LWLock	   *lock;
	bool		loaded;			/* the file (or the 1.2 reservation) was read */
	bool		damaged;		/* the file did not verify: refuse */
	uint64		reset_until;	/* bigint space: units up to it are the old layout's */
	BackfillSpace space[BACKFILL_SPACES];
} BackfillShared;

/* The file: this header, then per space per_unit, n and n regions, then a CRC-32C. */
typedef struct BackfillFileHeader
{
	char		magic[8];
	SavedConfig config;
	uint64		reset_until;
} BackfillFileHeader;

static BackfillShared *BackfillState = NULL;

static uint64 BackfillPerUnit(int space);
static void BackfillReset(uint64 until, bool other_layout);

/* Bytes of the backfill clock's shared memory. */
Size
BackfillShmemSize(void)
{
	return MAXALIGN(sizeof(BackfillShared));
}

/* Create (or attach to) the maps in shared memory; caller holds AddinShmemInitLock. */
void
BackfillShmemInit(void)
{
	bool		found;

	BackfillState = ShmemInitStruct("snowseq backfill", BackfillShmemSize(), &found);
	if (found)
		return;
	memset(BackfillState, 0, sizeof(BackfillShared));
	BackfillState->lock = &(GetNamedLWLockTranche("snowseq"))[1].lock;
}

/*
 * Where 1.2's backfill reservation stands after a reset (read only when
 * there is no backfill file): its bound under the same configuration, else
 * every sequence value of a time unit.
 */
static uint64
BackfillResetFloor(const ReserveResetArgs *args)
{
	if (args->old != NULL && args->same_config)
		return ReserveSavedBound(args->old, RESERVE_TAG_BACKFILL);
	return BackfillPerUnit(BACKFILL_BIGINT);
}

/*
 * A reset: 1.2's reservation raised, and in another configuration (or
 * without a readable state) every time unit up to the clock's, raised
 * before this, taken: their IDs could equal IDs of the old layout.
 */
static void
BackfillResetRaise(Reservation *r, uint64 floor, const ReserveResetArgs *args)
{
	ReserveResetRaise(r, floor, args);
	BackfillReset(pg_atomic_read_u64(&SnowseqRes[RESERVE_CLOCK].counter) >> snowseq_seq_bits,
				  !(args->old != NULL && args->same_config));
}

static const ReserveResetRule backfill_reset = {BackfillResetFloor, BackfillResetRaise};

/* Register the reset rule and the redo of the backfill maps; at preload. */
void
BackfillInit(void)
{
	ReserveRegisterOwner(RESERVE_BACKFILL, NULL, &backfill_reset);
	RmgrRegisterKind(XLOG_SNOWSEQ_BACKFILL, "BACKFILL", BackfillRedo, BackfillDescribe);
}

/* Values a time unit holds in each space. */
static uint64
BackfillPerUnit(int space)
{
	if (space == BACKFILL_BIGINT)
		return (uint64) 1 << snowseq_seq_bits;
	return (uint64) 1 << (Max(snowseq_seq_bits, 12) + BackfillUuidExtraBits());
}

/*
 * Counter bits of a UUID for a past instant past its clock field: they go
 * after the node id, in what would be random bits, leaving at least 16
 * random.
 */
int
BackfillUuidExtraBits(void)
{
	int			extra = Max(snowseq_seq_bits, 12) - 12;

	return Min(BACKFILL_UUID_EXTRA, 62 - extra - snowseq_node_bits - 16);
}

/* ---- height maps ---- */

/* The region of map holding unit t, or -1; the first region after t in *after. */
static int
BackfillFind(const BackfillMap *m, uint64 t, int *after)
{
	int			lo = 0,
				hi = m->n - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (m->r[mid].hi < t)
			lo = mid + 1;
		else if (m->r[mid].lo > t)
			hi = mid - 1;
		else
			return mid;
	}
	if (after)
		*after = lo;
	return -1;
}

/* The height of unit t in a map: 0 outside every region. */
static uint64
BackfillHeight(const BackfillMap *m, uint64 t)
{
	int			i = BackfillFind(m, t, NULL);

	return i < 0 ? 0 : m->r[i].height;
}

/*
 * Values a merge of neighbours a and b would over-state: the span of both
 * (the gap between them included) at the higher height, less what they
 * hold.
 */
static double
BackfillWaste(const BackfillRegion *a, const BackfillRegion *b)
{
	double		h = (double) Max(a->height, b->height);

	return ((double) (b->hi - a->lo) + 1) * h -
		((double) (a->hi - a->lo) + 1) * (double) a->height -
		((double) (b->hi - b->lo) + 1) * (double) b->height;
}

/*
 * Bring a list of regions (sorted, disjoint) back to at most limit,
 * merging the neighbours that waste fewest values; neighbours touching at
 * one height always merge.
 */
static void
BackfillCompact(BackfillRegion *r, int *n, int limit)
{
	int			k = 0;

	for (int i = 0; i < *n; i++)
	{
		if (k > 0 && r[k - 1].hi + 1 == r[i].lo && r[k - 1].height == r[i].height)
			r[k - 1].hi = r[i].hi;
		else
			r[k++] = r[i];
	}
	*n = k;
	while (*n > limit)
	{
		int			best = 0;
		double		least = BackfillWaste(&r[0], &r[1]);

		for (int i = 1; i + 1 < *n; i++)
		{
			double		w = BackfillWaste(&r[i], &r[i + 1]);

			if (w < least)
				least = w, best = i;
		}
		r[best].hi = r[best + 1].hi;
		r[best].height = Max(r[best].height, r[best + 1].height);
		memmove(&r[best + 1], &r[best + 2], sizeof(BackfillRegion) * (*n - best - 2));
		(*n)--;
	}
}

/* Do two maps say the same? */
static bool
BackfillSame(const BackfillMap *a, const BackfillMap *b)
{
	return a->n == b->n && memcmp(a->r, b->r, sizeof(BackfillRegion) * a->n) == 0;
}

/* Raise a map to at least height h over units lo..hi (never lowers a unit). */
static void
BackfillRaise(BackfillMap *m, uint64 lo, uint64 hi, uint64 h)
{
	BackfillRegion out[2 * BACKFILL_REGIONS + 4];
	int			n = 0;
	uint64		at = lo;		/* the next unit of lo..hi not yet placed */
	bool		placed = false;

	if (h == 0 || lo > hi)
		return;
	for (int i = 0; i < m->n; i++)
	{
		BackfillRegion x = m->r[i];

		if (placed || x.hi < lo)
		{
			out[n++] = x;
			continue;
		}
		if (x.lo > hi)
		{
			if (at <= hi)
				out[n++] = (BackfillRegion) {at, hi, h};
			placed = true;
			out[n++] = x;
			continue;
		}
		/* x overlaps lo..hi: the part before it, x's part before lo, the overlap, x's part after hi */
		if (at < x.lo)
			out[n++] = (BackfillRegion) {at, x.lo - 1, h};
		if (x.lo < lo)
			out[n++] = (BackfillRegion) {x.lo, lo - 1, x.height};
		out[n++] = (BackfillRegion) {Max(x.lo, lo), Min(x.hi, hi), Max(x.height, h)};
		at = Min(x.hi, hi) + 1;
		if (x.hi > hi)
		{
			out[n++] = (BackfillRegion) {hi + 1, x.hi, x.height};
			placed = true;
		}
		else if (x.hi == hi)
			placed = true;
		if (at == 0)			/* wrapped past the last unit */
			placed = true;
	}
	if (!placed && at <= hi)
		out[n++] = (BackfillRegion) {at, hi, h};
	BackfillCompact(out, &n, BACKFILL_REGIONS);
	memcpy(m->r, out, sizeof(BackfillRegion) * n);
	m->n = n;
}

/*
 * Raise unit t of a map to height h: in place when t is a region of its
 * own, or extends the region that ends just before it at that height (one
 * instant's many rows, instants in ascending order); else BackfillRaise.
 */
static void
BackfillRaiseUnit(BackfillMap *m, uint64 t, uint64 h)
{
	int			after = 0;
	int			i = BackfillFind(m, t, &after);

	if (i >= 0 && m->r[i].lo == t && m->r[i].hi == t &&
		(i == 0 || m->r[i - 1].hi + 1 < t || m->r[i - 1].height != Max(h, m->r[i].height)) &&
		(i == m->n - 1 || m->r[i + 1].lo > t + 1 || m->r[i + 1].height != Max(h, m->r[i].height)))
	{
		m->r[i].height = Max(h, m->r[i].height);
		return;
	}
	if (i < 0 && after > 0 && m->r[after - 1].hi + 1 == t && m->r[after - 1].height == h &&
		(after == m->n || m->r[after].lo > t + 1))
	{
		m->r[after - 1].hi = t;
		return;
	}
	BackfillRaise(m, t, t, h);
}

/* Raise dst to at least src + plus over units lo..hi (gaps of src count as 0). */
static void
BackfillRaiseBy(BackfillMap *dst, const BackfillMap *src, uint64 lo, uint64 hi, uint64 plus,
				uint64 cap)
{
	uint64		at = lo;

	for (int i = 0; i < src->n && at <= hi; i++)
	{
		const BackfillRegion *x = &src->r[i];

		if (x->hi < at)
			continue;
		if (x->lo > hi)
			break;
		if (x->lo > at)
			BackfillRaise(dst, at, x->lo - 1, Min(plus, cap));
		BackfillRaise(dst, Max(x->lo, at), Min(x->hi, hi), Min(x->height + plus, cap));
		if (Min(x->hi, hi) == PG_UINT64_MAX)
			return;
		at = Min(x->hi, hi) + 1;
	}
	if (at <= hi)
		BackfillRaise(dst, at, hi, Min(plus, cap));
}

/* The highest height of a map. */
static uint64
BackfillMaxHeight(const BackfillMap *m)
{
	uint64		h = 0;

	for (int i = 0; i < m->n; i++)
		h = Max(h, m->r[i].height);
	return h;
}

/* ---- the taken map's table of units ---- */

/* The slot of unit t in a space's table, or the free slot it would take. */
static BackfillUnit *
BackfillSlot(BackfillSpace *sp, uint64 t)
{
	uint32		i = hash_bytes_uint32((uint32) (t ^ (t >> 32))) & (BACKFILL_SLOTS - 1);

	while (sp->units[i].height != 0 && sp->units[i].unit != t)
		i = (i + 1) & (BACKFILL_SLOTS - 1);
	return &sp->units[i];
}

/* Values of unit t that may have been taken: its exact height, else its region's. */
static uint64
BackfillTaken(BackfillSpace *sp, uint64 t)
{
	BackfillUnit *u = BackfillSlot(sp, t);

	return u->height != 0 ? u->height : BackfillHeight(&sp->taken, t);
}

static int
BackfillUnitCmp(const void *a, const void *b)
{
	const BackfillUnit *x = a;
	const BackfillUnit *y = b;

	/* used slots first, by unit */
	if ((x->height == 0) != (y->height == 0))
		return x->height == 0 ? 1 : -1;
	return x->unit < y->unit ? -1 : x->unit > y->unit ? 1 : 0;
}

/*
 * Fold the table into the regions, in the order of the units (the regions
 * take its heights, merging where they must), and empty it.
 */
static void
BackfillFold(BackfillSpace *sp)
{
	qsort(sp->units, BACKFILL_SLOTS, sizeof(BackfillUnit), BackfillUnitCmp);
	for (int i = 0; i < sp->nunits; i++)
		BackfillRaiseUnit(&sp->taken, sp->units[i].unit, sp->units[i].height);
	memset(sp->units, 0, sizeof(sp->units));
	sp->nunits = 0;
	sp->folds++;
}

/* Unit t is taken up to h (h is at least what it was). */
static void
BackfillSetTaken(BackfillSpace *sp, uint64 t, uint64 h)
{
	BackfillUnit *u = BackfillSlot(sp, t);

	if (u->height == 0)
	{
		if (sp->nunits >= BACKFILL_SLOTS_FULL)
		{
			BackfillFold(sp);
			u = BackfillSlot(sp, t);
		}
		u->unit = t;
		sp->nunits++;
	}
	u->height = h;
}

/* Forget the table: the regions are the whole taken map again. */
static void
BackfillClearUnits(BackfillSpace *sp)
{
	memset(sp->units, 0, sizeof(sp->units));
	sp->nunits = 0;
}

/* ---- the file and the WAL ---- */

/* Write the durable maps to the file, durably.  Caller holds the lock. */
static void
BackfillSave(void)
{
	StringInfoData buf;
	BackfillFileHeader h;
	pg_crc32c	crc;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, BACKFILL_MAGIC, sizeof(h.magic));
	StateConfigCurrent(&h.config);
	h.reset_until = BackfillState->reset_until;
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, (char *) &h, sizeof(h));
	for (int s = 0; s < BACKFILL_SPACES; s++)
	{
		const BackfillMap *m = &BackfillState->space[s].durable;
		uint64		per_unit = BackfillState->space[s].per_unit;
		uint32		n = (uint32) m->n;

		appendBinaryStringInfo(&buf, (char *) &per_unit, sizeof(per_unit));
		appendBinaryStringInfo(&buf, (char *) &n, sizeof(n));
		appendBinaryStringInfo(&buf, (char *) m->r, sizeof(BackfillRegion) * m->n);
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf.data, buf.len);
	FIN_CRC32C(crc);
	appendBinaryStringInfo(&buf, (char *) &crc, sizeof(crc));

	StateWriteDurably(buf.data, buf.len, BACKFILL_FILE, BACKFILL_TMP, pg_file_create_mode);
	pfree(buf.data);
}

/* Log a space's durable map (whole) and flush it: standbys and recovery raise theirs to it. */
static void
BackfillLog(int space)
{
	XLogRecPtr	lsn;
	const BackfillMap *m = &BackfillState->space[space].durable;
	uint32		s = (uint32) space;
	uint32		n = (uint32) m->n;

	XLogBeginInsert();
	XLogRegisterData((char *) &s, sizeof(s));
	XLogRegisterData((char *) &n, sizeof(n));
	XLogRegisterData((char *) m->r, sizeof(BackfillRegion) * m->n);
	lsn = XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_BACKFILL);
	XLogFlush(lsn);
}

/*
 * Read the file into the maps (at start, in the postmaster); without it,
 * start from 1.2's one reservation, the highest sequence value any of its
 * laps used: every time unit is taken up to it.  A file that does not
 * verify makes IDs for past instants an ERROR until a reset.
 */
void
BackfillLoadState(void)
{
	int			fd = OpenTransientFile(BACKFILL_FILE, O_RDONLY | PG_BINARY);
	uint64		legacy = pg_atomic_read_u64(&SnowseqRes[RESERVE_BACKFILL].bound);

	for (int s = 0; s < BACKFILL_SPACES; s++)
	{
		BackfillSpace *sp = &BackfillState->space[s];

		memset(&sp->durable, 0, sizeof(sp->durable));
		sp->per_unit = BackfillPerUnit(s);
		if (legacy > 0)
			BackfillRaise(&sp->durable, 0, PG_UINT64_MAX,
						  s == BACKFILL_BIGINT ? legacy : legacy << BackfillUuidExtraBits());
	}
	if (fd >= 0)
	{
		struct stat st;
		char	   *data;
		BackfillFileHeader h;
		pg_crc32c	crc;
		size_t		at = sizeof(h);
		bool		ok;

		if (fstat(fd, &st) < 0)
			ereport(FATAL,
					(errcode_for_file_access(),
					 errmsg("could not stat file \"%s\": %m", BACKFILL_FILE)));
		data = palloc(st.st_size + 1);
		ok = read(fd, data, st.st_size) == st.st_size && st.st_size >= (off_t) (sizeof(h) + sizeof(crc));
		CloseTransientFile(fd);
		if (ok)
		{
			INIT_CRC32C(crc);
			COMP_CRC32C(crc, data, st.st_size - sizeof(crc));
			FIN_CRC32C(crc);
			ok = memcmp(&crc, data + st.st_size - sizeof(crc), sizeof(crc)) == 0 &&
				memcmp(data, BACKFILL_MAGIC, 8) == 0;
		}
		if (ok)
			memcpy(&h, data, sizeof(h));
		for (int s = 0; ok && s < BACKFILL_SPACES; s++)
		{
			BackfillSpace *sp = &BackfillState->space[s];
			uint64		per_unit;
			uint32		n;

			memcpy(&per_unit, data + at, sizeof(per_unit));
			memcpy(&n, data + at + sizeof(per_unit), sizeof(n));
			at += sizeof(per_unit) + sizeof(n);
			ok = n <= BACKFILL_REGIONS && at + n * sizeof(BackfillRegion) <= st.st_size - sizeof(crc);
			for (uint32 i = 0; ok && i < n; i++)
			{
				BackfillRegion r;

				memcpy(&r, data + at + i * sizeof(BackfillRegion), sizeof(r));
				/* a space of another size: its values mean nothing here, all taken */
				BackfillRaise(&sp->durable, r.lo, r.hi,
							  per_unit == sp->per_unit ? r.height : sp->per_unit);
			}
			at += n * sizeof(BackfillRegion);
		}
		if (ok)
			BackfillState->reset_until = h.reset_until;
		else
		{
			BackfillState->damaged = true;
			ereport(LOG,
					(errmsg("snowseq file \"%s\" is damaged: no IDs for past instants until snowseq_reset_state()",
							BACKFILL_FILE)));
		}
		pfree(data);
	}
	for (int s = 0; s < BACKFILL_SPACES; s++)
	{
		BackfillState->space[s].taken = BackfillState->space[s].durable;
		BackfillClearUnits(&BackfillState->space[s]);
	}
	BackfillState->loaded = true;
}

/* Redo of a durable map: both maps rise to it; the file follows. */
void
BackfillRedo(const char *data, size_t len)
{
	uint32		s,
				n;

	memcpy(&s, data, sizeof(s));
	memcpy(&n, data + sizeof(s), sizeof(n));
	if (s >= BACKFILL_SPACES || n > BACKFILL_REGIONS ||
		len != 2 * sizeof(uint32) + n * sizeof(BackfillRegion))
		elog(PANIC, "snowseq: backfill record of %zu bytes for space %u, %u regions", len, s, n);
	LWLockAcquire(BackfillState->lock, LW_EXCLUSIVE);
	for (uint32 i = 0; i < n; i++)
	{
		BackfillRegion r;

		memcpy(&r, data + 2 * sizeof(uint32) + i * sizeof(BackfillRegion), sizeof(r));
		BackfillRaise(&BackfillState->space[s].durable, r.lo, r.hi, r.height);
		BackfillRaise(&BackfillState->space[s].taken, r.lo, r.hi, r.height);
	}
	BackfillSave();
	LWLockRelease(BackfillState->lock);
}

/* A backfill record, described: its space and regions. */
void
BackfillDescribe(StringInfo buf, const char *data, size_t len)
{
	uint32		s,
				n;

	memcpy(&s, data, sizeof(s));
	memcpy(&n, data + sizeof(s), sizeof(n));
	appendStringInfo(buf, "%s space, %u regions", s == BACKFILL_BIGINT ? "bigint" : "uuid", n);
	for (uint32 i = 0; i < n && i < 4 && 2 * sizeof(uint32) + (i + 1) * sizeof(BackfillRegion) <= len; i++)
	{
		BackfillRegion r;

		memcpy(&r, data + 2 * sizeof(uint32) + i * sizeof(BackfillRegion), sizeof(r));
		appendStringInfo(buf, "%s units %llu..%llu below %llu", i == 0 ? ": " : ", ",
						 (unsigned long long) r.lo, (unsigned long long) r.hi,
						 (unsigned long long) r.height);
	}
	if (n > 4)
		appendStringInfoString(buf, ", ...");
}

/*
 * A reset to another layout: every time unit up to `until` (the clock's
 * after the reset) is taken in the bigint space, whose units are the
 * layout's; UUIDs count milliseconds and keep their map.  Caller holds
 * Snowseq->lock; saved and logged here.
 */
static void
BackfillReset(uint64 until, bool other_layout)
{
	LWLockAcquire(BackfillState->lock, LW_EXCLUSIVE);
	BackfillState->damaged = false;
	if (other_layout)
	{
		BackfillSpace *sp = &BackfillState->space[BACKFILL_BIGINT];

		memset(&sp->durable, 0, sizeof(sp->durable));
		sp->per_unit = BackfillPerUnit(BACKFILL_BIGINT);
		BackfillRaise(&sp->durable, 0, until, sp->per_unit);
		sp->taken = sp->durable;
		BackfillClearUnits(sp);
		BackfillState->reset_until = until;
		BackfillLog(BACKFILL_BIGINT);
	}
	BackfillSave();
	LWLockRelease(BackfillState->lock);
}

/* ---- taking a value ---- */

/* ERROR: no value is left in the time unit of ts. */
static void
BackfillRefuse(int space, TimestampTz ts, uint64 t, uint64 per_unit)
{
	char		when[MAXDATELEN + 1];

	strlcpy(when, timestamptz_to_str(ts), sizeof(when));
	if (space == BACKFILL_BIGINT && BackfillState->reset_until > 0 && t <= BackfillState->reset_until)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("no ID can be made for %s on this server: the layout was reset after it", when),
				 errdetail("An ID for an instant before %s could equal one the old layout issued.",
						   timestamptz_to_str(ClockCounterInstant(BackfillState->reset_until << snowseq_seq_bits))),
				 errhint("Backfill instants before it on a server with another snowseq.backfill_node_id.")));
	ereport(ERROR,
			(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
			 errmsg("all %llu %s for the time unit of %s are taken on this server",
					(unsigned long long) per_unit, space == BACKFILL_BIGINT ? "IDs" : "UUIDs", when),
			 errdetail("A time unit of %d ms holds %llu of them per backfill node id; snowseq.backfill_node_id = %d has used them all for this one. Other time units have their own (snowseq_capacity shows the fullest).",
					   space == BACKFILL_BIGINT ? snowseq_time_unit_ms : 1,
					   (unsigned long long) per_unit, snowseq_backfill_node_id),
			 errhint("Give the rows of one instant distinct timestamps, or backfill the rest on a server with another snowseq.backfill_node_id.")));
}

/*
 * The durable map must cover value s of unit t before it is handed out.
 * The block: twice the values t took since the table last folded (a burst
 * at one instant writes a number of times that grows with the logarithm
 * of its size), at most 1/RESERVE_SHARE of what is left there.  Raise the
 * map at t by the block, and around t (BACKFILL_WINDOW units either side)
 * to the regions' taken height plus the block: its neighbours likely take
 * as many (instants of ten rows each write once in a while, not once an
 * instant).  Log, save.  Caller holds the lock.
 */
static void
BackfillAdvance(int space, uint64 t, uint64 s)
{
	BackfillSpace *sp = &BackfillState->space[space];
	uint64		lo = t > BACKFILL_WINDOW ? t - BACKFILL_WINDOW : 0;
	uint64		hi = t < PG_UINT64_MAX - BACKFILL_WINDOW ? t + BACKFILL_WINDOW : PG_UINT64_MAX;
	uint64		base = BackfillHeight(&sp->taken, t);
	uint64		depth = s + 1 > base ? s + 1 - base : 1;
	uint64		block = Max(Min(2 * depth, (sp->per_unit - (s + 1)) / RESERVE_SHARE), 1);
	BackfillMap before = sp->durable;

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot make snowseq IDs for past instants during recovery"),
				 errhint("Make them on the primary.")));
	BackfillRaiseBy(&sp->durable, &sp->taken, lo, hi, block, sp->per_unit);
	BackfillRaise(&sp->durable, t, t, Min(s + 1 + block, sp->per_unit));
	if (BackfillSame(&before, &sp->durable))
		return;
	BackfillLog(space);
	BackfillSave();
	sp->writes++;
}

/*
 * The next value of a space for time unit t (the time of ts in the space's
 * units): its unit's taken height, which rises by one; durable before it
 * is returned.
 */
static uint64
BackfillTake(int space, TimestampTz ts, uint64 t)
{
	BackfillSpace *sp;
	uint64		s;

	LWLockAcquire(BackfillState->lock, LW_EXCLUSIVE);
	sp = &BackfillState->space[space];
	if (unlikely(BackfillState->damaged))
	{
		LWLockRelease(BackfillState->lock);
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowseq file \"%s\" is damaged", BACKFILL_FILE),
				 errdetail("It says which values of IDs for past instants were taken."),
				 errhint("Restore it from a backup, or call snowseq_reset_state(), which counts every value up to now as taken.")));
	}
	s = BackfillTaken(sp, t);
	if (s >= sp->per_unit)
	{
		LWLockRelease(BackfillState->lock);
		BackfillRefuse(space, ts, t, sp->per_unit);
	}
	PG_TRY();
	{
		BackfillSetTaken(sp, t, s + 1);
		if (s >= BackfillHeight(&sp->durable, t))
			BackfillAdvance(space, t, s);
	}
	PG_CATCH();
	{
		LWLockRelease(BackfillState->lock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	LWLockRelease(BackfillState->lock);
	ShmemCountIssued(1);
	return s;
}

/* ERROR unless IDs for a past instant can be made for ts. */
static void
BackfillCheck(TimestampTz ts)
{
	SnowseqCheckUsable();
	if (snowseq_backfill_node_id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq.backfill_node_id is not set"),
				 errdetail("IDs for a past instant carry a node id of their own, which no server's clock uses."),
				 errhint("Set snowseq.backfill_node_id in postgresql.conf to a node id no server uses, and restart the server.")));
	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp must be finite"),
				 errhint("Pass the instant the row was created at, such as its created_at column.")));
	if (TimeTimestamptzToMs(ts) > TimeWallMs())
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp %s is not in the past", timestamptz_to_str(ts)),
				 errhint("snowseq_id_at() and snowseq_uuid_at() are for past instants; use snowseq_next() or snowseq_uuid() for the present.")));
}

/*
 * The next value of the bigint backfill space for the time unit of ts:
 * (time << seq_bits) | seq, never handed out before, durable.
 */
uint64
BackfillNext(TimestampTz ts)
{
	int64		t;

	BackfillCheck(ts);
	t = ClockTimeFieldOf(ts);
	if (t < 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp %s is before snowseq.epoch", timestamptz_to_str(ts)),
				 errhint("IDs exist from snowseq.epoch on; an earlier epoch needs a reset of the layout.")));
	return ((uint64) t << snowseq_seq_bits) | BackfillTake(BACKFILL_BIGINT, ts, (uint64) t);
}

/*
 * The next UUID counter for the millisecond of ts (since 1970), with that
 * millisecond: never handed out before for it, durable.
 */
uint64
BackfillNextUuid(TimestampTz ts, int64 *ms)
{
	BackfillCheck(ts);
	*ms = TimeTimestamptzToMs(ts);
	if (*ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp %s is before 1970", timestamptz_to_str(ts)),
				 errhint("A version 7 UUID holds milliseconds since 1970-01-01.")));
	return BackfillTake(BACKFILL_UUID, ts, (uint64) *ms);
}

/*
 * What is left of a space: the values a time unit holds, how many of them
 * the fullest unit has taken, and the durable advances since start.
 */
void
BackfillCapacity(int space, uint64 *per_unit, uint64 *fullest, uint64 *writes)
{
	LWLockAcquire(BackfillState->lock, LW_SHARED);
	*per_unit = BackfillState->space[space].per_unit;
	*fullest = BackfillMaxHeight(&BackfillState->space[space].taken);
	for (int i = 0; i < BACKFILL_SLOTS; i++)
		*fullest = Max(*fullest, BackfillState->space[space].units[i].height);
	*fullest = Min(*fullest, *per_unit);
	*writes = BackfillState->space[space].writes;
	LWLockRelease(BackfillState->lock);
}

/* ERROR for a NULL instant: a row without a time gets no ID. */
void
BackfillCheckInstant(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the instant of %s() must not be NULL", get_func_name(fcinfo->flinfo->fn_oid)),
				 errhint("Pass the instant the row was created at, such as its created_at column.")));
}

PG_FUNCTION_INFO_V1(snowseq_id_at);

/* snowseq_id_at(ts) -> bigint: a new ID whose time field is that of ts. */
Datum
snowseq_id_at(PG_FUNCTION_ARGS)
{
	BackfillCheckInstant(fcinfo);
	PG_RETURN_INT64(ClockComposeBackfillId(BackfillNext(PG_GETARG_TIMESTAMPTZ(0))));
}
