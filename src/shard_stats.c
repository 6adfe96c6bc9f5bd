/*
 * shard_stats.c
 *		snowseq_shard_stats(parent): the rows and bytes of each piece of
 *		the routing map a partition holds, counted on the server where they
 *		live.
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/wait_event.h"

#include "gene.h"
#include "move.h"
#include "move_cleanup.h"
#include "move_common.h"
#include "move_group.h"
#include "move_orphans.h"
#include "move_plan.h"
#include "move_repl.h"
#include "move_switch.h"
#include "snowseq.h"
#include "sqlrun.h"
#include "testpoint.h"

/* An oid[] (oids) or int4[] (!oids) of a list of oids or ints. */
static ArrayType *
ListArray(List *l, bool oids)
{
	Datum	   *d = palloc(sizeof(Datum) * (list_length(l) + 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, l)
		d[n++] = oids ? ObjectIdGetDatum(lfirst_oid(lc)) : Int32GetDatum(lfirst_int(lc));
	return oids ? construct_array(d, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT) :
		construct_array(d, n, INT4OID, sizeof(int32), true, TYPALIGN_INT);
}

PG_FUNCTION_INFO_V1(snowseq_shard_stats);

/*
 * snowseq_shard_stats(parent): for each map entry and each partition it
 * overlaps, the rows and row bytes there, counted where they live.
 */
Datum
snowseq_shard_stats(PG_FUNCTION_ARGS)
{
	Oid			parent = PG_GETARG_OID(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Move	   *m;
	char	   *key;
	SPITupleTable *pieces;
	uint64		n;
	List	   *conns = NIL;
	List	   *part_oids = NIL;
	List	   *part_first = NIL;
	List	   *part_last = NIL;
	ListCell   *lc;
	Oid			arg_types[3] = {OIDARRAYOID, INT4ARRAYOID, INT4ARRAYOID};
	Datum		args[3];

	InitMaterializedSRF(fcinfo, 0);
	m = MoveNew(ExtSchemaQuoted(fcinfo->flinfo->fn_oid));
	m->parent = parent;
	SPI_connect();
	key = MoveParentKey(m);

	/* map entries cut by partitions: one row per piece */
	/* the partitions' genes, from their bounds (a default partition has none) */
	foreach(lc, MovePartBounds(parent))
	{
		MovePartBound *b = lfirst(lc);

		if (b->is_default)
			continue;
		part_oids = lappend_oid(part_oids, b->relid);
		part_first = lappend_int(part_first, b->has_lo ? GeneFromId(b->lo) : 0);
		part_last = lappend_int(part_last, b->has_hi ? GeneFromId(b->hi) - 1 : SNOWSEQ_MAX_GENE);
	}
	args[0] = PointerGetDatum(ListArray(part_oids, true));
	args[1] = PointerGetDatum(ListArray(part_first, false));
	args[2] = PointerGetDatum(ListArray(part_last, false));

	SpiRunArgs(psprintf("WITH map AS (SELECT coalesce(pg_catalog.lag(upper_gene) OVER (ORDER BY upper_gene) OPERATOR(pg_catalog.+) 1, 0) AS f, "
				 "upper_gene AS l, shard FROM %s), "
				 "parts AS (SELECT p.oid, c.relkind, p.f, p.l "
				 "FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.oid[]), pg_catalog.unnest($2::pg_catalog.int4[]), "
				 "pg_catalog.unnest($3::pg_catalog.int4[])) AS p(oid, f, l) "
				 "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.oid) "
				 "SELECT GREATEST(map.f, p.f), LEAST(map.l, p.l), map.shard, p.oid, p.relkind, "
				 "ft.ftserver, coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(ft.ftoptions) "
				 "WHERE option_name OPERATOR(pg_catalog.=) 'schema_name'), n.nspname), "
				 "coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(ft.ftoptions) "
				 "WHERE option_name OPERATOR(pg_catalog.=) 'table_name'), c.relname), "
				 "coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(a.attfdwoptions) "
				 "WHERE option_name OPERATOR(pg_catalog.=) 'column_name'), a.attname), "
				 "pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname) "
				 "FROM map LEFT JOIN parts p ON p.f OPERATOR(pg_catalog.<=) map.l AND p.l OPERATOR(pg_catalog.>=) map.f "
				 "LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.oid "
				 "LEFT JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
				 "LEFT JOIN pg_catalog.pg_foreign_table ft ON ft.ftrelid OPERATOR(pg_catalog.=) p.oid "
				 "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) p.oid AND a.attname OPERATOR(pg_catalog.=) %s "
				 "ORDER BY 1",
				 MoveExt(m, "snowseq_shard_map"), quote_literal_cstr(key)),
			   3, arg_types, args, NULL, SPI_OK_SELECT);
	pieces = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	t = pieces->vals[i];
		TupleDesc	d = pieces->tupdesc;
		bool		isnull;
		Datum		v[6];
		bool		nulls[6] = {false, false, false, false, false, false};
		int			f = DatumGetInt32(SPI_getbinval(t, d, 1, &isnull));
		int			l = DatumGetInt32(SPI_getbinval(t, d, 2, &isnull));
		Oid			part = DatumGetObjectId(SPI_getbinval(t, d, 4, &nulls[3]));
		char	   *cond;
		char	   *col = SPI_getvalue(t, d, 9);
		char	   *count_sql;

		v[0] = Int32GetDatum(f);
		v[1] = Int32GetDatum(l);
		v[2] = CStringGetTextDatum(SPI_getvalue(t, d, 3));
		v[3] = ObjectIdGetDatum(part);
		nulls[4] = nulls[5] = true;
		if (!nulls[3])
		{
			int64		end;

			cond = psprintf("%s >= " INT64_FORMAT "%s", quote_identifier(col), GeneFirstId(f),
							!GeneEndId(l, &end) ? "" :
							psprintf(" AND %s < " INT64_FORMAT, quote_identifier(col), end));
			if (DatumGetChar(SPI_getbinval(t, d, 5, &isnull)) == RELKIND_FOREIGN_TABLE)
			{
				Oid			server = DatumGetObjectId(SPI_getbinval(t, d, 6, &isnull));
				RemoteConn *rc = NULL;
				PGresult   *res;

				foreach(lc, conns)
					if (((RemoteConn *) lfirst(lc))->serverid == server)
						rc = lfirst(lc);
				if (rc == NULL)
				{
					rc = RemoteConnect(server);
					conns = lappend(conns, rc);
				}
				count_sql = psprintf("SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(pg_catalog.pg_column_size(t.*)), 0) "
									 "FROM %s t WHERE %s",
									 quote_qualified_identifier(SPI_getvalue(t, d, 7), SPI_getvalue(t, d, 8)), cond);
				res = RemoteExec(rc, count_sql, "count rows");
				v[4] = Int64GetDatum(pg_strtoint64(PQgetvalue(res, 0, 0)));
				v[5] = Int64GetDatum(pg_strtoint64(PQgetvalue(res, 0, 1)));
				nulls[4] = nulls[5] = false;
				PQclear(res);
			}
			else
			{
				SPITupleTable *saved = SPI_tuptable;

				SpiRun(psprintf("SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(pg_catalog.pg_column_size(t.*)), 0)::pg_catalog.int8 "
								"FROM %s t WHERE %s", SPI_getvalue(t, d, 10), cond), SPI_OK_SELECT);
				v[4] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
				v[5] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
				nulls[4] = nulls[5] = false;
				SPI_tuptable = saved;
			}
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	foreach(lc, conns)
		RemoteClose(lfirst(lc));
	SPI_finish();
	MemoryContextDelete(m->cxt);
	return (Datum) 0;
}
