/*
 * merge_mirror.c
 *		The trigger of a merge on a shard server (snowseq_merge_mirror).
 *
 * While the partitions of a merge still take writes, each table they read
 * on their server carries this AFTER ROW trigger: every row inserted,
 * updated or deleted there is applied, in the same transaction, to the
 * merged table (the first argument), by its ID (the second).  An insert or
 * an update is an upsert of the row's columns, a delete (and the old ID of
 * an update that changes it) a delete.  The merge copies the rows that were
 * there before in batches that lock them FOR SHARE and insert them ON
 * CONFLICT DO NOTHING (the backfill, merge.c).  The row's lock orders a
 * writer and the backfill: a writer of a row the backfill holds waits for
 * it, and the backfill of a row a writer changed copies the writer's
 * version (or nothing, for a delete) once the writer has committed, and
 * leaves alone the version the writer's trigger applied.  So once the
 * backfill has gone through every row, any snapshot sees in the merged
 * table exactly the rows of the tables it merges.
 *
 * The trigger's statements run with the latest snapshot, not the writer's:
 * a REPEATABLE READ writer (postgres_fdw runs every remote transaction so)
 * whose snapshot predates the backfill's copy of a row it then updates or
 * deletes must change that copy, which its own snapshot does not see.  Only
 * the holder of a row's lock in the table merged writes that row in the
 * merged table, so the latest committed version there is the one the
 * writer's change follows.

 * The writes run as the merged table's owner, which must own the table the
 * trigger fires on (else the trigger would let whoever writes there write
 * into a table of another role), as a security-restricted operation, into
 * a plain table only.  The merged table fires none of its own triggers and
 * checks no foreign key meanwhile: the merge keeps its triggers disabled
 * and makes its foreign keys in the switch (merge_switch.c), since they
 * fired and checked on the tables merged already.  TRUNCATE of a table
 * being merged is refused.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"

#include "sqlrun.h"

PG_FUNCTION_INFO_V1(snowseq_merge_mirror);

/*
 * The statement that applies a row of the source (parameter $1, of the
 * source's row type) to the target: an upsert of the target's columns that
 * are not generated (they are computed there again), by the ID.
 */
static char *
MergeMirrorUpsert(Relation target, const char *target_q, const char *id_col)
{
	TupleDesc	desc = RelationGetDescr(target);
	StringInfoData cols;
	StringInfoData vals;
	StringInfoData sets;

	initStringInfo(&cols);
	initStringInfo(&vals);
	initStringInfo(&sets);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);
		const char *c;

		if (a->attisdropped || a->attgenerated != '\0')
			continue;
		c = quote_identifier(NameStr(a->attname));
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", c);
		appendStringInfo(&vals, "%s($1).%s", vals.len ? ", " : "", c);
		if (strcmp(NameStr(a->attname), id_col) != 0)
			appendStringInfo(&sets, "%s%s = EXCLUDED.%s", sets.len ? ", " : "", c, c);
	}
	return psprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO %s%s",
					target_q, cols.data, vals.data, quote_identifier(id_col),
					sets.len ? "UPDATE SET " : "NOTHING", sets.data);
}

/*
 * Run one statement of the mirror with its one parameter, with the latest
 * snapshot (and no crosscheck: the row's lock in the table merged has
 * ordered the writers already).
 */
static void
MergeMirrorRun(const char *sql, Oid type, Datum value)
{
	Oid			types[1] = {type};
	Datum		values[1] = {value};
	SPIPlanPtr	plan = SPI_prepare(sql, 1, types);

	if (plan == NULL)
		elog(ERROR, "could not prepare a statement of the merge trigger: %s", SPI_result_code_string(SPI_result));
	if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(), InvalidSnapshot, false, false, 0) < 0)
		elog(ERROR, "could not apply a row to the merged table: %s", sql);
	SPI_freeplan(plan);
}

/*
 * snowseq_merge_mirror('schema.merged_table', 'id'): AFTER INSERT OR UPDATE
 * OR DELETE row trigger (and BEFORE TRUNCATE statement trigger) of a table
 * being merged.
 */
Datum
snowseq_merge_mirror(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Relation	rel;
	Relation	target;
	Oid			target_id;
	char	   *target_q;
	const char *id_col;
	int			attno;
	bool		isnull;
	int64		old_id = 0;
	int64		new_id = 0;
	Oid			save_user;
	int			save_sec;
	int			nest;
	HeapTuple	row = NULL;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_merge_mirror must be called as a trigger")));
	rel = td->tg_relation;
	if (td->tg_trigger->tgnargs != 2)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_merge_mirror takes the merged table and the ID column as its arguments")));
	target_id = DatumGetObjectId(DirectFunctionCall1(regclassin, CStringGetDatum(td->tg_trigger->tgargs[0])));
	if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot truncate table \"%s\" while it is being merged into table \"%s\"",
						RelationGetRelationName(rel), get_rel_name(target_id)),
				 errhint("Wait for the merge to end, or let snowseq_move_cleanup() undo it.")));
	if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_AFTER(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_merge_mirror must be an AFTER ROW trigger, or a BEFORE TRUNCATE one")));
	if (ExtRelationOwner(target_id) != rel->rd_rel->relowner)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table \"%s\" has another owner than table \"%s\", which it would write into",
						RelationGetRelationName(rel), get_rel_name(target_id))));
	id_col = td->tg_trigger->tgargs[1];
	attno = SPI_fnumber(RelationGetDescr(rel), id_col);
	if (attno <= 0 || TupleDescAttr(RelationGetDescr(rel), attno - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("table \"%s\" has no bigint column \"%s\"", RelationGetRelationName(rel), id_col)));

	/* the old row's ID (update, delete), the new row (insert, update) */
	if (!TRIGGER_FIRED_BY_INSERT(td->tg_event))
		old_id = DatumGetInt64(heap_getattr(td->tg_trigtuple, attno, RelationGetDescr(rel), &isnull));
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
		row = td->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		row = td->tg_newtuple;
	if (row != NULL)
		new_id = DatumGetInt64(heap_getattr(row, attno, RelationGetDescr(rel), &isnull));

	target = table_open(target_id, RowExclusiveLock);
	if (target->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\", which table \"%s\" is being merged into, is not a table",
						RelationGetRelationName(target), RelationGetRelationName(rel))));
	target_q = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(target)),
										  RelationGetRelationName(target));
	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(target->rd_rel->relowner,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION |
						   SECURITY_NOFORCE_RLS);
	nest = NewGUCNestLevel();
	SPI_connect();
	if (!TRIGGER_FIRED_BY_INSERT(td->tg_event) && (row == NULL || new_id != old_id))
		MergeMirrorRun(psprintf("DELETE FROM %s WHERE %s OPERATOR(pg_catalog.=) $1",
								target_q, quote_identifier(id_col)),
					   INT8OID, Int64GetDatum(old_id));
	if (row != NULL)
		MergeMirrorRun(MergeMirrorUpsert(target, target_q, id_col), RelationGetDescr(rel)->tdtypeid,
					   heap_copy_tuple_as_datum(row, RelationGetDescr(rel)));
	SPI_finish();
	AtEOXact_GUC(true, nest);
	SetUserIdAndSecContext(save_user, save_sec);
	table_close(target, NoLock);
	return PointerGetDatum(NULL);
}
