/*
 * merge_switch.c
 *		Elastic shards: the switch of a merge and its finish.
 *
 * The switch: the router takes its parents' lock; a server transaction
 * locks the tables, checks that the merge triggers are as the prepare step
 * made them, gives each merged table the foreign keys (NOT VALID), grants,
 * sequences and trigger states of the first table it merges, drops the
 * tables merged and is prepared; the router swaps the partitions for one
 * on the merged table and commits.  The finish commits the server's
 * prepared transaction and validates the foreign keys.  merge.c runs both
 * as steps; merge_cleanup.c finishes a merge that switched but was cut
 * off.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "merge.h"
#include "merge_records.h"
#include "merge_switch.h"
#include "move_common.h"
#include "move_orphans.h"
#include "move_parts.h"
#include "move_plan.h"
#include "move_schema.h"
#include "move_switch.h"
#include "sqlrun.h"
#include "twophase.h"
#include "testpoint.h"

#define MERGE_SWITCH_LOCK_MS	2000	/* the server's tables, with the router's lock held */

/*
 * The merge triggers on the tables of a merge, as "oid:xmin" of each
 * pg_trigger row: a trigger dropped, disabled or changed since they were
 * made (even disabled and enabled again: each ALTER writes the row anew)
 * changes it.
 */
char *
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

/*
 * Step: the switch.  The router locks the parents; a server transaction
 * locks the tables, checks that the merge trigger is on every one of them,
 * drops them and is prepared; the router swaps the partitions for one, on
 * the merged table, and commits state 'switched' with it (the step's
 * caller commits); MergeFinish commits the server's.  The parents' lock is
 * held (a session lock) until then, as a move holds it (MoveHoldParent).
 */
void
MergeSwitch(Move *m)
{
	RemoteConn *rc;
	StringInfoData tables;
	StringInfoData dropped;
	ListCell   *lc;
	List	   *all = NIL;
	char	   *v;

	(void) MoveLockParent(m, false);
	m->hold.blocked_at = GetCurrentTimestamp();
	RemoteClose(m->sess.lock);
	m->sess.lock = NULL;
	rc = MoveSession(m, &m->sess.lock, m->src_name);
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
	TwoPhasePrepare(rc, m->op.token, "prepare the server transaction of the merge");

	/* the router: one partition for the merged table, in place of the old ones */
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		ListCell   *lp;

		SpiRun(psprintf("CREATE FOREIGN TABLE %s (%s) SERVER %s OPTIONS (schema_name %s, table_name %s%s)",
						t->newpart.q, t->newpart.cols, quote_identifier(t->src_name),
						quote_literal_cstr(t->dst_nsp), quote_literal_cstr(t->dst_rel),
						t->newpart.opts ? t->newpart.opts : ""), SPI_OK_UTILITY);
		if (t->newpart.colopts != NULL)
			SpiRun(psprintf("ALTER FOREIGN TABLE %s %s", t->newpart.q, t->newpart.colopts + 1), SPI_OK_UTILITY);
		MoveForeignChecks(t->parent_q, t->newpart.q);
		foreach(lp, MergeOf(t)->parts)
		{
			SpiRun(psprintf("ALTER TABLE %s DETACH PARTITION %s", t->parent_q, (char *) lfirst(lp)), SPI_OK_UTILITY);
			SpiRun(psprintf("DROP FOREIGN TABLE %s", (char *) lfirst(lp)), SPI_OK_UTILITY);
		}
		SpiRun(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
						t->parent_q, t->newpart.q, BoundSql(t->part.has_lo, t->part.lo, "MINVALUE"),
						BoundSql(t->part.has_hi, t->part.hi, "MAXVALUE")), SPI_OK_UTILITY);
	}
	MoveHoldParent(m);
	SNOWSEQ_TESTPOINT("merge_before_router_commit");
	MergeRecordStep(m, MERGE_STEP_SWITCH, psprintf("switched_at = pg_catalog.clock_timestamp(), pause_ms = %.1f",
												MsSince(m->hold.blocked_at)), NULL);
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

/*
 * Step: after the router's commit, the server's (the prepared transaction
 * committed by its record, as the records' policies say for a merge done:
 * the records of the merged tables and triggers are forgotten, the tables
 * serve and the triggers went with the tables merged); the keys validated.
 */
void
MergeFinish(Move *m)
{
	char	   *error = NULL;

	if (CleanupRecordedMerge(m, &error) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("%s", error ? error : "the server's transaction of the merge could not be committed")));
	MoveReleaseParent(m);
	MergeValidateKeys(m);
	MergeRecordStep(m, MERGE_STEP_FINISH, "finished_at = pg_catalog.clock_timestamp(), error = NULL", NULL);
}
