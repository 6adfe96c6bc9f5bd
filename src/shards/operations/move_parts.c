/*
 * move_parts.c
 *		Elastic shards: a parent's partitions as moves and merges read them.
 *
 * On the router: the partitions of a parent and their bounds, the genes
 * each holds, the parent's partition key and columns, and what a foreign
 * partition reads (its postgres_fdw server, the table and ID column there,
 * its options).  Planning a move (move_plan.c), a merge (merge.c), the
 * placement group, the switch and the views all start from these.
 */
#include "postgres.h"

#include "access/table.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "nodes/parsenodes.h"
#include "partitioning/partdesc.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "gene.h"
#include "move_common.h"
#include "move_parts.h"
#include "sqlrun.h"

/*
 * The partitions of a parent and their bounds, read once from the
 * parent's partition descriptor and each partition's PartitionBoundSpec:
 * a list of MovePartBound, in bound order.  Partitions being detached are
 * left out, as the descriptor omits them for an active snapshot.
 */
List *
MovePartBounds(Oid parent)
{
	Relation	rel = table_open(parent, AccessShareLock);
	bool		pushed = false;
	PartitionDesc pd;
	List	   *parts = NIL;

	/* not partitioned: no partitions (MoveParentKey says why, where it matters) */
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
	{
		table_close(rel, NoLock);
		return NIL;
	}
	if (!ActiveSnapshotSet())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pushed = true;
	}
	pd = RelationGetPartitionDesc(rel, true);
	for (int i = 0; i < pd->nparts; i++)
	{
		MovePartBound *b = palloc0(sizeof(MovePartBound));
		HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(pd->oids[i]));
		Datum		d;
		bool		isnull;
		PartitionBoundSpec *spec;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for relation %u", pd->oids[i]);
		d = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relpartbound, &isnull);
		if (isnull)
			elog(ERROR, "partition %u has no bound", pd->oids[i]);
		spec = castNode(PartitionBoundSpec, stringToNode(TextDatumGetCString(d)));
		ReleaseSysCache(tup);
		b->relid = pd->oids[i];
		b->relkind = get_rel_relkind(b->relid);
		b->is_default = spec->is_default;
		if (!spec->is_default && spec->strategy == PARTITION_STRATEGY_RANGE)
		{
			PartitionRangeDatum *lo = linitial_node(PartitionRangeDatum, spec->lowerdatums);
			PartitionRangeDatum *hi = linitial_node(PartitionRangeDatum, spec->upperdatums);

			b->has_lo = lo->kind == PARTITION_RANGE_DATUM_VALUE;
			if (b->has_lo)
				b->lo = DatumGetInt64(castNode(Const, lo->value)->constvalue);
			b->has_hi = hi->kind == PARTITION_RANGE_DATUM_VALUE;
			if (b->has_hi)
				b->hi = DatumGetInt64(castNode(Const, hi->value)->constvalue);
		}
		parts = lappend(parts, b);
	}
	if (pushed)
		PopActiveSnapshot();
	table_close(rel, NoLock);
	return parts;
}

/* The parent's partition key column; errors if it is not gene-partitionable. */
char *
MoveParentKey(Move *m)
{
	Relation	rel = table_open(m->parent, AccessShareLock);
	PartitionKey key;
	char	   *col;

	m->parent_rel = MemoryContextStrdup(m->op.cxt, RelationGetRelationName(rel));
	m->parent_q = MemoryContextStrdup(m->op.cxt,
									  quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
																 m->parent_rel));
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" is not partitioned", m->parent_rel),
				 errhint("Moves take genes of a table partitioned by range on its bigint ID.")));
	key = RelationGetPartitionKey(rel);
	if (key->strategy != PARTITION_STRATEGY_RANGE || key->partnatts != 1 ||
		key->partattrs[0] == 0 || key->parttypid[0] != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("table \"%s\" must be partitioned by range on one bigint column", m->parent_rel),
				 errhint("Moves take genes of a table partitioned by range on its bigint ID.")));
	col = MemoryContextStrdup(m->op.cxt, get_attname(m->parent, key->partattrs[0], false));
	table_close(rel, NoLock);
	return col;
}

/*
 * The genes of a partition of m's parent: no default partition, bounds on
 * gene boundaries (moves and merges keep every gene in a partition of its
 * own range).
 */
void
MovePartGenes(Move *m, MovePartBound *b, int *first, int *last)
{
	char	   *name = get_rel_name(b->relid);

	if (b->is_default)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has a default partition, \"%s\"", m->parent_rel, name),
				 errhint("Moves and merges keep every gene in a partition of its own range: detach the default partition first.")));
	if (!GenesOfAlignedIds(b->has_lo, b->lo, b->has_hi, b->hi, first, last))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("partition \"%s\" of table \"%s\" is not aligned on gene boundaries", name, m->parent_rel),
				 errhint("Bounds of gene-range partitions are multiples of 2^48.")));
}

/*
 * The columns of m's parent as a foreign table on a new table of its
 * partitions lists them (names, types, collations, NOT NULL).
 */
char *
MoveParentColumns(Move *m)
{
	return SpiValue(m->op.cxt, psprintf(
									 "SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname) OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) "
									 "pg_catalog.format_type(a.atttypid, a.atttypmod) OPERATOR(pg_catalog.||) "
									 "CASE WHEN a.attcollation OPERATOR(pg_catalog.<>) t.typcollation "
									 "THEN ' COLLATE ' OPERATOR(pg_catalog.||) a.attcollation::pg_catalog.regcollation::text ELSE '' END "
									 "OPERATOR(pg_catalog.||) CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY a.attnum) "
									 "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid "
									 "WHERE a.attrelid OPERATOR(pg_catalog.=) %u AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped",
									 m->parent));
}

/*
 * The options of a foreign table of the router other than its remote
 * schema and table, as ", name 'value', ..." (or NULL), and its column
 * options as ", ALTER COLUMN c OPTIONS (...), ..." (or NULL), for another
 * foreign table that reads the same server the same way.
 */
void
MoveForeignOptions(Move *m, Oid rel, char **opts, char **colopts)
{
	char	   *relid = psprintf("%u", rel);

	/* text for the OPTIONS clauses of a new foreign table (DDL): values quoted as its literals */
	*opts = SpiValueParams(m->op.cxt, "SELECT pg_catalog.string_agg(pg_catalog.format(', %I %L', option_name, option_value), '') "
						   "FROM pg_catalog.pg_options_to_table((SELECT ftoptions FROM pg_catalog.pg_foreign_table "
						   "WHERE ftrelid OPERATOR(pg_catalog.=) $1::pg_catalog.oid)) "
						   "WHERE option_name OPERATOR(pg_catalog.<>) ALL (ARRAY['schema_name', 'table_name'])",
						   SQL_ARGS(relid));
	*colopts = SpiValueParams(m->op.cxt, "SELECT pg_catalog.string_agg(', ALTER COLUMN ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(a.attname) "
							  "OPERATOR(pg_catalog.||) ' OPTIONS (' OPERATOR(pg_catalog.||) (SELECT pg_catalog.string_agg("
							  "pg_catalog.format('%I %L', o.option_name, o.option_value), ', ') "
							  "FROM pg_catalog.pg_options_to_table(a.attfdwoptions) o) "
							  "OPERATOR(pg_catalog.||) ')', '') FROM pg_catalog.pg_attribute a "
							  "WHERE a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.oid AND a.attfdwoptions IS NOT NULL AND NOT a.attisdropped",
							  SQL_ARGS(relid));
}

/*
 * The foreign server a foreign partition reads (part_name as messages name
 * the partition), which must be a postgres_fdw server: moves and the
 * histogram reach no other.
 */
ForeignServer *
MovePartitionServer(Oid part, const char *part_name)
{
	ForeignServer *server = GetForeignServer(GetForeignTable(part)->serverid);

	if (strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "postgres_fdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("partition %s reads server \"%s\", which is not a postgres_fdw server",
						part_name, server->servername)));
	return server;
}

/*
 * The table a foreign partition reads on its server (schema and name) and
 * the column there of its column key, as postgres_fdw resolves them: the
 * table's schema_name and table_name options, the column's column_name,
 * else the local names.
 */
void
MoveForeignNames(Oid part, const char *key, char **schema, char **table, char **col)
{
	ForeignTable *ft = GetForeignTable(part);
	ListCell   *lc;

	*schema = NULL;
	*table = NULL;
	*col = pstrdup(key);
	foreach(lc, ft->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "schema_name") == 0)
			*schema = defGetString(d);
		else if (strcmp(d->defname, "table_name") == 0)
			*table = defGetString(d);
	}
	if (*schema == NULL)
		*schema = get_namespace_name(get_rel_namespace(part));
	if (*table == NULL)
		*table = get_rel_name(part);
	foreach(lc, GetForeignColumnOptions(part, get_attnum(part, key)))
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "column_name") == 0)
			*col = defGetString(d);
	}
}

/*
 * The CHECK constraints of a parent (those its partitions inherit) on a new
 * foreign table, so that it can be attached: ATTACH PARTITION wants each.
 */
void
MoveForeignChecks(const char *parent_q, const char *new_part_q)
{
	List	   *adds = NIL;
	ListCell   *lc;

	SpiRunParams("SELECT pg_catalog.format('ADD CONSTRAINT %I %s', conname, pg_catalog.pg_get_constraintdef(oid)) "
				 "FROM pg_catalog.pg_constraint WHERE conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
				 "AND contype OPERATOR(pg_catalog.=) 'c' AND NOT connoinherit ORDER BY conname",
				 SQL_ARGS(parent_q), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
		adds = lappend(adds, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	foreach(lc, adds)
		SpiRun(psprintf("ALTER FOREIGN TABLE %s %s", new_part_q, (char *) lfirst(lc)), SPI_OK_UTILITY);
}
