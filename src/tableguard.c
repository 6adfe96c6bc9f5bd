/*
 * tableguard.c
 *		Keeping other roles' code and locks out of snowseq's own tables.
 *
 * snowseq writes its tables (the counter definitions, the keys, the move,
 * fence, rebalance and merge records, the routing map's caches) as their
 * owner.  A trigger fires as the role that writes, so a trigger another role
 * placed on one of them would run as that owner (often the bootstrap
 * superuser) inside snowseq's own writes, and could rewrite the rows it
 * writes.  PostgreSQL lets any role granted TRIGGER create one, and a role
 * granted REFERENCES a foreign key, whose triggers on the referenced table
 * fire in the same writes (and whose row locks block them); a grant may
 * come from GRANT ALL ON ALL TABLES IN SCHEMA or from default privileges
 * set before CREATE EXTENSION.  Rules and policies need the owner already.
 *
 * One rule, for every table that is a member of the extension: only a role
 * with the privileges of the table's owner (the extension's owner, a
 * superuser) may create a trigger on it (object_access_hook, which sees the
 * internal triggers of a foreign key too), or take a lock on it stronger than
 * the ones reads and writes take (LOCK TABLE, and CLUSTER and REINDEX, which
 * MAINTAIN allows from PostgreSQL 17 on and which hold their locks until the
 * transaction ends), or lock its rows (SELECT ... FOR UPDATE or FOR SHARE,
 * which UPDATE allows though the guard refuses the UPDATE itself).  Whatever was granted, and when, no other role's code
 * runs inside snowseq's writes and no other role blocks them for longer than
 * a statement.  Changes of rows are the guard trigger's (snowseq_guard).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/catalog.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "storage/lockdefs.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "tableguard.h"

static object_access_hook_type prev_object_access_hook = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;

/*
 * The owner of relid if it is one of snowseq's tables (a member of the
 * extension in this database), else InvalidOid.
 */
static Oid
TableGuardOwner(Oid relid)
{
	Oid			ext;
	HeapTuple	tup;
	Oid			owner;

	if (!OidIsValid(relid) || IsCatalogRelationOid(relid))
		return InvalidOid;
	ext = get_extension_oid("snowseq", true);
	if (!OidIsValid(ext) || getExtensionOfObject(RelationRelationId, relid) != ext)
		return InvalidOid;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Refuse what (an action on relid) unless relid is not snowseq's or the
 * current role has the privileges of its owner.
 */
static void
TableGuardCheck(Oid relid, const char *what)
{
	Oid			owner = TableGuardOwner(relid);

	if (OidIsValid(owner) && !has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot %s table %s: snowseq writes it as its owner",
						what, get_rel_name(relid)),
				 errdetail("Only a role with the privileges of the table's owner may; a grant on the table does not allow it."),
				 errhint("Revoke the grant (docs/security.md says which grants snowseq's tables take), or have the extension's owner do it.")));
}

/* The table a new trigger (trigoid, not yet visible to other commands) is on. */
static Oid
TableGuardTriggerTable(Oid trigoid)
{
	Relation	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			relid = InvalidOid;

	ScanKeyInit(&key, Anum_pg_trigger_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(trigoid));
	scan = systable_beginscan(rel, TriggerOidIndexId, true, SnapshotSelf, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		relid = ((Form_pg_trigger) GETSTRUCT(tup))->tgrelid;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return relid;
}

/*
 * object_access_hook: a new trigger on one of snowseq's tables (CREATE
 * TRIGGER, or the triggers a foreign key that references it puts there) needs
 * the privileges of the table's owner.
 */
static void
TableGuardObjectAccess(ObjectAccessType access, Oid classId, Oid objectId,
					   int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access == OAT_POST_CREATE && classId == TriggerRelationId)
	{
		ObjectAccessPostCreate *pc = (ObjectAccessPostCreate *) arg;

		TableGuardCheck(TableGuardTriggerTable(objectId),
						pc != NULL && pc->is_internal ? "reference" : "create a trigger on");
	}
}

/* Check each relation of a list of RangeVars against what. */
static void
TableGuardCheckList(List *relations, const char *what)
{
	ListCell   *lc;

	foreach(lc, relations)
		TableGuardCheck(RangeVarGetRelid(lfirst_node(RangeVar, lc), NoLock, true), what);
}

/*
 * ProcessUtility hook: LOCK TABLE in a mode stronger than a write's, CLUSTER
 * and REINDEX of one of snowseq's tables need the privileges of its owner.
 * Weaker locks (ACCESS SHARE, ROW SHARE, ROW EXCLUSIVE) conflict with none
 * that snowseq's reads and writes take.
 */
static void
TableGuardProcessUtility(PlannedStmt *pstmt, const char *queryString,
						 bool readOnlyTree, ProcessUtilityContext context,
						 ParamListInfo params, QueryEnvironment *queryEnv,
						 DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, LockStmt) && ((LockStmt *) parsetree)->mode > RowExclusiveLock)
		TableGuardCheckList(((LockStmt *) parsetree)->relations, "lock");
#if PG_VERSION_NUM >= 190000
	/* 19 parses CLUSTER as REPACK, its new command */
	else if (IsA(parsetree, RepackStmt) && ((RepackStmt *) parsetree)->relation != NULL &&
			 ((RepackStmt *) parsetree)->relation->relation != NULL)
		TableGuardCheckList(list_make1(((RepackStmt *) parsetree)->relation->relation),
							((RepackStmt *) parsetree)->command == REPACK_COMMAND_CLUSTER ? "cluster" : "repack");
#else
	else if (IsA(parsetree, ClusterStmt) && ((ClusterStmt *) parsetree)->relation != NULL)
		TableGuardCheckList(list_make1(((ClusterStmt *) parsetree)->relation), "cluster");
#endif
	else if (IsA(parsetree, ReindexStmt) && ((ReindexStmt *) parsetree)->relation != NULL)
	{
		ReindexStmt *stmt = (ReindexStmt *) parsetree;
		Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);

		if (stmt->kind == REINDEX_OBJECT_INDEX && OidIsValid(relid))
			relid = IndexGetRelation(relid, true);
		TableGuardCheck(relid, "reindex");
	}

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/*
 * ExecutorStart hook: locking rows of one of snowseq's tables (FOR UPDATE,
 * FOR NO KEY UPDATE, FOR SHARE, FOR KEY SHARE) needs the privileges of its
 * owner; snowseq's own reads that lock rows run as the owner.
 */
static void
TableGuardExecutorStart(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *ps = queryDesc->plannedstmt;
	ListCell   *lc;

	foreach(lc, ps->rowMarks)
	{
		PlanRowMark *rc = lfirst_node(PlanRowMark, lc);
		RangeTblEntry *rte = rt_fetch(rc->rti, ps->rtable);

		if (RowMarkRequiresRowShareLock(rc->markType) && rte->rtekind == RTE_RELATION)
			TableGuardCheck(rte->relid, "lock rows of");
	}

	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Install the hooks (at preload), after the ones already there. */
void
TableGuardInit(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = TableGuardObjectAccess;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = TableGuardProcessUtility;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = TableGuardExecutorStart;
}
