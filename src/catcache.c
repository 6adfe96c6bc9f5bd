/*
 * catcache.c
 *		One mechanism for the per-backend caches of snowseq's configuration
 *		tables (the routing map, the fences, the counter definitions and the
 *		keys), invalidated as PostgreSQL's own caches are.
 *
 * Each table has an ALWAYS trigger that sends a relcache invalidation for
 * it with every change, whether made by SQL or applied by logical
 * replication (a physical standby replays the invalidation from the commit
 * record).  One relcache callback, registered once, bumps the generation of
 * the cache of the invalidated table (of every cache, for a reset).
 *
 * The rule: a lookup sees every change committed before the lookup began,
 * and those of its own transaction, whatever the isolation level of the
 * caller, as lookups in PostgreSQL's catalogs do.  So each lookup first
 * takes in pending invalidations (AcceptInvalidationMessages: one unlocked
 * read when there are none), and a load reads the table with the newest
 * snapshot (the statement's inside a parallel query, which cannot take
 * one).  The generation a load belongs to is read before the load starts:
 * an invalidation that arrives while it runs leaves the cache stale, and
 * the next lookup loads again.  A load that fails leaves no contents.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "catcache.h"
#include "sqlrun.h"

#define CATCACHE_MAX	8

static CatCache *catcaches[CATCACHE_MAX];
static int	ncatcaches = 0;
static bool callback_registered = false;

/* Relcache invalidation: a cached table changed (InvalidOid: everything). */
static void
CatCacheCallback(Datum arg, Oid relid)
{
	for (int i = 0; i < ncatcaches; i++)
	{
		CatCache   *c = catcaches[i];

		if (relid == InvalidOid || relid == c->relid)
			c->generation++;
	}
}

/* Take a cache into the callback's list, and the callback into PostgreSQL's. */
static void
CatCacheRegister(CatCache *cache)
{
	if (cache->registered)
		return;
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(CatCacheCallback, (Datum) 0);
		callback_registered = true;
	}
	if (ncatcaches == CATCACHE_MAX)
		elog(ERROR, "too many snowseq catalog caches");
	catcaches[ncatcaches++] = cache;
	cache->registered = true;
}

/* The cached table, in the schema of the calling function; ERROR if missing. */
static Oid
CatCacheTable(CatCache *cache, Oid fn_oid)
{
	Oid			nsp = ExtNamespace(fn_oid);
	Oid			relid = get_relname_relid(cache->relname, nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table %s does not exist in schema \"%s\"",
						cache->relname, get_namespace_name(nsp)),
				 errhint("Update the extension: ALTER EXTENSION snowseq UPDATE.")));
	return relid;
}

/*
 * The generation current now, after taking in pending invalidations: an
 * entry stamped with it is up to date.
 */
uint64
CatCacheGeneration(CatCache *cache)
{
	AcceptInvalidationMessages();
	return cache->generation;
}

/*
 * Start loading (part of) a cache: finds the table, and returns the
 * generation to stamp the loaded contents with, read before the load.
 */
uint64
CatCacheBeginLoad(CatCache *cache, Oid fn_oid)
{
	CatCacheRegister(cache);
	cache->relid = CatCacheTable(cache, fn_oid);
	return cache->generation;
}

/* A whole-table cache, loaded again by load if it is stale. */
void
CatCacheEnsure(CatCache *cache, Oid fn_oid, CatCacheLoadFn load)
{
	uint64		stamp;

	if (likely(cache->loaded == CatCacheGeneration(cache)))
		return;
	stamp = CatCacheBeginLoad(cache, fn_oid);
	cache->loaded = 0;
	load(cache);
	cache->loaded = stamp;
}

/* Mark a cache stale in this backend (after changing its table here). */
void
CatCacheInvalidate(CatCache *cache)
{
	cache->generation++;
}

/*
 * The snapshot a load reads with, registered: the newest, or the
 * statement's in parallel mode.  Pushed as the active one too, so that a
 * read-only SPI query uses it.
 */
Snapshot
CatCacheSnapshot(void)
{
	Snapshot	snapshot;

	snapshot = RegisterSnapshot(IsInParallelMode() ? GetActiveSnapshot() : GetLatestSnapshot());
	PushActiveSnapshot(snapshot);
	return snapshot;
}

/* Done with a load's snapshot. */
void
CatCacheSnapshotDone(Snapshot snapshot)
{
	PopActiveSnapshot();
	UnregisterSnapshot(snapshot);
}
