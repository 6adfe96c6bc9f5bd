/*
 * shard_ddl.c
 *		Schema changes of a gene-sharded table, made on the router, reach the
 *		tables of its shard servers in one two-phase transaction with the
 *		router's own change: all of them or none.  This file is the utility
 *		hook: which statements are carried, and their text for the servers;
 *		shard_ddl_xact.c keeps the servers' remote transactions, prepares
 *		and ends them with the router's, and decides those left prepared.
 *
 * On a gene-sharded parent (MoveGeneShardedTables) these statements are
 * carried to the remote table of every foreign partition:
 *	- ALTER TABLE with columns (ADD, DROP, TYPE, DEFAULT, NOT NULL), CHECK
 *	  constraints (ADD, DROP) and RENAME COLUMN;
 *	- CREATE INDEX (PostgreSQL skips foreign partitions) and DROP INDEX
 *	  (the remote indexes of the same definition, whatever their names);
 *	- COMMENT ON TABLE and COMMENT ON COLUMN.
 * Other subcommands (ATTACH and DETACH PARTITION, which moves use, OWNER,
 * triggers, ...) stay the router's own; a statement that mixes both kinds
 * is refused.  snowseq.shard_ddl = off keeps a session's changes on the
 * router alone.
 *
 * After the router's change, each server's statements run in a remote
 * transaction, opened as the current user through its user mapping (the
 * remote table's owner must be that mapping's role, as a local change needs
 * the table's owner).  Before the router commits, each remote transaction
 * is prepared (PREPARE TRANSACTION); a server that refuses or cannot be
 * reached makes the router's transaction fail, and every prepared one is
 * rolled back.  Once the router committed, each is committed; one that
 * cannot be (its server went down) stays prepared and is decided later by
 * its name, which carries the router's system identifier and transaction
 * id: committed where that transaction committed, rolled back where it did
 * not (ShardDdlResolve, run by the resolver at the router's start and by
 * snowseq_move_cleanup()).
 *
 * A change is refused while a move or a merge is not over on this router
 * (a move copies the source's definition; one kept revertable replicates
 * back into a table the change would not reach).
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "parser/scansup.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#include "merge.h"
#include "merge_records.h"
#include "move_common.h"
#include "move_group.h"
#include "compat.h"
#include "remote.h"
#include "shard_ddl.h"
#include "shard_ddl_xact.h"
#include "sqlrun.h"

static bool snowseq_shard_ddl = true;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* The remote table of a foreign partition, schema-qualified and quoted. */
static char *
DdlRemoteTable(Oid ftrelid, Oid *serverid)
{
	ForeignTable *ft = GetForeignTable(ftrelid);
	const char *nsp = get_namespace_name(get_rel_namespace(ftrelid));
	const char *rel = get_rel_name(ftrelid);
	ListCell   *lc;

	foreach(lc, ft->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "schema_name") == 0)
			nsp = defGetString(d);
		else if (strcmp(d->defname, "table_name") == 0)
			rel = defGetString(d);
	}
	*serverid = ft->serverid;
	return quote_qualified_identifier(nsp, rel);
}

/*
 * Whether relid is a gene-sharded parent of this database's snowseq: a
 * partitioned table, then the look-up of moves.
 */
static bool
DdlIsGeneSharded(Oid relid)
{
	char	   *ext;
	bool		found = false;
	ListCell   *lc;

	if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE ||
		!OidIsValid(get_extension_oid("snowseq", true)))
		return false;
	SPI_connect();
	ext = ExtSchemaInstalled();
	if (ext != NULL)
		foreach(lc, MoveGeneShardedTables(ext))
			found |= lfirst_oid(lc) == relid;
	SPI_finish();
	return found;
}

/*
 * Refuse a change while a move or a merge is not over: their records are
 * read as their owner.
 */
static void
DdlCheckNoMove(Oid relid)
{
	char	   *ext;
	char	   *busy;

	SPI_connect();
	ext = ExtSchemaInstalled();
	busy = MoveRecordsValueParams(ext, CurrentMemoryContext,
								  psprintf("SELECT coalesce((SELECT 'move ' OPERATOR(pg_catalog.||) move_id FROM %s.snowseq_moves "
										   "WHERE state::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) "
										   "ORDER BY move_id LIMIT 1), "
										   "(SELECT 'merge ' OPERATOR(pg_catalog.||) merge_id FROM %s.snowseq_merges "
										   "WHERE state::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($2::pg_catalog.text[]) "
										   "ORDER BY merge_id LIMIT 1))",
										   ext, ext),
								  SQL_ARGS(MoveStatesOver(),
										   MergeStatesOver()));
	SPI_finish();
	if (busy != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot change the definition of gene-sharded table \"%s\" while %s is not over",
						get_rel_name(relid), busy),
				 errdetail("A move copies the definition its source has, and one kept revertable replicates back into a table the change would not reach."),
				 errhint("Change it once the move or merge is done (snowseq_move_progress shows what is under way; finalize or revert a revertable move).")));
}

/*
 * The end of a name that starts at s[pos]: identifiers, quoted or plain,
 * joined by dots.
 */
static int
DdlNameEnd(const char *s, int pos, int end)
{
	for (;;)
	{
		int			p;

		if (pos < end && s[pos] == '"')
		{
			for (pos++; pos < end; pos++)
				if (s[pos] == '"')
				{
					if (pos + 1 < end && s[pos + 1] == '"')
						pos++;
					else
						break;
				}
			pos++;
		}
		else
			while (pos < end && (isalnum((unsigned char) s[pos]) || s[pos] == '_' ||
								 s[pos] == '$' || IS_HIGHBIT_SET(s[pos])))
				pos++;
		for (p = pos; p < end && scanner_isspace(s[p]); p++)
			;
		if (p >= end || s[p] != '.')
			return pos;
		for (p++; p < end && scanner_isspace(s[p]); p++)
			;
		pos = p;
	}
}

/* The text of the statement after the name at `location`, without its ';'. */
static char *
DdlTextAfterName(const PlannedStmt *pstmt, const char *query, int location)
{
	int			start = Max(pstmt->stmt_location, 0);
	int			end = pstmt->stmt_len > 0 ? start + pstmt->stmt_len : (int) strlen(query);
	int			from;

	if (location < start || location >= end)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot carry this statement to the shard servers: its text does not name the table"),
				 errhint("Run it as a statement of its own, or SET snowseq.shard_ddl = off and change each shard server's table yourself.")));
	from = DdlNameEnd(query, location, end);
	while (end > from && (scanner_isspace(query[end - 1]) || query[end - 1] == ';'))
		end--;
	return pnstrdup(query + from, end - from);
}

/* Whether an ALTER TABLE subcommand is carried to the shard servers. */
static bool
DdlCarried(const AlterTableCmd *cmd)
{
	switch (cmd->subtype)
	{
		case AT_AddColumn:
		case AT_DropColumn:
		case AT_AlterColumnType:
		case AT_ColumnDefault:
		case AT_SetNotNull:
		case AT_DropNotNull:
		case AT_DropConstraint:
		case AT_ValidateConstraint:
			return true;
		case AT_AddConstraint:
			return IsA(cmd->def, Constraint) &&
				(((Constraint *) cmd->def)->contype == CONSTR_CHECK ||
				 ((Constraint *) cmd->def)->contype == CONSTR_NOTNULL);
		default:
			return false;
	}
}

/* The foreign partitions of a parent, as remote tables with their servers. */
static List *
DdlPartitions(Oid parent, List **servers)
{
	List	   *tables = NIL;
	ListCell   *lc;

	*servers = NIL;
	foreach(lc, find_inheritance_children(parent, AccessShareLock))
	{
		Oid			child = lfirst_oid(lc);
		Oid			serverid;
		Relation	rel;

		if (get_rel_relkind(child) != RELKIND_FOREIGN_TABLE)
			continue;
		rel = relation_open(child, AccessShareLock);
		for (int a = 0; a < RelationGetDescr(rel)->natts; a++)
			if (!TupleDescAttr(RelationGetDescr(rel), a)->attisdropped &&
				GetForeignColumnOptions(child, a + 1) != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot carry the change to the shard servers: foreign partition \"%s\" maps its columns by options",
								get_rel_name(child)),
						 errhint("Change the shard servers' tables yourself and SET snowseq.shard_ddl = off for the router's change.")));
		relation_close(rel, AccessShareLock);
		tables = lappend(tables, DdlRemoteTable(child, &serverid));
		*servers = lappend_oid(*servers, serverid);
	}
	return tables;
}

/* Each remote table of a gene-sharded parent gets the same statement. */
static void
DdlEach(Oid parent, const char *head, const char *tail)
{
	List	   *servers;
	List	   *tables = DdlPartitions(parent, &servers);
	List	   *sqls = NIL;
	ListCell   *lc;

	foreach(lc, tables)
		sqls = lappend(sqls, psprintf("%s%s%s", head, (char *) lfirst(lc), tail));
	ShardDdlRun(servers, sqls);
}

/* COMMENT ON TABLE or COLUMN of a gene-sharded parent, on each remote table. */
static void
DdlComment(Oid parent, CommentStmt *stmt)
{
	List	   *servers;
	List	   *tables = DdlPartitions(parent, &servers);
	List	   *sqls = NIL;
	const char *col = stmt->objtype == OBJECT_COLUMN ?
		quote_identifier(strVal(llast(castNode(List, stmt->object)))) : NULL;
	ListCell   *lc;

	foreach(lc, tables)
	{
		char	   *sql;

		if (col == NULL)
			sql = stmt->comment ?
				psprintf("COMMENT ON TABLE %s IS %s", (char *) lfirst(lc), quote_literal_cstr(stmt->comment)) :
				psprintf("COMMENT ON TABLE %s IS NULL", (char *) lfirst(lc));
		else
			sql = stmt->comment ?
				psprintf("COMMENT ON COLUMN %s.%s IS %s", (char *) lfirst(lc), col, quote_literal_cstr(stmt->comment)) :
				psprintf("COMMENT ON COLUMN %s.%s IS NULL", (char *) lfirst(lc), col);
		sqls = lappend(sqls, sql);
	}
	ShardDdlRun(servers, sqls);
}

/*
 * What identifies an index of a gene-sharded parent on the shard tables: its
 * definition after the table's name (" USING btree (k) WHERE ..."); the
 * parent's index is never unique (foreign partitions).
 */
static char *
DdlIndexSignature(Oid indexoid)
{
	char	   *def = pg_get_indexdef_string(indexoid);
	char	   *using = strstr(def, " USING ");

	return using ? pstrdup(using) : NULL;
}

/*
 * DROP INDEX of an index of a gene-sharded parent, once the router's is
 * gone: drop each shard table's plain index of that definition (one that
 * is unique or backs a constraint is the shard's own).
 */
static void
DdlDropIndex(Oid parent, const char *signature)
{
	List	   *servers;
	List	   *tables = DdlPartitions(parent, &servers);
	ListCell   *lt;
	ListCell   *ls;

	forboth(lt, tables, ls, servers)
	{
		RemoteConn *rc = ShardDdlSession(lfirst_oid(ls));
		char	   *names;

		names = RemoteValueParams(rc,
								  "SELECT pg_catalog.string_agg(CAST(i.indexrelid AS pg_catalog.regclass)::pg_catalog.text, ', ') "
								  "FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) CAST($1 AS pg_catalog.regclass) "
								  "AND NOT i.indisunique AND NOT i.indisprimary "
								  "AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c "
								  "WHERE c.conindid OPERATOR(pg_catalog.=) i.indexrelid) "
								  "AND pg_catalog.substr(pg_catalog.pg_get_indexdef(i.indexrelid), "
								  "pg_catalog.strpos(pg_catalog.pg_get_indexdef(i.indexrelid), ' USING ')) OPERATOR(pg_catalog.=) $2",
								  SQL_ARGS(lfirst(lt), signature), "find the shard table's index");
		if (names != NULL)
			RemoteCommandSingle(rc, psprintf("DROP INDEX %s", names), "drop the shard table's index");
	}
}

/* The gene-sharded parent a statement changes, or InvalidOid. */
static Oid
DdlTarget(Node *stmt)
{
	if (IsA(stmt, AlterTableStmt))
	{
		AlterTableStmt *s = (AlterTableStmt *) stmt;

		if (s->objtype != OBJECT_TABLE)
			return InvalidOid;
		if (!s->relation->inh)
			return InvalidOid;
		return RangeVarGetRelid(s->relation, NoLock, true);
	}
	if (IsA(stmt, IndexStmt))
	{
		IndexStmt  *s = (IndexStmt *) stmt;

		if (!s->relation->inh || s->concurrent || s->unique || s->primary)
			return InvalidOid;
		return RangeVarGetRelid(s->relation, NoLock, true);
	}
	if (IsA(stmt, RenameStmt))
	{
		RenameStmt *s = (RenameStmt *) stmt;

		if (s->renameType != OBJECT_COLUMN || s->relationType != OBJECT_TABLE || !s->relation->inh)
			return InvalidOid;
		return RangeVarGetRelid(s->relation, NoLock, true);
	}
	if (IsA(stmt, CommentStmt))
	{
		CommentStmt *s = (CommentStmt *) stmt;
		List	   *names = castNode(List, s->object);

		if (s->objtype == OBJECT_TABLE)
			return RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true);
		if (s->objtype == OBJECT_COLUMN && list_length(names) >= 2)
			return RangeVarGetRelid(makeRangeVarFromNameList(list_truncate(list_copy(names),
																		   list_length(names) - 1)),
									NoLock, true);
	}
	return InvalidOid;
}

static void
ShardDdlProcessUtility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	Oid			parent = InvalidOid;
	List	   *drops = NIL;	/* parents of the indexes dropped */
	List	   *signatures = NIL;	/* and their definitions */

	if (snowseq_shard_ddl && !RecoveryInProgress())
	{
		if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_INDEX)
		{
			ListCell   *lc;

			/* what each index was; its table's owner alone drops it */
			foreach(lc, ((DropStmt *) stmt)->objects)
			{
				Oid			idx = RangeVarGetRelid(makeRangeVarFromNameList(lfirst(lc)), NoLock, true);
				Oid			rel = OidIsValid(idx) && get_rel_relkind(idx) == RELKIND_PARTITIONED_INDEX ?
					IndexGetRelation(idx, true) : InvalidOid;
				char	   *signature;

				if (!OidIsValid(rel) || !SnowseqClassOwnercheck(rel, GetUserId()) || !DdlIsGeneSharded(rel))
					continue;
				signature = DdlIndexSignature(idx);
				if (signature == NULL)
					continue;
				drops = lappend_oid(drops, rel);
				signatures = lappend(signatures, signature);
			}
		}
		else if (IsA(stmt, AlterTableStmt) || IsA(stmt, IndexStmt) || IsA(stmt, RenameStmt) ||
				 IsA(stmt, CommentStmt))
		{
			parent = DdlTarget(stmt);
			if (!DdlIsGeneSharded(parent))
				parent = InvalidOid;
		}
		if (OidIsValid(parent) && IsA(stmt, AlterTableStmt))
		{
			ListCell   *lc;
			int			carried = 0;
			int			cmds = 0;

			foreach(lc, ((AlterTableStmt *) stmt)->cmds)
			{
				cmds++;
				carried += DdlCarried(lfirst(lc)) ? 1 : 0;
			}
			if (carried > 0 && carried < cmds)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot change gene-sharded table \"%s\" and its shard tables with this mix of subcommands",
								get_rel_name(parent)),
						 errdetail("Changes of columns and CHECK constraints reach the shard servers' tables; the other subcommands change the router's table alone."),
						 errhint("Split the statement into one ALTER TABLE of each kind.")));
			if (carried == 0)
				parent = InvalidOid;
		}
		/* CREATE INDEX IF NOT EXISTS of an index the router has: nothing to carry */
		if (OidIsValid(parent) && IsA(stmt, IndexStmt) && ((IndexStmt *) stmt)->if_not_exists &&
			((IndexStmt *) stmt)->idxname != NULL &&
			OidIsValid(get_relname_relid(((IndexStmt *) stmt)->idxname, get_rel_namespace(parent))))
			parent = InvalidOid;
	}

	/*
	 * The router's change first: it checks the rights and takes the
	 * router's locks, so that writers wait there, never on a shard table
	 * whose lock a remote change holds while they hold the router's.
	 */
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	if (drops != NIL)
	{
		ListCell   *ld;
		ListCell   *ls;

		forboth(ld, drops, ls, signatures)
		{
			DdlCheckNoMove(lfirst_oid(ld));
			DdlDropIndex(lfirst_oid(ld), lfirst(ls));
		}
		return;
	}
	if (!OidIsValid(parent))
		return;
	DdlCheckNoMove(parent);
	if (IsA(stmt, AlterTableStmt))
		DdlEach(parent, "ALTER TABLE ",
				DdlTextAfterName(pstmt, queryString, ((AlterTableStmt *) stmt)->relation->location));
	else if (IsA(stmt, IndexStmt))
		DdlEach(parent, "CREATE INDEX ON ",
				DdlTextAfterName(pstmt, queryString, ((IndexStmt *) stmt)->relation->location));
	else if (IsA(stmt, RenameStmt))
	{
		RenameStmt *s = (RenameStmt *) stmt;

		DdlEach(parent, "ALTER TABLE ", psprintf(" RENAME COLUMN %s TO %s",
												 quote_identifier(s->subname),
												 quote_identifier(s->newname)));
	}
	else if (IsA(stmt, CommentStmt))
		DdlComment(parent, (CommentStmt *) stmt);
}
void
ShardDdlInit(void)
{
	DefineCustomBoolVariable("snowseq.shard_ddl",
							 "Carries schema changes of gene-sharded tables to their shard servers.",
							 "Off: ALTER TABLE, CREATE INDEX, DROP INDEX and COMMENT change the router's table alone.",
							 &snowseq_shard_ddl, true, PGC_USERSET, 0, NULL, NULL, NULL);
	ShardDdlXactInit();
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = ShardDdlProcessUtility;
}
