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
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "gene.h"
#include "merge.h"
#include "move_cleanup.h"
#include "move_common.h"
#include "move_group.h"
#include "move_plan.h"
#include "move_schema.h"
#include "move_switch.h"
#include "snowseq.h"
#include "sqlrun.h"
#include "testpoint.h"

#define MERGE_BATCH_ROWS	5000	/* rows the backfill updates per transaction */
#define MERGE_NOTICE_MS		10000	/* the backfill says how far it got so often */
#define MERGE_SWITCH_LOCK_MS	2000	/* the server's tables, with the router's lock held */
#define MERGE_SWITCH_TRIES	5		/* switches that found the server's tables busy */
#define MERGE_BATCH_TRIES	100		/* tries of a batch that waited too long or deadlocked */

/* One table of a merge: the partitions that become one. */
typedef struct MergeTable
{
	List	   *parts;			/* the router's partitions (quoted), in order */
	List	   *tables;			/* the tables they read on the server (quoted) */
	char	   *triggers;		/* the lead's: its merge triggers as made
								 * (MergeTriggers), checked at the switch */
} MergeTable;

/*
 * The states of a merge are those of moves it goes through (MoveStateName):
 * prepare, copy, switch, switched, then done, failed or rollback.
 */
#define MERGE_PREPARE	MoveStateName(MOVE_STATE_PREPARE)
#define MERGE_COPY		MoveStateName(MOVE_STATE_COPY)
#define MERGE_SWITCH	MoveStateName(MOVE_STATE_SWITCH)
#define MERGE_SWITCHED	MoveStateName(MOVE_STATE_SWITCHED)
#define MERGE_DONE		MoveStateName(MOVE_STATE_DONE)
#define MERGE_FAILED	MoveStateName(MOVE_STATE_FAILED)
#define MERGE_ROLLBACK	MoveStateName(MOVE_STATE_ROLLBACK)
/* a merge not over */
#define MERGE_NOT_OVER	MoveStateArray(MOVE_STATE_DONE, MOVE_STATE_FAILED, MOVE_STATE_NONE)

/* The router's lock of a merge, held by the session that runs it. */
static bool
MergeLock(int64 id, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_MERGE, id);
	return LockAcquire(&tag, ExclusiveLock, true, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

static void
MergeUnlock(int64 id)
{
	LOCKTAG		tag;

	SET_LOCKTAG_SNOWSEQ(tag, SNOWSEQ_LOCK_MERGE, id);
	(void) LockRelease(&tag, ExclusiveLock, true);
}

/* The table of a Move of a merge. */
static MergeTable *
MergeOf(Move *t)
{
	return (MergeTable *) t->merge;
}

/* Set columns of the records of a merge (every table's), as their owner. */
static void
MergeRecordSet(Move *m, const char *sets, int nargs, const char *const *values)
{
	MoveRecordsRunParams(m->ext, psprintf("UPDATE %s SET %s WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT
										  " OR group_merge OPERATOR(pg_catalog.=) " INT64_FORMAT,
										  MoveExt(m, "snowseq_merges"), sets, m->id, m->id),
						 nargs, values, SPI_OK_UPDATE);
}

/* Record the state of a merge. */
static void
MergeRecordState(Move *m, const char *state, const char *sets)
{
	MergeRecordSet(m, psprintf("state = $1::pg_catalog.text%s%s", sets ? ", " : "", sets ? sets : ""),
				   SQL_ARGS(state));
}

/* The committed state of a merge. */
static char *
MergeStateRead(Move *m)
{
	return MoveRecordsValue(m->ext, m->cxt, psprintf("SELECT state FROM %s WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
													 MoveExt(m, "snowseq_merges"), m->id));
}

/* The comment that marks the merged table as the merge's until its switch. */
static char *
MergeMark(Move *m)
{
	return psprintf("snowseq %s: merge in progress", MoveLead(m)->token);
}

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
	MergeTable *mt = MemoryContextAllocZero(t->cxt, sizeof(MergeTable));
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
							 t->lead ? ", and partition the tables of a placement group on the same genes" : "")));
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
			*server = MemoryContextStrdup(t->cxt, fs->servername);
		else if (strcmp(*server, fs->servername) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition \"%s\" of table \"%s\" reads server \"%s\", not server \"%s\"",
							name, t->parent_rel, fs->servername, *server),
					 errhint("Move its genes to server \"%s\" first (snowseq_move_to_neighbour), then merge.", *server)));
		MoveForeignNames(b->relid, key, &schema, &table, &col);
		old = MemoryContextSwitchTo(t->cxt);
		if (mt->parts == NIL)
		{
			/* the first partition: the merged one's options, schema and ID column */
			t->part_has_lo = b->has_lo;
			t->part_lo = b->lo;
			t->dst_nsp = pstrdup(schema);
			t->src_rel = pstrdup(table);
			t->src_table = quote_qualified_identifier(schema, table);
			t->id_col = pstrdup(col);
			t->part_q = pstrdup(part_q);
			MoveForeignOptions(t, b->relid, &t->new_opts, &t->new_colopts);
		}
		else if (strcmp(col, t->id_col) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition \"%s\" of table \"%s\" reads its ID from column \"%s\", partition %s from column \"%s\"",
							name, t->parent_rel, col, t->part_q, t->id_col)));
		t->part_has_hi = b->has_hi;
		t->part_hi = b->hi;
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
	t->new_cols = MoveParentColumns(t);
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
				m->members = list_delete_ptr(m->members, t);
				continue;
			}
			t->src_name = server;
			t->dst_name = server;
		}
	}
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *v = SpiValue(m->cxt, psprintf("SELECT pg_catalog.pg_has_role(relowner, 'USAGE') FROM pg_catalog.pg_class "
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
				MemoryContext old = MemoryContextSwitchTo(m->cxt);

				t->dst_rel = psprintf("%s_j" INT64_FORMAT, t->dst_rel, t->id);
				t->dst_table = quote_qualified_identifier(t->dst_nsp, t->dst_rel);
				MemoryContextSwitchTo(old);
			}
			MoveRecordsRunParams(m->ext, psprintf("UPDATE %s SET new_table = $1::pg_catalog.text "
												  "WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
												  MoveExt(m, "snowseq_merges"), t->id),
								 SQL_ARGS(t->dst_table), SPI_OK_UPDATE);
		}
	}
}

/*
 * Refuse a merge that overlaps a move or merge not over, of any table of
 * its group; record it (one row per table, the lead first) and take its
 * lock.  Its names: the router's node, this database and the merge.
 */
static void
MergeRecordNew(Move *m)
{
	char	   *node = MoveLocalNode(m);
	ListCell   *lc;

	MoveLockStart();
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *v;

		v = MoveRecordsValueParams(m->ext, m->cxt,
								   psprintf("SELECT move_id::pg_catalog.text OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||) state OPERATOR(pg_catalog.||) ')' "
											"FROM %s WHERE parent OPERATOR(pg_catalog.=) %u "
											"AND state OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) "
											"AND (last_gene OPERATOR(pg_catalog.>=) %d AND first_gene OPERATOR(pg_catalog.<=) %d "
											"OR part_name OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]) "
											"OR new_part_name OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])) "
											"ORDER BY move_id LIMIT 1",
											MoveExt(m, "snowseq_moves"), t->parent, m->first, m->last),
								   SQL_ARGS(MoveStateArray(MOVE_STATE_DONE, MOVE_STATE_FAILED, MOVE_STATE_REVERTED, MOVE_STATE_NONE),
											SqlTextArray(MergeOf(t)->parts)));
		if (v != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("genes %d to %d of table \"%s\" are in move %s", m->first, m->last, t->parent_rel, v),
					 errhint("Merge once it is over: done, failed, or (a revertable move) finalized; snowseq_move_cleanup() ends one that was interrupted.")));
		v = MoveRecordsValueParams(m->ext, m->cxt,
								   psprintf("SELECT merge_id::pg_catalog.text FROM %s WHERE parent OPERATOR(pg_catalog.=) %u "
											"AND state OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) "
											"AND last_gene OPERATOR(pg_catalog.>=) %d AND first_gene OPERATOR(pg_catalog.<=) %d "
											"ORDER BY merge_id LIMIT 1",
											MoveExt(m, "snowseq_merges"), t->parent, m->first, m->last),
								   SQL_ARGS(MERGE_NOT_OVER));
		if (v != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("genes %d to %d of table \"%s\" are in merge %s, which is not over", m->first, m->last, t->parent_rel, v),
					 errhint("Wait for it to end; snowseq_move_cleanup() ends one that was interrupted.")));
	}
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		MemoryContext old;
		char	   *name;

		t->id = pg_strtoint64(MoveRecordsValueParams(m->ext, m->cxt,
													 "SELECT pg_catalog.nextval(pg_catalog.pg_get_serial_sequence($1::pg_catalog.text, 'merge_id'))",
													 SQL_ARGS(MoveExt(m, "snowseq_merges"))));
		old = MemoryContextSwitchTo(m->cxt);
		if (t->lead == NULL)
			t->token = psprintf("snowseq_merge_%s_%u_" INT64_FORMAT, node, MyDatabaseId, t->id);
		else
			t->token = m->token;
		/* the merged table and the new partition: the parent's name, with the range */
		name = psprintf("%s_g%d_%d", t->parent_rel, m->first, m->last);
		if (strlen(name) >= NAMEDATALEN - 12)
			ereport(ERROR,
					(errcode(ERRCODE_NAME_TOO_LONG),
					 errmsg("the name of the merged table, \"%s\", is too long", name),
					 errhint("Use a shorter table name.")));
		t->dst_rel = name;
		t->dst_table = quote_qualified_identifier(t->dst_nsp, name);
		if (OidIsValid(get_relname_relid(name, get_rel_namespace(t->parent))))
			name = psprintf("%s_j" INT64_FORMAT, name, t->id);
		t->new_part_q = quote_qualified_identifier(get_namespace_name(get_rel_namespace(t->parent)), name);
		MemoryContextSwitchTo(old);
		MoveRecordsRunParams(m->ext, psprintf("INSERT INTO %s (merge_id, group_merge, parent, first_gene, last_gene, server, "
											  "parts, source_tables, new_part_name, new_table, part_lower, part_upper, id_column, "
											  "token, state, mover) OVERRIDING SYSTEM VALUE VALUES ($1::pg_catalog.int8, "
											  "$2::pg_catalog.int8, $3::pg_catalog.oid, $4::pg_catalog.int4, $5::pg_catalog.int4, "
											  "$6::pg_catalog.name, $7::pg_catalog.text[], $8::pg_catalog.text[], $9::pg_catalog.text, "
											  "$10::pg_catalog.text, $11::pg_catalog.int8, $12::pg_catalog.int8, $13::pg_catalog.text, "
											  "$14::pg_catalog.text, $15::pg_catalog.text, $16::pg_catalog.oid)",
											  MoveExt(m, "snowseq_merges")),
							 SQL_ARGS(psprintf(INT64_FORMAT, t->id), Int8Arg(t->lead != NULL, m->id),
									  psprintf("%u", t->parent), psprintf("%d", m->first), psprintf("%d", m->last),
									  m->src_name, SqlTextArray(MergeOf(t)->parts), SqlTextArray(MergeOf(t)->tables),
									  t->new_part_q, t->dst_table, Int8Arg(t->part_has_lo, t->part_lo),
									  Int8Arg(t->part_has_hi, t->part_hi), t->id_col, t->token, MERGE_PREPARE,
									  psprintf("%u", GetUserId())),
							 SPI_OK_INSERT);
	}
	(void) MergeLock(m->id, true);
}

/*
 * In the switch's server transaction, before the tables merged go: the
 * foreign keys of the first table each table merges, made NOT VALID on its
 * merged table, referencing the merged table of the group where they
 * referenced a table the merge drops, else the table they referenced;
 * validated once the merge has switched (MergeValidateKeys).  Not before:
 * the trigger applies a referencing row and the row it references in the
 * order the writes committed on the tables merged, which checked them.
 */
static void
MergeForeignKeys(Move *m, RemoteConn *rc)
{
	List	   *from = NIL;
	List	   *to = NIL;
	ListCell   *lc;

	/* what each dropped table becomes */
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		ListCell   *lt;

		foreach(lt, MergeOf(t)->tables)
		{
			from = lappend(from, lfirst(lt));
			to = lappend(to, t->dst_table);
		}
	}
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *sql = RemoteValueParams(rc,
											"SELECT pg_catalog.string_agg(pg_catalog.format('ALTER TABLE %s ADD CONSTRAINT %I %s NOT VALID', "
											"$2::pg_catalog.text, $4::pg_catalog.text OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) c.conname, "
											"pg_catalog.replace(pg_catalog.pg_get_constraintdef(c.oid), "
											"' REFERENCES ' OPERATOR(pg_catalog.||) c.confrelid::pg_catalog.regclass::text OPERATOR(pg_catalog.||) '(', "
											"' REFERENCES ' OPERATOR(pg_catalog.||) coalesce(d.t, c.confrelid::pg_catalog.regclass::text) "
											"OPERATOR(pg_catalog.||) '(')), '; ' ORDER BY c.conname) "
											"FROM pg_catalog.pg_constraint c LEFT JOIN ROWS FROM (pg_catalog.unnest($3::pg_catalog.text[]), "
											"pg_catalog.unnest($5::pg_catalog.text[])) d(f, t) "
											"ON pg_catalog.to_regclass(d.f) OPERATOR(pg_catalog.=) c.confrelid "
											"WHERE c.conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND c.contype OPERATOR(pg_catalog.=) 'f'",
											SQL_ARGS(t->src_table, t->dst_table, SqlTextArray(from), t->dst_rel, SqlTextArray(to)),
											"read the foreign keys of the tables to merge");

		if (sql != NULL)
			RemoteCommand(rc, sql, "create the foreign keys of the merged table");
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
 * The merge triggers on the tables of a merge, as "oid:xmin" of each
 * pg_trigger row: a trigger dropped, disabled or changed since they were
 * made (even disabled and enabled again: each ALTER writes the row anew)
 * changes it.
 */
static char *
MergeTriggers(Move *m, RemoteConn *rc)
{
	List	   *all = NIL;
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
		all = list_concat(all, list_copy(MergeOf(lfirst(lc))->tables));
	return RemoteValueParams(rc, "SELECT pg_catalog.string_agg(t.oid::text OPERATOR(pg_catalog.||) ':' "
							 "OPERATOR(pg_catalog.||) t.xmin::text, ' ' ORDER BY t.oid) "
							 "FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
							 "AND t.tgname OPERATOR(pg_catalog.=) ANY ('{snowseq_merge,snowseq_merge_truncate}')",
							 SQL_ARGS(SqlTextArray(all)), "read the merge triggers");
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
		MemoryContext old = MemoryContextSwitchTo(m->cxt);

		MergeOf(m)->triggers = MergeTriggers(m, rc);
		MemoryContextSwitchTo(old);
	}
	MergeRecordState(m, MERGE_COPY, NULL);
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
	MergeRecordState(m, MERGE_SWITCH, NULL);
}

/*
 * Step: the switch.  The router locks the parents; a server transaction
 * locks the tables, checks that the merge trigger is on every one of them,
 * drops them and is prepared; the router swaps the partitions for one, on
 * the merged table, and commits state 'switched' with it (the step's
 * caller commits); MergeFinish commits the server's.  The parents' lock is
 * held (a session lock) until then, as a move holds it (MoveHoldParent).
 */
static void
MergeSwitch(Move *m)
{
	RemoteConn *rc;
	StringInfoData tables;
	StringInfoData dropped;
	ListCell   *lc;
	List	   *all = NIL;
	char	   *v;

	(void) MoveLockParent(m, false);
	m->blocked_at = GetCurrentTimestamp();
	RemoteClose(m->lock);
	m->lock = NULL;
	rc = MoveSession(m, &m->lock, m->src_name);
	initStringInfo(&tables);
	initStringInfo(&dropped);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		ListCell   *lt;

		appendStringInfo(&tables, "%s%s", tables.len ? ", " : "", t->dst_table);
		foreach(lt, MergeOf(t)->tables)
		{
			appendStringInfo(&tables, ", %s", (char *) lfirst(lt));
			appendStringInfo(&dropped, "%s%s", dropped.len ? ", " : "", (char *) lfirst(lt));
		}
	}
	foreach(lc, MoveGroup(m))
		all = list_concat(all, list_copy(MergeOf(lfirst(lc))->tables));
	RemoteCommand(rc, "BEGIN", "begin the server transaction of the merge");
	/* no router query reaches them now: only an autovacuum or a query on the server itself */
	MoveCancelAutovacuum(rc, all);
	RemoteCommand(rc, psprintf("SET LOCAL lock_timeout = %d; LOCK TABLE %s IN ACCESS EXCLUSIVE MODE",
							   MERGE_SWITCH_LOCK_MS, tables.data),
				  "lock the tables of the merge");
	/* the triggers as the prepare step made them, so no write escaped them */
	v = MergeTriggers(m, rc);
	if (v == NULL || MergeOf(m)->triggers == NULL || strcmp(v, MergeOf(m)->triggers) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a merge trigger on the tables of the merge on server \"%s\" was dropped, disabled or changed",
						m->src_name),
				 errdetail("Writes since then may be missing in the merged table; the merge is undone.")));
	MergeForeignKeys(m, rc);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		char	   *cols = MoveRemoteColumns(rc, t->dst_table);
		ListCell   *lt;

		/* no column came or went since the copy */
		foreach(lt, MergeOf(t)->tables)
		{
			char	   *c = MoveRemoteColumns(rc, lfirst(lt));

			if (c == NULL || strcmp(c, cols) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("the columns of table %s on server \"%s\" changed during the merge",
								(char *) lfirst(lt), m->src_name),
						 errdetail("The merge is undone.")));
		}
		/* the first table's grants, the sequences its columns own, its triggers as they are on it */
		v = RemoteValueParams(rc, "SELECT pg_catalog.concat_ws('; ', "
							  "(SELECT pg_catalog.string_agg(pg_catalog.format('GRANT %s ON TABLE %s TO %s', x.privilege_type, "
							  "$2::pg_catalog.text, CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' "
							  "ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(x.grantee)) END), '; ') "
							  "FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) x "
							  "WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND x.grantee OPERATOR(pg_catalog.<>) c.relowner), "
							  "(SELECT pg_catalog.string_agg(pg_catalog.format('ALTER SEQUENCE %s OWNED BY %s.%I', "
							  "d.objid::pg_catalog.regclass, $2::pg_catalog.text, a.attname), '; ') "
							  "FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_class q ON q.oid OPERATOR(pg_catalog.=) d.objid "
							  "JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.refobjid "
							  "AND a.attnum OPERATOR(pg_catalog.=) d.refobjsubid "
							  "WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
							  "AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
							  "AND d.refobjid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND d.deptype OPERATOR(pg_catalog.=) 'a' "
							  "AND q.relkind OPERATOR(pg_catalog.=) 'S'), "
							  "(SELECT pg_catalog.string_agg(pg_catalog.format('ALTER TABLE %s %s TRIGGER %I', $2::pg_catalog.text, "
							  "CASE tgenabled WHEN 'O' THEN 'ENABLE' WHEN 'R' THEN 'ENABLE REPLICA' WHEN 'A' THEN 'ENABLE ALWAYS' "
							  "ELSE 'DISABLE' END, tgname), '; ') FROM pg_catalog.pg_trigger "
							  "WHERE tgrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND NOT tgisinternal "
							  "AND tgname OPERATOR(pg_catalog.<>) ALL ('{snowseq_fence,snowseq_fence_truncate,snowseq_merge,snowseq_merge_truncate}')))",
							  SQL_ARGS(t->src_table, t->dst_table), "read the grants, sequences and triggers of the table");
		if (v != NULL && v[0] != '\0')
			RemoteCommand(rc, v, "give the merged table the grants, sequences and triggers of the first table");
		RemoteCommand(rc, psprintf("COMMENT ON TABLE %s IS NULL", t->dst_table), "unmark the merged table");
	}
	/* their fences (tombstones of genes moved away, outside the merged table's check) go with them */
	foreach(lc, all)
		RemoteCommandParams(rc, psprintf("SELECT %s($1::pg_catalog.regclass)", MoveRemoteExt(rc, "snowseq_fence_clear")),
							SQL_ARGS((char *) lfirst(lc)), "clear the fences of a table the merge drops");
	RemoteCommand(rc, psprintf("DROP TABLE %s", dropped.data), "drop the tables the merge made one");
	RemoteCommand(rc, psprintf("PREPARE TRANSACTION %s", quote_literal_cstr(m->token)),
				  "prepare the server transaction of the merge");

	/* the router: one partition for the merged table, in place of the old ones */
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		ListCell   *lp;

		SpiRun(psprintf("CREATE FOREIGN TABLE %s (%s) SERVER %s OPTIONS (schema_name %s, table_name %s%s)",
						t->new_part_q, t->new_cols, quote_identifier(t->src_name),
						quote_literal_cstr(t->dst_nsp), quote_literal_cstr(t->dst_rel),
						t->new_opts ? t->new_opts : ""), SPI_OK_UTILITY);
		if (t->new_colopts != NULL)
			SpiRun(psprintf("ALTER FOREIGN TABLE %s %s", t->new_part_q, t->new_colopts + 1), SPI_OK_UTILITY);
		foreach(lp, MergeOf(t)->parts)
		{
			SpiRun(psprintf("ALTER TABLE %s DETACH PARTITION %s", t->parent_q, (char *) lfirst(lp)), SPI_OK_UTILITY);
			SpiRun(psprintf("DROP FOREIGN TABLE %s", (char *) lfirst(lp)), SPI_OK_UTILITY);
		}
		SpiRun(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
						t->parent_q, t->new_part_q, BoundSql(t->part_has_lo, t->part_lo, "MINVALUE"),
						BoundSql(t->part_has_hi, t->part_hi, "MAXVALUE")), SPI_OK_UTILITY);
	}
	MoveHoldParent(m);
	SNOWSEQ_TESTPOINT("merge_before_router_commit");
	MergeRecordState(m, MERGE_SWITCHED, psprintf("switched_at = pg_catalog.clock_timestamp(), pause_ms = %.1f",
												 MsSince(m->blocked_at)));
}

/*
 * Validate the foreign keys that MergeForeignKeys made, where the first
 * table merged had them valid; a key that does not validate stays NOT
 * VALID, with a WARNING.
 */
static void
MergeValidateKeys(Move *m)
{
	RemoteConn *rc = MoveSrc(m);
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		PGresult   *res = RemoteExecParams(rc, "SELECT pg_catalog.quote_ident(conname) FROM pg_catalog.pg_constraint "
										   "WHERE conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
										   "AND contype OPERATOR(pg_catalog.=) 'f' AND NOT convalidated ORDER BY conname",
										   SQL_ARGS(t->dst_table), "read the foreign keys to validate");

		for (int i = 0; i < PQntuples(res); i++)
		{
			char		state[6];
			char	   *err = RemoteTryMessage(rc, psprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s", t->dst_table,
															PQgetvalue(res, i, 0)),
											   "validate a foreign key of the merged table", state);

			if (err != NULL)
				ereport(WARNING,
						(errmsg("foreign key %s of table %s on server \"%s\" stays NOT VALID: %s",
								PQgetvalue(res, i, 0), t->dst_table, m->src_name, err),
						 errhint("It holds for new rows; fix the rows that break it, then ALTER TABLE ... VALIDATE CONSTRAINT.")));
		}
		PQclear(res);
	}
}

/* Step: after the router's commit, the server's; the keys validated. */
static void
MergeFinish(Move *m)
{
	MoveResolvePrepared(m, true);
	MoveReleaseParent(m);
	MergeValidateKeys(m);
	MergeRecordState(m, MERGE_DONE, "finished_at = pg_catalog.clock_timestamp(), error = NULL");
}

/*
 * Step of an undo: the server transaction rolled back if it was prepared,
 * the merge triggers dropped from the tables merged (which are there
 * again), the merged tables still marked as the merge's dropped.
 */
static void
MergeUndoObjects(Move *m)
{
	RemoteConn *rc = MoveSrc(m);
	List	   *merged = NIL;
	ListCell   *lc;

	MoveResolvePrepared(m, false);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		ListCell   *lt;
		char	   *v;

		foreach(lt, MergeOf(t)->tables)
		{
			v = RemoteValueParams(rc, "SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger WHERE tgrelid "
								  "OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text) "
								  "AND tgname OPERATOR(pg_catalog.=) ANY ('{snowseq_merge,snowseq_merge_truncate}')",
								  SQL_ARGS((char *) lfirst(lt)), "look up the merge trigger");
			if (strcmp(v, "0") == 0)
				continue;
			MoveTriggerDdl(rc, psprintf("DROP TRIGGER IF EXISTS snowseq_merge ON %s; "
										"DROP TRIGGER IF EXISTS snowseq_merge_truncate ON %s",
										(char *) lfirst(lt), (char *) lfirst(lt)),
						   "drop the merge trigger");
			MoveNote(t, m->src_name, psprintf("trigger snowseq_merge on %s", (char *) lfirst(lt)), "dropped");
		}
		v = RemoteValueParams(rc, "SELECT pg_catalog.obj_description(pg_catalog.to_regclass($1::pg_catalog.text), 'pg_class') "
							  "OPERATOR(pg_catalog.=) $2::pg_catalog.text",
							  SQL_ARGS(t->dst_table, MergeMark(t)), "look up the merged table");
		if (v != NULL && strcmp(v, "t") == 0)
			merged = lappend(merged, t->dst_table);
	}
	if (merged != NIL)
	{
		StringInfoData names;

		initStringInfo(&names);
		foreach(lc, merged)
			appendStringInfo(&names, "%s%s", names.len ? ", " : "", (char *) lfirst(lc));
		RemoteCommand(rc, psprintf("DROP TABLE %s", names.data), "drop the merged tables");
		foreach(lc, merged)
			MoveNote(m, m->src_name, psprintf("table %s", (char *) lfirst(lc)), "dropped");
	}
}

/*
 * Undo a merge that did not switch: the server transaction rolled back (if
 * prepared), the merge triggers and the merged tables (those still marked
 * as the merge's) dropped.  Leaves state failed, or rollback if something
 * could not be removed (with a WARNING).
 */
static void
MergeUndo(Move *m, const char *error)
{
	ErrorData  *err;

	RemoteClose(m->lock);
	m->lock = NULL;
	MoveReleaseParent(m);
	err = MoveTry(m, MergeUndoObjects);
	if (err != NULL)
	{
		MoveNote(m, m->src_name, "merge", psprintf("not undone: %s", err->message));
		MergeRecordSet(m, "state = $1::pg_catalog.text, error = $2::pg_catalog.text, finished_at = pg_catalog.clock_timestamp()",
					   SQL_ARGS(MERGE_ROLLBACK, error));
		ereport(WARNING,
				(errmsg("merge " INT64_FORMAT " could not be undone on server \"%s\": %s", m->id, m->src_name, err->message),
				 errhint("SELECT * FROM snowseq_move_cleanup(); undoes it once the server is reachable.")));
		return;
	}
	MergeRecordSet(m, "state = $1::pg_catalog.text, error = $2::pg_catalog.text, finished_at = pg_catalog.clock_timestamp()",
				   SQL_ARGS(MERGE_FAILED, error));
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
	char	   *state;

	SPI_commit();
	state = MergeStateRead(m);
	if (state != NULL && strcmp(state, MERGE_SWITCHED) == 0)
	{
		ErrorData  *fin = MoveTry(m, MergeFinish);

		SPI_commit();
		if (fin == NULL)
			ereport(WARNING,
					(errmsg("merge " INT64_FORMAT " completed after an error: %s", m->id, err->message)));
		else
		{
			MergeRecordSet(m, "error = $1::pg_catalog.text", SQL_ARGS(fin->message));
			SPI_commit();
			ereport(WARNING,
					(errmsg("merge " INT64_FORMAT " is done on the router, but server \"%s\" did not finish it: %s",
							m->id, m->src_name, fin->message),
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
				(errmsg("merge " INT64_FORMAT ": the switch found the tables busy (%s); trying again", m->id, err->message)));
		MoveReleaseParent(m);
		RemoteClose(m->lock);
		m->lock = NULL;
		SPI_commit();
		MoveSleep(1000L * attempt);
	}
}

/*
 * Resolve a merge that no session runs (its lock taken): finish it if its
 * router switched, else undo it; report into collect, or at elevel.
 */
static void
MergeResolve(Move *m, Move *collect, int elevel)
{
	char	   *state = MergeStateRead(m);

	if (strcmp(state, MERGE_SWITCHED) == 0)
	{
		ErrorData  *err = MoveTry(m, MergeFinish);

		if (err != NULL)
		{
			MoveNote(m, m->src_name, "merge", psprintf("not finished: %s", err->message));
			MergeRecordSet(m, "error = $1::pg_catalog.text", SQL_ARGS(err->message));
		}
		else
			MoveNote(m, m->src_name, "merge", "finished");
	}
	else
	{
		MergeUndo(m, "interrupted");
		if (strcmp(MergeStateRead(m), MERGE_FAILED) == 0)
			MoveNote(m, m->src_name, "merge", "undone");
	}
	if (collect != NULL)
		MoveReportCopy(collect, m);
	else
	{
		ListCell   *lc;

		foreach(lc, m->report)
		{
			MoveReport *r = lfirst(lc);

			ereport(elevel,
					(errmsg("interrupted merge " INT64_FORMAT " of genes %d to %d: %s%s%s: %s",
							m->id, m->first, m->last, r->server ? r->server : "",
							r->server ? ": " : "", r->object, r->action)));
		}
	}
}

/*
 * A merge's Move from its records: the lead's row, and one Move per other
 * table, each with its partitions and tables.
 */
static Move *
MergeLoad(const char *ext, int64 id)
{
	Move	   *m = MoveNew(ext);
	SPITupleTable *rows;
	uint64		n;

	MoveRecordsRunParams(ext, psprintf("SELECT merge_id, parent, first_gene, last_gene, server, parts, source_tables, "
									   "new_part_name, new_table, (pg_catalog.parse_ident(new_table))[1], "
									   "(pg_catalog.parse_ident(new_table))[2], token, parent::pg_catalog.text, mover "
									   "FROM %s.snowseq_merges WHERE merge_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 "
									   "OR group_merge OPERATOR(pg_catalog.=) $1::pg_catalog.int8 ORDER BY merge_id", ext),
						 SQL_ARGS(psprintf(INT64_FORMAT, id)), SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = rows->vals[i];
		TupleDesc	d = rows->tupdesc;
		bool		isnull;
		Move	   *t = i == 0 ? m : MoveNewMember(m, InvalidOid);
		MergeTable *mt = MemoryContextAllocZero(m->cxt, sizeof(MergeTable));
		MemoryContext old = MemoryContextSwitchTo(m->cxt);
		ArrayType  *a;
		Datum	   *elems;
		int			ne;

		t->merge = mt;
		t->id = DatumGetInt64(SPI_getbinval(tup, d, 1, &isnull));
		t->parent = DatumGetObjectId(SPI_getbinval(tup, d, 2, &isnull));
		t->first = DatumGetInt32(SPI_getbinval(tup, d, 3, &isnull));
		t->last = DatumGetInt32(SPI_getbinval(tup, d, 4, &isnull));
		t->src_name = SPI_getvalue(tup, d, 5);
		t->dst_name = t->src_name;
		a = DatumGetArrayTypeP(SPI_getbinval(tup, d, 6, &isnull));
		deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &ne);
		for (int j = 0; j < ne; j++)
			mt->parts = lappend(mt->parts, TextDatumGetCString(elems[j]));
		a = DatumGetArrayTypeP(SPI_getbinval(tup, d, 7, &isnull));
		deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &ne);
		for (int j = 0; j < ne; j++)
			mt->tables = lappend(mt->tables, TextDatumGetCString(elems[j]));
		t->new_part_q = SPI_getvalue(tup, d, 8);
		t->dst_table = SPI_getvalue(tup, d, 9);
		t->dst_nsp = SPI_getvalue(tup, d, 10);
		t->dst_rel = SPI_getvalue(tup, d, 11);
		t->token = SPI_getvalue(tup, d, 12);
		t->parent_q = SPI_getvalue(tup, d, 13);
		t->parent_rel = t->parent_q;
		t->mover = DatumGetObjectId(SPI_getbinval(tup, d, 14, &isnull));
		MemoryContextSwitchTo(old);
	}
	return m;
}

/*
 * Load and resolve one merge (into *m, for the caller to close); *over:
 * whether it is over.
 */
static void
MergeCleanupResolve(const char *ext, int64 id, Move *collect, bool at_start, int elevel, Move *volatile *m,
					volatile bool *over)
{
	Oid			save_user;
	int			save_sec;
	char	   *state;

	*m = MergeLoad(ext, id);
	/* at the router's start: as the role that ran the merge (its user mappings), if it is still there */
	GetUserIdAndSecContext(&save_user, &save_sec);
	if (at_start && OidIsValid((*m)->mover) &&
		SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum((*m)->mover)))
		SetUserIdAndSecContext((*m)->mover, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	MergeResolve(*m, collect, elevel);
	SetUserIdAndSecContext(save_user, save_sec);
	state = MergeStateRead(*m);
	*over = strcmp(state, MERGE_DONE) == 0 || strcmp(state, MERGE_FAILED) == 0;
}

/* Close the sessions of a merge cleanup resolved (if loaded), and let go of its lock. */
static void
MergeCleanupRelease(int64 id, Move *m)
{
	if (m != NULL)
	{
		MoveCloseSessions(m);
		MemoryContextDelete(m->cxt);
	}
	MergeUnlock(id);
}

/*
 * Resolve one merge whose lock this session has just taken (MergeCleanup),
 * and let go of the lock and of its sessions, whatever happens; whether it
 * is over.
 */
static bool
MergeCleanupOne(const char *ext, int64 id, Move *collect, bool at_start, int elevel)
{
	Move	   *volatile m = NULL;
	volatile bool over = false;

	PG_TRY();
	{
		MergeCleanupResolve(ext, id, collect, at_start, elevel, &m, &over);
	}
	PG_CATCH();
	{
		MergeCleanupRelease(id, m);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MergeCleanupRelease(id, m);
	return over;
}

/*
 * Resolve the merges that no session runs (of one table's group, or all):
 * finish those the router switched, undo the others; at_start (the
 * resolver, at the router's start) as the role that ran each.  Returns how
 * many are still not over.
 */
int
MergeCleanup(const char *ext, Oid parent, Move *collect, bool at_start, int elevel)
{
	List	   *ids = NIL;
	ListCell   *lc;
	int			left = 0;

	/* a catalog older than 1.3 has no merges */
	if (SpiValueParams(CurrentMemoryContext, "SELECT pg_catalog.to_regclass($1::pg_catalog.text)",
					   SQL_ARGS(psprintf("%s.snowseq_merges", ext))) == NULL)
		return 0;
	MoveRecordsRunParams(ext, psprintf("SELECT m.merge_id FROM %s.snowseq_merges m WHERE m.group_merge IS NULL "
									   "AND m.state OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) %s ORDER BY m.merge_id",
									   ext,
									   OidIsValid(parent) ?
									   psprintf("AND EXISTS (SELECT 1 FROM %s.snowseq_merges g WHERE (g.merge_id OPERATOR(pg_catalog.=) m.merge_id "
												"OR g.group_merge OPERATOR(pg_catalog.=) m.merge_id) AND g.parent OPERATOR(pg_catalog.=) %u)",
												ext, parent) : ""),
						 SQL_ARGS(MERGE_NOT_OVER), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		ids = lappend(ids, psprintf(INT64_FORMAT, DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
																			   SPI_tuptable->tupdesc, 1, &isnull))));
	}
	foreach(lc, ids)
	{
		int64		id = pg_strtoint64(lfirst(lc));

		if (!MergeLock(id, false) || !MergeCleanupOne(ext, id, collect, at_start, elevel))
			left++;
	}
	return left;
}

/*
 * At the start of a router (its resolver, in a transaction): resolve the
 * merges of this database that a crash interrupted, as snowseq_move_cleanup()
 * would: one in or after its switch holds the server's tables in its
 * prepared transaction, one before it keeps the trigger on the tables it
 * merges (a cost to every write there, and TRUNCATE refused), and nothing of
 * either runs after a restart.  Returns how many are left.
 */
int
MergeResolveSwitches(int elevel)
{
	int			left = 0;
	char	   *nsp;

	SPI_connect();
	nsp = ExtSchemaInstalled();
	if (nsp != NULL)
		left = MergeCleanup(nsp, InvalidOid, NULL, true, elevel);
	SPI_finish();
	return left;
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
					m->id, m->first, m->last, m->parent_rel,
					m->members ? psprintf(" and of %d other tables of its placement group", list_length(m->members)) : "",
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
			pause = MoveRecordsValue(m->ext, m->cxt, psprintf("SELECT pause_ms FROM %s WHERE merge_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
															  MoveExt(m, "snowseq_merges"), m->id));
			ereport(NOTICE,
					(errmsg("genes %d to %d of table \"%s\" are one partition, %s, on server \"%s\"; the switch held the table for %s ms",
							m->first, m->last, m->parent_rel, m->new_part_q, m->src_name, pause ? pause : "?")));
		}
	}
	PG_FINALLY();
	{
		MoveReleaseParent(m);
		MergeUnlock(m->id);
		MoveCloseSessions(m);
	}
	PG_END_TRY();
	SPI_finish();
	MemoryContextDelete(m->cxt);
	PG_RETURN_VOID();
}
