/*
 * counter_def.c
 *		The definitions of named counters: creating, continuing, starting
 *		over and dropping a counter or a serial, granting and revoking it,
 *		and what arrives in snowseq_counters by other means (a restore).
 *
 * The definitions table is written by these functions alone, as its owner:
 * creating a counter is EXECUTE on the create functions, and the creating
 * role owns the new counter (USAGE WITH GRANT OPTION on its floor); every
 * other change of a counter is its owner's (counter_rights.c).  A row that
 * arrives without a floor, as a restore of the table alone brings it, gets
 * a floor that awaits its record (counter_floor.c).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "compat.h"
#include "counter.h"
#include "counter_cache.h"
#include "counter_floor.h"
#include "counter_rights.h"
#include "guc.h"
#include "sqlrun.h"

#define COUNTER_MAX_NODES		(1 << 20)

/* The definitions table of the calling function's schema, for SQL text. */
static char *
CounterDefTableName(Oid fn_oid)
{
	return ExtObject(fn_oid, "snowseq_counters");
}

/*
 * Run the next statements as the owner of the definitions table: the
 * functions write it for their callers, who need no right on it.
 */
static void
CounterDefAsTableOwner(Oid ext_nsp, Oid *save_user, int *save_sec)
{
	ExtBecome(ExtRelationOwner(get_relname_relid("snowseq_counters", ext_nsp)), save_user, save_sec);
}

/* ERROR unless user owns the counter whose floor is seq. */
static void
CounterDefCheckOwner(Oid seq, Oid user, const NameData *name, const char *what)
{
	if (!CounterRightsIsOwner(seq, user))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of counter \"%s\" to %s it", NameStr(*name), what),
				 errhint("Its owner, a role with its owner's privileges, or a superuser may; the owner holds USAGE WITH GRANT OPTION on its floor %s.",
						 CounterFloorQualified(seq))));
}

/*
 * A counter of this name has no definition row: what its floor and its
 * reservation say it issued decides.  Returns its restart_base (the raw
 * counter when it starts over) and whether its floor must start over;
 * ERROR when values it issued could be issued again, or when the caller
 * does not own the counter it would continue.
 */
static int64
CounterDefFresh(Oid floor_nsp, bool owned, Oid creator, const NameData *name, bool serial,
				const char *comment, bool restart, bool *replace)
{
	Oid			seq = CounterFloorFind(floor_nsp, name);
	uint64		taken = CounterTaken(name);

	*replace = false;
	if (OidIsValid(seq))
	{
		int64		floor;
		CounterFloorState state = CounterFloorRead(seq, &floor);
		char	   *had = CounterFloorCommentOf(seq);

		if (owned)
			CounterDefCheckOwner(seq, creator, name, restart ? "start over" : "continue");
		if (restart)
		{
			*replace = true;
			return (int64) taken;
		}
		if (state == COUNTER_FLOOR_SET && floor != COUNTER_FLOOR_NONE &&
			(had == NULL || strcmp(had, comment) != 0))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("snowseq counter \"%s\" issued values before as another kind or format",
							NameStr(*name)),
					 errdetail("Its floor says: %s.", had ? had : "(nothing)"),
					 errhint(serial ?
							 "Create the serial with the format it had to continue it, or create a serial under a new name." :
							 "Create it as the kind it was to continue it, or pass restart => true to start it over and issue its old values again.")));
		/* continued above its floor when loaded */
		return 0;
	}
	if (taken == 0)
		return 0;
	if (restart)
		return (int64) taken;
	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("snowseq counter \"%s\" issued values before, under a definition that is gone",
					NameStr(*name)),
			 errdetail("Its reservation in this database has taken values, but no floor says which, so a new definition could issue them again."),
			 errhint(serial ? "Create a serial under a new name." :
					 "Pass restart => true to start it over and issue its old values again, or create a counter under a new name.")));
	return 0;					/* keep the compiler quiet */
}

/*
 * Create a counter or a serial, or continue a dropped one with the same
 * definition, or, with restart, start it over.  Its place among the
 * reservations and its floor are taken here, not at first use; the
 * creating role owns a new counter.  Needs a 1.3 catalog (the functions
 * of older ones reach the older rules through their own SQL).
 */
static void
CounterDefCreate(FunctionCallInfo fcinfo, bool serial, NameData *name, int64 start, int32 nodes,
			  int64 maximum, const char *format, const char *tzname, bool restart)
{
	Oid			ext_nsp = ExtNamespace(fcinfo->flinfo->fn_oid);
	char	   *table = CounterDefTableName(fcinfo->flinfo->fn_oid);
	CounterCatalog catalog = CounterCacheCatalog(ext_nsp);
	Oid			types[8] = {TEXTOID, TEXTOID, INT8OID, INT4OID, TEXTOID, TEXTOID, INT8OID, INT8OID};
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	const char *kind = serial ? "serial" : "counter";
	char	   *comment = CounterFloorComment(name, serial, format);
	bool		replace = false;
	bool		fresh_floor;
	bool		row_existed;
	Reservation *r;
	CounterEntry def;
	Oid			floor_nsp;
	Oid			seq;
	Oid			creator = GetUserId();
	Oid			save_user = InvalidOid;
	int			save_sec = 0;

	if (start < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start must not be negative, not %lld", (long long) start)));
	if (nodes < 1 || nodes > COUNTER_MAX_NODES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("nodes must be between 1 and %d, not %d", COUNTER_MAX_NODES, nodes),
				 errhint("nodes is how many servers interleave their values: each takes every nodes-th value, offset by its node id.")));
	ShmemCheckPreloaded();
	memset(&def, 0, sizeof(def));
	def.serial = serial;
	def.start = start;
	def.nodes = nodes;
	def.maximum = maximum;
	if (serial)
		SerialParse(format, tzname, &def.fmt);
	if (CounterCacheLastK(serial, start, nodes, maximum, def.fmt.number_width) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 serial ?
				 errmsg("the first number of serial \"%s\", %lld, does not fit in the %d digits of its format",
						NameStr(*name), (long long) start + snowseq_node_id % nodes, def.fmt.number_width) :
				 errmsg("the first value of counter \"%s\", %lld, is above its maximum %lld",
						NameStr(*name), (long long) start + snowseq_node_id % nodes, (long long) maximum),
				 errhint(serial ? "Give the format more digits, or start lower." :
						 "Start lower, or raise the maximum.")));
	if (catalog != COUNTER_CATALOG_1_3 && maximum != PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("counters of this database have no maximum: its snowseq catalog is older than 1.3"),
				 errhint("Update the extension: ALTER EXTENSION snowseq UPDATE.")));

	values[0] = CStringGetTextDatum(NameStr(*name));
	values[1] = CStringGetTextDatum(kind);
	values[2] = Int64GetDatum(start);
	values[3] = Int32GetDatum(nodes);
	values[4] = serial ? CStringGetTextDatum(format) : (Datum) 0;
	values[5] = serial ? CStringGetTextDatum(tzname) : (Datum) 0;
	nulls[4] = nulls[5] = serial ? ' ' : 'n';
	values[7] = Int64GetDatum(maximum);
	nulls[7] = maximum == PG_INT64_MAX ? 'n' : ' ';

	/* one maker at a time: the floor and the row are decided together */
	LockRelationOid(get_relname_relid("snowseq_counters", ext_nsp), ShareUpdateExclusiveLock);
	floor_nsp = CounterFloorSchema(true);
	fresh_floor = !OidIsValid(CounterFloorFind(floor_nsp, name));
	/*
	 * 1.3 writes the table as its owner; older catalogs as the caller,
	 * whose rights on the table decided then (a 1.2 row names its owner)
	 */
	if (catalog == COUNTER_CATALOG_1_3)
		CounterDefAsTableOwner(ext_nsp, &save_user, &save_sec);
	SPI_connect();
	SpiRunArgs(psprintf("SELECT kind, start, nodes, format, time_zone, dropped, restart_base, %s FROM %s "
						"WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE",
						catalog == COUNTER_CATALOG_1_3 ? "maximum" : "NULL::pg_catalog.int8", table),
			   1, types, values, nulls, SPI_OK_SELECT);
	row_existed = SPI_processed > 0;
	if (!row_existed)
	{
		def.restart_base = CounterDefFresh(floor_nsp, catalog == COUNTER_CATALOG_1_3, creator, name,
										   serial, comment, restart, &replace);
		values[6] = Int64GetDatum(def.restart_base);
		if (catalog == COUNTER_CATALOG_1_2)
		{
			types[7] = REGROLEOID;
			values[7] = ObjectIdGetDatum(creator);
			nulls[7] = ' ';
		}
		SpiRunArgs(psprintf("INSERT INTO %s (name, kind, start, nodes, format, time_zone, restart_base%s) "
							"VALUES ($1, $2, $3, $4, $5, $6, $7%s)", table,
							catalog == COUNTER_CATALOG_1_3 ? ", maximum" :
							catalog == COUNTER_CATALOG_1_2 ? ", owner" : "",
							catalog == COUNTER_CATALOG_1_1 ? "" : ", $8"),
				   catalog == COUNTER_CATALOG_1_1 ? 7 : 8, types, values, nulls, SPI_OK_INSERT);
	}
	else
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *old_format = SPI_getvalue(tup, desc, 4);
		char	   *old_tz = SPI_getvalue(tup, desc, 5);
		Datum		old_max = SPI_getbinval(tup, desc, 8, &isnull);
		bool		same = strcmp(SPI_getvalue(tup, desc, 1), kind) == 0 &&
			DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull)) == start &&
			DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull)) == nodes &&
			((old_format == NULL && format == NULL) ||
			 (old_format && format && strcmp(old_format, format) == 0)) &&
			((old_tz == NULL && tzname == NULL) || (old_tz && tzname && strcmp(old_tz, tzname) == 0));
		Oid			old_seq = CounterFloorFind(floor_nsp, name);

		(void) SPI_getbinval(tup, desc, 8, &isnull);
		same = same && (isnull ? maximum == PG_INT64_MAX : DatumGetInt64(old_max) == maximum);
		if (!DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull)))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("snowseq counter \"%s\" already exists", NameStr(*name))));
		if (OidIsValid(old_seq) && catalog == COUNTER_CATALOG_1_3)
			CounterDefCheckOwner(old_seq, creator, name, restart ? "start over" : "continue");
		def.restart_base = DatumGetInt64(SPI_getbinval(tup, desc, 7, &isnull));
		if (same && !restart)
			SpiRunArgs(psprintf("UPDATE %s SET dropped = false WHERE name OPERATOR(pg_catalog.=) $1", table),
					   1, types, values, nulls, SPI_OK_UPDATE);
		else if (!restart)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("a dropped snowseq counter \"%s\" had another definition", NameStr(*name)),
					 errdetail("Continuing it under another start, node count, maximum, format or time zone could issue its values again."),
					 errhint("Create it with the definition it had to continue it, or pass restart => true to start it over and issue its old values again.")));
		else if (serial)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a serial cannot start over"),
					 errhint("Create a serial under a new name.")));
		else
		{
			/* start over above what was taken: restart_base is its counter */
			Datum		base = Int64GetDatum((int64) CounterTaken(name));
			Oid			btypes[6] = {TEXTOID, INT8OID, INT8OID, INT4OID, TEXTOID, INT8OID};
			Datum		bvalues[6] = {values[0], base, values[2], values[3], values[1], values[7]};
			char		bnulls[6] = {' ', ' ', ' ', ' ', ' ', nulls[7]};

			def.restart_base = DatumGetInt64(base);
			replace = true;
			SpiRunArgs(psprintf("UPDATE %s SET dropped = false, restart_base = $2, start = $3, nodes = $4, "
								"kind = $5, format = NULL, time_zone = NULL%s "
								"WHERE name OPERATOR(pg_catalog.=) $1", table,
								catalog == COUNTER_CATALOG_1_3 ? ", maximum = $6" : ""),
					   catalog == COUNTER_CATALOG_1_3 ? 6 : 5, btypes, bvalues, bnulls, SPI_OK_UPDATE);
		}
	}
	if (!CounterHasRoom(name, table, floor_nsp))
		CounterNoRoom(name);
	SPI_finish();
	if (catalog == COUNTER_CATALOG_1_3)
		SetUserIdAndSecContext(save_user, save_sec);

	/*
	 * Its place, and, for a new counter or one that starts over, a floor
	 * covering what its reservation allows so far.  A floor it had keeps
	 * its value (one that awaits its record stays so): a definition other
	 * than the one it was written under is raised above it when loaded.
	 */
	r = CounterReservation(name);
	if (replace || fresh_floor)
	{
		/* a row without its floor is a restore's: it awaits its record */
		seq = CounterFloorMake(floor_nsp, name, comment,
							   replace || !row_existed || catalog != COUNTER_CATALOG_1_3,
							   CounterRecordOf(&def, pg_atomic_read_u64(&r->bound)), replace);
		if (fresh_floor && catalog == COUNTER_CATALOG_1_3)
			CounterRightsSetOwner(seq, creator);
	}
	SerialFree(&def.fmt);
}

PG_FUNCTION_INFO_V1(snowseq_create_counter);
PG_FUNCTION_INFO_V1(snowseq_create_counter_1_3);
PG_FUNCTION_INFO_V1(snowseq_create_serial);
PG_FUNCTION_INFO_V1(snowseq_drop_counter);
PG_FUNCTION_INFO_V1(snowseq_counters_changed);

/* ERROR for a NULL argument that must have a value. */
static void
CounterDefRequire(FunctionCallInfo fcinfo, int arg, const char *what)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
}

/*
 * snowseq_create_counter(name, start, nodes, restart[, maximum]): the C
 * symbol of 1.3's five arguments, and snowseq_create_counter of the four
 * before it (a database not yet updated calls that one).
 */
static Datum
CounterDefCreateCall(FunctionCallInfo fcinfo, bool has_maximum)
{
	NameData	name;
	int64		maximum = PG_INT64_MAX;

	CounterDefRequire(fcinfo, 0, "counter name");
	CounterDefRequire(fcinfo, 1, "start");
	CounterDefRequire(fcinfo, 2, "nodes");
	CounterDefRequire(fcinfo, 3, "restart");
	if (has_maximum && !PG_ARGISNULL(4))
		maximum = PG_GETARG_INT64(4);
	CounterCacheName(PG_GETARG_TEXT_PP(0), &name);
	CounterDefCreate(fcinfo, false, &name, PG_GETARG_INT64(1), PG_GETARG_INT32(2), maximum, NULL, NULL,
				  PG_GETARG_BOOL(3));
	PG_RETURN_VOID();
}

Datum
snowseq_create_counter_1_3(PG_FUNCTION_ARGS)
{
	return CounterDefCreateCall(fcinfo, true);
}

Datum
snowseq_create_counter(PG_FUNCTION_ARGS)
{
	return CounterDefCreateCall(fcinfo, false);
}

/* snowseq_create_serial(name, format, time_zone, start, nodes) */
Datum
snowseq_create_serial(PG_FUNCTION_ARGS)
{
	NameData	name;

	CounterDefRequire(fcinfo, 0, "serial name");
	CounterDefRequire(fcinfo, 1, "format");
	CounterDefRequire(fcinfo, 2, "time_zone");
	CounterDefRequire(fcinfo, 3, "start");
	CounterDefRequire(fcinfo, 4, "nodes");
	CounterCacheName(PG_GETARG_TEXT_PP(0), &name);
	CounterDefCreate(fcinfo, true, &name, PG_GETARG_INT64(3), PG_GETARG_INT32(4), PG_INT64_MAX,
				  text_to_cstring(PG_GETARG_TEXT_PP(1)), text_to_cstring(PG_GETARG_TEXT_PP(2)), false);
	PG_RETURN_VOID();
}

/*
 * snowseq_drop_counter(name): no more values; its place and its values are
 * kept.  Its owner may (1.3); in older catalogs whoever may update the
 * definitions table.
 */
Datum
snowseq_drop_counter(PG_FUNCTION_ARGS)
{
	NameData	name;
	Oid			ext_nsp = ExtNamespace(fcinfo->flinfo->fn_oid);
	char	   *table = CounterDefTableName(fcinfo->flinfo->fn_oid);
	Oid			type = TEXTOID;
	Datum		value;
	Oid			save_user;
	int			save_sec;
	bool		as_owner = CounterCacheCatalog(ext_nsp) == COUNTER_CATALOG_1_3;

	CounterDefRequire(fcinfo, 0, "counter name");
	CounterCacheName(PG_GETARG_TEXT_PP(0), &name);
	value = CStringGetTextDatum(NameStr(name));
	if (as_owner)
	{
		Oid			seq = CounterFloorFind(CounterFloorSchema(false), &name);

		if (OidIsValid(seq))
			CounterDefCheckOwner(seq, GetUserId(), &name, "drop");
		else if (!SnowseqClassOwnercheck(get_relname_relid("snowseq_counters", ext_nsp), GetUserId()))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be owner of counter \"%s\" to drop it", NameStr(name)),
					 errhint("It has no floor, so no owner: the owner of snowseq_counters may drop it.")));
		CounterDefAsTableOwner(ext_nsp, &save_user, &save_sec);
	}
	SPI_connect();
	if (SpiRunArgs(psprintf("UPDATE %s SET dropped = true WHERE name OPERATOR(pg_catalog.=) $1 AND NOT dropped",
							table), 1, &type, &value, NULL, SPI_OK_UPDATE) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" does not exist", NameStr(name))));
	SPI_finish();
	if (as_owner)
		SetUserIdAndSecContext(save_user, save_sec);
	PG_RETURN_VOID();
}

/*
 * Trigger on the definitions: tell every backend to reload them, and (1.3)
 * give a definition that arrives without a floor, as a restore of the
 * table alone brings it, a floor that awaits its record: the counter is
 * refused until the dump's setval() or snowseq_counter_raise() writes it.
 */
Datum
snowseq_counters_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "snowseq_counters_changed must be called as a trigger");
	CacheInvalidateRelcache(td->tg_relation);
	if (TRIGGER_FIRED_FOR_ROW(td->tg_event) && TRIGGER_FIRED_BY_INSERT(td->tg_event) &&
		CounterCacheCatalog(RelationGetNamespace(td->tg_relation)) == COUNTER_CATALOG_1_3)
	{
		bool		isnull;
		Datum		d = heap_getattr(td->tg_trigtuple, 1, RelationGetDescr(td->tg_relation), &isnull);
		Datum		k = heap_getattr(td->tg_trigtuple, 2, RelationGetDescr(td->tg_relation), &isnull);
		Datum		fmt = heap_getattr(td->tg_trigtuple, 5, RelationGetDescr(td->tg_relation), &isnull);
		NameData	name;
		bool		serial = strcmp(TextDatumGetCString(k), "serial") == 0;
		Oid			nsp;

		CounterCacheName(DatumGetTextPP(d), &name);
		LockRelationOid(RelationGetRelid(td->tg_relation), ShareUpdateExclusiveLock);
		nsp = CounterFloorSchema(true);
		if (!OidIsValid(CounterFloorFind(nsp, &name)))
			(void) CounterFloorMake(nsp, &name,
									CounterFloorComment(&name, serial, isnull ? NULL : TextDatumGetCString(fmt)),
									false, 0, false);
	}
	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(snowseq_grant_counter);
PG_FUNCTION_INFO_V1(snowseq_revoke_counter);

/*
 * Grant or revoke USAGE of a counter (drawing values, raising it, seeing
 * its state) to a role or PUBLIC: a GRANT or REVOKE on its floor, made by
 * the calling role, which must own the counter.  A revoke holds from the
 * next call of every session (the floor's invalidation reaches them).
 */
static void
CounterDefGrant(FunctionCallInfo fcinfo, bool grant)
{
	NameData	name;
	char	   *role;
	Oid			grantee;
	Oid			seq;

	CounterDefRequire(fcinfo, 0, "counter name");
	CounterDefRequire(fcinfo, 1, "role");
	CounterCacheName(PG_GETARG_TEXT_PP(0), &name);
	role = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (pg_strcasecmp(role, "public") == 0)
		grantee = ACL_ID_PUBLIC;
	else if (!OidIsValid(grantee = get_role_oid(role, true)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" does not exist", role),
				 errhint("Name a role as pg_roles.rolname has it (not quoted), or 'public'.")));
	if (CounterCacheCatalog(ExtNamespace(fcinfo->flinfo->fn_oid)) != COUNTER_CATALOG_1_3)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the counters of this database are of an older snowseq release"),
				 errhint("Update the extension: ALTER EXTENSION snowseq UPDATE.")));
	seq = CounterFloorFind(CounterFloorSchema(false), &name);
	if (!OidIsValid(seq))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" has no floor to grant it on", NameStr(name)),
				 errhint("Create it with snowseq_create_counter() or snowseq_create_serial(); a restored one gets its floor from the same dump, or from snowseq_counter_raise().")));
	CounterDefCheckOwner(seq, GetUserId(), &name, grant ? "grant" : "revoke");
	CounterRightsGrant(seq, grantee, grant);
}

/* snowseq_grant_counter(name, role): role (or PUBLIC) may use the counter. */
Datum
snowseq_grant_counter(PG_FUNCTION_ARGS)
{
	CounterDefGrant(fcinfo, true);
	PG_RETURN_VOID();
}

/* snowseq_revoke_counter(name, role): role (or PUBLIC) may no longer use it. */
Datum
snowseq_revoke_counter(PG_FUNCTION_ARGS)
{
	CounterDefGrant(fcinfo, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(snowseq_counters_to_1_3);

/*
 * snowseq_counters_to_1_3() -> integer: the update to 1.3 moves every
 * counter's record and rights onto a floor in snowseq_state: the floor
 * covers the higher of its old floor in the extension's schema and a floor
 * made there already (without either, what this cluster's reservation
 * allowed), and the next load raises the reservation above it; the
 * row's owner gets USAGE WITH GRANT OPTION, its grantees USAGE from the
 * owner; the old floor is dropped.  Called by the update script alone
 * (created, called and dropped there), between adding the column maximum
 * and dropping the columns owner and acl.  Returns the counters moved.
 */
Datum
snowseq_counters_to_1_3(PG_FUNCTION_ARGS)
{
	Oid			ext_nsp = ExtNamespace(fcinfo->flinfo->fn_oid);
	char	   *table = CounterDefTableName(fcinfo->flinfo->fn_oid);
	Oid			floor_nsp;
	MemoryContext cxt = CurrentMemoryContext;
	int			n;
	int			moved = 0;
	CounterEntry *defs;
	Oid		   *owners;
	Acl		  **acls;

	LockRelationOid(get_relname_relid("snowseq_counters", ext_nsp), ShareUpdateExclusiveLock);
	floor_nsp = CounterFloorSchema(true);
	SPI_connect();
	n = (int) SpiRun(psprintf("SELECT name, kind, start, nodes, restart_base, format, owner, acl FROM %s",
							  table), SPI_OK_SELECT);
	defs = MemoryContextAllocZero(cxt, sizeof(CounterEntry) * Max(n, 1));
	owners = MemoryContextAllocZero(cxt, sizeof(Oid) * Max(n, 1));
	acls = MemoryContextAllocZero(cxt, sizeof(Acl *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;
		char	   *fmt = SPI_getvalue(tup, desc, 6);
		MemoryContext old = MemoryContextSwitchTo(cxt);

		strlcpy(NameStr(defs[i].name), SPI_getvalue(tup, desc, 1), NAMEDATALEN);
		defs[i].serial = strcmp(SPI_getvalue(tup, desc, 2), "serial") == 0;
		defs[i].start = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		defs[i].nodes = DatumGetInt32(SPI_getbinval(tup, desc, 4, &isnull));
		defs[i].restart_base = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
		defs[i].fmt.format = fmt ? pstrdup(fmt) : NULL;
		d = SPI_getbinval(tup, desc, 7, &isnull);
		owners[i] = isnull ? InvalidOid : DatumGetObjectId(d);
		d = SPI_getbinval(tup, desc, 8, &isnull);
		acls[i] = isnull ? NULL : DatumGetAclPCopy(d);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();

	for (int i = 0; i < n; i++)
	{
		CounterEntry *e = &defs[i];
		Oid			legacy = CounterFloorFindLegacy(ext_nsp, &e->name);
		Oid			seq = CounterFloorFind(floor_nsp, &e->name);
		int64		value = COUNTER_FLOOR_NONE;
		int64		f;
		bool		made = !OidIsValid(seq);
		bool		recorded = false;

		/*
		 * The floors as they are (each load raises the reservation above a
		 * floor it did not write itself); without any, what this cluster's
		 * reservation allowed
		 */
		if (OidIsValid(legacy) && CounterFloorRead(legacy, &f) == COUNTER_FLOOR_SET)
			value = Max(value, f), recorded = true;
		if (OidIsValid(seq) && CounterFloorRead(seq, &f) == COUNTER_FLOOR_SET)
			value = Max(value, f), recorded = true;
		if (!recorded)
			value = CounterRecordOf(e, CounterTaken(&e->name));
		seq = CounterFloorMake(floor_nsp, &e->name,
							   CounterFloorComment(&e->name, e->serial, e->fmt.format),
							   true, value, false);
		if (OidIsValid(owners[i]) && SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owners[i])))
		{
			Oid			save_user;
			int			save_sec;

			if (made)
				CounterRightsSetOwner(seq, owners[i]);
			/* the grants, as the owner made them */
			ExtBecome(owners[i], &save_user, &save_sec);
			for (int j = 0; acls[i] != NULL && j < ACL_NUM(acls[i]); j++)
			{
				AclItem    *item = &ACL_DAT(acls[i])[j];

				if ((ACLITEM_GET_PRIVS(*item) & ACL_USAGE) == 0 ||
					(item->ai_grantee != ACL_ID_PUBLIC &&
					 !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(item->ai_grantee))))
					continue;
				CounterRightsGrant(seq, item->ai_grantee, true);
			}
			SetUserIdAndSecContext(save_user, save_sec);
		}
		if (OidIsValid(legacy))
			CounterFloorDrop(legacy);
		moved++;
	}
	PG_RETURN_INT32(moved);
}
