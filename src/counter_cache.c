/*
 * counter_cache.c
 *		The definitions of named counters as each backend caches them.
 *
 * A definition (a row of snowseq_counters) is loaded once and kept until
 * the table changes: catcache.c's generation of the table says when, and
 * its rule holds (a lookup sees every change committed before it began,
 * and its own transaction's).  Each call site remembers the entry of the
 * name it was last called with, so a call with the same name costs a
 * compare and a generation check.  The rights of the current user are
 * decided at load and kept for that user until a role, a membership or a
 * relation changes (counter_rights.c).
 *
 * What the entry means for values (its reservation, its floor's record)
 * is counter.c's: it prepares an entry after each load.
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "catcache.h"
#include "counter_cache.h"
#include "counter_floor.h"
#include "counter_rights.h"
#include "guc.h"
#include "sqlrun.h"
#include "testpoint.h"

/* What a call site remembers: the entry of the name it was last called with. */
typedef struct CounterCallCache
{
	int			len;
	char		name[NAMEDATALEN];
	CounterEntry *entry;
} CounterCallCache;

static CatCache counter_defs = CATCACHE_INIT("snowseq_counters");
static HTAB *counter_cache = NULL;
static MemoryContext counter_cxt = NULL;

/* A counter's name as a NameData; ERROR if it is not a valid one. */
void
CounterCacheName(text *t, NameData *name)
{
	int			len = VARSIZE_ANY_EXHDR(t);

	if (len < 1 || len >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("counter name must have 1 to %d bytes, not %d", NAMEDATALEN - 1, len)));
	memset(name, 0, sizeof(*name));
	memcpy(NameStr(*name), VARDATA_ANY(t), len);
	if (memchr(NameStr(*name), '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("counter name must not contain a zero byte")));
}

/* Which release's catalog the definitions table in schema ext_nsp is. */
CounterCatalog
CounterCacheCatalog(Oid ext_nsp)
{
	Oid			relid = get_relname_relid("snowseq_counters", ext_nsp);

	if (OidIsValid(relid) && get_attnum(relid, "maximum") != InvalidAttrNumber)
		return COUNTER_CATALOG_1_3;
	if (OidIsValid(relid) && get_attnum(relid, "acl") != InvalidAttrNumber)
		return COUNTER_CATALOG_1_2;
	return COUNTER_CATALOG_1_1;
}

/*
 * The largest k whose value a counter can hand out (0 when none can): at
 * most maximum, and a serial's number in the digits of its format (at most
 * 2^40 - 1 numbers a period).  What a counter has left is measured against
 * it, and its reservation never reaches past it.
 */
uint64
CounterCacheLastK(bool serial, int64 start, int32 nodes, int64 maximum, int number_width)
{
	int64		first;
	int64		max = maximum;
	uint64		k;

	if (serial && number_width < 19)
	{
		max = 1;
		for (int i = 0; i < number_width; i++)
			max *= 10;
		max -= 1;
	}
	if (pg_add_s64_overflow(start, snowseq_node_id % nodes, &first) || first > max)
		return 0;
	k = (uint64) (max - first) / (uint64) nodes + 1;
	return serial ? Min(k, SERIAL_K_MASK) : k;
}

/* The grants of a 1.2 definition row as stored: NULL for none (NULL or empty). */
static Acl *
CounterCacheAcl(Datum d, bool isnull)
{
	Acl		   *acl;

	if (isnull)
		return NULL;
	acl = DatumGetAclPCopy(d);
	if (ARR_NDIM(acl) == 0)
		return NULL;
	return acl;
}

/* Find an entry's floor, and (1.3) whether it holds the counter's record. */
static void
CounterCacheFindFloor(CounterEntry *e)
{
	int64		value;

	e->floor_seq = CounterFloorFind(CounterFloorSchema(false), &e->name);
	e->unrecorded = e->catalog == COUNTER_CATALOG_1_3 &&
		(!OidIsValid(e->floor_seq) || CounterFloorRead(e->floor_seq, &value) != COUNTER_FLOOR_SET);
}

/* The owner of the definitions table in schema ext_nsp. */
static Oid
CounterCacheTableOwner(Oid ext_nsp)
{
	return ExtRelationOwner(get_relname_relid("snowseq_counters", ext_nsp));
}

/* May user use the counter of entry e, by the rights of its catalog? */
static bool
CounterCacheMayUse(const CounterEntry *e, Oid user)
{
	switch (e->catalog)
	{
		case COUNTER_CATALOG_1_3:
			/* without a floor, nothing is granted: the table's owner decides */
			if (!OidIsValid(e->floor_seq))
				return has_privs_of_role(user, e->table_owner);
			return CounterRightsMayUse(e->floor_seq, user);
		case COUNTER_CATALOG_1_2:
			return CounterRightsMayUseLegacy(user, e->owner, e->acl);
		case COUNTER_CATALOG_1_1:
			break;
	}
	return true;
}

/*
 * ERROR unless the current user may use a cached counter.  The decision is
 * kept for one user id while the rights generation stays.
 */
static inline void
CounterCacheCheckUse(CounterEntry *e)
{
	Oid			user = GetUserId();
	uint64		generation = CounterRightsGeneration();

	if (likely(e->allowed_user == user && e->allowed_generation == generation))
		return;
	/* a relation changed: perhaps the floor (dropped, made again) */
	if (e->allowed_generation != generation && e->catalog == COUNTER_CATALOG_1_3)
	{
		Oid			seq = CounterFloorFind(CounterFloorSchema(false), &e->name);

		if (seq != e->floor_seq)
			CounterCacheFindFloor(e);
	}
	if (!CounterCacheMayUse(e, user))
		CounterRightsDenied(NameStr(e->name));
	e->allowed_user = user;
	e->allowed_generation = generation;
}

/* ERROR: a 1.3 counter has no record of what it issued. */
static void
CounterCacheUnrecorded(const CounterEntry *e, bool missing)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("snowseq %s \"%s\" has no record of the values it issued",
					e->serial ? "serial" : "counter", NameStr(e->name)),
			 missing ?
			 errdetail("Its floor sequence in schema %s is missing: its definition was restored without it (pg_dump --table, --data-only into a database that lacked it, --exclude-schema %s), or the sequence was dropped.",
					   COUNTER_FLOOR_SCHEMA, COUNTER_FLOOR_SCHEMA) :
			 errdetail("Its definition was restored without the value of its floor sequence (pg_dump --table or --data-only without schema %s), so values it issued before could be issued again.",
					   COUNTER_FLOOR_SCHEMA),
			 errhint("Restore schema %s from the same dump, or, knowing the last value it issued, continue above it: SELECT snowseq_counter_raise('%s', last_value_issued);",
					 COUNTER_FLOOR_SCHEMA, NameStr(e->name))));
}

/* Free what an entry holds, for a reload. */
static void
CounterCacheClear(CounterEntry *e)
{
	SerialFree(&e->fmt);
	if (e->acl != NULL)
		pfree(e->acl);
	e->acl = NULL;
}

/*
 * Read the definition of counter `name` (the calling function's database)
 * into e, its allocations in cxt; false when there is none.  *dropped says
 * whether it was dropped.  The caller has connected to SPI.
 */
static bool
CounterCacheRead(Oid fn_oid, const NameData *name, CounterEntry *e, MemoryContext cxt,
				 bool *dropped)
{
	Oid			ext_nsp = ExtNamespace(fn_oid);
	char	   *table = ExtObject(fn_oid, "snowseq_counters");
	CounterCatalog catalog = CounterCacheCatalog(ext_nsp);
	Datum		arg = CStringGetTextDatum(NameStr(*name));
	Oid			argtype = TEXTOID;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	MemoryContext old;
	Oid			table_owner = CounterCacheTableOwner(ext_nsp);
	Oid			save_user;
	int			save_sec;
	int			rc;

	/* the definitions are read as the table's owner: no role needs SELECT on it */
	ExtBecome(table_owner, &save_user, &save_sec);
	rc = SPI_execute_with_args(psprintf("SELECT kind, start, nodes, restart_base, format, time_zone, dropped, %s, %s "
									   "FROM %s WHERE name OPERATOR(pg_catalog.=) $1",
									   catalog == COUNTER_CATALOG_1_2 ? "owner" : "NULL::pg_catalog.oid",
									   catalog == COUNTER_CATALOG_1_2 ? "acl" :
									   catalog == COUNTER_CATALOG_1_3 ? "maximum" : "NULL::pg_catalog.int8",
									   table),
							   1, &argtype, &arg, NULL, true, 1);
	SetUserIdAndSecContext(save_user, save_sec);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read %s", table);
	if (SPI_processed == 0)
		return false;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	*dropped = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
	e->name = *name;
	e->catalog = catalog;
	e->table_owner = table_owner;
	e->ext_nsp = ext_nsp;
	e->allowed_user = InvalidOid;
	e->serial = strcmp(SPI_getvalue(tup, desc, 1), "serial") == 0;
	e->start = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
	e->nodes = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
	e->restart_base = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
	e->owner = InvalidOid;
	e->acl = NULL;
	e->maximum = PG_INT64_MAX;
	if (catalog == COUNTER_CATALOG_1_2)
	{
		Datum		d;

		e->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 8, &isnull));
		d = SPI_getbinval(tup, desc, 9, &isnull);
		old = MemoryContextSwitchTo(cxt);
		e->acl = CounterCacheAcl(d, isnull);
		MemoryContextSwitchTo(old);
	}
	else if (catalog == COUNTER_CATALOG_1_3)
	{
		Datum		d = SPI_getbinval(tup, desc, 9, &isnull);

		if (!isnull)
			e->maximum = DatumGetInt64(d);
	}
	memset(&e->fmt, 0, sizeof(e->fmt));
	if (e->serial)
	{
		char	   *fmt = SPI_getvalue(tup, desc, 5);
		char	   *tzname = SPI_getvalue(tup, desc, 6);

		old = MemoryContextSwitchTo(cxt);
		SerialParse(fmt, tzname, &e->fmt);
		MemoryContextSwitchTo(old);
	}
	e->k_last = CounterCacheLastK(e->serial, e->start, e->nodes, e->maximum, e->fmt.number_width);
	return true;
}

/*
 * Load a definition into the cache; ERROR if there is none.  catcache.c's
 * rule: the generation is read before the definition, with the newest
 * snapshot, so a drop committed meanwhile leaves the entry stale.
 */
static CounterEntry *
CounterCacheLoad(Oid fn_oid, const NameData *name)
{
	uint64		stamp = CatCacheBeginLoad(&counter_defs, fn_oid);
	Snapshot	snapshot;
	CounterEntry *e;
	CounterEntry def;
	bool		found;
	bool		dropped = false;

	if (counter_cache == NULL)
	{
		HASHCTL		ctl;

		counter_cxt = AllocSetContextCreate(TopMemoryContext, "snowseq counters",
											ALLOCSET_SMALL_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = NAMEDATALEN;
		ctl.entrysize = sizeof(CounterEntry);
		ctl.hcxt = counter_cxt;
		counter_cache = hash_create("snowseq counters", 64, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	SNOWSEQ_TESTPOINT("counter_cache_load");
	snapshot = CatCacheSnapshot();
	SPI_connect();
	memset(&def, 0, sizeof(def));
	if (!CounterCacheRead(fn_oid, name, &def, counter_cxt, &dropped))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" does not exist", NameStr(*name)),
				 errhint("Create it with snowseq_create_counter() or snowseq_create_serial().")));
	SPI_finish();
	CatCacheSnapshotDone(snapshot);
	if (dropped)
	{
		CounterCacheClear(&def);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" was dropped", NameStr(*name)),
				 errhint("Its owner may create it again with the same definition to continue it.")));
	}

	e = hash_search(counter_cache, NameStr(*name), HASH_ENTER, &found);
	if (found)
		CounterCacheClear(e);
	*e = def;
	e->valid = false;
	e->prepared = false;

	/* its floor: where 1.3 keeps its rights and record */
	CounterCacheFindFloor(e);
	/* refused before the counter takes a place or reads its floor */
	CounterCacheCheckUse(e);
	e->version = stamp;
	e->valid = true;
	return e;
}

/*
 * The definition of counter `name` of the calling function's database,
 * dropped or not, read now (not cached), with its floor; false when there
 * is none.
 */
bool
CounterCacheReadNow(Oid fn_oid, const NameData *name, CounterEntry *e, bool *dropped)
{
	bool		found;

	memset(e, 0, sizeof(*e));
	SPI_connect();
	found = CounterCacheRead(fn_oid, name, e, CurrentMemoryContext, dropped);
	SPI_finish();
	if (found)
		CounterCacheFindFloor(e);
	return found;
}

/* May the current user use the counter of entry e (read by CounterCacheReadNow)? */
bool
CounterCacheMayUseEntry(const CounterEntry *e)
{
	return CounterCacheMayUse(e, GetUserId());
}

/*
 * The cached definition of the counter named by argument 0 of a call, the
 * current user's right to use it checked; ERROR for a definition of the
 * other kind, and (unless want is COUNTER_WANT_ANY) for one without a
 * record of what it issued.
 */
CounterEntry *
CounterCacheGet(FunctionCallInfo fcinfo, CounterWant want)
{
	CounterCallCache *cc = fcinfo->flinfo->fn_extra;
	text	   *t;
	int			len;
	CounterEntry *e = NULL;
	NameData	name;
	uint64		generation;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("counter name must not be NULL")));
	t = PG_GETARG_TEXT_PP(0);
	len = VARSIZE_ANY_EXHDR(t);
	if (cc != NULL && cc->len == len && memcmp(cc->name, VARDATA_ANY(t), len) == 0)
		e = cc->entry;
	generation = CatCacheGeneration(&counter_defs);
	if (likely(e != NULL && e->valid && e->version == generation))
	{
		CounterCacheCheckUse(e);
		if (likely(!e->unrecorded))
			return e;
	}

	CounterCacheName(t, &name);
	if (counter_cache != NULL)
		e = hash_search(counter_cache, NameStr(name), HASH_FIND, NULL);
	if (e == NULL || !e->valid || e->version != generation)
		e = CounterCacheLoad(fcinfo->flinfo->fn_oid, &name);
	CounterCacheCheckUse(e);
	if (want != COUNTER_WANT_ANY && e->serial != (want == COUNTER_WANT_SERIAL))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("snowseq counter \"%s\" is a %s", NameStr(name), e->serial ? "serial" : "counter"),
				 errhint("Use %s() for it.", e->serial ? "snowseq_serial" : "snowseq_counter_next")));
	if (unlikely(e->unrecorded))
	{
		/* its record may have arrived since (a restore's setval) */
		CounterCacheFindFloor(e);
		if (e->unrecorded && want != COUNTER_WANT_ANY)
			CounterCacheUnrecorded(e, !OidIsValid(e->floor_seq));
	}
	if (cc == NULL)
		cc = fcinfo->flinfo->fn_extra =
			MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CounterCallCache));
	cc->len = len;
	memcpy(cc->name, VARDATA_ANY(t), len);
	cc->entry = e;
	return e;
}

/*
 * May the current user see the state of counter `name` of the calling
 * function's database?  Its rights as its catalog keeps them, also for a
 * dropped counter (the cache holds live ones only); a name without a
 * definition has nothing to protect.
 */
bool
CounterCacheMayUseName(Oid fn_oid, const NameData *name)
{
	CounterEntry e;
	bool		dropped;

	if (!CounterCacheReadNow(fn_oid, name, &e, &dropped))
		return true;
	return CounterCacheMayUse(&e, GetUserId());
}
