/*
 * move_keep.c
 *		Elastic shards: the keep view of a split.
 *
 * A split leaves the partition that keeps the rest of the genes reading a
 * view of the rows that stay on the source (the keep view), so that no
 * row is deleted in the switch; after the moved rows are deleted in
 * batches the partitions point back at their tables and the views go.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"

#include "move_common.h"
#include "move_group.h"
#include "move_keep.h"
#include "move_plan.h"
#include "move_repl.h"
#include "move_switch.h"
#include "snowseq.h"
#include "sqlrun.h"
#include "testpoint.h"

#define MOVE_POINT_NOWAIT_MS	10000	/* partitions back at their tables: tries that never queue */

/*
 * The keep view of one table of a split: on the source, beside the table,
 * the rows that stay there.  From the switch until the moved rows are
 * deleted (in batches, after it), the router's partition that keeps the
 * rest of the genes reads this view, so the switch deletes nothing and the
 * pause of the moved genes does not grow with their rows.  It has the
 * table's columns and its ctid (postgres_fdw updates and deletes rows by
 * ctid), WITH CHECK OPTION so no write through it reaches a moved ID, and
 * security_invoker, so the table's grants and policies apply to each user
 * as before.
 */
char *
MoveKeepView(Move *m)
{
	return psprintf("%s_keep_%d", MoveLead(m)->op.token, m->hold.fence_id);
}

/* The keep view, qualified and quoted, on the source. */
static char *
MoveKeepViewQ(Move *m)
{
	return psprintf("%s.%s", quote_identifier(m->dst_nsp), quote_identifier(MoveKeepView(m)));
}

/* A condition on the ID column that holds for exactly the IDs that stay. */
static char *
MoveKeepCondition(Move *m, const char *alias)
{
	bool		has_lo,
				has_hi;
	int64		lo,
				hi;
	char	   *col = psprintf("%s.%s", alias, quote_identifier(m->id_col));

	MoveIds(m, &has_lo, &lo, &has_hi, &hi);
	Assert(m->kind != MOVE_KIND_WHOLE);
	if (m->kind == MOVE_KIND_SUFFIX)
		return psprintf("%s OPERATOR(pg_catalog.<) " INT64_FORMAT, col, lo);
	return psprintf("%s OPERATOR(pg_catalog.>=) " INT64_FORMAT, col, hi);
}

/*
 * Create the keep view of a table, with the table's owner and grants, on
 * the source, committed before the switch: between the router's commit of
 * the switch and the source's COMMIT PREPARED, a reader of the view waits
 * for the source table's lock, which the prepared transaction holds, as a
 * reader of the table would (a view made in that transaction would not
 * exist for it yet).  A move that does not switch drops it
 * (MoveDropKeepViewOf).
 */
void
MoveCreateKeepView(Move *m, RemoteConn *rc)
{
	char	   *view = MoveKeepViewQ(m);
	PGresult   *res;

	RemoteCommand(rc, psprintf("DROP VIEW IF EXISTS %s; CREATE VIEW %s WITH (security_invoker = true) AS "
							   "SELECT t.ctid, t.* FROM %s t WHERE %s WITH CASCADED CHECK OPTION",
							   view, view, m->src_table, MoveKeepCondition(m, "t")),
				  "create the view of the rows that stay");
	res = RemoteExecParams(rc, "SELECT pg_catalog.format('ALTER VIEW %s OWNER TO %I', $1::pg_catalog.text, r.rolname) "
						   "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) c.relowner "
						   "WHERE c.oid OPERATOR(pg_catalog.=) $2::pg_catalog.regclass "
						   "UNION ALL SELECT pg_catalog.format('GRANT %s ON %s TO %s', x.privilege_type, $1::pg_catalog.text, "
						   "CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(g.rolname) END) "
						   "FROM pg_catalog.pg_class c CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) x "
						   "LEFT JOIN pg_catalog.pg_roles g ON g.oid OPERATOR(pg_catalog.=) x.grantee "
						   "WHERE c.oid OPERATOR(pg_catalog.=) $2::pg_catalog.regclass "
						   "AND x.privilege_type OPERATOR(pg_catalog.=) ANY (ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'])",
						   SQL_ARGS(view, m->src_table), "read the table's owner and grants");
	for (int i = 0; i < PQntuples(res); i++)
		RemoteCommand(rc, PQgetvalue(res, i, 0), "give the view the table's owner and grants");
	PQclear(res);
}

/*
 * Point the router's partition of a table at a relation of the source:
 * the keep view (to_view) or the table itself.  Nothing happens if it
 * points there already.
 */
void
MovePointPartition(Move *m, bool to_view)
{
	const char *rel = to_view ? MoveKeepView(m) : m->src_rel;
	SPITupleTable *rows;
	char	   *set_nsp = "ADD";
	char	   *set_rel = "ADD";
	bool		there = true;

	SpiRunParams("SELECT o.option_name::pg_catalog.text, o.option_value::pg_catalog.text "
				 "FROM pg_catalog.pg_foreign_table f, pg_catalog.pg_options_to_table(f.ftoptions) o "
				 "WHERE f.ftrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
				 "AND o.option_name OPERATOR(pg_catalog.=) ANY (ARRAY['schema_name', 'table_name'])",
				 SQL_ARGS(m->part.q), SPI_OK_SELECT);
	rows = SPI_tuptable;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *name = SPI_getvalue(rows->vals[i], rows->tupdesc, 1);
		char	   *value = SPI_getvalue(rows->vals[i], rows->tupdesc, 2);

		if (strcmp(name, "schema_name") == 0)
		{
			set_nsp = "SET";
			there = there && strcmp(value, m->dst_nsp) == 0;
		}
		else
		{
			set_rel = "SET";
			there = there && strcmp(value, rel) == 0;
		}
	}
	if (there && strcmp(set_nsp, "SET") == 0 && strcmp(set_rel, "SET") == 0)
		return;
	SpiRun(psprintf("ALTER FOREIGN TABLE %s OPTIONS (%s schema_name %s, %s table_name %s)",
					m->part.q, set_nsp, quote_literal_cstr(m->dst_nsp), set_rel, quote_literal_cstr(rel)),
		   SPI_OK_UTILITY);
}

/* Whether the router's partition of a table reads its keep view (now, as this transaction sees it). */
static bool
MovePartitionReadsView(Move *m)
{
	char	   *v = SpiValueParams(m->op.cxt, "SELECT pg_catalog.count(*) FROM pg_catalog.pg_foreign_table f, "
								   "pg_catalog.pg_options_to_table(f.ftoptions) o "
								   "WHERE f.ftrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text) "
								   "AND o.option_name OPERATOR(pg_catalog.=) 'table_name' "
								   "AND o.option_value OPERATOR(pg_catalog.=) $2::pg_catalog.text",
								   SQL_ARGS(m->part.q, MoveKeepView(m)));

	return strcmp(v, "0") != 0;
}

/* A split's partition that reads its keep view still (as this transaction sees it), for MovePointBack. */
static bool
MoveReadsView(Move *t)
{
	return t->kind != MOVE_KIND_WHOLE && MovePartitionReadsView(t);
}

/*
 * One try at the locks of the partitions of a group that read keep views
 * (LOCK TABLE does not take foreign tables): without waiting, or waiting
 * hold.wait_ms for each.
 */
static void
MoveLockPartitionsOnce(Move *m)
{
	ListCell   *lc;

	if (m->hold.wait_ms > 0)
		SpiRun(psprintf("SELECT pg_catalog.set_config('lock_timeout', '%d', true)", m->hold.wait_ms), SPI_OK_SELECT);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		Oid			relid;

		if (!MoveReadsView(t))
			continue;
		relid = pg_strtoint64(SpiValueParams(m->op.cxt, "SELECT $1::pg_catalog.regclass::pg_catalog.oid",
											 SQL_ARGS(t->part.q)));
		if (m->hold.wait_ms > 0)
			LockRelationOid(relid, AccessExclusiveLock);
		else if (!ConditionalLockRelationOid(relid, AccessExclusiveLock))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain lock on relation %s", t->part.q)));
	}
	if (m->hold.wait_ms > 0)
		SpiRun("SELECT pg_catalog.set_config('lock_timeout', '0', true)", SPI_OK_SELECT);
}

/*
 * After the moved rows of a split are deleted on the source: point the
 * partitions of the group that read keep views back at their tables, in
 * one transaction (one catalog change each).  The locks are tried without
 * waiting for up to MOVE_POINT_NOWAIT_MS (nothing waits for such a try,
 * and nothing is in a hurry: the views serve meanwhile), then waiting, all
 * the waits of one try together shorter than deadlock_timeout: a writer
 * that holds one of the locks and waits for another is never the one a
 * deadlock check cancels, since the move lets go first.  The views go once this commits (MoveDropKeepView).
 */
void
MovePointBack(Move *m)
{
	TimestampTz start = GetCurrentTimestamp();
	ListCell   *lc;
	int			n = 0;
	int			cap;

	foreach(lc, MoveGroup(m))
		n += MoveReadsView(lfirst(lc)) ? 1 : 0;
	if (n == 0)
		return;
	/* all the waits of one try together stay under deadlock_timeout */
	cap = Max(DeadlockTimeout / (2 * n), 10);
	m->hold.wait_ms = 0;
	for (;;)
	{
		ErrorData  *err = MoveTry(m, MoveLockPartitionsOnce);

		if (err == NULL)
			break;
		if ((err->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE && err->sqlerrcode != ERRCODE_T_R_DEADLOCK_DETECTED) ||
			MsSince(start) > MOVE_SWITCH_BUDGET_MS)
			ReThrowError(err);
		if (MsSince(start) > MOVE_POINT_NOWAIT_MS)
			m->hold.wait_ms = Min(Max(m->hold.wait_ms * 2, 10), cap);
		MoveSleep(m->hold.wait_ms == 0 ? 5 : 20);
	}
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		if (MoveReadsView(t))
			MovePointPartition(t, false);
	}
}

/*
 * Record the keep view of a table of a split, in the router transaction of
 * the step that learns its name (the fence's id), which commits before the
 * switch makes it.
 */
void
MoveRecordKeepView(Move *m)
{
	if (m->kind != MOVE_KIND_WHOLE && m->revert.reverts == 0)
		MoveRecordObject(m, m->src_name, MOVE_OBJECT_VIEW, MoveKeepViewQ(m));
}

/* Undo: drop the keep view of a table of a move that did not switch. */
void
MoveDropKeepViewOf(Move *m)
{
	if (m->kind != MOVE_KIND_WHOLE && m->hold.fence_id != 0)
	{
		RemoteCommand(MoveSrc(m), psprintf("DROP VIEW IF EXISTS %s", MoveKeepViewQ(m)), "drop the view of the rows that stay");
		MoveForgetObject(m, m->src_name, MOVE_OBJECT_VIEW, MoveKeepViewQ(m));
	}
}

/*
 * Drop the keep view of a table on the source, once the router's
 * committed partition no longer reads it.  Returns false if it still does.
 */
bool
MoveDropKeepView(Move *m)
{
	if (m->kind == MOVE_KIND_WHOLE)
		return true;
	if (MovePartitionReadsView(m))
		return false;
	RemoteCommand(MoveSrc(m), psprintf("DROP VIEW IF EXISTS %s", MoveKeepViewQ(m)), "drop the view of the rows that stayed");
	MoveForgetObject(m, m->src_name, MOVE_OBJECT_VIEW, MoveKeepViewQ(m));
	return true;
}

