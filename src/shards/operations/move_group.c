/*
 * move_group.c
 *		Elastic shards: the placement group of a move, and the foreign keys
 *		within it.
 *
 * The tables a move of a gene range takes together (every gene-sharded table
 * whose partition of the first gene is on another server), the checks of
 * the foreign keys between them on a server, and the order the source
 * deletes their rows in.
 */
#include "postgres.h"

#include "access/table.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "partitioning/partdesc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "gene.h"
#include "move_common.h"
#include "move_group.h"
#include "move_parts.h"
#include "nodes.h"
#include "snowseq.h"
#include "sqlrun.h"
#include "testpoint.h"

#define MOVE_KEYS_LOCK_ATTEMPTS 400	/* tries to lock the tables of a foreign key */

/*
 * The genes of the partition of a parent that holds a gene, and the
 * foreign server it reads (NULL: not a foreign table); false if none does.
 * A default partition has no bounds, so it holds every gene here: the
 * move that follows refuses it and says why.
 */
bool
PartitionOfGene(Oid parent, int gene, int *first, int *last, char **server)
{
	ListCell   *lc;

	foreach(lc, MovePartBounds(parent))
	{
		MovePartBound *b = lfirst(lc);

		if (GenesOfAlignedIds(b->has_lo, b->lo, b->has_hi, b->hi, first, last) &&
			*first <= gene && gene <= *last)
		{
			*server = NULL;
			if (b->relkind == RELKIND_FOREIGN_TABLE)
				*server = GetForeignServer(GetForeignTable(b->relid)->serverid)->servername;
			return true;
		}
	}
	return false;
}

/*
 * The gene-sharded tables of this database, in oid order: every table
 * partitioned by range on one bigint column whose partitions are all
 * foreign tables on servers that snowseq_shard_map (of the schema ext, quoted)
 * names, so that the map governs them all.  Inside SPI; the list is in
 * SPI's memory, gone with SPI_finish.
 */
List *
MoveGeneShardedTables(const char *ext)
{
	List	   *tables = NIL;

	SpiRun(psprintf("SELECT c.oid FROM pg_catalog.pg_class c "
					"JOIN pg_catalog.pg_partitioned_table pt ON pt.partrelid OPERATOR(pg_catalog.=) c.oid "
					"JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid "
					"AND a.attnum OPERATOR(pg_catalog.=) pt.partattrs[0] "
					"WHERE c.relkind OPERATOR(pg_catalog.=) 'p' AND pt.partstrat OPERATOR(pg_catalog.=) 'r' "
					"AND pt.partnatts OPERATOR(pg_catalog.=) 1 "
					"AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype "
					"AND EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid) "
					"AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i "
					"LEFT JOIN pg_catalog.pg_foreign_table ft ON ft.ftrelid OPERATOR(pg_catalog.=) i.inhrelid "
					"LEFT JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) ft.ftserver "
					"WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid AND (s.srvname IS NULL OR NOT EXISTS "
					"(SELECT 1 FROM %s.snowseq_shard_map map WHERE map.shard OPERATOR(pg_catalog.=) s.srvname))) "
					"ORDER BY c.oid", ext), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		tables = lappend_oid(tables, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																	SPI_tuptable->tupdesc, 1, &isnull)));
	}
	return tables;
}

/*
 * The placement group of a move: the gene-sharded tables
 * (MoveGeneShardedTables) that hold gene m->first in a partition on another
 * server than to_server.  m->parent comes first (InvalidOid: every such
 * table, in oid order); a table outside the group moves alone, as the
 * checks allow.
 */
List *
MovePlacementGroup(Move *m, const char *to_server)
{
	List	   *tables;
	List	   *group = NIL;
	ListCell   *lc;

	/* a catalog older than the library: one table at a time */
	if (!MoveGroupsRecorded(m->op.ext))
	{
		if (!OidIsValid(m->parent))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("moves of every gene-sharded table need snowseq 1.2 in this database"),
					 errhint("Run ALTER EXTENSION snowseq UPDATE.")));
		return list_make1_oid(m->parent);
	}

	tables = MoveGeneShardedTables(m->op.ext);
	if (OidIsValid(m->parent))
	{
		if (!list_member_oid(tables, m->parent))
			return list_make1_oid(m->parent);
		group = list_make1_oid(m->parent);
	}
	foreach(lc, tables)
	{
		Oid			t = lfirst_oid(lc);
		int			f,
					l;
		char	   *server;

		if (t == m->parent)
			continue;
		if (PartitionOfGene(t, m->first, &f, &l, &server) && server != NULL &&
			strcmp(server, to_server) != 0)
			group = lappend_oid(group, t);
	}
	if (group == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no gene-sharded table holds gene %d on a server other than \"%s\"", m->first, to_server),
				 errhint("Gene-sharded tables are partitioned by range on a bigint ID into foreign tables on the servers snowseq_shard_map names.")));
	return group;
}

/*
 * Refuse a move whose foreign keys between tables of the group would
 * cross the moved range: a row that moves referencing one that stays, or
 * one that stays referencing one that moves, would be left dangling on
 * one server.  The group's rows of one gene reference each other only.
 * With lock (in the source transaction, before its deletes), both tables
 * of each such key are locked against writes first.
 */
void
MoveCheckGroupKeys(Move *m, RemoteConn *rc, bool lock)
{
	List	   *group = MoveGroup(m);
	PGresult   *res;
	ListCell   *lc;

	if (list_length(group) < 2)
		return;
	res = RemoteExecParams(rc, "SELECT pg_catalog.quote_ident(c.conname), "
						   "pg_catalog.quote_ident(cn.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(cc.relname), "
						   "pg_catalog.quote_ident(pn.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(pc.relname), "
						   "(SELECT pg_catalog.string_agg(pg_catalog.format('c.%I OPERATOR(pg_catalog.=) p.%I', ca.attname, pa.attname), ' AND ') "
						   "FROM ROWS FROM (pg_catalog.unnest(c.conkey), pg_catalog.unnest(c.confkey)) k(ck, pk) "
						   "JOIN pg_catalog.pg_attribute ca ON ca.attrelid OPERATOR(pg_catalog.=) c.conrelid AND ca.attnum OPERATOR(pg_catalog.=) k.ck "
						   "JOIN pg_catalog.pg_attribute pa ON pa.attrelid OPERATOR(pg_catalog.=) c.confrelid AND pa.attnum OPERATOR(pg_catalog.=) k.pk) "
						   "FROM pg_catalog.pg_constraint c "
						   "JOIN pg_catalog.pg_class cc ON cc.oid OPERATOR(pg_catalog.=) c.conrelid "
						   "JOIN pg_catalog.pg_namespace cn ON cn.oid OPERATOR(pg_catalog.=) cc.relnamespace "
						   "JOIN pg_catalog.pg_class pc ON pc.oid OPERATOR(pg_catalog.=) c.confrelid "
						   "JOIN pg_catalog.pg_namespace pn ON pn.oid OPERATOR(pg_catalog.=) pc.relnamespace "
						   "WHERE c.contype OPERATOR(pg_catalog.=) 'f' "
						   "AND c.confrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.regclass[]) "
						   "AND c.conrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.regclass[]) "
						   "ORDER BY 1",
						   SQL_ARGS(SqlTextArray(MoveGroupTables(m, false, false))),
						   "look up foreign keys between the tables of the move");
	for (int i = 0; i < PQntuples(res); i++)
	{
		Move	   *child = NULL;
		Move	   *parent = NULL;
		char	   *n;

		foreach(lc, group)
		{
			Move	   *t = lfirst(lc);

			if (strcmp(t->src_table, PQgetvalue(res, i, 1)) == 0)
				child = t;
			if (strcmp(t->src_table, PQgetvalue(res, i, 2)) == 0)
				parent = t;
		}
		if (child == NULL || parent == NULL)
			continue;
		/*
		 * In the source transaction: no writer may add a reference
		 * meanwhile.  Never queued (a writer holding one table and waiting
		 * for the other would deadlock with it): tried again until the
		 * writers under way are done.
		 */
		if (lock)
			SNOWSEQ_TESTPOINT("move_before_keys_lock");
		for (int attempt = 1; lock; attempt++)
		{
			char		state[6];

			if (RemoteTry(rc, psprintf("SAVEPOINT snowseq_keys; LOCK TABLE %s, %s IN SHARE MODE NOWAIT",
									   child->src_table, parent->src_table),
						  "lock the tables of a foreign key", state))
			{
				MoveLead(m)->hold.keys_locked = true;
				break;
			}
			if (strcmp(state, "55P03") != 0 || attempt == MOVE_KEYS_LOCK_ATTEMPTS)
			{
				char	   *holders = NULL;

				if (strcmp(state, "55P03") == 0)
				{
					RemoteCommand(rc, "ROLLBACK TO SAVEPOINT snowseq_keys", "look up who holds the tables");
					holders = MoveLockHolders(rc, list_make2(child->src_table, parent->src_table));
				}
				ereport(ERROR,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("could not lock tables %s and %s on server \"%s\" to check foreign key %s",
								child->src_table, parent->src_table, MoveLead(m)->src_name, PQgetvalue(res, i, 0)),
						 holders ? errdetail("They were held through %d tries, at the last by %s.", attempt, holders) : 0,
						 errhint("Retry when the source is less busy.")));
			}
			RemoteCommand(rc, "ROLLBACK TO SAVEPOINT snowseq_keys", "wait for the writers of a foreign key");
			/* an autovacuum would hold the lock for long: cancelled, as a waiting lock would */
			MoveCancelAutovacuum(rc, list_make2(child->src_table, parent->src_table));
			MoveSleep(Min(5 * attempt, 50));
		}
		/* rows on either side of the moved range, joined on the key */
		n = RemoteValue(rc, psprintf("SELECT (SELECT pg_catalog.count(*) FROM %s p JOIN %s c ON %s "
									 "WHERE (%s) AND NOT coalesce((%s), false)) OPERATOR(pg_catalog.+) "
									 "(SELECT pg_catalog.count(*) FROM %s c JOIN %s p ON %s "
									 "WHERE (%s) AND NOT coalesce((%s), false))",
									 parent->src_table, child->src_table, PQgetvalue(res, i, 3),
									 MoveIdConditionOf(parent, "p"), MoveIdConditionOf(child, "c"),
									 child->src_table, parent->src_table, PQgetvalue(res, i, 3),
									 MoveIdConditionOf(child, "c"), MoveIdConditionOf(parent, "p")),
						"look for references across the moved range");
		if (strcmp(n, "0") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("foreign key %s of table %s on server \"%s\" links %s rows inside genes %d to %d with rows outside them",
							PQgetvalue(res, i, 0), child->src_table, MoveLead(m)->src_name,
							n, m->first, m->last),
					 errdetail("Rows of table %s and the rows of %s they reference must move together: both must carry the same gene.",
							   child->src_table, parent->src_table),
					 errhint("Give referencing rows the gene of the rows they reference (snowseq_gene_next of the same key), or move genes whose rows reference only each other.")));
	}
	PQclear(res);
}

/*
 * The tables of the group in the order their moved rows go: a table that
 * other tables of the group reference after those (children before
 * parents), so that no moment leaves a referencing row without its row.
 */
List *
MoveDeleteOrder(Move *m, RemoteConn *rc)
{
	List	   *group = MoveGroup(m);
	List	   *order = NIL;
	PGresult   *res;
	ListCell   *lc;

	if (list_length(group) < 2)
		return group;
	/* pairs (referencing, referenced) by position in the group, 1-based */
	res = RemoteExecParams(rc, "SELECT pg_catalog.array_position(g.t, c.conrelid), pg_catalog.array_position(g.t, c.confrelid) "
						   "FROM (SELECT pg_catalog.array_agg(pg_catalog.to_regclass(u.n)::pg_catalog.oid ORDER BY u.o) AS t "
						   "FROM pg_catalog.unnest($1::pg_catalog.text[]) WITH ORDINALITY u(n, o)) g, pg_catalog.pg_constraint c "
						   "WHERE c.contype OPERATOR(pg_catalog.=) 'f' AND c.conrelid OPERATOR(pg_catalog.<>) c.confrelid "
						   "AND c.conrelid OPERATOR(pg_catalog.=) ANY (g.t) AND c.confrelid OPERATOR(pg_catalog.=) ANY (g.t)",
						   SQL_ARGS(SqlTextArray(MoveGroupTables(m, false, false))),
						   "look up foreign keys between the tables of the move");
	while (list_length(order) < list_length(group))
	{
		int			added = 0;

		foreach(lc, group)
		{
			Move	   *t = lfirst(lc);
			bool		waits = false;

			if (list_member_ptr(order, t))
				continue;
			/* a table waits while a table that references it has not gone */
			for (int i = 0; i < PQntuples(res) && !waits; i++)
			{
				Move	   *child = list_nth(group, atoi(PQgetvalue(res, i, 0)) - 1);

				if (list_nth(group, atoi(PQgetvalue(res, i, 1)) - 1) == t && !list_member_ptr(order, child))
					waits = true;
			}
			if (!waits)
			{
				order = lappend(order, t);
				added++;
			}
		}
		/* a cycle of foreign keys: the rest in group order */
		if (added == 0)
			foreach(lc, group)
				if (!list_member_ptr(order, lfirst(lc)))
					order = lappend(order, lfirst(lc));
	}
	PQclear(res);
	return order;
}
