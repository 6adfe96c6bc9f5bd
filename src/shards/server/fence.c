/*
 * fence.c
 *		The source side of a gene-range move: fences on ID ranges of local
 *		tables.
 *
 * A move holds back the writes to the range it moves, and only those: the
 * snowseq_fence row trigger looks the written ID up in the fences of its
 * table (snowseq_fence, cached per backend under catcache.c's rule: read
 * with a fresh snapshot whatever the writer's isolation level).  A
 * fence is
 *	 open	no effect (a move is copying);
 *	 block	writers of the range wait on an advisory lock the mover holds;
 *	 reject writers of the range fail with a serialization failure, so the
 *			client retries and the router sends the retry to the new server;
 *	 moved	the range lives elsewhere: writes to it here are refused.
 * block and reject apply only while the mover's session on this server is
 * alive (it holds SNOWSEQ_LOCK_ALIVE, taken by snowseq_fence_hold): if the
 * router dies mid-move, writes go on here, where the rows still are.  The
 * locks are on tags no SQL role can take (remote.h), so nobody but the
 * mover can make a fence act or hold its writers back.  Writes to every other range pass
 * after one cache lookup.
 *
 * snowseq_fence_wait lets the mover wait for transactions that were already
 * writing to the table before the fence, as CREATE INDEX CONCURRENTLY does,
 * without blocking anyone.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "catcache.h"
#include "compat.h"
#include "snowseq.h"
#include "fence.h"
#include "gene.h"
#include "shard_locks.h"
#include "sqlrun.h"

typedef struct Fence
{
	int			id;
	Oid			relid;
	bool		has_lo;
	bool		has_hi;
	int64		lo;
	int64		hi;
	FenceState	state;			/* never FENCE_OPEN: open ones are not loaded */
	char	   *to_server;
} Fence;

static CatCache fence_cache = CATCACHE_INIT("snowseq_fence");

/* The names of the fence states, as snowseq_fence.state stores them (its check lists the same). */
static const char *const FenceStateNames[] = {"open", "block", "reject", "moved"};

StaticAssertDecl(lengthof(FenceStateNames) == FENCE_MOVED + 1, "a name for each fence state");

/* The stored name of a fence state. */
const char *
FenceStateName(FenceState state)
{
	Assert(state >= FENCE_OPEN && state <= FENCE_MOVED);
	return FenceStateNames[state];
}

/* The fence state of a stored name; false if there is none of that name. */
static bool
FenceStateOf(const char *name, FenceState *state)
{
	for (int i = 0; i < lengthof(FenceStateNames); i++)
	{
		if (strcmp(name, FenceStateNames[i]) == 0)
		{
			*state = (FenceState) i;
			return true;
		}
	}
	return false;
}
static Fence *fences = NULL;
static int	nfences = 0;
static MemoryContext fence_cxt = NULL;

/* The fence table, in the schema of the calling function. */
static Oid
FenceTable(Oid fn_oid)
{
	Oid			relid = get_relname_relid("snowseq_fence", ExtNamespace(fn_oid));

	if (!OidIsValid(relid))
		elog(ERROR, "snowseq_fence table is missing");
	return relid;
}

/* Load the fences that have an effect (all but open ones); catcache.c's rule. */
static void
FenceLoad(CatCache *cache)
{
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	Snapshot	snap;
	int			cap = 8;

	if (fence_cxt == NULL)
		fence_cxt = AllocSetContextCreate(TopMemoryContext, "snowseq fences",
										  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(fence_cxt);
	fences = MemoryContextAlloc(fence_cxt, sizeof(Fence) * cap);
	nfences = 0;
	rel = table_open(cache->relid, AccessShareLock);
	/* the latest committed state, not the writer's transaction snapshot */
	snap = CatCacheSnapshot();
	scan = SnowseqTableBeginScan(rel, snap);
	slot = table_slot_create(rel, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		char	   *name = TextDatumGetCString(slot_getattr(slot, 6, &isnull));
		FenceState	state;
		Fence	   *f;

		if (!FenceStateOf(name, &state))
			elog(ERROR, "snowseq_fence holds an unknown fence state \"%s\"", name);
		if (state == FENCE_OPEN)
			continue;
		if (nfences == cap)
		{
			cap *= 2;
			fences = repalloc(fences, sizeof(Fence) * cap);
		}
		f = &fences[nfences++];
		f->id = DatumGetInt32(slot_getattr(slot, 1, &isnull));
		f->relid = DatumGetObjectId(slot_getattr(slot, 3, &isnull));
		f->lo = DatumGetInt64(slot_getattr(slot, 4, &isnull));
		f->has_lo = !isnull;
		f->hi = DatumGetInt64(slot_getattr(slot, 5, &isnull));
		f->has_hi = !isnull;
		f->state = state;
		f->to_server = MemoryContextStrdup(fence_cxt,
										   TextDatumGetCString(slot_getattr(slot, 7, &isnull)));
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	CatCacheSnapshotDone(snap);
	table_close(rel, AccessShareLock);
}

/* Bring the cache up to date with committed fence changes. */
static void
FenceRefresh(Oid fn_oid)
{
	CatCacheEnsure(&fence_cache, fn_oid, FenceLoad);
}

/* The effective fence of a table covering an ID, or NULL. */
static Fence *
FenceFind(Oid relid, int64 id)
{
	for (int i = 0; i < nfences; i++)
	{
		Fence	   *f = &fences[i];

		if (f->relid == relid && (!f->has_lo || id >= f->lo) && (!f->has_hi || id < f->hi))
			return f;
	}
	return NULL;
}

/* First and last gene of a fence, for messages. */
static void
FenceGenes(Fence *f, int *first, int *last)
{
	GenesOfIds(f->has_lo, f->lo, f->has_hi, f->hi, first, last);
}

/* Whether the mover of a fence still has its session on this server. */
static bool
FenceMoverAlive(Fence *f)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_ALIVE, f->id);
	if (LockAcquire(&tag, ShareLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, ShareLock, false);
	return false;
}

/* Wait until the mover lets writers of a blocked fence go. */
static void
FenceWaitBlock(Fence *f)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_BLOCK, f->id);
	(void) LockAcquire(&tag, ShareLock, false, false);
	LockRelease(&tag, ShareLock, false);
}

/* Let a write of an ID through, wait for it, or refuse it. */
static void
FenceCheck(Oid fn_oid, Relation rel, int64 id)
{
	for (;;)
	{
		Fence	   *f;
		int			first,
					last;

		FenceRefresh(fn_oid);
		f = FenceFind(RelationGetRelid(rel), id);
		if (f == NULL)
			return;
		FenceGenes(f, &first, &last);
		if (f->state == FENCE_MOVED)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("genes %d to %d of table \"%s\" have moved to server \"%s\"",
							first, last, RelationGetRelationName(rel), f->to_server),
					 errhint("Write through the router, or on that server.")));
		/* a mover that is gone holds nothing back: the rows are still here */
		if (!FenceMoverAlive(f))
			return;
		if (f->state == FENCE_REJECT)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("genes %d to %d of table \"%s\" are moving to server \"%s\"",
							first, last, RelationGetRelationName(rel), f->to_server),
					 errhint("Retry the transaction: the router sends it to the new server.")));
		FenceWaitBlock(f);
		/* the mover changed the fence before letting go: look again */
	}
}

/* The ID of a row, or false if it is NULL. */
static bool
FenceRowId(HeapTuple tuple, TupleDesc desc, int attno, int64 *id)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attno, desc, &isnull);

	if (isnull)
		return false;
	*id = DatumGetInt64(d);
	return true;
}

PG_FUNCTION_INFO_V1(snowseq_fence);
PG_FUNCTION_INFO_V1(snowseq_fence_open);
PG_FUNCTION_INFO_V1(snowseq_fence_state);
PG_FUNCTION_INFO_V1(snowseq_fence_drop);
PG_FUNCTION_INFO_V1(snowseq_fence_wait);
PG_FUNCTION_INFO_V1(snowseq_fence_clear);
PG_FUNCTION_INFO_V1(snowseq_fence_hold);
PG_FUNCTION_INFO_V1(snowseq_fence_let_go);

/*
 * snowseq_fence('id_column'): BEFORE INSERT OR UPDATE OR DELETE row trigger
 * (and BEFORE TRUNCATE statement trigger) of a shard table.
 */
Datum
snowseq_fence(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Oid			fn_oid = fcinfo->flinfo->fn_oid;
	Relation	rel;
	TupleDesc	desc;
	int			attno;
	int64		id;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_fence must be called as a trigger")));
	rel = td->tg_relation;
	if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
	{
		FenceRefresh(fn_oid);
		for (int i = 0; i < nfences; i++)
		{
			Fence	   *f = &fences[i];
			int			first,
						last;

			if (f->relid != RelationGetRelid(rel) || f->state == FENCE_MOVED || !FenceMoverAlive(f))
				continue;
			FenceGenes(f, &first, &last);
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("cannot truncate table \"%s\" while genes %d to %d are moving to server \"%s\"",
							RelationGetRelationName(rel), first, last, f->to_server)));
		}
		return PointerGetDatum(NULL);
	}
	if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_BEFORE(td->tg_event) ||
		td->tg_trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_fence must be a BEFORE ROW trigger with the ID column as its argument")));
	desc = RelationGetDescr(rel);
	attno = SPI_fnumber(desc, td->tg_trigger->tgargs[0]);
	if (attno <= 0 || TupleDescAttr(desc, attno - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("table \"%s\" has no bigint column \"%s\"",
						RelationGetRelationName(rel), td->tg_trigger->tgargs[0])));

	/* writes to tables without fences pass after one lookup */
	FenceRefresh(fn_oid);
	if (nfences > 0)
	{
		int64		old_id;
		bool		has_old;

		/* the row inserted, or the old row of an update or delete */
		has_old = FenceRowId(td->tg_trigtuple, desc, attno, &old_id);
		if (has_old)
			FenceCheck(fn_oid, rel, old_id);
		/* an update may also move a row into a fenced range */
		if (TRIGGER_FIRED_BY_UPDATE(td->tg_event) &&
			FenceRowId(td->tg_newtuple, desc, attno, &id) && (!has_old || id != old_id))
			FenceCheck(fn_oid, rel, id);
	}
	if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		return PointerGetDatum(td->tg_newtuple);
	return PointerGetDatum(td->tg_trigtuple);
}

/* Qualified name of the fence table, for SPI. */
static char *
FenceTableName(Oid fn_oid)
{
	return ExtObject(fn_oid, "snowseq_fence");
}

/*
 * snowseq_fence_open(token, rel, lo, hi, to_server) -> int: an open fence
 * for a move (the same one again for the same token).
 */
Datum
snowseq_fence_open(PG_FUNCTION_ARGS)
{
	Oid			types[6] = {TEXTOID, OIDOID, INT8OID, INT8OID, TEXTOID, TEXTOID};
	Datum		values[6];
	char		nulls[7] = "      ";
	char	   *sql;
	bool		isnull;
	int32		id;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("token, table and server of a fence must not be NULL")));
	for (int i = 0; i < 5; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		if (PG_ARGISNULL(i))
			nulls[i] = 'n';
	}
	values[5] = CStringGetTextDatum(FenceStateName(FENCE_OPEN));
	sql = psprintf("INSERT INTO %s AS f (token, relid, lo, hi, state, to_server) "
				   "VALUES ($1, $2, $3, $4, $6, $5) "
				   "ON CONFLICT (token) DO UPDATE SET updated_at = pg_catalog.clock_timestamp() "
				   "RETURNING f.fence_id",
				   FenceTableName(fcinfo->flinfo->fn_oid));
	SPI_connect();
	SpiRunArgs(sql, 6, types, values, nulls, SPI_OK_INSERT_RETURNING);
	id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	PG_RETURN_INT32(id);
}

/* snowseq_fence_state(fence_id, state): change a fence; writers see it at once. */
Datum
snowseq_fence_state(PG_FUNCTION_ARGS)
{
	int32		id = PG_GETARG_INT32(0);
	char	   *state = text_to_cstring(PG_GETARG_TEXT_PP(1));
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2] = {Int32GetDatum(id), PG_GETARG_DATUM(1)};
	char	   *sql;
	FenceState	known;

	if (!FenceStateOf(state, &known))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fence state must be %s, %s, %s or %s, not \"%s\"",
						FenceStateName(FENCE_OPEN), FenceStateName(FENCE_BLOCK),
						FenceStateName(FENCE_REJECT), FenceStateName(FENCE_MOVED), state)));
	sql = psprintf("UPDATE %s SET state = $2, updated_at = pg_catalog.clock_timestamp() "
				   "WHERE fence_id OPERATOR(pg_catalog.=) $1",
				   FenceTableName(fcinfo->flinfo->fn_oid));
	SPI_connect();
	SpiRunArgs(sql, 2, types, values, NULL, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("fence %d does not exist", id)));
	SPI_finish();
	/* every backend reloads its fences when this commits */
	CacheInvalidateRelcacheByRelid(FenceTable(fcinfo->flinfo->fn_oid));
	PG_RETURN_VOID();
}

/* snowseq_fence_drop(token) -> bool: remove a move's fence unless it is a tombstone. */
Datum
snowseq_fence_drop(PG_FUNCTION_ARGS)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {PG_GETARG_DATUM(0), CStringGetTextDatum(FenceStateName(FENCE_MOVED))};
	char	   *sql;
	bool		found;

	sql = psprintf("DELETE FROM %s WHERE token OPERATOR(pg_catalog.=) $1 "
				   "AND state OPERATOR(pg_catalog.<>) $2",
				   FenceTableName(fcinfo->flinfo->fn_oid));
	SPI_connect();
	SpiRunArgs(sql, 2, types, values, NULL, SPI_OK_DELETE);
	found = SPI_processed > 0;
	SPI_finish();
	CacheInvalidateRelcacheByRelid(FenceTable(fcinfo->flinfo->fn_oid));
	PG_RETURN_BOOL(found);
}

/*
 * snowseq_fence_wait(fence_id, timeout_ms) -> bool: wait until every
 * transaction that held a write lock on the fence's table when called has
 * ended, or waits on the fence.  Only writers count (not vacuum or analyze,
 * which take SHARE UPDATE EXCLUSIVE); a writer held back by the fence
 * counts as done, since it fails once the fence rejects and nothing it
 * wrote can commit.  Polls, so it never joins a lock queue; false if some
 * are still running after timeout_ms.
 */
Datum
snowseq_fence_wait(PG_FUNCTION_ARGS)
{
	int32		fence_id = PG_GETARG_INT32(0);
	int32		timeout_ms = PG_GETARG_INT32(1);
	TimestampTz start = GetCurrentTimestamp();
	Oid			types[2] = {INT4OID, TEXTARRAYOID};
	Datum		values[2] = {Int32GetDatum(fence_id), (Datum) 0};
	bool		isnull;
	bool		done = false;

	SPI_connect();
	/* the writers now: their virtual transaction ids */
	SpiRunArgs(psprintf("SELECT pg_catalog.array_agg(l.virtualtransaction) FROM pg_catalog.pg_locks l "
						"JOIN %s f ON f.relid OPERATOR(pg_catalog.=) l.relation "
						"WHERE f.fence_id OPERATOR(pg_catalog.=) $1 AND l.locktype OPERATOR(pg_catalog.=) 'relation' "
						"AND l.database OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_database "
						"WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) "
						"AND l.mode OPERATOR(pg_catalog.=) ANY (ARRAY['RowExclusiveLock', 'ShareRowExclusiveLock', "
						"'ExclusiveLock', 'AccessExclusiveLock']) AND l.granted "
						"AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()",
						FenceTableName(fcinfo->flinfo->fn_oid)),
			   1, types, values, NULL, SPI_OK_SELECT);
	values[1] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		done = true;
	while (!done)
	{
		/* a transaction holds the lock on its own virtual id until it ends */
		SpiRunArgs(psprintf("SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks v "
							"WHERE v.locktype OPERATOR(pg_catalog.=) 'virtualxid' AND v.granted "
							"AND v.virtualxid OPERATOR(pg_catalog.=) ANY ($2) "
							"AND v.pid OPERATOR(pg_catalog.<>) ALL (SELECT w.pid FROM pg_catalog.pg_locks w "
							"WHERE w.locktype OPERATOR(pg_catalog.=) 'advisory' AND NOT w.granted "
							"AND w.classid OPERATOR(pg_catalog.=) %u AND w.objid OPERATOR(pg_catalog.=) $1::pg_catalog.oid "
							"AND w.objsubid OPERATOR(pg_catalog.=) %d))",
							(uint32) SNOWSEQ_LOCK_BLOCK, SNOWSEQ_LOCK_FIELD4),
				   2, types, values, NULL, SPI_OK_SELECT);
		done = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		SPI_freetuptable(SPI_tuptable);
		if (done || TimestampDifferenceExceeds(start, GetCurrentTimestamp(), timeout_ms))
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 2L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_finish();
	PG_RETURN_BOOL(done);
}

/*
 * snowseq_fence_clear(rel) -> int: remove every fence of a table, tombstones
 * included, when an empty table becomes the destination of a move.
 */
Datum
snowseq_fence_clear(PG_FUNCTION_ARGS)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {PG_GETARG_DATUM(0)};
	char	   *sql;
	int32		n;

	sql = psprintf("DELETE FROM %s WHERE relid OPERATOR(pg_catalog.=) $1",
				   FenceTableName(fcinfo->flinfo->fn_oid));
	SPI_connect();
	SpiRunArgs(sql, 1, types, values, NULL, SPI_OK_DELETE);
	n = (int32) SPI_processed;
	SPI_finish();
	CacheInvalidateRelcacheByRelid(FenceTable(fcinfo->flinfo->fn_oid));
	PG_RETURN_INT32(n);
}

/*
 * snowseq_fence_hold(fence_id): the calling session (the mover's) holds the
 * fence: its block and reject states act while this session lives, and
 * writers of its IDs wait while it is at block, until snowseq_fence_let_go
 * or the end of the session.  Session locks, as pg_advisory_lock takes
 * them, on tags that no SQL role can take; taken again by a session that
 * holds them, they are held once more.
 */
Datum
snowseq_fence_hold(PG_FUNCTION_ARGS)
{
	int32		fence_id = PG_GETARG_INT32(0);
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_ALIVE, fence_id);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_BLOCK, fence_id);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	PG_RETURN_VOID();
}

/*
 * snowseq_fence_let_go(fence_id) -> bool: writers that wait on the fence
 * go on (to see its state again); the session still holds it alive.
 * False if this session did not hold it.
 */
Datum
snowseq_fence_let_go(PG_FUNCTION_ARGS)
{
	int32		fence_id = PG_GETARG_INT32(0);
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_BLOCK, fence_id);
	PG_RETURN_BOOL(LockRelease(&tag, ExclusiveLock, true));
}
