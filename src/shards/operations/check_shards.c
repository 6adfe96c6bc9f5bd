/*
 * check_shards.c
 *		snowseq_check_shards(): the tables of every shard server against the
 *		router's definition.  A move copies whatever its source has, so a
 *		column added on one server alone, or an index made on some, goes
 *		unseen until it breaks a write or a query; this finds it from the
 *		router, one row per difference.
 *
 * What is compared, per gene-sharded table (MoveGeneShardedTables):
 *	- columns: each of the router's parent on every partition's remote table,
 *	  with its type and NOT NULL; a column only on a shard is reported too;
 *	- indexes and CHECK constraints of the router's parent must be on every
 *	  remote table (the router cannot make them there: CREATE INDEX on the
 *	  parent skips foreign partitions);
 *	- indexes, foreign keys and triggers of the remote tables must be the
 *	  same on all of them (snowseq's own triggers, fences and the merge's
 *	  mirror, are left out: they come and go with moves);
 *	- snowseq's version on each server against the router's.
 * A server that cannot be asked is a row, not an ERROR.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "move_common.h"
#include "move_group.h"
#include "move_parts.h"
#include "remote.h"
#include "shmem.h"
#include "sqlrun.h"

/* One thing a table has: a column, an index, a constraint or a trigger. */
typedef struct Facet
{
	char	   *kind;			/* column, index, constraint, trigger */
	char	   *object;			/* what identifies it across tables */
	char	   *def;			/* what must be equal */
	char	   *detail;			/* its name there, or NOT NULL as t/f */
} Facet;

/* A remote table of one partition, and what it has. */
typedef struct ShardTable
{
	char	   *server;
	char	   *table;			/* schema.table, quoted */
	List	   *facets;			/* NIL with problem set: not read */
	char	   *problem;
	bool		asked;			/* the server answered */
	char	   *version;		/* snowseq's version there, or NULL */
} ShardTable;

/*
 * The facets of a table ($1, a name as regclass reads it), on any server:
 * the same text runs on the router (its parent) and on each shard server.
 * An index is identified by what it indexes, not by its name, which
 * differs from table to table.
 */
static const char FacetsSql[] =
"SELECT 'column', a.attname::pg_catalog.text, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull::pg_catalog.text "
"FROM pg_catalog.pg_attribute a "
"WHERE a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped "
"UNION ALL "
"SELECT 'index', (CASE WHEN i.indisunique THEN 'UNIQUE ' ELSE '' END) OPERATOR(pg_catalog.||) am.amname::pg_catalog.text "
"OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||) (SELECT pg_catalog.string_agg(pg_catalog.pg_get_indexdef(i.indexrelid, k, true), ', ' ORDER BY k) "
"FROM pg_catalog.generate_series(1, i.indnkeyatts::pg_catalog.int4) k) OPERATOR(pg_catalog.||) ')' "
"OPERATOR(pg_catalog.||) COALESCE(' WHERE ' OPERATOR(pg_catalog.||) pg_catalog.pg_get_expr(i.indpred, i.indrelid, true), ''), "
"'', c.relname::pg_catalog.text "
"FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid "
"JOIN pg_catalog.pg_am am ON am.oid OPERATOR(pg_catalog.=) c.relam "
"WHERE i.indrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
"UNION ALL "
"SELECT CASE co.contype WHEN 'c' THEN 'check' ELSE 'foreign key' END, pg_catalog.pg_get_constraintdef(co.oid, true), '', co.conname::pg_catalog.text "
"FROM pg_catalog.pg_constraint co "
"WHERE co.conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND co.contype OPERATOR(pg_catalog.=) ANY (ARRAY['c', 'f']::pg_catalog.\"char\"[]) "
"UNION ALL "
"SELECT 'trigger', t.tgname::pg_catalog.text, t.tgfoid::pg_catalog.regprocedure::pg_catalog.text OPERATOR(pg_catalog.||) ' type ' "
"OPERATOR(pg_catalog.||) t.tgtype::pg_catalog.text OPERATOR(pg_catalog.||) ' enabled ' OPERATOR(pg_catalog.||) t.tgenabled::pg_catalog.text, t.tgname::pg_catalog.text "
"FROM pg_catalog.pg_trigger t "
"WHERE t.tgrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND NOT t.tgisinternal "
"AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid "
"WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid OPERATOR(pg_catalog.=) t.tgfoid "
"AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass "
"AND d.deptype OPERATOR(pg_catalog.=) 'e' AND e.extname OPERATOR(pg_catalog.=) 'snowseq')";

/* A facet from four text values (no def: the object is its definition). */
static Facet *
FacetMake(const char *kind, const char *object, const char *def, const char *detail)
{
	Facet	   *f = palloc(sizeof(Facet));

	f->kind = pstrdup(kind);
	f->object = pstrdup(object);
	f->def = pstrdup(def && *def ? def : object);
	f->detail = pstrdup(detail ? detail : "");
	return f;
}

/* The facets of the router's parent. */
static List *
FacetsLocal(Oid parent, MemoryContext cxt)
{
	List	   *facets = NIL;
	char	   *rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(parent)), get_rel_name(parent));

	/* the text runs everywhere: the parent by its qualified name */
	SpiRunParams(FacetsSql, SQL_ARGS(rel), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(cxt);

		facets = lappend(facets, FacetMake(SPI_getvalue(tup, desc, 1), SPI_getvalue(tup, desc, 2),
										   SPI_getvalue(tup, desc, 3), SPI_getvalue(tup, desc, 4)));
		MemoryContextSwitchTo(old);
	}
	return facets;
}

/* Read a remote table's facets on its server (RemoteAsk). */
static void
FacetsAsk(RemoteConn *rc, void *arg)
{
	ShardTable *st = arg;
	PGresult   *res;

	st->asked = true;
	st->version = rc->extversion ? pstrdup(rc->extversion) : NULL;
	if (strcmp(RemoteValueParams(rc, "SELECT (pg_catalog.to_regclass($1::pg_catalog.text) IS NOT NULL)::pg_catalog.text",
								 SQL_ARGS(st->table), "look up the table"), "true") != 0)
	{
		st->problem = pstrdup("the table is not on the server");
		return;
	}
	res = RemoteExecParams(rc, FacetsSql, SQL_ARGS(st->table), "read the table's columns, indexes, constraints and triggers");
	for (int i = 0; i < PQntuples(res); i++)
		st->facets = lappend(st->facets, FacetMake(PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
												   PQgetvalue(res, i, 2), PQgetvalue(res, i, 3)));
	PQclear(res);
}

/*
 * Read a remote table's facets; what goes wrong (the server cannot be
 * asked, the table is not there) becomes its problem.
 */
static void
FacetsRemote(ShardTable *st, Oid serverid)
{
	char	   *problem = RemoteAsk(serverid, FacetsAsk, st);

	if (problem != NULL)
	{
		st->facets = NIL;
		st->problem = psprintf("cannot be asked: %s", problem);
	}
}

/* The facet of a kind and object in a list, or NULL. */
static Facet *
FacetFind(List *facets, const char *kind, const char *object)
{
	ListCell   *lc;

	foreach(lc, facets)
	{
		Facet	   *f = lfirst(lc);

		if (strcmp(f->kind, kind) == 0 && strcmp(f->object, object) == 0)
			return f;
	}
	return NULL;
}

/* Emit one difference. */
static void
CheckRow(ReturnSetInfo *rsinfo, Oid parent, const char *server, const char *table, const char *kind,
		 const char *object, const char *router, const char *shard, const char *problem)
{
	Datum		v[8];
	bool		n[8] = {false};
	const char *text[7] = {server, table, kind, object, router, shard, problem};

	v[0] = ObjectIdGetDatum(parent);
	n[0] = !OidIsValid(parent);
	for (int i = 0; i < 7; i++)
	{
		n[i + 1] = text[i] == NULL;
		v[i + 1] = n[i + 1] ? (Datum) 0 : CStringGetTextDatum(text[i]);
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
}

/* Whether a facet kind is one every remote table must share. */
static bool
FacetShared(const char *kind)
{
	return strcmp(kind, "index") == 0 || strcmp(kind, "foreign key") == 0 || strcmp(kind, "trigger") == 0;
}

/* Compare each remote table of one parent with the router and with each other. */
static void
CheckParent(ReturnSetInfo *rsinfo, Oid parent, List *router, List *shards)
{
	ListCell   *lc;
	ListCell   *lf;

	foreach(lc, shards)
	{
		ShardTable *st = lfirst(lc);

		if (st->problem)
		{
			CheckRow(rsinfo, parent, st->server, st->table, "table", NULL, NULL, NULL, st->problem);
			continue;
		}
		/* the router's columns, indexes and CHECK constraints, on this table */
		foreach(lf, router)
		{
			Facet	   *f = lfirst(lf);
			Facet	   *s = FacetFind(st->facets, f->kind, f->object);

			if (strcmp(f->kind, "trigger") == 0 || strcmp(f->kind, "foreign key") == 0)
				continue;		/* the router's fire on the router */
			if (s == NULL)
				CheckRow(rsinfo, parent, st->server, st->table, f->kind, f->object, f->def, NULL,
						 "on the router, not on the shard");
			else if (strcmp(f->kind, "column") == 0 && strcmp(f->def, s->def) != 0)
				CheckRow(rsinfo, parent, st->server, st->table, f->kind, f->object, f->def, s->def,
						 "another type on the shard");
			else if (strcmp(f->kind, "column") == 0 && strcmp(f->detail, "true") == 0 && strcmp(s->detail, "true") != 0)
				CheckRow(rsinfo, parent, st->server, st->table, f->kind, f->object, "NOT NULL", "NULL",
						 "NOT NULL on the router, not on the shard");
		}
		/* the shard's columns the router lacks; what another shard has and this lacks */
		foreach(lf, st->facets)
		{
			Facet	   *s = lfirst(lf);

			if (strcmp(s->kind, "column") == 0 && FacetFind(router, "column", s->object) == NULL)
				CheckRow(rsinfo, parent, st->server, st->table, s->kind, s->object, NULL, s->def,
						 "on the shard, not on the router");
		}
		foreach(lf, shards)
		{
			ShardTable *other = lfirst(lf);
			ListCell   *lo;

			if (other == st || other->problem)
				continue;
			foreach(lo, other->facets)
			{
				Facet	   *o = lfirst(lo);
				Facet	   *s;
				bool		seen = false;
				ListCell   *le;

				if (!FacetShared(o->kind) || FacetFind(router, o->kind, o->object) != NULL)
					continue;
				/* said once, for the first table that has it */
				foreach(le, shards)
				{
					ShardTable *e = lfirst(le);

					if (e == other)
						break;
					if (e != st && !e->problem && FacetFind(e->facets, o->kind, o->object) != NULL)
						seen = true;
				}
				if (seen)
					continue;
				s = FacetFind(st->facets, o->kind, o->object);
				if (s == NULL)
					CheckRow(rsinfo, parent, st->server, st->table, o->kind, o->object, NULL, NULL,
							 psprintf("on %s of server \"%s\", not on this shard", other->table, other->server));
				else if (strcmp(o->def, s->def) != 0)
					CheckRow(rsinfo, parent, st->server, st->table, o->kind, o->object, NULL, s->def,
							 psprintf("%s on %s of server \"%s\"", o->def, other->table, other->server));
			}
		}
	}
}

PG_FUNCTION_INFO_V1(snowseq_check_shards);

/*
 * snowseq_check_shards() -> (parent, server, remote_table, kind, object,
 * router, shard, problem): one row per difference between the router's
 * gene-sharded tables and their shard servers' tables, and per server whose
 * snowseq version is not the router's.  No row: nothing has drifted.
 */
Datum
snowseq_check_shards(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *ext = ExtSchemaQuoted(fcinfo->flinfo->fn_oid);
	MemoryContext cxt = CurrentMemoryContext;
	List	   *servers = NIL;	/* names of the servers asked for their version */
	char	   *version;
	ListCell   *lc;

	ShmemCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	version = SpiValue(cxt, "SELECT extversion FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'snowseq'");
	foreach(lc, MoveGeneShardedTables(ext))
	{
		Oid			parent = lfirst_oid(lc);
		List	   *router;
		List	   *shards = NIL;
		ListCell   *lp;
		Relation	rel;
		char	   *key;

		rel = table_open(parent, AccessShareLock);
		key = get_attname(parent, RelationGetPartitionKey(rel)->partattrs[0], false);
		table_close(rel, NoLock);
		router = FacetsLocal(parent, cxt);
		foreach(lp, MovePartBounds(parent))
		{
			MovePartBound *b = lfirst(lp);
			ShardTable *st;
			ForeignServer *server;
			char	   *nsp;
			char	   *tab;
			char	   *col;
			MemoryContext old;

			if (b->relkind != RELKIND_FOREIGN_TABLE)
				continue;
			server = MovePartitionServer(b->relid, get_rel_name(b->relid));
			MoveForeignNames(b->relid, key, &nsp, &tab, &col);
			old = MemoryContextSwitchTo(cxt);
			st = palloc0(sizeof(ShardTable));
			st->server = pstrdup(server->servername);
			st->table = psprintf("%s.%s", quote_identifier(nsp), quote_identifier(tab));
			FacetsRemote(st, server->serverid);
			shards = lappend(shards, st);
			if (st->asked && !list_member(servers, makeString(st->server)))
			{
				servers = lappend(servers, makeString(pstrdup(st->server)));
				if (st->version == NULL || version == NULL || strcmp(st->version, version) != 0)
					CheckRow(rsinfo, InvalidOid, st->server, NULL, "snowseq", "version", version, st->version,
							 st->version == NULL ? "snowseq is not installed in the server's database"
							 : "another snowseq version than the router's");
			}
			MemoryContextSwitchTo(old);
		}
		CheckParent(rsinfo, parent, router, shards);
	}
	SPI_finish();
	return (Datum) 0;
}
