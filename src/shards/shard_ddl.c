/*
 * shard_ddl.c
 *		Schema changes of a gene-sharded table, made on the router, reach the
 *		tables of its shard servers in one two-phase transaction with the
 *		router's own change: all of them or none.
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
#include "access/xloginsert.h"
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
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "parser/scansup.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "merge.h"
#include "move_common.h"
#include "move_group.h"
#include "compat.h"
#include "remote.h"
#include "rmgr.h"
#include "shard_ddl.h"
#include "sqlrun.h"
#include "testpoint.h"

#define SHARD_DDL_GID_PREFIX "snowseq_ddl_"
#define XLOG_SNOWSEQ_SHARD_DDL	0x80	/* the router's transaction id, before shards prepare */
#define DDL_END_TIMEOUT_MS		30000	/* to end a server's part in a commit or abort */

/* the router's session settings the shard servers parse and wait under */
static const char *const DdlCopiedSettings[] = {
	"search_path", "standard_conforming_strings", "DateStyle", "IntervalStyle", "TimeZone",
	"lock_timeout", "statement_timeout"
};

/* one shard server's part of the router's transaction */
typedef struct DdlServer
{
	Oid			serverid;
	RemoteConn *rc;
	int			depth;			/* transaction nesting it is at: 1 after BEGIN, one
								 * more for each SAVEPOINT */
	bool		broken;			/* a savepoint could not be ended there */
	bool		prepared;
	char		gid[96];
} DdlServer;

static bool snowseq_shard_ddl = true;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static List *ddl_servers = NIL;	/* of DdlServer *, in TopMemoryContext */
static bool ddl_callbacks = false;

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
								  SQL_ARGS(MoveStateArray(MOVE_STATE_DONE, MOVE_STATE_FAILED, MOVE_STATE_REVERTED,
														  MOVE_STATE_NONE),
										   MERGE_NOT_OVER));
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

static void DdlXactCallback(XactEvent event, void *arg);
static void DdlSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
							   SubTransactionId parentSubid, void *arg);

/* The open remote transaction on a server, opened on first need. */
static DdlServer *
DdlServerFor(Oid serverid)
{
	ListCell   *lc;
	DdlServer  *s;
	MemoryContext old;

	foreach(lc, ddl_servers)
	{
		s = lfirst(lc);
		if (s->serverid == serverid)
			return s;
	}
	if (!ddl_callbacks)
	{
		RegisterXactCallback(DdlXactCallback, NULL);
		RegisterSubXactCallback(DdlSubXactCallback, NULL);
		ddl_callbacks = true;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	s = palloc0(sizeof(DdlServer));
	s->serverid = serverid;
	ddl_servers = lappend(ddl_servers, s);
	s->rc = RemoteConnect(serverid);
	MemoryContextSwitchTo(old);
	RemoteCommand(s->rc, "BEGIN", "begin the change of the shard tables");
	for (int i = 0; i < lengthof(DdlCopiedSettings); i++)
		RemoteCommandParams(s->rc, "SELECT pg_catalog.set_config($1, $2, true)",
							SQL_ARGS(DdlCopiedSettings[i], GetConfigOption(DdlCopiedSettings[i], false, false)),
							"take the router session's settings");
	s->depth = 1;
	return s;
}

/* A server's remote transaction at the router's nesting: savepoints as here. */
static DdlServer *
DdlServerAt(Oid serverid)
{
	DdlServer  *s = DdlServerFor(serverid);

	while (s->depth < GetCurrentTransactionNestLevel())
	{
		s->depth++;
		RemoteCommand(s->rc, psprintf("SAVEPOINT s%d", s->depth), "mark a savepoint on the shard server");
	}
	return s;
}

/* Run one statement in the remote transaction of each server in turn. */
static void
DdlRun(List *servers, List *sqls)
{
	ListCell   *ls;
	ListCell   *lq;

	forboth(ls, servers, lq, sqls)
	{
		DdlServer  *s = DdlServerAt(lfirst_oid(ls));

		RemoteCommandSingle(s->rc, lfirst(lq), "change the shard table");
	}
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
	DdlRun(servers, sqls);
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
	DdlRun(servers, sqls);
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
		DdlServer  *s = DdlServerAt(lfirst_oid(ls));
		char	   *names;

		names = RemoteValueParams(s->rc,
								  "SELECT pg_catalog.string_agg(CAST(i.indexrelid AS pg_catalog.regclass)::pg_catalog.text, ', ') "
								  "FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) CAST($1 AS pg_catalog.regclass) "
								  "AND NOT i.indisunique AND NOT i.indisprimary "
								  "AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c "
								  "WHERE c.conindid OPERATOR(pg_catalog.=) i.indexrelid) "
								  "AND pg_catalog.substr(pg_catalog.pg_get_indexdef(i.indexrelid), "
								  "pg_catalog.strpos(pg_catalog.pg_get_indexdef(i.indexrelid), ' USING ')) OPERATOR(pg_catalog.=) $2",
								  SQL_ARGS(lfirst(lt), signature), "find the shard table's index");
		if (names != NULL)
			RemoteCommandSingle(s->rc, psprintf("DROP INDEX %s", names), "drop the shard table's index");
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

/* The name of the prepared remote transaction of a server. */
static void
DdlGid(DdlServer *s)
{
	snprintf(s->gid, sizeof(s->gid), SHARD_DDL_GID_PREFIX UINT64_FORMAT "_" UINT64_FORMAT "_%u_%u",
			 GetSystemIdentifier(), U64FromFullTransactionId(GetTopFullTransactionId()),
			 GetUserId(), s->serverid);
}

/* The router's record of its transaction id: nothing to redo. */
static void
DdlRedoMark(const char *data, size_t len)
{
}

static void
DdlDescribeMark(StringInfo buf, const char *data, size_t len)
{
	appendStringInfoString(buf, "a schema change of shard tables is about to be prepared");
}

/* Forget every server's part: close the sessions. */
static void
DdlForget(void)
{
	ListCell   *lc;

	foreach(lc, ddl_servers)
	{
		DdlServer  *s = lfirst(lc);

		RemoteClose(s->rc);
		pfree(s);
	}
	list_free(ddl_servers);
	ddl_servers = NIL;
}

/*
 * Run one command on a server's session without raising, within
 * DDL_END_TIMEOUT_MS (a commit or an abort must end, whatever the network
 * does); NULL on success, else what went wrong (the session is then
 * dropped).
 */
static char *
DdlExecBounded(DdlServer *s, const char *sql)
{
	PGconn	   *conn = s->rc ? s->rc->conn : NULL;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DDL_END_TIMEOUT_MS);
	char	   *error = NULL;
	PGresult   *res;

	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
		return pstrdup("the connection was lost");
	if (!PQsendQuery(conn, sql))
		error = pchomp(PQerrorMessage(conn));
	while (error == NULL)
	{
		while (error == NULL && PQisBusy(conn))
		{
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			int			rc;

			if (left <= 0)
			{
				error = psprintf("no answer within %d s", DDL_END_TIMEOUT_MS / 1000);
				break;
			}
			rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								   PQsocket(conn), left, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(conn))
				error = pchomp(PQerrorMessage(conn));
		}
		if (error != NULL)
			break;
		res = PQgetResult(conn);
		if (res == NULL)
			break;
		if (PQresultStatus(res) != PGRES_COMMAND_OK && error == NULL)
			error = pchomp(PQresultErrorMessage(res));
		PQclear(res);
	}
	if (error != NULL && PQisBusy(conn))
		RemoteClose(s->rc);
	return error;
}

/* End a server's part without raising: committed or rolled back. */
static void
DdlFinish(DdlServer *s, bool commit)
{
	char	   *sql;
	char	   *error;

	if (!s->prepared)
	{
		if (s->rc != NULL)
			(void) DdlExecBounded(s, "ROLLBACK");
		return;
	}
	if (commit)
		sql = psprintf("COMMIT PREPARED %s", quote_literal_cstr(s->gid));
	else
		sql = psprintf("ROLLBACK PREPARED %s", quote_literal_cstr(s->gid));
	error = DdlExecBounded(s, sql);
	if (error != NULL)
		ereport(WARNING,
				(errmsg("the change of the shard table on server \"%s\" is prepared and not yet %s",
						s->rc ? s->rc->server : "?", commit ? "committed" : "rolled back"),
				 errdetail("%s; its prepared transaction is \"%s\".", error, s->gid),
				 errhint("Once the server is back, run SELECT * FROM snowseq_move_cleanup(); on this router.")));
}

static void
DdlXactCallback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (ddl_servers == NIL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			SNOWSEQ_TESTPOINT("shard_ddl_prepare");

			/*
			 * The router's transaction id names each prepared part and
			 * decides it after a crash: a record carrying it is flushed
			 * first, so that after any crash that id is known here and is
			 * never given to another transaction.
			 */
			{
				char		mark = 0;

				(void) GetTopTransactionId();
				XLogBeginInsert();
				XLogRegisterData(&mark, sizeof(mark));
				XLogFlush(XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_SHARD_DDL));
			}
			foreach(lc, ddl_servers)
			{
				DdlServer  *s = lfirst(lc);

				/* a server whose part began in a savepoint rolled back */
				if (s->rc == NULL || s->depth == 0)
					continue;
				if (s->broken)
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_FAILURE),
							 errmsg("the change of the shard table on server \"%s\" lost track of a savepoint", s->rc->server),
							 errhint("Run the change again.")));
				DdlGid(s);
				RemoteCommand(s->rc, psprintf("PREPARE TRANSACTION %s", quote_literal_cstr(s->gid)),
							  "prepare the change of the shard table");
				s->prepared = true;
			}
			SNOWSEQ_TESTPOINT("shard_ddl_prepared");
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
			foreach(lc, ddl_servers)
				DdlFinish(lfirst(lc), event == XACT_EVENT_COMMIT);
			DdlForget();
			break;
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that changed the tables of shard servers")));
			break;
		default:
			break;
	}
}

/*
 * A savepoint of the router's transaction ends on each shard server too:
 * released with it, or rolled back to.  Nothing is raised here; a server
 * where it fails is marked, and the router's commit fails.
 */
static void
DdlSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
				   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	foreach(lc, ddl_servers)
	{
		DdlServer  *s = lfirst(lc);
		char	   *sql;

		if (s->depth < level || s->rc == NULL)
			continue;
		sql = event == SUBXACT_EVENT_PRE_COMMIT_SUB ?
			psprintf("RELEASE SAVEPOINT s%d", level) :
			psprintf("ROLLBACK TO SAVEPOINT s%d; RELEASE SAVEPOINT s%d", level, level);
		if (DdlExecBounded(s, sql) != NULL)
			s->broken = true;
		s->depth = level - 1;
	}
}

/* What deciding the prepared changes on one server gave. */
typedef struct DdlDecide
{
	int			elevel;
	int			left;			/* prepared changes that could not be decided */
	List	   *decided;		/* "server|gid|action" */
	List	   *others;			/* roles whose prepared changes were seen (Oid) */
	MemoryContext cxt;			/* for decided and others */
} DdlDecide;

/*
 * The parts of one of this router's prepared names: the router's full
 * transaction id, the role and the server; false for any other name.
 */
static bool
DdlParseGid(const char *gid, const char *prefix, uint64 *xid, Oid *role, Oid *server)
{
	const char *p = gid + strlen(prefix);
	char	   *end;
	unsigned long long v[3];

	if (strncmp(gid, prefix, strlen(prefix)) != 0)
		return false;
	for (int i = 0; i < 3; i++)
	{
		if (!isdigit((unsigned char) *p))
			return false;
		errno = 0;
		v[i] = strtoull(p, &end, 10);
		if (errno != 0 || *end != (i < 2 ? '_' : '\0'))
			return false;
		p = end + (i < 2 ? 1 : 0);
	}
	if (v[1] > PG_UINT32_MAX || v[2] > PG_UINT32_MAX)
		return false;
	*xid = v[0];
	*role = (Oid) v[1];
	*server = (Oid) v[2];
	return true;
}

/*
 * Decide the prepared changes this router's current role made on a server:
 * commit those whose router transaction committed, roll back those whose
 * did not (a superuser decides every role's).
 */
static void
DdlDecideOn(RemoteConn *rc, void *arg)
{
	DdlDecide  *d = arg;
	PGresult   *res;
	char	   *prefix = psprintf(SHARD_DDL_GID_PREFIX UINT64_FORMAT "_", GetSystemIdentifier());

	res = RemoteExec(rc, "SELECT gid FROM pg_catalog.pg_prepared_xacts "
					 "WHERE database OPERATOR(pg_catalog.=) pg_catalog.current_database() ORDER BY gid",
					 "list the prepared transactions");
	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *gid = PQgetvalue(res, i, 0);
		uint64		xid;
		Oid			role;
		Oid			server;
		char	   *status;
		bool		commit;
		char		sqlstate[6];
		char	   *decide;
		MemoryContext old;

		if (!DdlParseGid(gid, prefix, &xid, &role, &server) || server != rc->serverid)
			continue;
		if (role != GetUserId() && !superuser())
		{
			old = MemoryContextSwitchTo(d->cxt);
			d->others = list_append_unique_oid(d->others, role);
			MemoryContextSwitchTo(old);
			continue;
		}
		/* NULL: too old to be known here, or not yet given (never flushed) */
		status = SpiValueParams(CurrentMemoryContext,
								"SELECT CASE WHEN $1::pg_catalog.xid8 OPERATOR(pg_catalog.<) "
								"pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()) "
								"THEN pg_catalog.pg_xact_status($1::pg_catalog.xid8) END",
								SQL_ARGS(psprintf(UINT64_FORMAT, xid)));
		if (status == NULL || strcmp(status, "in progress") == 0)
		{
			if (status == NULL)
				ereport(d->elevel,
						(errmsg("the change of a shard table prepared as \"%s\" on server \"%s\" is left: this router does not know its transaction",
								gid, rc->server),
						 errhint("Commit it there if the router's table has the change, else roll it back.")));
			d->left++;
			continue;
		}
		commit = strcmp(status, "committed") == 0;
		if (commit)
			decide = psprintf("COMMIT PREPARED %s", quote_literal_cstr(gid));
		else
			decide = psprintf("ROLLBACK PREPARED %s", quote_literal_cstr(gid));
		if (!RemoteTry(rc, decide, "decide the prepared change of the shard table", sqlstate))
		{
			d->left++;
			continue;
		}
		old = MemoryContextSwitchTo(d->cxt);
		d->decided = lappend(d->decided, psprintf("%s|%s|%s", rc->server, gid,
												  commit ? "committed" : "rolled back"));
		MemoryContextSwitchTo(old);
	}
	PQclear(res);
}

/*
 * Decide, as the current user, the prepared changes of shard tables this
 * router left on every server of its shard map (SPI connected).  Returns
 * how many are left; a server that cannot be asked is reported at
 * unreachable_elevel, and counted only when that is elevel.  *decided gets
 * "server|gid|action" of each decided, *others the roles whose changes were
 * seen and left to them, in cxt.
 */
static int
DdlResolveAs(const char *ext, int elevel, int unreachable_elevel, List **decided,
			 List **others, MemoryContext cxt)
{
	DdlDecide	d = {elevel, 0, NIL, NIL, cxt};
	List	   *servers = NIL;

	SpiRun(psprintf("SELECT DISTINCT s.oid FROM pg_catalog.pg_foreign_server s "
					"JOIN %s.snowseq_shard_map m ON m.shard OPERATOR(pg_catalog.=) s.srvname "
					"WHERE pg_catalog.has_server_privilege(s.oid, 'USAGE') ORDER BY s.oid", ext),
		   SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		servers = lappend_oid(servers, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																	 SPI_tuptable->tupdesc, 1, &isnull)));
	}
	for (int i = 0; i < list_length(servers); i++)
	{
		char	   *problem = RemoteAsk(list_nth_oid(servers, i), DdlDecideOn, &d);

		if (problem != NULL)
		{
			ereport(unreachable_elevel,
					(errmsg("could not look for prepared changes of shard tables on server \"%s\": %s",
							GetForeignServer(list_nth_oid(servers, i))->servername, problem)));
			if (unreachable_elevel == elevel)
				d.left++;
		}
	}
	if (decided)
		*decided = d.decided;
	if (others)
		*others = d.others;
	return d.left;
}

int
ShardDdlResolveAll(const char *ext, int elevel, int unreachable_elevel, List **decided,
				   MemoryContext cxt)
{
	return DdlResolveAs(ext, elevel, unreachable_elevel, decided, NULL, cxt);
}

/*
 * At the router's start (the resolver): decide the prepared changes of shard
 * tables as the roles that made them (named in them), reached through the
 * owners of the gene-sharded tables first.  Returns how many are left.
 */
int
ShardDdlResolveAtStart(int elevel)
{
	char	   *ext;
	List	   *roles = NIL;
	int			left = 0;
	ListCell   *lc;

	SPI_connect();
	ext = ExtSchemaInstalled();
	if (ext != NULL)
	{
		foreach(lc, MoveGeneShardedTables(ext))
		{
			HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(lfirst_oid(lc)));

			if (HeapTupleIsValid(tup))
			{
				roles = list_append_unique_oid(roles, ((Form_pg_class) GETSTRUCT(tup))->relowner);
				ReleaseSysCache(tup);
			}
		}
		/* roles grows with those seen in the names */
		for (int i = 0; i < list_length(roles); i++)
		{
			Oid			role = list_nth_oid(roles, i);
			List	   *others = NIL;
			Oid			save_user;
			int			save_sec;

			if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
				continue;
			ExtBecome(role, &save_user, &save_sec);
			left += DdlResolveAs(ext, elevel, DEBUG1, NULL, &others, CurrentMemoryContext);
			SetUserIdAndSecContext(save_user, save_sec);
			foreach(lc, others)
				roles = list_append_unique_oid(roles, lfirst_oid(lc));
		}
	}
	SPI_finish();
	return left;
}

/*
 * snowseq_move_cleanup's part: decide the prepared changes of shard tables,
 * one row of its result for each.
 */
void
ShardDdlReportResolved(Move *collect)
{
	List	   *decided = NIL;
	ListCell   *lc;

	(void) ShardDdlResolveAll(collect->ext, NOTICE, NOTICE, &decided, collect->cxt);
	foreach(lc, decided)
	{
		char	   *line = lfirst(lc);
		char	   *gid = strchr(line, '|');
		char	   *action = strrchr(line, '|');
		MemoryContext old = MemoryContextSwitchTo(collect->cxt);
		MoveReport *r = palloc0(sizeof(MoveReport));

		r->server = pnstrdup(line, gid - line);
		r->object = psprintf("prepared transaction %s", pnstrdup(gid + 1, action - gid - 1));
		r->action = pstrdup(action + 1);
		collect->report = lappend(collect->report, r);
		MemoryContextSwitchTo(old);
	}
}

void
ShardDdlInit(void)
{
	DefineCustomBoolVariable("snowseq.shard_ddl",
							 "Carries schema changes of gene-sharded tables to their shard servers.",
							 "Off: ALTER TABLE, CREATE INDEX, DROP INDEX and COMMENT change the router's table alone.",
							 &snowseq_shard_ddl, true, PGC_USERSET, 0, NULL, NULL, NULL);
	RmgrRegisterKind(XLOG_SNOWSEQ_SHARD_DDL, "SHARD_DDL", DdlRedoMark, DdlDescribeMark);
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = ShardDdlProcessUtility;
}
