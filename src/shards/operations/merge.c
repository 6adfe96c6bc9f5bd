/*
 * merge.c
 *		Elastic shards: neighbouring partitions of one server become one
 *		(snowseq_merge_partitions), while they take writes.
 *
 * A router partition is a postgres_fdw foreign table reading one table on
 * its server.  A merge of genes first..last makes the partitions of those
 * genes, all on one server, one partition reading one table there, for
 * every table of the placement group, in four steps that each commit:
 *
 *	prepare  the merged table on the server, with what the first table it
 *			 merges has (columns, keys, defaults, checks, policies, indexes,
 *			 owner; its triggers made but disabled), and on each table it
 *			 merges the trigger snowseq_merge_mirror (merge_mirror.c), which
 *			 applies every row written there to the merged table in the
 *			 same transaction;
 *	copy	 the backfill: the rows of the tables it merges are copied in
 *			 batches, locked FOR SHARE (so a writer of a row and the copy of
 *			 it take turns), ON CONFLICT DO NOTHING (a row the trigger wrote
 *			 is the latest), as the tables' owner; then one query compares
 *			 the rows of the merged table with theirs;
 *	switch	 the router takes its parents' lock; a server transaction locks
 *			 the tables, checks the triggers are as made, gives the merged
 *			 table the first table's foreign keys (NOT VALID), grants,
 *			 sequences and trigger states, drops the tables it merged and is
 *			 prepared (two-phase); the router detaches and drops the old
 *			 partitions, attaches one foreign table on the merged table and
 *			 commits; then the server commits.  No query through the router
 *			 sees a row twice or misses one: until the switch the merged
 *			 table is read by no partition, and the switch's pause does not
 *			 grow with the rows;
 *	finish	 the foreign keys of the merged table are validated.
 *
 * Logical replication, which moves use, cannot copy between two tables of
 * one database (it maps tables by name), and a partitioned table on the
 * server read through one foreign table would update rows by ctid, which is
 * unique in one table only; hence the trigger.  A merge that fails is
 * undone (the prepared transaction rolled back, the triggers and the merged
 * table dropped); one cut by a crash is resolved by snowseq_move_cleanup()
 * or by the resolver at the router's start (MergeResolveSwitches), as its
 * record (snowseq_merges) says.
 *
 * This file plans and checks a merge and runs its steps; the switch and
 * the finish are in merge_switch.c, the records and the lock in
 * merge_records.c, the undo and the resolution of interrupted merges in
 * merge_cleanup.c.
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "gene.h"
#include "merge.h"
#include "merge_cleanup.h"
#include "merge_records.h"
#include "merge_switch.h"
#include "move_cleanup.h"
#include "move_common.h"
#include "move_group.h"
#include "move_parts.h"
#include "move_plan.h"
#include "move_schema.h"
#include "move_switch.h"
#include "snowseq.h"
#include "sqlrun.h"
#include "testpoint.h"

#define MERGE_BATCH_ROWS	5000	/* rows the backfill updates per transaction */
#define MERGE_NOTICE_MS		10000	/* the backfill says how far it got so often */
#define MERGE_SWITCH_TRIES	5		/* switches that found the server's tables busy */
#define MERGE_BATCH_TRIES	100		/* tries of a batch that waited too long or deadlocked */

/*
 * The partitions of one table in genes first..last: each a postgres_fdw
 * foreign table on the server (NULL: the first one's), none reaching past
 * those genes, together holding all of them; fills t's merge, its merged
 * bounds and names.  Returns how many there are (a table with one has
 * nothing to merge).
 */
static int
MergeFindParts(Move *t, char **server)
{
	MergeTable *mt = MemoryContextAllocZero(t->op.cxt, sizeof(MergeTable));
	char	   *key = MoveParentKey(t);
	int			next = t->first;
	ListCell   *lc;
	MemoryContext old;

	t->merge = mt;
	foreach(lc, MovePartBounds(t->parent))
	{
		MovePartBound *b = lfirst(lc);
		char	   *name = get_rel_name(b->relid);
		char	   *part_q;
		ForeignServer *fs;
		char	   *schema;
		char	   *table;
		char	   *col;
		int			f,
					l;

		MovePartGenes(t, b, &f, &l);
		if (l < t->first || f > t->last)
			continue;
		if (f < t->first || l > t->last)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("partition \"%s\" of table \"%s\" holds genes %d to %d, not all of them in genes %d to %d",
							name, t->parent_rel, f, l, t->first, t->last),
					 errhint("A merge makes whole partitions one: name genes from the first of a partition to the last of one%s.",
							 t->group.lead ? ", and partition the tables of a placement group on the same genes" : "")));
		if (f != next)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("no partition of table \"%s\" holds genes %d to %d", t->parent_rel, next, f - 1),
					 errhint("A merge makes neighbouring partitions one.")));
		next = l + 1;
		part_q = quote_qualified_identifier(get_namespace_name(get_rel_namespace(b->relid)), name);
		if (b->relkind != RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("partition \"%s\" of table \"%s\" is not a foreign table", name, t->parent_rel),
					 errhint("Merges make foreign tables of one postgres_fdw server one.")));
		fs = MovePartitionServer(b->relid, part_q);
		if (*server == NULL)
			*server = MemoryContextStrdup(t->op.cxt, fs->servername);
		else if (strcmp(*server, fs->servername) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition \"%s\" of table \"%s\" reads server \"%s\", not server \"%s\"",
							name, t->parent_rel, fs->servername, *server),
					 errhint("Move its genes to server \"%s\" first (snowseq_move_to_neighbour), then merge.", *server)));
		MoveForeignNames(b->relid, key, &schema, &table, &col);
		old = MemoryContextSwitchTo(t->op.cxt);
		if (mt->parts == NIL)
		{
			/* the first partition: the merged one's options, schema and ID column */
			t->part.has_lo = b->has_lo;
			t->part.lo = b->lo;
			t->dst_nsp = pstrdup(schema);
			t->src_rel = pstrdup(table);
			t->src_table = quote_qualified_identifier(schema, table);
			t->id_col = pstrdup(col);
			t->part.q = pstrdup(part_q);
			MoveForeignOptions(t, b->relid, &t->newpart.opts, &t->newpart.colopts);
		}
		else if (strcmp(col, t->id_col) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition \"%s\" of table \"%s\" reads its ID from column \"%s\", partition %s from column \"%s\"",
							name, t->parent_rel, col, t->part.q, t->id_col)));
		t->part.has_hi = b->has_hi;
		t->part.hi = b->hi;
		mt->parts = lappend(mt->parts, pstrdup(part_q));
		mt->tables = lappend(mt->tables, quote_qualified_identifier(schema, table));
		MemoryContextSwitchTo(old);
	}
	if (mt->parts != NIL && next <= t->last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no partition of table \"%s\" holds genes %d to %d", t->parent_rel, next, t->last),
				 errhint("A merge makes neighbouring partitions one.")));
	t->kind = MOVE_KIND_WHOLE;
	/* the router's new partition: the parent's columns */
	t->newpart.cols = MoveParentColumns(t);
	return list_length(mt->parts);
}

/*
 * The tables of a merge of genes first..last of parent's placement group
 * (every gene-sharded table that has partitions in those genes, parent
 * first), each with its partitions; errors if parent has fewer than two
 * there, or any of them cannot be merged.
 */
static Move *
MergePlan(const char *ext, Oid parent, int first, int last)
{
	Move	   *m = MoveNew(ext);
	List	   *tables;
	ListCell   *lc;
	char	   *server = NULL;
	int			n;

	if (first < 0 || last > SNOWSEQ_MAX_GENE || first > last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genes %d to %d are not a gene range", first, last),
				 errhint("Genes go from 0 to %d, and the first is not above the last.", SNOWSEQ_MAX_GENE)));
	m->parent = parent;
	m->first = first;
	m->last = last;
	n = MergeFindParts(m, &server);
	if (n < 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genes %d to %d of table \"%s\" are in %s", first, last, m->parent_rel,
						n == 0 ? "no partition" : "one partition already"),
				 errhint("Name the genes of two or more neighbouring partitions.")));
	m->src_name = server;
	m->dst_name = server;
	tables = MoveGeneShardedTables(ext);
	if (list_member_oid(tables, parent))
	{
		foreach(lc, tables)
		{
			Move	   *t;

			if (lfirst_oid(lc) == parent)
				continue;
			t = MoveNewMember(m, lfirst_oid(lc));
			if (MergeFindParts(t, &server) < 2)
			{
				/* nothing of it to merge */
				m->group.members = list_delete_ptr(m->group.members, t);
				continue;
			}
			t->src_name = server;
			t->dst_name = server;
		}
	}
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *v = SpiValue(m->op.cxt, psprintf("SELECT pg_catalog.pg_has_role(relowner, 'USAGE') FROM pg_catalog.pg_class "
												  "WHERE oid OPERATOR(pg_catalog.=) %u", t->parent));

		if (v == NULL || v[0] != 't')
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be owner of table %s", t->parent_rel)));
	}
	(void) GetUserMapping(GetUserId(), GetForeignServerByName(server, false)->serverid);
	return m;
}

/*
 * Step: check the server and the tables there: snowseq with the merge's
 * trigger, a superuser session, prepared transactions; plain tables with
 * the same columns, primary key (the ID) and owner, referenced by no
 * foreign key from outside the merge; a free name for the merged table.
 */
static void
MergeChecks(Move *m)
{
	RemoteConn *rc = MoveSrc(m);
	List	   *all = NIL;
	ListCell   *lc;
	char	   *v;

	MoveCheckServer(rc);
	v = RemoteValueParams(rc, "SELECT pg_catalog.to_regprocedure($1::pg_catalog.text) IS NOT NULL",
						  SQL_ARGS(MoveRemoteExt(rc, "snowseq_merge_mirror()")), "look up the merge trigger");
	if (strcmp(v, "t") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq %s on server \"%s\" cannot merge partitions", rc->extversion, rc->server),
				 errhint("Run ALTER EXTENSION snowseq UPDATE there.")));
	v = RemoteValue(rc, "SELECT pg_catalog.current_setting('max_prepared_transactions')",
					"read max_prepared_transactions");
	if (v == NULL || strcmp(v, "0") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("max_prepared_transactions is 0 on server \"%s\"", m->src_name),
				 errhint("Set max_prepared_transactions to 1 or more there and restart it: the switch commits there in two phases.")));
	foreach(lc, MoveGroup(m))
		all = list_concat(all, MergeOf(lfirst(lc))->tables);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *cols = MoveRemoteColumns(rc, t->src_table);
		char	   *pk = MoveRemotePkey(rc, t->src_table);
		char	   *want_pk = psprintf("PRIMARY KEY (%s)", quote_identifier(t->id_col));
		ListCell   *lt;
		PGresult   *res;

		foreach(lt, MergeOf(t)->tables)
		{
			char	   *table = lfirst(lt);
			char	   *c;

			res = RemoteExecParams(rc, "SELECT c.relkind::text, pg_catalog.pg_get_userbyid(c.relowner)::text, "
								   "pg_catalog.pg_get_userbyid(f.relowner)::text FROM pg_catalog.pg_class c, pg_catalog.pg_class f "
								   "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text) "
								   "AND f.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($2::pg_catalog.text)",
								   SQL_ARGS(table, t->src_table), "look up a table to merge");
			if (PQntuples(res) != 1)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_TABLE),
						 errmsg("table %s does not exist on server \"%s\"", table, m->src_name)));
			if (strcmp(PQgetvalue(res, 0, 0), "r") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_WRONG_OBJECT_TYPE),
						 errmsg("%s on server \"%s\" is not a plain table", table, m->src_name)));
			if (strcmp(PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2)) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("table %s on server \"%s\" is owned by \"%s\", table %s by \"%s\"",
								table, m->src_name, PQgetvalue(res, 0, 1), t->src_table, PQgetvalue(res, 0, 2)),
						 errhint("The tables a merge makes one have one owner: ALTER TABLE ... OWNER TO on the server.")));
			PQclear(res);
			c = MoveRemoteColumns(rc, table);
			if (c == NULL || strcmp(c, cols) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("table %s on server \"%s\" does not have the columns of table %s",
								table, m->src_name, t->src_table),
						 errdetail("Expected columns %s.", cols)));
			c = MoveRemotePkey(rc, table);
			if (c == NULL || pk == NULL || strcmp(c, want_pk) != 0 || strcmp(pk, want_pk) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("the primary key of table %s on server \"%s\" is not (%s)", table, m->src_name, t->id_col),
						 errhint("A merge applies the rows written meanwhile by their ID: give each table a primary key on its ID alone.")));
		}
		/*
		 * What would not carry over, or would break the switch's drop: a
		 * unique index but the primary key (it would apply across the tables
		 * merged, and a write to one of them could fail for a row of
		 * another), a view or rule on them, a publication of them, FORCE
		 * ROW LEVEL SECURITY (the copy runs as the owner and must see every
		 * row), a virtual generated column
		 */
		v = RemoteValueParams(rc, "SELECT x FROM (SELECT 1 o, 'unique index ' OPERATOR(pg_catalog.||) i.indexrelid::pg_catalog.regclass::text "
							  "OPERATOR(pg_catalog.||) ' of table ' OPERATOR(pg_catalog.||) i.indrelid::pg_catalog.regclass::text AS x "
							  "FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
							  "AND i.indisunique AND NOT i.indisprimary "
							  "UNION ALL SELECT 1, 'exclusion constraint ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.conname) "
							  "OPERATOR(pg_catalog.||) ' of table ' OPERATOR(pg_catalog.||) c.conrelid::pg_catalog.regclass::text "
							  "FROM pg_catalog.pg_constraint c WHERE c.conrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
							  "AND c.contype OPERATOR(pg_catalog.=) 'x' "
							  "UNION ALL SELECT 2, 'view or rule ' OPERATOR(pg_catalog.||) r.ev_class::pg_catalog.regclass::text "
							  "OPERATOR(pg_catalog.||) ' on table ' OPERATOR(pg_catalog.||) d.refobjid::pg_catalog.regclass::text "
							  "FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid "
							  "WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
							  "AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
							  "AND d.refobjid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
							  "UNION ALL SELECT 3, 'publication ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(p.pubname) "
							  "OPERATOR(pg_catalog.||) ' of table ' OPERATOR(pg_catalog.||) pr.prrelid::pg_catalog.regclass::text "
							  "FROM pg_catalog.pg_publication_rel pr JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) pr.prpubid "
							  "WHERE pr.prrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
							  "UNION ALL SELECT 4, 'FORCE ROW LEVEL SECURITY of table ' OPERATOR(pg_catalog.||) c.oid::pg_catalog.regclass::text "
							  "FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") AND c.relforcerowsecurity "
							  "UNION ALL SELECT 5, 'virtual generated column ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(a.attname) "
							  "OPERATOR(pg_catalog.||) ' of table ' OPERATOR(pg_catalog.||) a.attrelid::pg_catalog.regclass::text "
							  "FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
							  "AND a.attgenerated OPERATOR(pg_catalog.=) 'v' AND NOT a.attisdropped) y ORDER BY o, x LIMIT 1",
							  SQL_ARGS(SqlTextArray(MergeOf(t)->tables)), "look up what a merge cannot carry over");
		if (v != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the %s on server \"%s\" keeps genes %d to %d from being merged", v, m->src_name,
							m->first, m->last),
					 errdetail("A merge drops the tables it merges, copies them as their owner, and keeps only their primary key unique."),
					 errhint("Drop it (or turn it off) for the merge, then make it again on the merged table.")));
		res = RemoteExecParams(rc, "SELECT pg_catalog.quote_ident(c.conname), c.conrelid::pg_catalog.regclass::text, "
							   "c.confrelid::pg_catalog.regclass::text FROM pg_catalog.pg_constraint c "
							   "WHERE c.contype OPERATOR(pg_catalog.=) 'f' "
							   "AND c.confrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
							   "AND NOT coalesce(c.conrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) "), false) "
							   "ORDER BY c.conrelid, c.conname LIMIT 1",
							   SQL_ARGS(SqlTextArray(all)), "look up foreign keys referencing the tables to merge");
		if (PQntuples(res) == 1)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("foreign key %s of table %s on server \"%s\" references table %s, which the merge drops",
							PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), m->src_name, PQgetvalue(res, 0, 2)),
					 errhint("Drop the foreign key before merging, or merge the table that holds it too.")));
		PQclear(res);
		/* a table of the merged table's name (a move's, of part of these genes): the merge's id after it */
		for (int attempt = 0;; attempt++)
		{
			v = RemoteValueParams(rc, "SELECT pg_catalog.to_regclass($1::pg_catalog.text) IS NOT NULL",
								  SQL_ARGS(t->dst_table), "look up the merged table");
			if (strcmp(v, "t") != 0)
				break;
			if (attempt > 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_TABLE),
						 errmsg("table %s already exists on server \"%s\"", t->dst_table, m->src_name),
						 errhint("Drop or rename it: the merged genes get a table of that name.")));
			{
				MemoryContext old = MemoryContextSwitchTo(m->op.cxt);

				t->dst_rel = psprintf("%s_j" INT64_FORMAT, t->dst_rel, t->op.id);
				t->dst_table = quote_qualified_identifier(t->dst_nsp, t->dst_rel);
				MemoryContextSwitchTo(old);
			}
			MoveRecordsRunParams(m->op.ext, psprintf("UPDATE %s SET new_table = $1::pg_catalog.text "
												  "WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
												  MoveExt(m, "snowseq_merges"), t->op.id),
								 SQL_ARGS(t->dst_table), SPI_OK_UPDATE);
		}
	}
}

/* The owner of a table on the server, quoted. */
static char *
MergeOwner(RemoteConn *rc, const char *table)
{
	return RemoteValueParams(rc, "SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(relowner)) "
							 "FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
							 SQL_ARGS(table), "read the owner of a table");
}

/* The tables of one table of a merge, for move_schema.c: from its first table to the merged one. */
static MoveSchemaTables *
MergeSchemaTables(Move *t, RemoteConn *rc)
{
	MoveSchemaTables *st = palloc0(sizeof(MoveSchemaTables));

	st->src = rc;
	st->dst = rc;
	st->table = t->src_table;
	st->nsp = t->dst_nsp;
	st->src_rel = t->src_rel;
	st->dst_rel = t->dst_rel;
	st->target = t->dst_table;
	return st;
}

/*
 * Step: the merged tables, empty, with what the first table each merges
 * has (columns, keys, defaults, checks, indexes, policies, owner; its
 * triggers made but disabled, its grants and foreign keys left for the
 * switch: until then only the merge writes there, and what the triggers
 * and keys would do was done on the tables merged); then the trigger on
 * every table merged, which from its commit on applies each write there to
 * the merged table.  ENABLE ALWAYS: writes under session_replication_role
 * = replica (a subscription's) are applied too.
 */
static void
MergePrepare(Move *m)
{
	RemoteConn *rc = MoveSrc(m);
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		MoveSchemaTables *st = MergeSchemaTables(t, rc);
		char	   *cols = MoveRemoteColumns(rc, t->src_table);
		char	   *owner = MergeOwner(rc, t->src_table);

		/* one transaction: the table exists, marked as the merge's, or not at all */
		RemoteCommand(rc, psprintf("CREATE TABLE %s (%s, CONSTRAINT %s PRIMARY KEY (%s), CONSTRAINT %s CHECK (%s)); "
								   "COMMENT ON TABLE %s IS %s; ALTER TABLE %s OWNER TO %s",
								   t->dst_table, cols, quote_identifier(psprintf("%s_pkey", t->dst_rel)),
								   quote_identifier(t->id_col), quote_identifier(psprintf("%s_genes", t->dst_rel)),
								   MoveIdCondition(t), t->dst_table, quote_literal_cstr(MergeMark(t)),
								   t->dst_table, owner),
					  "create the merged table");
		/* indexes now: the backfill then fills them row by row, as the writes do */
		MoveSchemaCreate(st);
		MoveSchemaIndexes(st);
		RemoteCommand(rc, psprintf("ALTER TABLE %s DISABLE TRIGGER USER", t->dst_table),
					  "disable the triggers of the merged table until the switch");
	}
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		ListCell   *lt;

		foreach(lt, MergeOf(t)->tables)
			MoveTriggerDdl(rc, psprintf("CREATE TRIGGER snowseq_merge AFTER INSERT OR UPDATE OR DELETE ON %s "
										"FOR EACH ROW EXECUTE FUNCTION %s(%s, %s); "
										"ALTER TABLE %s ENABLE ALWAYS TRIGGER snowseq_merge; "
										"CREATE TRIGGER snowseq_merge_truncate BEFORE TRUNCATE ON %s "
										"FOR EACH STATEMENT EXECUTE FUNCTION %s(%s, %s); "
										"ALTER TABLE %s ENABLE ALWAYS TRIGGER snowseq_merge_truncate",
										(char *) lfirst(lt), MoveRemoteExt(rc, "snowseq_merge_mirror"),
										quote_literal_cstr(t->dst_table), quote_literal_cstr(t->id_col),
										(char *) lfirst(lt),
										(char *) lfirst(lt), MoveRemoteExt(rc, "snowseq_merge_mirror"),
										quote_literal_cstr(t->dst_table), quote_literal_cstr(t->id_col),
										(char *) lfirst(lt)),
						   "create the merge trigger");
	}
	{
		MemoryContext old = MemoryContextSwitchTo(m->op.cxt);

		MergeOf(m)->triggers = MergeTriggers(m, rc);
		MemoryContextSwitchTo(old);
	}
	MergeRecordStep(m, MERGE_STEP_COPY, NULL, NULL);
}

/*
 * Step: the backfill.  The rows of the tables merged are copied to the
 * merged table in batches of consecutive IDs that each commit (the bound of
 * a batch read first, unlocked, so that a row whose ID changes while the
 * batch waits for it cannot carry the batch past IDs it did not copy),
 * locked FOR SHARE and inserted ON CONFLICT DO NOTHING.  The lock makes a
 * writer of a row wait for the batch, or the batch for the writer, whose
 * version it then copies, unless the writer's trigger has applied it
 * already (merge_mirror.c).  A batch creates no row version in the tables
 * merged, so no REPEATABLE READ writer there fails for it; it waits for a
 * row at most a second and gives way in a deadlock (deadlock_timeout
 * 100 ms), and is tried again.  It runs as the tables' owner, with
 * row_security off (a policy that would hide a row from it is an ERROR,
 * never a row left out): the merged table's indexes, checks and defaults
 * are that role's code.  READ COMMITTED whatever the role's default.
 */
static void
MergeCopy(Move *m)
{
	RemoteConn *rc = MoveSrc(m);
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz noticed = start;
	int64		rows = 0;
	ListCell   *lc;

	SNOWSEQ_TESTPOINT("merge_before_backfill");
	RemoteCommand(rc, "SET default_transaction_isolation = 'read committed'; SET lock_timeout = '1s'; "
				  "SET deadlock_timeout = '100ms'", "set up the session of the copy");
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		const char *col = quote_identifier(t->id_col);
		/* the columns a row is copied with: not the generated ones, computed again */
		char	   *cols = RemoteValueParams(rc, "SELECT pg_catalog.string_agg(pg_catalog.quote_ident(attname), ', ' ORDER BY attnum) "
											 "FROM pg_catalog.pg_attribute WHERE attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
											 "AND attnum OPERATOR(pg_catalog.>) 0 AND NOT attisdropped AND attgenerated OPERATOR(pg_catalog.=) ''",
											 SQL_ARGS(t->dst_table), "read the columns of the merged table");
		char	   *owner = MergeOwner(rc, t->dst_table);
		ListCell   *lt;

		RemoteCommand(rc, psprintf("SET ROLE %s; SET row_security = off", owner), "become the owner of the tables");
		foreach(lt, MergeOf(t)->tables)
		{
			char	   *after = NULL;
			char	   *bound = psprintf("SELECT %s::pg_catalog.text FROM %s WHERE $1::pg_catalog.int8 IS NULL "
										 "OR %s OPERATOR(pg_catalog.>) $1::pg_catalog.int8 ORDER BY %s OFFSET %d LIMIT 1",
										 col, (char *) lfirst(lt), col, col, MERGE_BATCH_ROWS - 1);
			char	   *batch = psprintf("WITH b AS (SELECT %s FROM %s WHERE ($1::pg_catalog.int8 IS NULL "
										 "OR %s OPERATOR(pg_catalog.>) $1::pg_catalog.int8) AND ($2::pg_catalog.int8 IS NULL "
										 "OR %s OPERATOR(pg_catalog.<=) $2::pg_catalog.int8) FOR SHARE), "
										 "i AS (INSERT INTO %s (%s) SELECT %s FROM b ON CONFLICT (%s) DO NOTHING RETURNING 1) "
										 "SELECT pg_catalog.count(*) FROM i",
										 cols, (char *) lfirst(lt), col, col, t->dst_table, cols, cols, col);

			for (;;)
			{
				char	   *upper = RemoteValueParams(rc, bound, SQL_ARGS(after), "read the bound of a batch");
				PGresult   *res = NULL;
				char		state[6];

				for (int attempt = 1; res == NULL; attempt++)
				{
					res = RemoteTryExecParams(rc, batch, SQL_ARGS(after, upper), "copy a batch of rows to the merged table",
											  state);
					if (res != NULL)
						break;
					/* a lock waited for too long, a deadlock: again, a little later */
					if (attempt == MERGE_BATCH_TRIES ||
						(strcmp(state, "55P03") != 0 && strcmp(state, "40P01") != 0 && strcmp(state, "40001") != 0))
						res = RemoteExecParams(rc, batch, SQL_ARGS(after, upper), "copy a batch of rows to the merged table");
					else
						MoveSleep(10 * attempt);
				}
				rows += pg_strtoint64(PQgetvalue(res, 0, 0));
				PQclear(res);
				CHECK_FOR_INTERRUPTS();
				if (MsSince(noticed) > MERGE_NOTICE_MS)
				{
					noticed = GetCurrentTimestamp();
					ereport(NOTICE,
							(errmsg("merging genes %d to %d on server \"%s\": %lld rows after %.0f s",
									m->first, m->last, m->src_name, (long long) rows, MsSince(start) / 1000)));
				}
				if (upper == NULL)
					break;
				after = upper;
			}
		}
		RemoteCommand(rc, "RESET ROLE; RESET row_security", "be the merge's role again");
	}
	RemoteCommand(rc, "RESET default_transaction_isolation; RESET lock_timeout; RESET deadlock_timeout",
				  "reset the session of the copy");
	MergeRecordSet(m, psprintf("rows_copied = " INT64_FORMAT ", copied_at = pg_catalog.clock_timestamp()", rows), 0, NULL);
}

/*
 * Step: the merged table holds the rows of the tables it merges, each once
 * and alike, at one snapshot (one query): the trigger keeps it so from its
 * commit on, the backfill did for the rows before.  Compared by their text.
 */
static void
MergeCompare(Move *m)
{
	RemoteConn *rc = MoveSrc(m);
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *cols = RemoteValueParams(rc, "SELECT pg_catalog.string_agg('x.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(attname), ', ' ORDER BY attnum) "
											 "FROM pg_catalog.pg_attribute WHERE attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
											 "AND attnum OPERATOR(pg_catalog.>) 0 AND NOT attisdropped",
											 SQL_ARGS(t->src_table), "read the columns of the table");
		StringInfoData merged;
		ListCell   *lt;
		char	   *v;

		initStringInfo(&merged);
		foreach(lt, MergeOf(t)->tables)
			appendStringInfo(&merged, "%sSELECT ROW(%s)::text FROM %s x", merged.len ? " UNION ALL " : "",
							 cols, (char *) lfirst(lt));
		v = RemoteValue(rc, psprintf("SELECT (SELECT pg_catalog.count(*) FROM (%s EXCEPT ALL SELECT ROW(%s)::text FROM %s x) a) "
									 "OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM (SELECT ROW(%s)::text FROM %s x EXCEPT ALL (%s)) b)",
									 merged.data, cols, t->dst_table, cols, t->dst_table, merged.data),
						"compare the merged table with the tables it merges");
		if (strcmp(v, "0") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the merged table %s on server \"%s\" differs from the tables it merges in %s rows",
							t->dst_table, m->src_name, v),
					 errdetail("The merge is undone; nothing was switched."),
					 errhint("Look for a trigger on those tables that was disabled, or writes with triggers off, during the merge.")));
	}
	MergeRecordStep(m, MERGE_STEP_BLOCK, NULL, NULL);
}

/*
 * After a step's error (rolled back, committed): resolve the merge as its
 * committed state says.  Before the router's switch it is undone and the
 * error thrown: the merge failed.  Once the router switched the merge is
 * done, whatever the server says: finish it there, or, if the server
 * cannot be reached, leave that to cleanup and the resolver with a
 * WARNING; an ERROR would say the merge failed, and it did not.  Returns
 * false where no error is thrown.
 */
static bool
MergeFailed(Move *m, ErrorData *err)
{
	SPI_commit();
	if (MergeStateRead(m) == MOVE_STATE_SWITCHED)
	{
		ErrorData  *fin = MoveTry(m, MergeFinish);

		SPI_commit();
		if (fin == NULL)
			ereport(WARNING,
					(errmsg("merge " INT64_FORMAT " completed after an error: %s", m->op.id, err->message)));
		else
		{
			MergeRecordSet(m, "error = $1::pg_catalog.text", SQL_ARGS(fin->message));
			SPI_commit();
			ereport(WARNING,
					(errmsg("merge " INT64_FORMAT " is done on the router, but server \"%s\" did not finish it: %s",
							m->op.id, m->src_name, fin->message),
					 errdetail("The router switched to the merged tables; the server's prepared transaction commits when it is resolved."),
					 errhint("SELECT * FROM snowseq_move_cleanup(); finishes it once the server is reachable (the router's resolver does at its next start).")));
		}
		return false;
	}
	MergeUndo(m, err->message);
	SPI_commit();
	ReThrowError(err);
	return false;
}

/* Run a step of a merge and commit; as MergeFailed on an error. */
static bool
MergeRun(Move *m, MoveStep step)
{
	ErrorData  *err = MoveTry(m, step);

	if (err != NULL)
		return MergeFailed(m, err);
	SPI_commit();
	return true;
}

/*
 * Run the switch; while the server's tables were busy (a lock not had
 * within MERGE_SWITCH_LOCK_MS: a long query or an anti-wraparound vacuum
 * there), let go of everything and try again a little later, up to
 * MERGE_SWITCH_TRIES tries in all; otherwise as MergeRun.
 */
static bool
MergeRunSwitch(Move *m)
{
	for (int attempt = 1;; attempt++)
	{
		ErrorData  *err = MoveTry(m, MergeSwitch);

		if (err == NULL)
		{
			SPI_commit();
			return true;
		}
		if (err->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE || attempt == MERGE_SWITCH_TRIES)
			return MergeFailed(m, err);
		ereport(NOTICE,
				(errmsg("merge " INT64_FORMAT ": the switch found the tables busy (%s); trying again", m->op.id, err->message)));
		MoveReleaseParent(m);
		RemoteClose(m->sess.lock);
		m->sess.lock = NULL;
		SPI_commit();
		MoveSleep(1000L * attempt);
	}
}

PG_FUNCTION_INFO_V1(snowseq_merge_partitions);

/*
 * snowseq_merge_partitions(parent, first_gene, last_gene): the partitions of
 * those genes, on one server, become one, for every table of the placement
 * group that has partitions there.  A procedure: it commits between steps.
 */
Datum
snowseq_merge_partitions(PG_FUNCTION_ARGS)
{
	char	   *ext;
	Move	   *m;
	ListCell   *lc;
	char	   *pause;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table and genes of a merge must not be NULL")));
	MoveCheckNonAtomic(fcinfo, "a merge of partitions");
	SPI_connect_ext(SPI_OPT_NONATOMIC);
	ext = ExtSchemaQuoted(fcinfo->flinfo->fn_oid);
	m = MergePlan(ext, PG_GETARG_OID(0), PG_GETARG_INT32(1), PG_GETARG_INT32(2));

	/* moves and merges of these tables that were interrupted end first */
	foreach(lc, MoveGroup(m))
	{
		(void) CleanupMoves(ext, ((Move *) lfirst(lc))->parent, NULL, false, NOTICE);
		(void) MergeCleanup(ext, ((Move *) lfirst(lc))->parent, NULL, false, NOTICE);
	}
	SPI_commit();
	MergeRecordNew(m);
	SPI_commit();
	ereport(NOTICE,
			(errmsg("merge " INT64_FORMAT ": the partitions of genes %d to %d of table \"%s\"%s on server \"%s\" become one",
					m->op.id, m->first, m->last, m->parent_rel,
					m->group.members ? psprintf(" and of %d other tables of its placement group", list_length(m->group.members)) : "",
					m->src_name)));
	PG_TRY();
	{
		if (MergeRun(m, MergeChecks) &&
			MergeRun(m, MergePrepare) &&
			MergeRun(m, MergeCopy) &&
			MergeRun(m, MergeCompare) &&
			MergeRunSwitch(m))
		{
			SNOWSEQ_TESTPOINT("merge_after_router_commit");
			(void) MergeRun(m, MergeFinish);
			pause = MoveRecordsValue(m->op.ext, m->op.cxt, psprintf("SELECT pause_ms FROM %s WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
															  MoveExt(m, "snowseq_merges"), m->op.id));
			ereport(NOTICE,
					(errmsg("genes %d to %d of table \"%s\" are one partition, %s, on server \"%s\"; the switch held the table for %s ms",
							m->first, m->last, m->parent_rel, m->newpart.q, m->src_name, pause ? pause : "?")));
		}
	}
	PG_FINALLY();
	{
		MoveReleaseParent(m);
		MergeUnlock(m->op.id);
		MoveCloseSessions(m);
	}
	PG_END_TRY();
	SPI_finish();
	MemoryContextDelete(m->op.cxt);
	PG_RETURN_VOID();
}
