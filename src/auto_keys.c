/*
 * auto_keys.c
 *		snowseq.auto_keys: with it on, the primary key of a table that a
 *		CREATE TABLE makes (or an ALTER TABLE ... ADD COLUMN adds), when it
 *		is a bigint serial (bigserial) or a bigint identity column, becomes
 *		DEFAULT snowseq_next() and its sequence is dropped, in the same
 *		statement, as snowseq_convert would do it: ORMs that write their own
 *		DDL (Django, Active Record, Knex, Hibernate) get snowflake IDs
 *		without a change to their models.  An integer or smallint key of
 *		that kind is refused: snowflake IDs do not fit in it.
 *
 * A ProcessUtility hook, not an event trigger: with the setting off (the
 * default) the hook costs one test of a bool per utility statement, and
 * nothing is installed in any database.  The conversion is ConvertRun, as
 * the user that runs the DDL (who owns the new table); every name in the
 * SQL it runs is qualified.  Nothing is done while an extension is being
 * created (its tables change only with it), in a binary upgrade, in a
 * database without snowseq, or for a partition (the partitioned table's
 * default applies to it).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "auto_keys.h"
#include "compat.h"
#include "convert.h"

/* snowseq.auto_keys: new bigint serial and identity keys take snowseq_next() */
static bool auto_keys = false;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* What a statement may give a new key: the table, and the columns it adds. */
typedef struct AutoKeysTarget
{
	RangeVar   *relation;		/* the table, as the statement names it */
	bool		created;		/* CREATE TABLE: every column is new */
	List	   *added;			/* ALTER TABLE: the names of the columns added */
} AutoKeysTarget;

/* The schema of extension snowseq in this database, or InvalidOid. */
static Oid
AutoKeysExtSchema(void)
{
	Oid			ext = get_extension_oid("snowseq", true);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	if (!OidIsValid(ext))
		return InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

/*
 * Does the statement make a table or add columns to one?  Fills *target
 * with copies (the statement's tree may be changed while it runs).
 */
static bool
AutoKeysStatement(Node *parsetree, AutoKeysTarget *target)
{
	memset(target, 0, sizeof(*target));
	if (IsA(parsetree, CreateStmt))
	{
		CreateStmt *stmt = (CreateStmt *) parsetree;

		/* a partition takes the default of its partitioned table */
		if (stmt->partbound != NULL)
			return false;
		target->relation = copyObject(stmt->relation);
		target->created = true;
		return true;
	}
	if (IsA(parsetree, AlterTableStmt))
	{
		AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
		ListCell   *lc;

		if (stmt->objtype != OBJECT_TABLE)
			return false;
		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

			if (cmd->subtype == AT_AddColumn && IsA(cmd->def, ColumnDef))
				target->added = lappend(target->added,
										pstrdup(((ColumnDef *) cmd->def)->colname));
		}
		if (target->added == NIL)
			return false;
		target->relation = copyObject(stmt->relation);
		return true;
	}
	return false;
}

/*
 * The table the statement made or changed, or InvalidOid: a CREATE TABLE
 * that made nothing (IF NOT EXISTS of a table older than this transaction)
 * counts as none.
 */
static Oid
AutoKeysRelation(AutoKeysTarget *target)
{
	Oid			relid;
	HeapTuple	tup;
	bool		made_now;

	if (!target->created)
		return RangeVarGetRelid(target->relation, NoLock, true);
	relid = get_relname_relid(target->relation->relname,
							  RangeVarGetCreationNamespace(target->relation));
	if (!OidIsValid(relid))
		return InvalidOid;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	made_now = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
	ReleaseSysCache(tup);
	return made_now ? relid : InvalidOid;
}

/* Is the column a serial: its default is nextval() of a sequence it owns? */
static bool
AutoKeysIsSerial(Oid relid, AttrNumber attnum, const char *colname)
{
	List	   *seqs = ConvertDefaultSequences(list_make1_oid(relid), colname);
	ListCell   *lc;

	foreach(lc, seqs)
	{
		Oid			owner;
		int32		col;

		if (sequenceIsOwned(lfirst_oid(lc), DEPENDENCY_AUTO, &owner, &col) &&
			owner == relid && col == attnum)
			return true;
	}
	return false;
}

/*
 * Give the table's new primary key snowflake IDs, if it is a one-column
 * serial or identity key among the columns the statement made: bigint is
 * converted, integer and smallint are refused.
 */
static void
AutoKeysTable(AutoKeysTarget *target)
{
	Oid			relid = AutoKeysRelation(target);
	Oid			extschema;
	Oid			constraint;
	Bitmapset  *pk;
	int			member;
	AttrNumber	attnum;
	HeapTuple	tup;
	Form_pg_attribute att;
	char	   *colname;
	char		identity;
	bool		column_new;
	Oid			type;
	char	   *relname;
	char	   *done;

	if (!OidIsValid(relid) || get_rel_relispartition(relid))
		return;
	if (get_rel_relkind(relid) != RELKIND_RELATION &&
		get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return;
	pk = get_primary_key_attnos(relid, true, &constraint);
	if (bms_num_members(pk) != 1)
		return;
	member = bms_next_member(pk, -1);
	attnum = member + FirstLowInvalidHeapAttributeNumber;

	tup = SearchSysCacheAttNum(relid, attnum);
	if (!HeapTupleIsValid(tup))
		return;
	att = (Form_pg_attribute) GETSTRUCT(tup);
	colname = pstrdup(NameStr(att->attname));
	identity = att->attidentity;
	type = getBaseType(att->atttypid);
	/* ADD COLUMN IF NOT EXISTS of a column that was there adds nothing */
	column_new = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
	ReleaseSysCache(tup);

	if (!target->created)
	{
		ListCell   *lc;
		bool		added = false;

		foreach(lc, target->added)
			added |= strcmp(lfirst(lc), colname) == 0;
		if (!added || !column_new)
			return;
	}
	if (!identity && !AutoKeysIsSerial(relid, attnum, colname))
		return;
	/* the database has no snowseq: its DDL stays as it is */
	extschema = AutoKeysExtSchema();
	if (!OidIsValid(extschema))
		return;

	relname = get_rel_name(relid);
	if (type == INT2OID || type == INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("primary key \"%s\" of table \"%s\" is of type %s: snowflake IDs do not fit in it",
						colname, relname, format_type_be(type)),
				 errdetail("snowseq.auto_keys is on: the serial or identity key of a new table takes snowseq IDs, positive 63-bit numbers."),
				 errhint("Declare the key bigint (bigserial, or bigint GENERATED AS IDENTITY; "
						 "Django: BigAutoField; Active Record: id: :bigint; Knex: bigIncrements; "
						 "Hibernate: a Long id), or SET snowseq.auto_keys = off for tables that keep their sequence.")));
	if (type != INT8OID)
		return;

	done = ConvertRun(relid, colname, false, get_namespace_name(extschema));
	ereport(DEBUG1, (errmsg_internal("snowseq.auto_keys: %s", done)));
}

/*
 * The ProcessUtility hook: runs the statement, then, with snowseq.auto_keys
 * on, gives the key of the table it made or extended snowflake IDs.
 */
static void
AutoKeysProcessUtility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					   ProcessUtilityContext context, ParamListInfo params,
					   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	AutoKeysTarget target;
	bool		act;

	act = auto_keys && !creating_extension && !IsBinaryUpgrade &&
		AutoKeysStatement(pstmt->utilityStmt, &target);

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	if (act)
		AutoKeysTable(&target);
}

/* Define snowseq.auto_keys and install the hook. */
void
AutoKeysInit(void)
{
	DefineCustomBoolVariable("snowseq.auto_keys",
							 "Gives the bigint serial or identity primary key of each new table snowflake IDs.",
							 "With it on, CREATE TABLE (and ALTER TABLE ... ADD COLUMN) turns such a key into "
							 "DEFAULT snowseq_next() and drops its sequence; an integer key of that kind is refused.",
							 &auto_keys, false, PGC_USERSET, 0, NULL, NULL, NULL);
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = AutoKeysProcessUtility;
}
