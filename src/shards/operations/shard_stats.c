/*
 * shard_stats.c
 *		snowseq_shard_stats(parent): the rows and bytes of each piece of
 *		the routing map a partition holds, counted on the server where they
 *		live, and the writes and reads of the partition's table there, from
 *		that server's cumulative statistics; and snowseq_shard_counters(parent):
 *		those writes and reads alone, per partition, without counting a row
 *		and without keeping a lock on the parent.
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "access/transam.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "gene.h"
#include "move.h"
#include "move_cleanup.h"
#include "move_common.h"
#include "move_group.h"
#include "move_orphans.h"
#include "move_parts.h"
#include "move_repl.h"
#include "move_switch.h"
#include "route.h"
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

/* What a call of ShardStatsRun reads and returns. */
typedef enum ShardStatsMode
{
	SHARD_STATS_ROWS,			/* snowseq_shard_stats up to 1.2: rows, bytes */
	SHARD_STATS_ACCESS,			/* from 1.3 on: rows, bytes, writes, reads */
	SHARD_STATS_COUNTERS		/* snowseq_shard_counters: writes, reads */
} ShardStatsMode;

/* Per mode: the SQL function and its number of columns. */
static const struct
{
	const char *function;
	int			ncols;
}			ShardStatsModes[] =
{
	[SHARD_STATS_ROWS] = {"snowseq_shard_stats", 6},
	[SHARD_STATS_ACCESS] = {"snowseq_shard_stats", 8},
	[SHARD_STATS_COUNTERS] = {"snowseq_shard_counters", 4},
};

#define SHARD_STATS_COLS 8

/*
 * The writes and reads of a table from the cumulative statistics of its
 * server: rows inserted, updated and deleted; rows read by sequential scans
 * and fetched by index scans.  $1: the table's name.
 */
#define SHARD_STATS_ACCESS_SQL \
	"SELECT s.n_tup_ins OPERATOR(pg_catalog.+) s.n_tup_upd OPERATOR(pg_catalog.+) s.n_tup_del, " \
	"s.seq_tup_read OPERATOR(pg_catalog.+) coalesce(s.idx_tup_fetch, 0) " \
	"FROM pg_catalog.pg_stat_all_tables s WHERE s.relid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"

/*
 * One past the latest transaction a server has completed (as xid8): a row
 * version whose xmin is at least this one was written by a transaction that
 * got its id after the reading.
 */
#define SHARD_STATS_NEXT_XID_SQL \
	"SELECT CAST(CAST(pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()) AS pg_catalog.text) AS pg_catalog.int8)"

/* One row of the result before a partition's writes and reads are shared out. */
typedef struct ShardStatsPiece
{
	int			first;
	int			last;
	char	   *shard;
	Oid			part;			/* InvalidOid: no partition holds the genes */
	int64		rows;
	int64		bytes;
	int64		part_writes;	/* of the whole partition */
	int64		part_reads;
	int64		next_xid;		/* SHARD_STATS_COUNTERS: its server's, at the reading */
} ShardStatsPiece;

/*
 * A piece's share of what its partition counts: in proportion to the rows
 * of the partition it holds, or to its genes where the partition holds no
 * rows.  Shares are rounded by their running sums, so the pieces of a
 * partition add up to its count exactly.
 */
static void
ShardStatsShare(ShardStatsPiece *pieces, int from, int to, Datum *writes, Datum *reads)
{
	double		total_rows = 0;
	double		total_genes = 0;
	double		run = 0;
	int64		w_done = 0;
	int64		r_done = 0;

	for (int i = from; i < to; i++)
	{
		total_rows += pieces[i].rows;
		total_genes += pieces[i].last - pieces[i].first + 1;
	}
	for (int i = from; i < to; i++)
	{
		double		upto;
		int64		w,
					r;

		run += total_rows > 0 ? pieces[i].rows : pieces[i].last - pieces[i].first + 1;
		upto = i == to - 1 ? 1.0 : run / (total_rows > 0 ? total_rows : total_genes);
		w = (int64) floor(pieces[i].part_writes * upto);
		r = (int64) floor(pieces[i].part_reads * upto);
		writes[i] = Int64GetDatum(w - w_done);
		reads[i] = Int64GetDatum(r - r_done);
		w_done = w;
		r_done = r;
	}
}

/*
 * Count each piece of ShardStatsRun's query (n rows of pieces) into out:
 * its partition's counters (access) and its rows (count_rows), where the
 * partition lives.  The connections it opens are added to *conns, for
 * the caller to close, an error here included.
 */
static void
ShardStatsCount(SPITupleTable *pieces, uint64 n, ShardStatsPiece *out, bool access,
				bool count_rows, List *volatile *conns)
{
	ListCell   *lc;

	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	t = pieces->vals[i];
		TupleDesc	d = pieces->tupdesc;
		bool		isnull;
		bool		no_part;
		int			f = DatumGetInt32(SPI_getbinval(t, d, 1, &isnull));
		int			l = DatumGetInt32(SPI_getbinval(t, d, 2, &isnull));
		Oid			part = DatumGetObjectId(SPI_getbinval(t, d, 4, &no_part));
		char	   *cond;
		char	   *col = SPI_getvalue(t, d, 9);
		char	   *count_sql;

		out[i].first = f;
		out[i].last = l;
		out[i].shard = SPI_getvalue(t, d, 3);
		out[i].part = no_part ? InvalidOid : part;
		if (!no_part)
		{
			int64		end;
			bool		same_part = i > 0 && out[i - 1].part == part;

			cond = psprintf("%s >= " INT64_FORMAT "%s", quote_identifier(col), GeneFirstId(f),
							!GeneEndId(l, &end) ? "" :
							psprintf(" AND %s < " INT64_FORMAT, quote_identifier(col), end));
			if (DatumGetChar(SPI_getbinval(t, d, 5, &isnull)) == RELKIND_FOREIGN_TABLE)
			{
				Oid			server = DatumGetObjectId(SPI_getbinval(t, d, 6, &isnull));
				RemoteConn *rc = NULL;
				PGresult   *res;
				char	   *remote = quote_qualified_identifier(SPI_getvalue(t, d, 7), SPI_getvalue(t, d, 8));

				foreach(lc, *conns)
					if (((RemoteConn *) lfirst(lc))->serverid == server)
						rc = lfirst(lc);
				if (rc == NULL)
				{
					rc = RemoteConnect(server);
					*conns = lappend(*conns, rc);
				}

				/* the partition's counters once, before any of its rows are counted */
				if (same_part)
				{
					out[i].part_writes = out[i - 1].part_writes;
					out[i].part_reads = out[i - 1].part_reads;
				}
				else if (access)
				{
					if (!count_rows)
					{
						res = RemoteExec(rc, SHARD_STATS_NEXT_XID_SQL, "read the next transaction id");
						out[i].next_xid = pg_strtoint64(PQgetvalue(res, 0, 0));
						PQclear(res);
					}
					res = RemoteExecParams(rc, SHARD_STATS_ACCESS_SQL, SQL_ARGS(remote),
										   "read table statistics");
					if (PQntuples(res) == 1)
					{
						out[i].part_writes = pg_strtoint64(PQgetvalue(res, 0, 0));
						out[i].part_reads = pg_strtoint64(PQgetvalue(res, 0, 1));
					}
					PQclear(res);
				}
				if (!count_rows)
					continue;
				count_sql = psprintf("SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(pg_catalog.pg_column_size(t.*)), 0) "
									 "FROM %s t WHERE %s", remote, cond);
				res = RemoteExec(rc, count_sql, "count rows");
				out[i].rows = pg_strtoint64(PQgetvalue(res, 0, 0));
				out[i].bytes = pg_strtoint64(PQgetvalue(res, 0, 1));
				PQclear(res);
			}
			else
			{
				SPITupleTable *saved = SPI_tuptable;

				if (same_part)
				{
					out[i].part_writes = out[i - 1].part_writes;
					out[i].part_reads = out[i - 1].part_reads;
				}
				else if (access)
				{
					if (!count_rows)
					{
						SpiRun(SHARD_STATS_NEXT_XID_SQL, SPI_OK_SELECT);
						out[i].next_xid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
					}
					/* a fresh snapshot of the statistics, not this transaction's */
					SpiRun("SELECT pg_catalog.pg_stat_clear_snapshot()", SPI_OK_SELECT);
					SpiRunParams(SHARD_STATS_ACCESS_SQL, SQL_ARGS(SPI_getvalue(t, d, 10)), SPI_OK_SELECT);
					if (SPI_processed == 1)
					{
						out[i].part_writes = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
						out[i].part_reads = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
					}
				}
				if (count_rows)
				{
					SpiRun(psprintf("SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(pg_catalog.pg_column_size(t.*)), 0)::pg_catalog.int8 "
									"FROM %s t WHERE %s", SPI_getvalue(t, d, 10), cond), SPI_OK_SELECT);
					out[i].rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
					out[i].bytes = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
				}
				SPI_tuptable = saved;
			}
		}
	}
}

/*
 * The rows of snowseq_shard_stats(parent): for each map entry and each
 * partition it overlaps, the rows and row bytes there, counted where they
 * live, and (SHARD_STATS_ACCESS) the partition's writes and reads since its
 * table there was created or its statistics reset, shared out over its
 * pieces by ShardStatsShare.  The counters are read before the rows are
 * counted, so this call's own count is not in its reads (it is in the next
 * call's).  SHARD_STATS_COUNTERS: the rows of snowseq_shard_counters(parent)
 * instead, one per partition, its writes and reads whole; no row counted.
 */
static void
ShardStatsRun(FunctionCallInfo fcinfo, ShardStatsMode mode)
{
	Oid			parent = PG_GETARG_OID(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Move	   *m;
	char	   *key;
	SPITupleTable *pieces;
	uint64		n;
	List	   *volatile conns = NIL;
	List	   *part_oids = NIL;
	List	   *part_first = NIL;
	List	   *part_last = NIL;
	ListCell   *lc;
	Oid			arg_types[7] = {OIDARRAYOID, INT4ARRAYOID, INT4ARRAYOID, TEXTOID, INT4ARRAYOID, INT4ARRAYOID, TEXTARRAYOID};
	Datum		args[7];
	List	   *map_first = NIL;
	List	   *map_last = NIL;
	List	   *map_shards = NIL;
	ShardStatsPiece *out;
	Datum	   *writes;
	Datum	   *reads;
	int			start;
	bool		access = mode != SHARD_STATS_ROWS;
	bool		count_rows = mode != SHARD_STATS_COUNTERS;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != ShardStatsModes[mode].ncols)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s returns %d columns, its SQL definition %d", ShardStatsModes[mode].function,
						ShardStatsModes[mode].ncols, rsinfo->setDesc->natts),
				 errhint("Update the extension: ALTER EXTENSION snowseq UPDATE.")));
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

	/*
	 * The counters need no lock on the parent once its partitions are
	 * known: a caller that waits between two readings (the rebalancer's
	 * sample) must not keep one, or a DDL or a move's switch queues behind
	 * it and every writer behind that.  Only the two counts this call took
	 * (MoveParentKey's and MovePartBounds') are dropped: a lock the caller
	 * holds stays.
	 */
	if (!count_rows)
	{
		UnlockRelationOid(parent, AccessShareLock);
		UnlockRelationOid(parent, AccessShareLock);
	}
	args[0] = PointerGetDatum(ListArray(part_oids, true));
	args[1] = PointerGetDatum(ListArray(part_first, false));
	args[2] = PointerGetDatum(ListArray(part_last, false));
	args[3] = CStringGetTextDatum(key);
	/* the map as routing reads it (route.c's cache), as snowseq_route routes */
	foreach(lc, RouteRanges(fcinfo->flinfo->fn_oid))
	{
		RouteRange *r = lfirst(lc);

		map_first = lappend_int(map_first, r->first);
		map_last = lappend_int(map_last, r->last);
		map_shards = lappend(map_shards, cstring_to_text(r->shard));
	}
	args[4] = PointerGetDatum(ListArray(map_first, false));
	args[5] = PointerGetDatum(ListArray(map_last, false));
	{
		Datum	   *d = palloc(sizeof(Datum) * (list_length(map_shards) + 1));
		int			i = 0;

		foreach(lc, map_shards)
			d[i++] = PointerGetDatum(lfirst(lc));
		args[6] = PointerGetDatum(construct_array(d, i, TEXTOID, -1, false, TYPALIGN_INT));
	}

	SpiRunArgs(psprintf("WITH map AS (SELECT m.f, m.l, m.shard FROM ROWS FROM (pg_catalog.unnest($5::pg_catalog.int4[]), "
				 "pg_catalog.unnest($6::pg_catalog.int4[]), pg_catalog.unnest($7::pg_catalog.text[])) AS m(f, l, shard)), "
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
				 "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) p.oid AND a.attname OPERATOR(pg_catalog.=) $4::pg_catalog.name "
				 "ORDER BY 1"),
			   7, arg_types, args, NULL, SPI_OK_SELECT);
	pieces = SPI_tuptable;
	n = SPI_processed;
	out = palloc0(sizeof(ShardStatsPiece) * (n + 1));
	PG_TRY();
	{
		ShardStatsCount(pieces, n, out, access, count_rows, &conns);
	}
	PG_FINALLY();
	{
		/* closed whatever happens: a server's error must not leave one open */
		foreach(lc, conns)
			RemoteClose(lfirst(lc));
	}
	PG_END_TRY();

	/* counters: one row per partition, its pieces being next to each other */
	if (!count_rows)
	{
		for (uint64 i = 0; i < n; i++)
		{
			Datum		v[4];
			bool		nulls[4] = {false};

			if (out[i].part == InvalidOid || (i > 0 && out[i - 1].part == out[i].part))
				continue;
			v[0] = ObjectIdGetDatum(out[i].part);
			v[1] = Int64GetDatum(out[i].part_writes);
			v[2] = Int64GetDatum(out[i].part_reads);
			v[3] = Int64GetDatum(out[i].next_xid);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		}
		SPI_finish();
		MemoryContextDelete(m->op.cxt);
		return;
	}

	/* share each partition's writes and reads out over its pieces */
	writes = palloc0(sizeof(Datum) * (n + 1));
	reads = palloc0(sizeof(Datum) * (n + 1));
	start = 0;
	for (int i = 1; i <= (int) n; i++)
		if (i == (int) n || out[i].part != out[start].part || out[start].part == InvalidOid)
		{
			if (out[start].part != InvalidOid)
				ShardStatsShare(out, start, i, writes, reads);
			start = i;
		}
	for (uint64 i = 0; i < n; i++)
	{
		Datum		v[SHARD_STATS_COLS];
		bool		nulls[SHARD_STATS_COLS] = {false};

		v[0] = Int32GetDatum(out[i].first);
		v[1] = Int32GetDatum(out[i].last);
		v[2] = CStringGetTextDatum(out[i].shard);
		v[3] = ObjectIdGetDatum(out[i].part);
		v[4] = Int64GetDatum(out[i].rows);
		v[5] = Int64GetDatum(out[i].bytes);
		v[6] = writes[i];
		v[7] = reads[i];
		if (out[i].part == InvalidOid)
			nulls[3] = nulls[4] = nulls[5] = nulls[6] = nulls[7] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	SPI_finish();
	MemoryContextDelete(m->op.cxt);
}

PG_FUNCTION_INFO_V1(snowseq_shard_stats);
PG_FUNCTION_INFO_V1(snowseq_shard_stats_1_3);
PG_FUNCTION_INFO_V1(snowseq_shard_counters);

/* snowseq_shard_stats(parent) of 1.1 and 1.2: rows and bytes. */
Datum
snowseq_shard_stats(PG_FUNCTION_ARGS)
{
	ShardStatsRun(fcinfo, SHARD_STATS_ROWS);
	return (Datum) 0;
}

/* snowseq_shard_stats(parent) of 1.3: rows, bytes, writes and reads. */
Datum
snowseq_shard_stats_1_3(PG_FUNCTION_ARGS)
{
	ShardStatsRun(fcinfo, SHARD_STATS_ACCESS);
	return (Datum) 0;
}

/*
 * snowseq_shard_counters(parent) of 1.3: the writes and reads of each
 * partition, as snowseq_shard_stats reads them, without counting rows and
 * without keeping a lock on the parent (the rebalancer's first reading).
 */
Datum
snowseq_shard_counters(PG_FUNCTION_ARGS)
{
	ShardStatsRun(fcinfo, SHARD_STATS_COUNTERS);
	return (Datum) 0;
}

/*
 * The rows of a table in genes $1 to $3, by buckets of $2 genes (bucket b:
 * genes $1 + b * $2 onward), and of them the rows whose version was written
 * (inserted or updated) by transaction $4 or a later one ($4 NULL: every
 * row).  age() is modulo 2^32: a frozen row keeps its xmin, whose age turns
 * negative once it is 2^31 transactions old, so a negative age is an old
 * row.  %1$s: the column key, %2$s: the table.  The same text runs on a
 * partition's server and on the router.
 */
#define SHARD_HISTOGRAM_SQL \
	"SELECT CAST(((t.%1$s OPERATOR(pg_catalog.>>) 48) OPERATOR(pg_catalog.-) $1::pg_catalog.int8) " \
	"OPERATOR(pg_catalog./) $2::pg_catalog.int8 AS pg_catalog.int4), pg_catalog.count(*), " \
	"pg_catalog.count(*) FILTER (WHERE $4::pg_catalog.xid IS NULL " \
	"OR pg_catalog.age(t.xmin) OPERATOR(pg_catalog.<=) pg_catalog.age($4::pg_catalog.xid) " \
	"AND pg_catalog.age(t.xmin) OPERATOR(pg_catalog.>=) 0) " \
	"FROM %2$s t WHERE t.%1$s OPERATOR(pg_catalog.>=) ($1::pg_catalog.int8 OPERATOR(pg_catalog.<<) 48) " \
	"AND (t.%1$s OPERATOR(pg_catalog.>>) 48) OPERATOR(pg_catalog.<=) $3::pg_catalog.int8 GROUP BY 1 ORDER BY 1"

/*
 * The histogram's rows from a partition's server: sql run there with its
 * parameters, each row (bucket, rows, written) put into rsinfo's result.
 * The result and the connection are let go whatever happens, an error there
 * included.
 */
static void
ShardStatsHistogramRemote(ReturnSetInfo *rsinfo, Oid serverid, const char *sql,
						  int nargs, const char *const *values)
{
	RemoteConn *rc = RemoteConnect(serverid);
	PGresult   *volatile res = NULL;

	PG_TRY();
	{
		res = RemoteExecParams(rc, sql, nargs, values, "count rows by genes");
		for (int i = 0; i < PQntuples(res); i++)
		{
			Datum		v[3];
			bool		nulls[3] = {false};

			v[0] = Int32GetDatum(pg_strtoint32(PQgetvalue(res, i, 0)));
			v[1] = Int64GetDatum(pg_strtoint64(PQgetvalue(res, i, 1)));
			v[2] = Int64GetDatum(pg_strtoint64(PQgetvalue(res, i, 2)));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		}
	}
	PG_FINALLY();
	{
		PQclear(res);
		RemoteClose(rc);
	}
	PG_END_TRY();
}

PG_FUNCTION_INFO_V1(snowseq_shard_histogram);

/*
 * snowseq_shard_histogram(partition, key, first_gene, last_gene, width,
 * since) of 1.3: the rows of a partition of a gene-sharded table in genes
 * first_gene to last_gene, counted where they live, in buckets of width
 * genes, and of them the rows written since transaction since of the
 * partition's server (the next_xid of snowseq_shard_counters: xmin at least
 * since, taken modulo 2^32 as xmin is; NULL: every row).  The rebalancer
 * cuts a partition by it: by rows, or by the rows its writes touched during
 * its sample.  A row updated twice counts once; a deleted row does not
 * count, nor a row of a transaction that had its id before since.  No
 * bucket without a row is returned.  The caller needs SELECT on the partition (and a
 * user mapping for its server), as for reading it.
 */
Datum
snowseq_shard_histogram(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			part;
	char	   *key;
	int32		first;
	int32		last;
	int32		width;
	char	   *since = NULL;
	Relation	rel;
	char		relkind;
	char	   *sql;
	char	   *first_s;
	char	   *width_s;
	char	   *last_s;
	AclResult	acl;

	InitMaterializedSRF(fcinfo, 0);
	for (int a = 0; a < 5; a++)
		if (PG_ARGISNULL(a))
			return (Datum) 0;
	part = PG_GETARG_OID(0);
	key = NameStr(*PG_GETARG_NAME(1));
	first = PG_GETARG_INT32(2);
	last = PG_GETARG_INT32(3);
	width = PG_GETARG_INT32(4);
	if (first < 0 || last > SNOWSEQ_MAX_GENE || first > last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genes %d to %d are not a gene range", first, last),
				 errhint("Genes go from 0 to %d, and the first is not above the last.", SNOWSEQ_MAX_GENE)));
	if (width < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a bucket of %d genes is not a bucket", width),
				 errhint("Give width 1 or more.")));
	if (!PG_ARGISNULL(5))
	{
		uint32		xid = (uint32) ((uint64) PG_GETARG_INT64(5) & 0xFFFFFFFF);

		/* the normal xid at or next to it: age() of a special xid is "frozen" */
		since = psprintf("%u", Max(xid, FirstNormalTransactionId));
	}

	/* SELECT on the whole table, checked before any lock on it is taken */
	acl = pg_class_aclcheck(part, GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, get_relkind_objtype(get_rel_relkind(part)), get_rel_name(part));
	rel = relation_open(part, AccessShareLock);
	relkind = rel->rd_rel->relkind;
	relation_close(rel, NoLock);
	if (get_attnum(part, key) == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", key, get_rel_name(part)),
				 errhint("Give the column key of the partition's table.")));
	first_s = psprintf("%d", first);
	width_s = psprintf("%d", width);
	last_s = psprintf("%d", last);

	if (relkind == RELKIND_FOREIGN_TABLE)
	{
		ForeignServer *server = MovePartitionServer(part, get_rel_name(part));
		char	   *schema;
		char	   *table;
		char	   *col;

		MoveForeignNames(part, key, &schema, &table, &col);
		sql = psprintf(SHARD_HISTOGRAM_SQL, quote_identifier(col), quote_qualified_identifier(schema, table));
		ShardStatsHistogramRemote(rsinfo, server->serverid, sql, SQL_ARGS(first_s, width_s, last_s, since));
	}
	else if (relkind == RELKIND_RELATION || relkind == RELKIND_PARTITIONED_TABLE)
	{
		sql = psprintf(SHARD_HISTOGRAM_SQL, quote_identifier(key),
					   quote_qualified_identifier(get_namespace_name(get_rel_namespace(part)), get_rel_name(part)));
		SPI_connect();
		SpiRunParams(sql, SQL_ARGS(first_s, width_s, last_s, since), SPI_OK_SELECT);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			Datum		v[3];
			bool		nulls[3] = {false};
			bool		isnull;

			for (int c = 0; c < 3; c++)
				v[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1, &isnull);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		}
		SPI_finish();
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table or a foreign table", get_rel_name(part)),
				 errhint("Give a partition of a gene-sharded table.")));
	return (Datum) 0;
}
