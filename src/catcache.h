/*
 * catcache.h
 *		Per-backend caches of snowseq's configuration tables (catcache.c):
 *		the routing map, the fences, the counter definitions and the keys.
 */
#ifndef SNOWSEQ_CATCACHE_H
#define SNOWSEQ_CATCACHE_H

#include "utils/snapshot.h"

/*
 * One cached table.  generation counts the invalidations of the table seen
 * by this backend; contents loaded while the generation was g are current
 * as long as it is still g.
 */
typedef struct CatCache
{
	const char *relname;		/* the table, in the extension's schema */
	Oid			relid;			/* found at the last load */
	uint64		generation;		/* bumped by each invalidation of relid */
	uint64		loaded;			/* generation of the contents; 0: none */
	bool		registered;
} CatCache;

/* A cache of the table relname, statically allocated. */
#define CATCACHE_INIT(name)	{ .relname = (name), .generation = 1 }

/* Fills a whole-table cache; cache->relid names the table. */
typedef void (*CatCacheLoadFn) (CatCache *cache);

extern void CatCacheEnsure(CatCache *cache, Oid fn_oid, CatCacheLoadFn load);
extern uint64 CatCacheBeginLoad(CatCache *cache, Oid fn_oid);
extern uint64 CatCacheGeneration(CatCache *cache);
extern void CatCacheInvalidate(CatCache *cache);
extern Snapshot CatCacheSnapshot(void);
extern void CatCacheSnapshotDone(Snapshot snapshot);

#endif							/* SNOWSEQ_CATCACHE_H */
