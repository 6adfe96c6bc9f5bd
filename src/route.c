/*
 * route.c
 *		Routing: shard_of, gene ranges, the routing map and its per-backend
 *		cache (snowseq_create_shards, which fills the map, is in
 *		src/shards/operations/create_shards.c).
 *
 * The map (snowseq_shard_map) gives each shard the highest gene it holds;
 * a gene belongs to the row with the smallest upper_gene >= it.  Each
 * backend keeps the map sorted in memory and finds a gene by binary
 * search; the cache follows catcache.c's rule: a lookup sees every change
 * committed before it began (the map's trigger sends the invalidation).
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "partitioning/partdesc.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rangetypes.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"
#include "utils/typcache.h"
#include "utils/uuid.h"

#include "catcache.h"
#include "compat.h"
#include "snowseq.h"
#include "gene.h"
#include "route.h"
#include "sqlrun.h"

typedef struct MapEntry
{
	int			upper_gene;
	char	   *shard;
} MapEntry;

static CatCache map_cache = CATCACHE_INIT("snowseq_shard_map");
static MapEntry *map = NULL;
static int	map_len = 0;
static MemoryContext map_cxt = NULL;

/* Load the map into backend memory, sorted by upper_gene (catcache.c's rule). */
static void
MapLoad(CatCache *cache)
{
	char	   *name;
	StringInfoData q;
	Snapshot	snapshot;

	if (map_cxt == NULL)
		map_cxt = AllocSetContextCreate(TopMemoryContext, "snowseq shard map",
										ALLOCSET_SMALL_SIZES);
	MemoryContextReset(map_cxt);
	map = NULL;
	map_len = 0;
	name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(cache->relid)),
									  cache->relname);

	initStringInfo(&q);
	appendStringInfo(&q, "SELECT upper_gene, shard FROM %s ORDER BY upper_gene", name);
	snapshot = CatCacheSnapshot();
	SPI_connect();
	if (SPI_execute(q.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read %s", name);
	map = MemoryContextAlloc(map_cxt, sizeof(MapEntry) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		bool		isnull;

		map[i].upper_gene = DatumGetInt32(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		map[i].shard = MemoryContextStrdup(map_cxt, SPI_getvalue(tup, SPI_tuptable->tupdesc, 2));
	}
	map_len = (int) SPI_processed;
	SPI_finish();
	CatCacheSnapshotDone(snapshot);
}

/* The shard holding a gene: ceiling lookup by binary search. */
static text *
MapLookup(Oid fn_oid, int gene)
{
	int			lo = 0,
				hi;

	CatCacheEnsure(&map_cache, fn_oid, MapLoad);
	if (map_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq_shard_map is empty"),
				 errhint("Insert one row per gene range (upper_gene, and the shard server that holds it) ending at upper_gene 32767, or call snowseq_create_shards().")));
	hi = map_len;
	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (map[mid].upper_gene < gene)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == map_len)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gene %d is not covered by snowseq_shard_map: genes %d to %d have no shard",
						gene, map[map_len - 1].upper_gene + 1, SNOWSEQ_MAX_GENE),
				 errhint("Add a row with upper_gene %d to snowseq_shard_map.", SNOWSEQ_MAX_GENE)));
	return cstring_to_text(map[lo].shard);
}

/* Reject a negative ID: no gene. */
static int
GeneOfId(int64 id)
{
	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowseq ID must not be negative: %lld", (long long) id),
				 errhint("Gene IDs are positive; their top 15 bits are the gene.")));
	return GeneFromId(id);
}

/* Reject a gene outside 0 .. 32767. */
static void
CheckGene(int gene)
{
	if (gene < 0 || gene > SNOWSEQ_MAX_GENE)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("gene must be between 0 and %d, not %d", SNOWSEQ_MAX_GENE, gene)));
}

/* The int8range of a gene's IDs, [gene << 48, (gene + 1) << 48). */
static Datum
GeneRange(int gene)
{
	TypeCacheEntry *tc = lookup_type_cache(INT8RANGEOID, TYPECACHE_RANGE_INFO);
	RangeBound	lower,
				upper;
	int64		end = 0;

	CheckGene(gene);
	lower.val = Int64GetDatum(GeneFirstId(gene));
	lower.infinite = false;
	lower.inclusive = true;
	lower.lower = true;
	/* the last gene ends at the top of bigint: no finite exclusive bound */
	upper.infinite = !GeneEndId(gene, &end);
	upper.val = Int64GetDatum(upper.infinite ? 0 : end);
	upper.inclusive = false;
	upper.lower = false;
	return RangeTypePGetDatum(SnowseqMakeRange(tc, &lower, &upper, false));
}

PG_FUNCTION_INFO_V1(shard_of);
PG_FUNCTION_INFO_V1(snowseq_gene_range);
PG_FUNCTION_INFO_V1(snowseq_route);
PG_FUNCTION_INFO_V1(snowseq_route_gene);
PG_FUNCTION_INFO_V1(snowseq_shard_map_changed);
PG_FUNCTION_INFO_V1(shard_of_uuid);
PG_FUNCTION_INFO_V1(snowseq_route_uuid);
PG_FUNCTION_INFO_V1(snowseq_route_ranges);

/*
 * The 23-bit gene of a 128-bit gene ID: its top 23 bits.  ERROR for a UUID
 * that is not version 8 of the RFC variant, which snowseq_gene_uuid() makes.
 */
static int
WideGeneOfUuid(const pg_uuid_t *uuid)
{
	if ((uuid->data[6] >> 4) != 8 || (uuid->data[8] & 0xC0) != 0x80)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a 128-bit gene ID",
						DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(uuid)))),
				 errdetail("A 128-bit gene ID is an RFC 9562 version 8 UUID: its third group begins with 8, its fourth with 8, 9, a or b."),
				 errhint("Make 128-bit gene IDs with snowseq_gene_uuid(key).")));
	return (uuid->data[0] << 15) | (uuid->data[1] << 7) | (uuid->data[2] >> 1);
}

/* shard_of(uuid) -> int: the 23-bit gene of a 128-bit gene ID; >> 8 is its 15-bit gene. */
Datum
shard_of_uuid(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(WideGeneOfUuid(PG_GETARG_UUID_P(0)));
}

/* snowseq_route(uuid) -> text: the shard of a 128-bit gene ID, by the same map. */
Datum
snowseq_route_uuid(PG_FUNCTION_ARGS)
{
	int			gene = WideGeneOfUuid(PG_GETARG_UUID_P(0)) >> SNOWSEQ_WIDE_EXTRA_BITS;

	PG_RETURN_TEXT_P(MapLookup(fcinfo->flinfo->fn_oid, gene));
}

/* shard_of(id) -> int: the gene of an ID, id >> 48. */
Datum
shard_of(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(GeneOfId(PG_GETARG_INT64(0)));
}

/* snowseq_gene_range(gene) -> int8range */
Datum
snowseq_gene_range(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(GeneRange(PG_GETARG_INT32(0)));
}

/* snowseq_route(id) -> text: the shard of an ID. */
Datum
snowseq_route(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(MapLookup(fcinfo->flinfo->fn_oid, GeneOfId(PG_GETARG_INT64(0))));
}

/* snowseq_route_gene(gene) -> text: the shard of a gene (snowseq_route_key uses it). */
Datum
snowseq_route_gene(PG_FUNCTION_ARGS)
{
	int			gene = PG_GETARG_INT32(0);

	CheckGene(gene);
	PG_RETURN_TEXT_P(MapLookup(fcinfo->flinfo->fn_oid, gene));
}

/*
 * Trigger on the map, for each statement and each row and ENABLE ALWAYS, so
 * that a change however applied (by a logical replication subscriber, or
 * with session_replication_role = replica) tells every backend to reload it.
 */
Datum
snowseq_shard_map_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "snowseq_shard_map_changed must be called as a trigger");
	CacheInvalidateRelcache(td->tg_relation);
	return PointerGetDatum(NULL);
}

/*
 * The map as the routing functions read it, from this backend's cache
 * under its rule (every change committed before the call, and the
 * caller's own): each server's genes, first to last, in gene order, in
 * the current memory context.  What elastic shards read the map through
 * (the rebalance's servers, snowseq_shard_stats), so they route as
 * snowseq_route does.  fn_oid: a function of the extension's schema.
 */
List *
RouteRanges(Oid fn_oid)
{
	List	   *ranges = NIL;
	int			first = 0;

	CatCacheEnsure(&map_cache, fn_oid, MapLoad);
	for (int i = 0; i < map_len; i++)
	{
		RouteRange *r = palloc(sizeof(RouteRange));

		r->first = first;
		r->last = map[i].upper_gene;
		r->shard = pstrdup(map[i].shard);
		ranges = lappend(ranges, r);
		first = map[i].upper_gene + 1;
	}
	return ranges;
}

/* snowseq_route_ranges(): RouteRanges as rows (first_gene, last_gene, shard). */
Datum
snowseq_route_ranges(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, RouteRanges(fcinfo->flinfo->fn_oid))
	{
		RouteRange *r = lfirst(lc);
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = Int32GetDatum(r->first);
		values[1] = Int32GetDatum(r->last);
		values[2] = CStringGetTextDatum(r->shard);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_NULL();
}
