/*
 * convert.c
 *		snowseq_convert: switch the key column of an existing table (serial,
 *		bigserial, identity, or a plain bigint with or without a default),
 *		and of all its partitions, to DEFAULT snowseq_next(), after checking
 *		that every ID issued from then on lies above every value the column
 *		holds.
 *
 * The table and all its partitions (or inheritance children) are locked
 * ACCESS EXCLUSIVE, all or none (ConvertLockAll: without waiting for a lock
 * while holding another), before the column is read, so no row can be added
 * between the check and the switch, and rows of transactions still open
 * are waited for and counted.  The check takes one ID from the clock: the
 * clock is cluster-wide and monotonic, so every later ID is above it.  The
 * clock is never pushed ahead to pass existing values; values above it are
 * an ERROR that says when the clock will pass them.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/partition.h"
#include "catalog/pg_attrdef.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_sequence.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/primnodes.h"
#include "parser/parse_func.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#include "clock.h"
#include "compat.h"
#include "convert.h"
#include "guc.h"
#include "shmem.h"
#include "sqlrun.h"

/* An identity sequence, as it was before the identity was dropped. */
typedef struct KeptSequence
{
	char	   *qname;			/* schema-qualified, quoted */
	char	   *nspname;
	char	   *relname;
	Oid			typid;
	int64		start;
	int64		increment;
	int64		max;
	int64		min;
	int64		cache;
	bool		cycle;
	int64		last_value;
	bool		is_called;
} KeptSequence;

/* Quoted, schema-qualified name of a relation. */
static char *
QualifiedRelName(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* ERROR unless the current user owns the relation; checked before any lock. */
static void
ConvertCheckOwner(Oid relid)
{
	char	   *name;

	if (SnowseqClassOwnercheck(relid, GetUserId()))
		return;
	name = get_rel_name(relid);
	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)), name);
}

/*
 * The sequences linked to an object by dependencies of one type: those it
 * depends on, or (referenced) those that depend on it.
 */
static List *
DependSequences(Oid classid, Oid objid, int32 subid, bool referenced, char deptype)
{
	Relation	dep = table_open(DependRelationId, AccessShareLock);
	ScanKeyData key[3];
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *seqs = NIL;

	if (referenced)
	{
		ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(classid));
		ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(objid));
		ScanKeyInit(&key[2], Anum_pg_depend_refobjsubid, BTEqualStrategyNumber, F_INT4EQ,
					Int32GetDatum(subid));
	}
	else
	{
		ScanKeyInit(&key[0], Anum_pg_depend_classid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(classid));
		ScanKeyInit(&key[1], Anum_pg_depend_objid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(objid));
		ScanKeyInit(&key[2], Anum_pg_depend_objsubid, BTEqualStrategyNumber, F_INT4EQ,
					Int32GetDatum(subid));
	}
	scan = systable_beginscan(dep, referenced ? DependReferenceIndexId : DependDependerIndexId,
							  true, NULL, 3, key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);
		Oid			cls = referenced ? d->classid : d->refclassid;
		Oid			obj = referenced ? d->objid : d->refobjid;

		if (d->deptype == deptype && cls == RelationRelationId &&
			get_rel_relkind(obj) == RELKIND_SEQUENCE)
			seqs = list_append_unique_oid(seqs, obj);
	}
	systable_endscan(scan);
	table_close(dep, AccessShareLock);
	return seqs;
}

/*
 * What still uses a sequence besides the defaults just replaced (other
 * columns' defaults, views, functions with SQL bodies): a description of
 * the first few, or NULL if nothing does.
 */
static char *
SequenceUsers(Oid seqid)
{
	Relation	dep = table_open(DependRelationId, AccessShareLock);
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	StringInfoData users;
	int			n = 0;

	initStringInfo(&users);
	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(RelationRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(seqid));
	scan = systable_beginscan(dep, DependReferenceIndexId, true, NULL, 2, key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);
		ObjectAddress user;

		if (d->deptype != DEPENDENCY_NORMAL)
			continue;
		if (n++ < 3)
		{
			ObjectAddressSubSet(user, d->classid, d->objid, d->objsubid);
			appendStringInfo(&users, "%s%s", n > 1 ? ", " : "",
							 getObjectDescription(&user, false));
		}
	}
	systable_endscan(scan);
	table_close(dep, AccessShareLock);
	if (n > 3)
		appendStringInfo(&users, " and %d more", n - 3);
	return n > 0 ? users.data : NULL;
}

/*
 * Columns of other tables whose foreign keys reference this column (in the
 * table or one of its partitions) and that are too narrow for snowflake
 * IDs: one "ALTER TABLE ... TYPE bigint;" each, or NULL if there are none.
 * pg_constraint has no index on the referenced table: a heap scan, once.
 */
static char *
NarrowReferences(List *rels, const char *colname)
{
	Relation	con = table_open(ConstraintRelationId, AccessShareLock);
	SysScanDesc scan = systable_beginscan(con, InvalidOid, false, NULL, 0, NULL);
	HeapTuple	tup;
	StringInfoData alters;
	bool		any = false;

	initStringInfo(&alters);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_constraint c = (Form_pg_constraint) GETSTRUCT(tup);
		bool		isnull;
		Datum		d;
		ArrayType  *conkey;
		ArrayType  *confkey;
		int16	   *fk;
		int16	   *pk;
		int			n;
		AttrNumber	keyatt;

		/* clones for partitions repeat the constraint of their parent */
		if (c->contype != CONSTRAINT_FOREIGN || OidIsValid(c->conparentid) ||
			!list_member_oid(rels, c->confrelid))
			continue;
		keyatt = get_attnum(c->confrelid, colname);
		d = heap_getattr(tup, Anum_pg_constraint_conkey, RelationGetDescr(con), &isnull);
		if (isnull)
			continue;
		conkey = DatumGetArrayTypeP(d);
		d = heap_getattr(tup, Anum_pg_constraint_confkey, RelationGetDescr(con), &isnull);
		if (isnull)
			continue;
		confkey = DatumGetArrayTypeP(d);
		n = ArrayGetNItems(ARR_NDIM(conkey), ARR_DIMS(conkey));
		fk = (int16 *) ARR_DATA_PTR(conkey);
		pk = (int16 *) ARR_DATA_PTR(confkey);
		for (int i = 0; i < n; i++)
		{
			Oid			type;

			if (pk[i] != keyatt)
				continue;
			type = getBaseType(get_atttype(c->conrelid, fk[i]));
			if (type == INT2OID || type == INT4OID)
			{
				appendStringInfo(&alters, " ALTER TABLE %s ALTER COLUMN %s TYPE bigint;",
								 QualifiedRelName(c->conrelid),
								 quote_identifier(get_attname(c->conrelid, fk[i], false)));
				any = true;
			}
		}
	}
	systable_endscan(scan);
	table_close(con, AccessShareLock);
	return any ? alters.data : NULL;
}

/* The column's default expression, as SQL; NULL if it has none. */
static char *
DefaultText(Relation rel, AttrNumber attnum, Node **expr)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	*expr = NULL;
	if (constr == NULL)
		return NULL;
	for (int i = 0; i < constr->num_defval; i++)
	{
		if (constr->defval[i].adnum != attnum)
			continue;
		*expr = stringToNode(constr->defval[i].adbin);
		return deparse_expression(*expr,
								  deparse_context_for(RelationGetRelationName(rel),
													  RelationGetRelid(rel)),
								  false, false);
	}
	return NULL;
}

/*
 * The largest value of the column in the table and all its partitions,
 * read with row security off: a policy that hid rows from the owner would
 * make the check wrong, so it is an ERROR instead.  Returns false for an
 * empty column.
 */
static bool
ColumnMax(const char *qrel, const char *qcol, int64 *max)
{
	int			nestlevel = NewGUCNestLevel();
	bool		isnull;
	Datum		d;
	char	   *sql = psprintf("SELECT pg_catalog.max(%s) FROM %s", qcol, qrel);

	(void) set_config_option("row_security", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	SpiRun(sql, SPI_OK_SELECT);
	AtEOXact_GUC(true, nestlevel);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		*max = DatumGetInt64(d);
	return !isnull;
}

/* ERROR: the column holds values the clock has not reached yet. */
static void
RefuseAhead(const char *col, const char *relname, int64 max, int64 next)
{
	int			shift = snowseq_node_bits + snowseq_seq_bits;
	uint64		counter = (((uint64) max >> shift) + 1) << snowseq_seq_bits;

	if (counter >= ClockCounterLimit())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" of table \"%s\" holds values up to %lld, above every ID snowseq can issue",
						col, relname, (long long) max),
				 errdetail("The next snowseq ID is %lld, and the time field ends before the IDs pass %lld.",
						   (long long) next, (long long) max),
				 errhint("Renumber the rows above %lld, or leave this table on its sequence.",
						 (long long) next)));
	else
	{
		char		when[MAXDATELEN + 1];

		strlcpy(when, timestamptz_to_str(ClockCounterInstant(counter)), sizeof(when));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" of table \"%s\" holds values up to %lld, above the IDs snowseq issues now",
						col, relname, (long long) max),
				 errdetail("The next snowseq ID is %lld; snowseq IDs pass %lld at %s.",
						   (long long) next, (long long) max, when),
				 errhint("Convert after %s, or renumber the rows above %lld: the snowseq clock is never moved ahead to pass existing values.",
						 when, (long long) next)));
	}
}

/* The parameters and state of an identity sequence, to make it anew. */
static KeptSequence *
SequenceSnapshot(Oid seqid)
{
	KeptSequence *k = palloc0(sizeof(KeptSequence));
	HeapTuple	tup = SearchSysCache1(SEQRELID, ObjectIdGetDatum(seqid));
	Form_pg_sequence s;
	bool		isnull;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for sequence %u", seqid);
	s = (Form_pg_sequence) GETSTRUCT(tup);
	k->typid = s->seqtypid;
	k->start = s->seqstart;
	k->increment = s->seqincrement;
	k->max = s->seqmax;
	k->min = s->seqmin;
	k->cache = s->seqcache;
	k->cycle = s->seqcycle;
	ReleaseSysCache(tup);
	k->nspname = get_namespace_name(get_rel_namespace(seqid));
	k->relname = get_rel_name(seqid);
	k->qname = quote_qualified_identifier(k->nspname, k->relname);
	SpiRun(psprintf("SELECT last_value, is_called FROM %s", k->qname), SPI_OK_SELECT);
	k->last_value = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	k->is_called = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	return k;
}

/* Make a dropped identity sequence anew, as a sequence owned by the column. */
static void
SequenceRecreate(const KeptSequence *k, const char *qrel, const char *qcol)
{
	Oid			seqid;

	SpiRun(psprintf("CREATE SEQUENCE %s AS %s INCREMENT BY %lld MINVALUE %lld MAXVALUE %lld "
					"START WITH %lld CACHE %lld %sCYCLE OWNED BY %s.%s",
					k->qname, format_type_be(k->typid), (long long) k->increment,
					(long long) k->min, (long long) k->max, (long long) k->start,
					(long long) k->cache, k->cycle ? "" : "NO ", qrel, qcol),
		   SPI_OK_UTILITY);
	seqid = get_relname_relid(k->relname, get_namespace_oid(k->nspname, false));
	(void) DirectFunctionCall3(setval3_oid, ObjectIdGetDatum(seqid),
							   Int64GetDatum(k->last_value), BoolGetDatum(k->is_called));
}

/*
 * Lock a table and all its partitions or inheritance children ACCESS
 * EXCLUSIVE, all or none; returns them, the table first.  A session writing
 * straight into a partition holds the partition's lock and then takes the
 * parent's (to check the row against the partition bound): the reverse of
 * the parent-first order, so waiting for a partition while holding the
 * parent deadlocks with it.  A child that is not free at once makes this
 * let go of every lock it took, wait (holding none) for the transactions
 * that hold the child to end, and start again.
 */
static List *
ConvertLockAll(Oid relid)
{
	for (;;)
	{
		List	   *rels;
		ListCell   *lc;
		Oid			busy = InvalidOid;
		LOCKTAG		tag;

		LockRelationOid(relid, AccessExclusiveLock);
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation with OID %u does not exist", relid)));
		rels = list_make1_oid(relid);
		/* breadth first: a parent is locked before its children are read */
		foreach(lc, rels)
		{
			List	   *children = find_inheritance_children_extended(lfirst_oid(lc), false, NoLock,
																	  NULL, NULL);
			ListCell   *c;

			foreach(c, children)
			{
				Oid			child = lfirst_oid(c);

				if (!ConditionalLockRelationOid(child, AccessExclusiveLock))
				{
					busy = child;
					break;
				}
				/* dropped before we locked it */
				if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(child)))
				{
					UnlockRelationOid(child, AccessExclusiveLock);
					continue;
				}
				rels = lappend_oid(rels, child);
			}
			if (OidIsValid(busy))
				break;
		}
		if (!OidIsValid(busy))
			return rels;

		foreach(lc, rels)
			UnlockRelationOid(lfirst_oid(lc), AccessExclusiveLock);
		list_free(rels);
		SET_LOCKTAG_RELATION(tag, MyDatabaseId, busy);
		WaitForLockers(tag, AccessExclusiveLock, false);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Open the table to convert, locked ACCESS EXCLUSIVE together with all its
 * partitions or inheritance children (returned in *rels, the table first):
 * no row may come in through any of them between the check and the switch.
 */
static Relation
ConvertOpen(Oid relid, List **rels)
{
	Relation	rel;
	const char *relname;
	Oid			ext;

	/* the owner's right, checked before any lock is taken */
	ConvertCheckOwner(relid);
	/* an extension's tables change only with the extension */
	ext = getExtensionOfObject(RelationRelationId, relid);
	if (OidIsValid(ext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" belongs to extension \"%s\"",
						get_rel_name(relid), get_extension_name(ext)),
				 errhint("snowseq_convert changes the tables of applications; an extension's tables change only with the extension.")));
	*rels = ConvertLockAll(relid);
	rel = try_table_open(relid, NoLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	relname = RelationGetRelationName(rel);
	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", relname),
				 errhint("snowseq_convert changes the key column of a table or a partitioned table.")));
	if (rel->rd_rel->relispartition)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" is a partition of \"%s\"", relname,
						get_rel_name(get_partition_parent(relid, false))),
				 errhint("Convert the partitioned table: its default then applies to every partition.")));
	return rel;
}

/*
 * The column to convert: a bigint that is neither generated nor a system
 * column, and that no column of another table too narrow for snowflake IDs
 * references.  Too narrow is refused with the statements that widen it.
 */
static Form_pg_attribute
ConvertColumn(Relation rel, List *rels, const char *col, const char *qrel, const char *qcol)
{
	const char *relname = RelationGetRelationName(rel);
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), col);
	Form_pg_attribute att;
	Oid			type;
	char	   *narrow;

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", col, relname)));
	if (attnum < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot convert system column \"%s\"", col)));
	att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	if (att->attgenerated)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("column \"%s\" of table \"%s\" is a generated column", col, relname),
				 errhint("A generated column computes its value; it takes no default.")));

	/* snowflake IDs need 63 bits, and so does every column referencing them */
	type = getBaseType(att->atttypid);
	narrow = NarrowReferences(rels, col);
	if (type == INT2OID || type == INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of table \"%s\" is of type %s: snowflake IDs do not fit in it",
						col, relname, format_type_be(att->atttypid)),
				 errdetail("snowseq IDs are positive 63-bit numbers."),
				 errhint("Widen it first (this rewrites the table): ALTER TABLE %s ALTER COLUMN %s TYPE bigint;%s",
						 qrel, qcol, narrow ? narrow : "")));
	if (type != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of table \"%s\" is of type %s, not bigint",
						col, relname, format_type_be(att->atttypid)),
				 errhint("snowseq IDs are bigint.")));
	if (narrow)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("foreign keys referencing column \"%s\" of table \"%s\" are too narrow for snowflake IDs",
						col, relname),
				 errdetail("snowseq IDs are positive 63-bit numbers."),
				 errhint("Widen them first (this rewrites those tables):%s", narrow)));
	return att;
}

/* The sequences the column's defaults use, in the table and every partition. */
List *
ConvertDefaultSequences(List *rels, const char *col)
{
	List	   *seqs = NIL;
	ListCell   *lc;

	foreach(lc, rels)
	{
		Oid			r = lfirst_oid(lc);
		Oid			def = GetAttrDefaultOid(r, get_attnum(r, col));

		if (OidIsValid(def))
			seqs = list_concat_unique_oid(seqs, DependSequences(AttrDefaultRelationId, def, 0,
																false, DEPENDENCY_NORMAL));
	}
	return seqs;
}

/*
 * Drop the identity of the column wherever it has one (from 17 on, the
 * parent's drop recurses to the partitions); its sequence goes with it.
 * With keep, each sequence is noted first, to be made anew.  Returns the
 * sequences kept.
 */
static List *
DropIdentities(List *rels, const char *col, const char *qcol, bool keep, StringInfo result)
{
	List	   *kept = NIL;
	ListCell   *lc;

	foreach(lc, rels)
	{
		Oid			r = lfirst_oid(lc);
		AttrNumber	a = get_attnum(r, col);
		HeapTuple	tup = SearchSysCacheAttNum(r, a);
		char		identity;
		List	   *seqs;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for attribute %d of relation %u", a, r);
		identity = ((Form_pg_attribute) GETSTRUCT(tup))->attidentity;
		ReleaseSysCache(tup);
		if (!identity)
			continue;
		seqs = DependSequences(RelationRelationId, r, a, true, DEPENDENCY_INTERNAL);
		if (keep && seqs != NIL)
			kept = lappend(kept, SequenceSnapshot(linitial_oid(seqs)));
		else if (seqs != NIL)
			appendStringInfo(result, "; sequence %s dropped", QualifiedRelName(linitial_oid(seqs)));
		SpiRun(psprintf("ALTER TABLE %s ALTER COLUMN %s DROP IDENTITY",
						QualifiedRelName(r), qcol),
			   SPI_OK_UTILITY);
	}
	return kept;
}

/*
 * The sequences of the old defaults: dropped, unless kept on request or
 * still used by something else (then a NOTICE says by what).
 */
static void
DropSequences(List *seqs, bool keep, StringInfo result)
{
	ListCell   *lc;

	foreach(lc, seqs)
	{
		Oid			seq = lfirst_oid(lc);
		char	   *qseq = QualifiedRelName(seq);
		char	   *users;

		if (keep)
		{
			appendStringInfo(result, "; sequence %s kept", qseq);
			continue;
		}
		users = SequenceUsers(seq);
		if (users)
		{
			ereport(NOTICE,
					(errmsg("sequence %s is kept: %s still uses it", qseq, users)));
			appendStringInfo(result, "; sequence %s kept (still used)", qseq);
			continue;
		}
		SpiRun(psprintf("DROP SEQUENCE %s", qseq), SPI_OK_UTILITY);
		appendStringInfo(result, "; sequence %s dropped", qseq);
	}
}

/*
 * ConvertRun switches the key column col of a table the current user owns,
 * and of all its partitions, to DEFAULT snowseq_next() of the schema
 * extschema, above every value it holds; the old sequence or identity is
 * dropped, or kept.  Returns what it did, as snowseq_convert says it.
 */
char *
ConvertRun(Oid relid, const char *col, bool keep, const char *extschema)
{
	char	   *qcol = pstrdup(quote_identifier(col));
	char	   *qrel;
	char	   *relname;
	Relation	rel;
	List	   *rels;
	List	   *default_seqs;
	List	   *kept;
	ListCell   *lc;
	Form_pg_attribute att;
	char		identity;
	Node	   *old_expr;
	char	   *old_default;
	bool		has_max;
	int64		max = 0;
	int64		next;
	StringInfoData result;

	SnowseqCheckUsable();
	rel = ConvertOpen(relid, &rels);
	relname = pstrdup(RelationGetRelationName(rel));
	qrel = QualifiedRelName(relid);
	att = ConvertColumn(rel, rels, col, qrel, qcol);
	identity = att->attidentity;
	old_default = DefaultText(rel, att->attnum, &old_expr);
	table_close(rel, NoLock);
	if (old_expr && IsA(old_expr, FuncExpr) &&
		((FuncExpr *) old_expr)->funcid ==
		LookupFuncName(list_make2(makeString(pstrdup(extschema)), makeString("snowseq_next")), 0, NULL, false))
	{
		ereport(NOTICE,
				(errmsg("column \"%s\" of table \"%s\" already takes its values from snowseq_next()",
						col, relname)));
		return psprintf("%s.%s: already DEFAULT snowseq_next()", qrel, qcol);
	}
	default_seqs = ConvertDefaultSequences(rels, col);

	/* every ID issued from now on must lie above every value there */
	SPI_connect();
	has_max = ColumnMax(qrel, qcol, &max);
	next = ClockComposeId(ClockNext(1));
	if (has_max && max >= next)
		RefuseAhead(col, relname, max, next);

	initStringInfo(&result);
	appendStringInfo(&result, "%s.%s: DEFAULT snowseq_next()", qrel, qcol);
	if (identity)
		appendStringInfo(&result, " replaces GENERATED %s AS IDENTITY",
						 identity == ATTRIBUTE_IDENTITY_ALWAYS ? "ALWAYS" : "BY DEFAULT");
	else if (old_default)
		appendStringInfo(&result, " replaces DEFAULT %s", old_default);
	else
		appendStringInfoString(&result, " set (no default before)");

	kept = DropIdentities(rels, col, qcol, keep, &result);
	SpiRun(psprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s.snowseq_next()",
					qrel, qcol, quote_identifier(extschema)),
		   SPI_OK_UTILITY);
	foreach(lc, kept)
	{
		KeptSequence *k = lfirst(lc);

		SequenceRecreate(k, qrel, qcol);
		appendStringInfo(&result, "; sequence %s kept (now a plain sequence owned by the column)",
						 k->qname);
	}
	DropSequences(default_seqs, keep, &result);
	SPI_finish();

	if (has_max)
		appendStringInfo(&result, "; values up to %lld, new IDs above %lld",
						 (long long) max, (long long) next);
	else
		appendStringInfo(&result, "; column empty, new IDs above %lld", (long long) next);
	return result.data;
}

PG_FUNCTION_INFO_V1(snowseq_convert);

/*
 * snowseq_convert(tab, col, keep_sequence) -> text: the key column of a
 * table the caller owns, and of all its partitions, takes its values from
 * snowseq_next(), above every value it holds; the old sequence or identity
 * is dropped, or kept.  Says what it did.
 */
Datum
snowseq_convert(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *col = NameStr(*PG_GETARG_NAME(1));
	bool		keep = PG_GETARG_BOOL(2);
	char	   *extschema = get_namespace_name(ExtNamespace(fcinfo->flinfo->fn_oid));

	PG_RETURN_TEXT_P(cstring_to_text(ConvertRun(relid, col, keep, extschema)));
}
