/*
 * move.c
 *		Elastic shards, the router side: the entry points
 *		(snowseq_move_genes and its conveniences snowseq_split_partition
 *		and snowseq_move_to_neighbour, by their older names
 *		snowseq_split_shard and snowseq_merge_shards in C,
 *		snowseq_move_cleanup, snowseq_placement_group,
 *		snowseq_shard_stats) and
 *		the orchestration of a move: its steps in order, each committed,
 *		and the state it records.  The steps themselves live in
 *		move_plan.c (planning and checks), move_repl.c (logical
 *		replication), move_switch.c (block and switch) and move_cleanup.c
 *		(finish, undo, resolve, orphans).
 *
 * A router's sharded table is partitioned by gene range; each partition is
 * a postgres_fdw foreign table reading one table on one shard server, and
 * snowseq_shard_map names that server (the foreign server) for each gene
 * range.  A move of genes first..last from the server of their partition
 * (the source) to another server (the destination) uses PostgreSQL's own
 * logical replication, the way Citus moves a shard:
 *
 *	prepare  the destination gets a table of its own for the range (never a
 *			 table another partition reads: that partition would show the
 *			 copied rows twice); the source table a fence trigger and a
 *			 publication filtered on the ID range; the destination a
 *			 subscription that copies and then streams; the router a foreign
 *			 table on the new table, not yet attached;
 *	copy	 wait for the initial copy, then catch up;
 *	block	 writes to the range, and only those, wait on the source; wait
 *			 for writers already under way, then for the subscription to
 *			 apply everything up to the source's current WAL position; drop
 *			 the subscription; the held-back writers fail with a
 *			 serialization failure, and their retries reach the new server
 *			 once the router has switched;
 *	switch	 a split makes its keep view on the source (the rows that stay);
 *			 a source transaction marks the fence "moved" and deletes
 *			 nothing; one router transaction takes the parent's lock,
 *			 detaches the partition, attaches what is left of it (reading
 *			 the keep view) and the new foreign table, and rewrites the map;
 *			 the source transaction locks the source table and is prepared
 *			 (two-phase), the router commits, then the source commits: no
 *			 query through the router sees a row twice or misses one, and a
 *			 router that dies between the two commits leaves the source
 *			 table waiting for the outcome its record decides;
 *	finish	 commit the prepared source transaction, drop the publication
 *			 (the slot went with the subscription), delete the moved rows on
 *			 the source in batches, validate the foreign keys made between a
 *			 group's new tables, point a split's partitions back at their
 *			 tables, and once that commits drop the keep views.
 *
 * Each step commits, and the record in snowseq_moves says how far a move
 * got (while it copies, also how far the copy got, for
 * snowseq_move_progress); a move holds an advisory lock on the router for
 * its whole life.  A move that fails undoes itself: the old placement never
 * stopped serving.  One whose router died in or after the switch is
 * finished or undone when the router starts again (worker.c's move
 * resolver); one that died earlier, by snowseq_move_cleanup(), which the
 * next move of the same table runs first.
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "move.h"
#include "merge_cleanup.h"
#include "move_cleanup.h"
#include "move_common.h"
#include "move_group.h"
#include "move_keep.h"
#include "move_orphans.h"
#include "move_parts.h"
#include "move_plan.h"
#include "move_repl.h"
#include "move_switch.h"
#include "shard_ddl_xact.h"
#include "snowseq.h"
#include "gene.h"
#include "sqlrun.h"
#include "testpoint.h"

#define MOVE_PROGRESS_MS		500 /* the copy's progress is committed so often */

/* snowseq.move_revert_window: how long a move keeps its source current after its switch */
static int	move_revert_window = 0;

/* Define the settings of moves. */
void
MoveInit(void)
{
	DefineCustomIntVariable("snowseq.move_revert_window",
							"How long a move keeps its source current after its switch, so that it can be reverted.",
							"0 finishes a move at once.  Within the window, snowseq_move_revert() switches "
							"the genes back and snowseq_move_finalize() ends it sooner.",
							&move_revert_window, 0, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
}

/*
 * Open a fence of one table of a move on the source (its group's), on the
 * IDs that move, for its destination; returns the fence's id.
 */
static int
MoveOpenFence(Move *t)
{
	RemoteConn *src = MoveSrc(t);
	bool		has_lo,
				has_hi;
	int64		lo,
				hi;

	MoveIds(t, &has_lo, &lo, &has_hi, &hi);
	return pg_strtoint32(RemoteValueParams(src, psprintf("SELECT %s($1::pg_catalog.text, $2::pg_catalog.regclass, "
														 "$3::pg_catalog.int8, $4::pg_catalog.int8, $5::pg_catalog.text)",
														 MoveRemoteExt(src, "snowseq_fence_open")),
										   SQL_ARGS(t->op.token, t->src_table, Int8Arg(has_lo, lo),
													Int8Arg(has_hi, hi), t->dst_name),
										   "open the fence"));
}

/* The destination table and the source's fence of one table of a move. */
static void
MovePrepareTable(Move *m)
{
	RemoteConn *src = MoveSrc(m);
	RemoteConn *dst = MoveDst(m);

	if (m->dest_created == 1)
	{
		char	   *cols = MoveRemoteColumns(src, m->src_table);
		char	   *pk = MoveRemotePkey(src, m->src_table);
		char	   *owner = RemoteValueParams(src, "SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(relowner)) "
											  "FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
											  SQL_ARGS(m->src_table), "read the table owner");
		char	   *grants = RemoteValueParams(src, "SELECT pg_catalog.string_agg(pg_catalog.format('GRANT %s ON TABLE %s TO %s', "
											   "x.privilege_type, $1::pg_catalog.text, CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' "
											   "ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(x.grantee)) END), '; ') "
											   "FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) x "
											   "WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.text::pg_catalog.regclass "
											   "AND x.grantee OPERATOR(pg_catalog.<>) c.relowner",
											   SQL_ARGS(m->src_table), "read the table privileges");
		char	   *check = MoveIdCondition(m);

		/*
		 * One remote transaction: the table exists, marked as the move's, or
		 * not at all.  It is named like the source table until replication
		 * stops; its constraints carry the final name already.
		 */
		RemoteCommand(dst, psprintf("CREATE SCHEMA IF NOT EXISTS %s; "
									"CREATE TABLE %s (%s%s%s%s, CONSTRAINT %s CHECK (%s)); "
									"COMMENT ON TABLE %s IS %s; ALTER TABLE %s OWNER TO %s; %s%s"
									"CREATE TRIGGER snowseq_fence BEFORE INSERT OR UPDATE OR DELETE ON %s "
									"FOR EACH ROW EXECUTE FUNCTION %s(%s); "
									"CREATE TRIGGER snowseq_fence_truncate BEFORE TRUNCATE ON %s "
									"FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)",
									quote_identifier(m->dst_nsp), m->src_table, cols,
									pk ? ", CONSTRAINT " : "", pk ? quote_identifier(psprintf("%s_pkey", m->dst_rel)) : "",
									pk ? psprintf(" %s", pk) : "",
									quote_identifier(psprintf("%s_genes", m->dst_rel)), check,
									m->src_table, quote_literal_cstr(MoveCopyMark(m)), m->src_table, owner,
									grants ? grants : "", grants ? "; " : "",
									m->src_table, MoveRemoteExt(dst, "snowseq_fence"), quote_literal_cstr(m->id_col),
									m->src_table, MoveRemoteExt(dst, "snowseq_fence"), quote_literal_cstr(m->id_col)),
					  "create the destination table");
		MoveSchemaCreate(MoveTables(m));
	}
	else
	{
		/* an empty table that matches: forget its old fences */
		RemoteCommandParams(dst, psprintf("SELECT %s($1::pg_catalog.regclass)", MoveRemoteExt(dst, "snowseq_fence_clear")),
							SQL_ARGS(m->src_table), "clear the fences of the destination table");
		MoveFenceTrigger(dst, m->src_table, m->id_col);
	}

	/* the source: fence trigger, an open fence, a publication of the range */
	MoveFenceTrigger(src, m->src_table, m->id_col);
	m->hold.fence_id = MoveOpenFence(m);
}

/* The router's foreign table on the new table of one table of a move, not attached. */
static void
MovePrepareForeignTable(Move *m)
{
	SpiRun(psprintf("CREATE FOREIGN TABLE %s (%s) SERVER %s OPTIONS (schema_name %s, table_name %s%s)",
					m->newpart.q, m->newpart.cols, quote_identifier(m->dst_name),
					quote_literal_cstr(m->dst_nsp), quote_literal_cstr(m->dst_rel),
					m->newpart.opts ? m->newpart.opts : ""), SPI_OK_UTILITY);
	if (m->newpart.colopts != NULL)
		SpiRun(psprintf("ALTER FOREIGN TABLE %s %s", m->newpart.q, m->newpart.colopts + 1), SPI_OK_UTILITY);
	MoveForeignChecks(m->parent_q, m->newpart.q);
	if (m->group.lead != NULL)
		MoveRecordSet(m, psprintf("fence_id = %d", m->hold.fence_id));
}

/*
 * Step: for every table of the group the destination table and the fence,
 * then one publication of them all and one subscription (disabled: its
 * table-sync slots are recorded first), then the router's foreign tables.
 * Local writes come last, so that no transaction stays open here while the
 * servers work.
 */
static void
MovePrepareObjects(Move *m)
{
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
		MovePrepareTable(lfirst(lc));
	MoveCreatePublication(m);
	MoveCreateSubscription(m);
	/*
	 * Recorded in this step's transaction, committed before the next step
	 * enables the subscription and before the switch makes the keep views.
	 */
	MoveRecordSyncSlots(m);
	foreach(lc, MoveGroup(m))
	{
		MovePrepareForeignTable(lfirst(lc));
		MoveRecordKeepView(lfirst(lc));
	}
	MoveRecordStep(m, MOVE_STEP_COPY, psprintf("fence_id = %d, sub_oid = %u", m->hold.fence_id, m->copy.sub_oid));
}

/* The rows of the moving genes of every table of the group, on a server (NULL: the source). */
static char *
MoveGroupRows(Move *m, RemoteConn *rc, bool on_dest)
{
	StringInfoData sql;
	ListCell   *lc;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT 0");
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		if (on_dest)
			appendStringInfo(&sql, " OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM %s)", t->src_table);
		else
			appendStringInfo(&sql, " OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM %s WHERE %s)",
							 t->src_table, MoveIdCondition(t));
	}
	return RemoteValue(rc, sql.data, on_dest ? "count the copied rows" : "count the rows to copy");
}

/* Step: the copy begins (the subscription is enabled): the rows it has to copy, for its progress. */
static void
MoveCopyStart(Move *m)
{
	char	   *rows;

	MoveEnableSubscription(m);
	rows = MoveGroupRows(m, MoveSrc(m), false);
	m->copy.started = m->copy.noticed = m->copy.probed = GetCurrentTimestamp();
	m->copy.caught_up = false;
	MoveRecordSetParams(m, "rows_total = $1::pg_catalog.int8, rows_copied = 0, copy_started_at = pg_catalog.clock_timestamp(), "
						"progress_at = pg_catalog.clock_timestamp()", SQL_ARGS(rows));
}

/*
 * Record the copy's progress, as the destination and the source see it:
 * rows copied, the copy's size, the subscription's lag.
 */
static void
MoveCopyProgress(Move *m, const char *rows)
{
	char	   *bytes = MoveCopySize(m);
	char	   *lag = MoveLagBytes(m);

	/* no count of the rows (NULL) keeps the last one */
	MoveRecordSetParams(m, "rows_copied = coalesce($1::pg_catalog.int8, rows_copied), bytes_copied = $2::pg_catalog.int8, "
						"lag_bytes = $3::pg_catalog.int8, progress_at = pg_catalog.clock_timestamp()",
						SQL_ARGS(rows, bytes, lag));
}

/*
 * Step: watch the copy for a while (MOVE_PROGRESS_MS), then record its
 * progress (committed by the caller, for snowseq_move_progress).  Once the
 * copy is done, catch up twice (the second is short) and set m->copy.caught_up.
 */
static void
MoveCopyWatch(Move *m)
{
	TimestampTz watch = GetCurrentTimestamp();
	char	   *rows = NULL;
	bool		ready = false;
	ListCell   *lc;

	while (!ready && MsSince(watch) < MOVE_PROGRESS_MS)
	{
		ready = MoveCopyState(m, &rows);
		if (!ready && MsSince(m->copy.noticed) > 10000)
		{
			ereport(NOTICE,
					(errmsg("copying genes %d to %d to server \"%s\": %s rows after %.0f s",
							m->first, m->last, m->dst_name,
							rows ? rows : "?", MsSince(m->copy.started) / 1000)));
			m->copy.noticed = GetCurrentTimestamp();
		}
		if (ready)
			break;
		/* the source going down must not leave the move waiting forever */
		if (MsSince(m->copy.probed) > 2000)
		{
			RemoteCommand(MoveSrc(m), "SELECT 1", "reach the source");
			m->copy.probed = GetCurrentTimestamp();
		}
		MoveSleep(100);
	}
	if (!ready)
	{
		MoveCopyProgress(m, rows);
		return;
	}
	/* indexes on the copied rows at once, before the catch-up */
	foreach(lc, MoveGroup(m))
		if (((Move *) lfirst(lc))->dest_created == 1)
			MoveSchemaIndexes(MoveTables(lfirst(lc)));
	MoveGroupForeignKeys(m);
	if (m->revert.window > 0)
		MoveBackPrepare(m);
	SNOWSEQ_TESTPOINT("move_after_copy");
	(void) MoveWaitApplied(m, MoveSourceLsn(m), 0);
	(void) MoveWaitApplied(m, MoveSourceLsn(m), 0);
	rows = MoveGroupRows(m, MoveDst(m), true);
	ereport(NOTICE,
			(errmsg("copied %s rows of genes %d to %d to server \"%s\" in %.1f s",
					rows, m->first, m->last, m->dst_name, MsSince(m->copy.started) / 1000)));
	MoveCopyProgress(m, rows);
	MoveRecordSet(m, "copied_at = pg_catalog.clock_timestamp()");
	m->copy.caught_up = true;
}

/* Step: the checks of every table of the group, and of the keys between them. */
static void
MoveGroupChecks(Move *m)
{
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
		MovePrepareChecks(lfirst(lc));
	MoveCheckGroupKeys(m, MoveSrc(m), false);
}

/* Let go of a move: its sessions and its advisory lock. */
static void
MoveRelease(Move *m)
{
	ListCell   *lc;

	MoveReleaseParent(m);
	MoveCloseSessions(m);
	foreach(lc, MoveGroup(m))
		MoveUnlock(((Move *) lfirst(lc))->op.id);
}

/*
 * Run one step of a move and commit.  On error undo the move (or finish it,
 * if the source committed its switch), then raise the error; returns false
 * if the move turned out complete after all.
 */
static bool
MoveRun(Move *m, MoveStep step)
{
	ErrorData  *err = MoveTry(m, step);

	if (err != NULL)
	{
		m->op.state = MoveStateRead(m);
		MoveResolve(m, err->message);
		SPI_commit();
		m->op.state = MoveStateRead(m);
		MoveRelease(m);
		if (m->op.state == MOVE_STATE_DONE)
		{
			/* the source committed before the error: the move is complete */
			ereport(WARNING,
					(errmsg("move " INT64_FORMAT " completed after an error: %s", m->op.id, err->message)));
			return false;
		}
		if (m->op.leftovers)
			ereport(WARNING,
					(errmsg("move " INT64_FORMAT " left objects behind", m->op.id),
					 errhint("SELECT * FROM snowseq_move_cleanup(); removes them once their servers are reachable.")));
		ReThrowError(err);
	}
	SPI_commit();
	/* the state the step recorded (MoveTransitions) */
	m->op.state = MoveStateRead(m);
	return true;
}

/* Watch the copy to its end, committing its progress as it goes; false as MoveRun. */
static bool
MoveCopyAll(Move *m)
{
	while (!m->copy.caught_up)
		if (!MoveRun(m, MoveCopyWatch))
			return false;
	return true;
}

/* Step: drop the keep views of a split's tables on the source, once unused. */
static void
MoveDropKeepViews(Move *m)
{
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
		(void) MoveDropKeepView(lfirst(lc));
}

/*
 * Run the step that ends a move whose router switched (its finish, or a
 * revert's end); an error is recorded and reported in a WARNING: the move
 * stays switched, and snowseq_move_cleanup() finishes it.
 */
static void
MoveEndStep(Move *m, MoveStep step, const char *switched)
{
	ErrorData  *err = MoveTry(m, step);

	if (err != NULL)
	{
		MoveRecordSetParams(m, "error = $1::pg_catalog.text", SQL_ARGS(err->message));
		ereport(WARNING,
				(errmsg("move " INT64_FORMAT " %s, but could not clean up: %s", m->op.id, switched, err->message),
				 errhint("SELECT * FROM snowseq_move_cleanup(); finishes it.")));
	}
}

/*
 * Once the router's commit has its partitions read the tables again: drop
 * the keep views of a move, or say in a WARNING that they are left.
 */
static void
MoveEndViews(Move *m)
{
	ErrorData  *err = MoveTry(m, MoveDropKeepViews);

	if (err != NULL)
		ereport(WARNING,
				(errmsg("move " INT64_FORMAT " could not drop its views on server \"%s\": %s", m->op.id, m->src_name, err->message),
				 errhint("SELECT * FROM snowseq_move_cleanup(); drops them.")));
}

/* The names of the tables of a move's group, quoted, for messages. */
static char *
MoveGroupNames(Move *m)
{
	StringInfoData names;
	ListCell   *lc;

	initStringInfo(&names);
	foreach(lc, MoveGroup(m))
		appendStringInfo(&names, "%s\"%s\"", names.len > 0 ? ", " : "", ((Move *) lfirst(lc))->parent_rel);
	return names.data;
}

/*
 * Move genes first..last of the placement group of a table (InvalidOid:
 * of every gene-sharded table) to a server: the whole procedure.  Every
 * table of the group moves in this one move, the first one leading.
 */
static void
MoveGenes(FunctionCallInfo fcinfo, Oid parent, int first, int last, const char *to_server)
{
	Move	   *m;
	char	   *ext;
	List	   *group;
	ListCell   *lc;

	MoveCheckNonAtomic(fcinfo, "a move of genes");
	SPI_connect_ext(SPI_OPT_NONATOMIC);
	ext = ExtSchemaQuoted(fcinfo->flinfo->fn_oid);

	/*
	 * A catalog older than 1.3 has no table for the records of what a move
	 * makes: a move begun there would leave objects nothing finds.
	 */
	if (!MoveObjectsRecorded(ext))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("moves need snowseq 1.3 in this database; it is older"),
				 errdetail("A move records every object it makes before making it, in snowseq_move_objects, which 1.3 creates."),
				 errhint("Run ALTER EXTENSION snowseq UPDATE, then move.")));

	m = MoveNew(ext);
	m->parent = parent;
	m->first = first;
	m->last = last;
	m->revert.window = move_revert_window;
	group = MovePlacementGroup(m, to_server);

	/* moves of these tables that were interrupted end first */
	foreach(lc, group)
		CleanupMoves(ext, lfirst_oid(lc), NULL, false, NOTICE);
	SPI_commit();

	m->parent = linitial_oid(group);
	MovePlan(m, to_server);
	for_each_from(lc, group, 1)
	{
		Move	   *t = MoveNewMember(m, lfirst_oid(lc));

		MovePlan(t, to_server);
		if (strcmp(t->src_name, m->src_name) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("genes %d to %d of table \"%s\" are on server \"%s\", those of table \"%s\" on server \"%s\"",
							first, last, t->parent_rel, t->src_name, m->parent_rel, m->src_name),
					 errdetail("The tables of a placement group keep each gene on the server the map names."),
					 errhint("Move the genes of table \"%s\" to server \"%s\" first.", t->parent_rel, m->src_name)));
	}
	MoveRecordNew(m);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		if (t->group.lead != NULL)
		{
			MoveRecordNew(t);
			MoveRecordSet(t, psprintf("group_move = " INT64_FORMAT, m->op.id));
		}
	}
	SPI_commit();
	/* the records of what the move will make are committed; none of it exists */
	SNOWSEQ_TESTPOINT("move_after_record");
	ereport(NOTICE,
			(errmsg("move " INT64_FORMAT ": genes %d to %d of %s %s from server \"%s\" to server \"%s\"",
					m->op.id, first, last, m->group.members ? "tables" : "table", MoveGroupNames(m), m->src_name, m->dst_name)));

	if (!MoveRun(m, MoveGroupChecks) ||
		!MoveRun(m, MovePrepareObjects) ||
		!MoveRun(m, MoveCopyStart) ||
		!MoveCopyAll(m) ||
		!MoveRun(m, MoveBlock) ||
		!MoveRun(m, MoveSwitch))
	{
		SPI_finish();
		return;
	}
	/* the router committed its switch: MoveFinish commits the source's */
	SNOWSEQ_TESTPOINT("move_after_router_commit");
	{
		char	   *pause = MoveRecordsValue(m->op.ext, m->op.cxt, psprintf("SELECT pause_ms FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
																	  MoveExt(m, "snowseq_moves"), m->op.id));

		ereport(NOTICE,
				(errmsg("genes %d to %d of table \"%s\" are on server \"%s\"; their writes were held back for %s ms",
						first, last, m->parent_rel, m->dst_name, pause ? pause : "?")));
	}
	MoveEndStep(m, MoveFinish, "switched over");
	SPI_commit();
	if (MoveStateRead(m) == MOVE_STATE_REVERTABLE)
	{
		char	   *until = MoveRecordsValue(m->op.ext, m->op.cxt, psprintf("SELECT revertable_until FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
																	  MoveExt(m, "snowseq_moves"), m->op.id));

		ereport(NOTICE,
				(errmsg("move " INT64_FORMAT " keeps server \"%s\" current until %s: CALL snowseq_move_revert(" INT64_FORMAT
						") moves the genes back, CALL snowseq_move_finalize(" INT64_FORMAT ") ends it sooner",
						m->op.id, m->src_name, until ? until : "?", m->op.id, m->op.id)));
	}
	MoveEndViews(m);
	SPI_commit();
	MoveRelease(m);
	SPI_finish();
	MemoryContextDelete(m->op.cxt);
}

/* Let go of the locks of a move's group (MoveRevertable's). */
static void
MoveUnlockGroup(Move *m)
{
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
		MoveUnlock(((Move *) lfirst(lc))->op.id);
}

/*
 * A revertable move (its leading record), loaded with its group and
 * locked, for snowseq_move_revert and snowseq_move_finalize; errors if
 * there is none, the caller does not own its tables, or it is not
 * revertable or busy.
 */
static Move *
MoveRevertable(FunctionCallInfo fcinfo, int64 id)
{
	char	   *ext = ExtSchemaQuoted(fcinfo->flinfo->fn_oid);
	char	   *lead;
	char	   *earlier;
	Move	   *o;
	ListCell   *lc;

	lead = MoveRecordsValue(ext, CurrentMemoryContext,
					psprintf("SELECT coalesce(group_move, 0) FROM %s.snowseq_moves WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
							 ext, id));

	if (lead == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("move " INT64_FORMAT " does not exist", id)));
	if (strcmp(lead, "0") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("move " INT64_FORMAT " is a table of move %s", id, lead),
				 errhint("Name move %s: the tables of a placement group move back together.", lead)));
	o = MoveLoadById(ext, id);
	foreach(lc, MoveGroup(o))
	{
		Move	   *t = lfirst(lc);
		char	   *v = SpiValue(o->op.cxt, psprintf("SELECT pg_catalog.pg_has_role(relowner, 'USAGE') FROM pg_catalog.pg_class "
												  "WHERE oid OPERATOR(pg_catalog.=) %u", t->parent));

		if (v == NULL || v[0] != 't')
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be owner of table %s", t->parent_rel)));
	}
	if (o->op.state != MOVE_STATE_REVERTABLE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("move " INT64_FORMAT " is %s, not revertable", id, MoveStateName(o->op.state)),
				 errhint("A move is revertable after its switch when snowseq.move_revert_window was set for it, "
						 "until it is finalized or reverted.")));
	foreach(lc, MoveGroup(o))
	{
		if (!MoveLock(((Move *) lfirst(lc))->op.id, false))
		{
			ListCell   *lc2;

			foreach(lc2, MoveGroup(o))
			{
				if (lc2 == lc)
					break;
				MoveUnlock(((Move *) lfirst(lc2))->op.id);
			}
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("move " INT64_FORMAT " is being reverted or finalized", id)));
		}
	}
	/*
	 * An earlier revert that is not over (cut by a crash, or undone with
	 * leftovers) holds the way back's name, which the next revert takes:
	 * it is resolved first.  One that failed is over, and left nothing.
	 */
	earlier = MoveRecordsValueParams(ext, CurrentMemoryContext,
									 psprintf("SELECT move_id::pg_catalog.text OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) state "
											  "FROM %s.snowseq_moves WHERE reverts OPERATOR(pg_catalog.=) $1::pg_catalog.int8 "
											  "AND group_move IS NULL AND state::pg_catalog.text OPERATOR(pg_catalog.<>) $2::pg_catalog.text "
											  "ORDER BY move_id DESC LIMIT 1", ext),
									 SQL_ARGS(psprintf(INT64_FORMAT, id), MoveStateName(MOVE_STATE_FAILED)));
	if (earlier != NULL)
	{
		char	   *state = strchr(earlier, ' ');

		*state++ = '\0';
		MoveUnlockGroup(o);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("move %s, an earlier revert of move " INT64_FORMAT ", is %s", earlier, id, state),
				 errhint("Run snowseq_move_cleanup() to resolve it, then revert again.")));
	}
	return o;
}

/*
 * Step of a revert: its fences on the destination of the move it reverts,
 * open, and the subscription of the way back, which a revert that did not
 * switch may have left without (it kept the slot).
 */
static void
MoveRevertPrepare(Move *m)
{
	Move	   *o = m->revert.of;
	char	   *v;
	ListCell   *lc;

	MoveBackSubscribe(o, false);
	v = MoveSubscriptionOid(MoveDst(m), m->op.token);
	m->copy.sub_oid = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;
	/* the errors it had before the revert are not the revert's */
	v = RemoteValue(MoveDst(m), psprintf("SELECT %s FROM pg_catalog.pg_stat_subscription_stats st "
										 "WHERE st.subid OPERATOR(pg_catalog.=) %u",
										 MoveSubErrorsSql(MoveDst(m), "st"), m->copy.sub_oid),
					"read the errors of the subscription back to the source");
	m->copy.sub_errors = v ? pg_strtoint64(v) : 0;
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		t->hold.fence_id = MoveOpenFence(t);
		MoveRecordSet(t, psprintf("fence_id = %d, sub_oid = %u", t->hold.fence_id, m->copy.sub_oid));
	}
}

PG_FUNCTION_INFO_V1(snowseq_move_revert);
PG_FUNCTION_INFO_V1(snowseq_move_finalize);

/*
 * snowseq_move_revert(move): switch a revertable move back, as a move of
 * its own in the other direction whose copy is already there (the source
 * was kept current): block the moved genes on the destination, catch the
 * source up, switch the router back, drop the destination tables.
 */
Datum
snowseq_move_revert(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"the move"};
	int64		id;
	Move	   *o;
	Move	   *r;

	MoveArgsGiven(fcinfo, "a revert", names);
	id = PG_GETARG_INT64(0);
	MoveCheckNonAtomic(fcinfo, "a move of genes");
	SPI_connect_ext(SPI_OPT_NONATOMIC);
	o = MoveRevertable(fcinfo, id);
	PG_TRY();
	{
		r = MoveRevertNew(o);
		SPI_commit();
		ereport(NOTICE,
				(errmsg("move " INT64_FORMAT ": genes %d to %d of %s %s go back from server \"%s\" to server \"%s\" (revert of move " INT64_FORMAT ")",
						r->op.id, r->first, r->last, o->group.members ? "tables" : "table", MoveGroupNames(o), r->src_name, r->dst_name, id)));
		if (MoveRun(r, MoveRevertPrepare) &&
			MoveRun(r, MoveBlock) &&
			MoveRun(r, MoveSwitch))
		{
			char	   *pause = MoveRecordsValue(r->op.ext, r->op.cxt, psprintf("SELECT pause_ms FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
																		  MoveExt(r, "snowseq_moves"), r->op.id));

			ereport(NOTICE,
					(errmsg("genes %d to %d of table \"%s\" are on server \"%s\" again; their writes were held back for %s ms",
							r->first, r->last, r->parent_rel, r->dst_name, pause ? pause : "?")));
			MoveEndStep(r, MoveRevertFinish, "switched back");
			SPI_commit();
			MoveEndViews(o);
			SPI_commit();
			MoveRelease(r);
		}
	}
	PG_FINALLY();
	{
		MoveUnlockGroup(o);
	}
	PG_END_TRY();
	MoveCloseSessions(o);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Step of snowseq_move_finalize: the way back goes; the move is switched
 * and no longer keeps its source (whoever finishes it, snowseq_move_cleanup
 * included, does not keep it again).
 */
static void
MoveFinalizeBack(Move *m)
{
	ListCell   *lc;

	MoveBackDrop(m);
	foreach(lc, MoveGroup(m))
		((Move *) lfirst(lc))->revert.window = 0;
	MoveRecordStep(m, MOVE_STEP_FINALIZE, "revertable_until = NULL, revert_window = NULL");
	MoveRecordsRun(m->op.ext, psprintf("UPDATE %s SET revert_window = NULL WHERE group_move OPERATOR(pg_catalog.=) " INT64_FORMAT,
									MoveExt(m, "snowseq_moves"), m->op.id), SPI_OK_UPDATE);
}

/*
 * snowseq_move_finalize(move): a revertable move stops keeping its source
 * current and finishes: the moved rows leave the source.
 */
Datum
snowseq_move_finalize(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"the move"};
	int64		id;
	Move	   *o;

	MoveArgsGiven(fcinfo, "a finalize", names);
	id = PG_GETARG_INT64(0);
	MoveCheckNonAtomic(fcinfo, "a move of genes");
	SPI_connect_ext(SPI_OPT_NONATOMIC);
	o = MoveRevertable(fcinfo, id);
	PG_TRY();
	{
		ErrorData  *err = MoveTry(o, MoveFinalizeBack);

		if (err == NULL)
		{
			SPI_commit();
			err = MoveTry(o, MoveFinishSource);
		}
		if (err != NULL)
		{
			MoveRecordSetParams(o, "error = $1::pg_catalog.text", SQL_ARGS(err->message));
			SPI_commit();
			ReThrowError(err);
		}
		SPI_commit();
		MoveEndViews(o);
		SPI_commit();
		ereport(NOTICE,
				(errmsg("move " INT64_FORMAT " is final: genes %d to %d of table \"%s\" are on server \"%s\" alone",
						id, o->first, o->last, o->parent_rel, o->dst_name)));
	}
	PG_FINALLY();
	{
		MoveUnlockGroup(o);
	}
	PG_END_TRY();
	MoveCloseSessions(o);
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(snowseq_move_genes);
PG_FUNCTION_INFO_V1(snowseq_move_genes_all);
PG_FUNCTION_INFO_V1(snowseq_split_shard);
PG_FUNCTION_INFO_V1(snowseq_merge_shards);
PG_FUNCTION_INFO_V1(snowseq_move_cleanup);
PG_FUNCTION_INFO_V1(snowseq_placement_group);

/* snowseq_move_genes(parent, first_gene, last_gene, to_server): a procedure. */
Datum
snowseq_move_genes(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, genes and server of a move must not be NULL")));
	MoveGenes(fcinfo, PG_GETARG_OID(0), PG_GETARG_INT32(1), PG_GETARG_INT32(2),
			  NameStr(*PG_GETARG_NAME(3)));
	PG_RETURN_VOID();
}

/* snowseq_move_genes(first_gene, last_gene, to_server): every gene-sharded table, a procedure. */
Datum
snowseq_move_genes_all(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("genes and server of a move must not be NULL")));
	MoveGenes(fcinfo, InvalidOid, PG_GETARG_INT32(0), PG_GETARG_INT32(1), NameStr(*PG_GETARG_NAME(2)));
	PG_RETURN_VOID();
}

/* snowseq_split_shard(parent, at_gene, to_server): genes at_gene..end of its partition move. */
Datum
snowseq_split_shard(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"the table", "the gene", "the server"};
	Oid			parent;
	int			gene;
	int			first,
				last;
	char	   *server;

	MoveArgsGiven(fcinfo, "a split", names);
	parent = PG_GETARG_OID(0);
	gene = PG_GETARG_INT32(1);
	if (!PartitionOfGene(parent, gene, &first, &last, &server))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no partition of table \"%s\" holds gene %d", get_rel_name(parent), gene)));
	MoveGenes(fcinfo, parent, gene, last, NameStr(*PG_GETARG_NAME(2)));
	PG_RETURN_VOID();
}

/*
 * snowseq_merge_shards(parent, gene): the partition holding gene moves to
 * the server of the partition before it (after it, for the first).
 */
Datum
snowseq_merge_shards(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"the table", "the gene"};
	Oid			parent;
	int			gene;
	int			first,
				last,
				nf,
				nl;
	char	   *server;
	char	   *to = NULL;

	MoveArgsGiven(fcinfo, "a move to a neighbour", names);
	parent = PG_GETARG_OID(0);
	gene = PG_GETARG_INT32(1);
	if (!PartitionOfGene(parent, gene, &first, &last, &server))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no partition of table \"%s\" holds gene %d", get_rel_name(parent), gene)));
	if (first > 0 && PartitionOfGene(parent, first - 1, &nf, &nl, &to) && to != NULL)
		;
	else if (last < SNOWSEQ_MAX_GENE && PartitionOfGene(parent, last + 1, &nf, &nl, &to) && to != NULL)
		;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the partition holding gene %d has no neighbour on another server", gene)));
	MoveGenes(fcinfo, parent, first, last, to);
	PG_RETURN_VOID();
}

/*
 * snowseq_placement_group(parent): the tables that move with parent, parent
 * first: every gene-sharded table of the database (MoveGeneShardedTables) if
 * parent is one, else parent alone.  What the rebalancer counts as the
 * load of parent's partitions.  Reads the catalogs and snowseq_shard_map
 * only.
 */
Datum
snowseq_placement_group(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			parent = PG_GETARG_OID(0);
	List	   *tables;
	ListCell   *lc;
	Datum		v[1];
	bool		n[1] = {false};

	/* one column, of a scalar type: the descriptor the caller expects */
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	v[0] = ObjectIdGetDatum(parent);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	SPI_connect();
	/* in SPI's memory, gone with SPI_finish: the rows are stored first */
	tables = MoveGeneShardedTables(ExtSchemaQuoted(fcinfo->flinfo->fn_oid));
	if (list_member_oid(tables, parent))
	{
		foreach(lc, tables)
		{
			if (lfirst_oid(lc) == parent)
				continue;
			v[0] = ObjectIdGetDatum(lfirst_oid(lc));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
		}
	}
	SPI_finish();
	return (Datum) 0;
}

/* snowseq_move_cleanup(): resolve every move that is not running; one row per object. */
Datum
snowseq_move_cleanup(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MoveOp	   *collect;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	collect = MoveOpNew(ExtSchemaQuoted(fcinfo->flinfo->fn_oid));
	SPI_connect();
	MoveCheckCleaner(collect->ext);
	CleanupMoves(collect->ext, InvalidOid, collect, false, NOTICE);
	(void) MergeCleanup(collect->ext, InvalidOid, collect, false, NOTICE);
	CleanupRecorded(collect);
	ShardDdlReportResolved(collect);
	SPI_finish();
	foreach(lc, collect->report)
	{
		MoveReport *r = lfirst(lc);
		Datum		v[7];
		bool		n[7] = {r->id == 0, r->id == 0, r->id == 0, r->id == 0, r->server == NULL, false, false};

		v[0] = Int64GetDatum(r->id);
		v[1] = ObjectIdGetDatum(r->parent);
		v[2] = Int32GetDatum(r->first);
		v[3] = Int32GetDatum(r->last);
		v[4] = (Datum) 0;
		if (r->server)
		{
			Name		nm = palloc0(NAMEDATALEN);

			namestrcpy(nm, r->server);
			v[4] = NameGetDatum(nm);
		}
		v[5] = CStringGetTextDatum(r->object);
		v[6] = CStringGetTextDatum(r->action);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	MemoryContextDelete(collect->cxt);
	return (Datum) 0;
}
