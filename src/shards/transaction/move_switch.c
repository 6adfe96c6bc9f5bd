/*
 * move_switch.c
 *		Elastic shards: block and switch.
 *
 * The fence on the source (its triggers and state), holding back the
 * writes of the moving range while replication catches up for the last
 * time, the router's lock on the parent, the router's switch of
 * partitions and map, the two-phase source transaction whose outcome the
 * router's committed state decides, and the foreign keys between the new
 * tables of a group on the destination.  A split leaves the partition that
 * keeps the rest of the genes reading a view of the rows that stay (the
 * keep view, move_keep.c), so that no row is deleted in the switch.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"

#include "fence.h"
#include "move_common.h"
#include "move_group.h"
#include "move_keep.h"
#include "move_parts.h"
#include "move_plan.h"
#include "move_repl.h"
#include "move_switch.h"
#include "snowseq.h"
#include "sqlrun.h"
#include "twophase.h"
#include "testpoint.h"

#define MOVE_BLOCK_ATTEMPTS		5	/* tries to hold writes back and catch up */
#define MOVE_LOCKERS_WAIT_MS	2000	/* for writers already under way */
#define MOVE_FINAL_CATCHUP_MS	5000	/* final catch-up, writes held back */
#define MOVE_SWITCH_NOWAIT_MS	1000	/* router lock: tries that never queue */
#define MOVE_SWITCH_MAX_WAIT_MS 2000	/* then queued tries, lock_timeout up to */
#define MOVE_TRIGGER_LOCK_MS	100 /* lock_timeout for the fence trigger */
#define MOVE_AUTOVACUUM_WAIT_MS 20	/* deadlock_timeout of the switch's locks */
#define MOVE_TRIGGER_ATTEMPTS	50	/* source table lock tries for the trigger */
#define MOVE_FK_ATTEMPTS		500 /* a foreign key on the destination: tries, 20 ms apart */

/*
 * The two-phase name of the source transaction of a move: its token
 * (twophase.c writes the statements).
 */
static const char *
MoveGid(Move *m)
{
	return m->op.token;
}

/*
 * Set the state of a fence on a server, one call: values go as parameters,
 * never into the SQL text.
 */
static void
SwitchFenceState(RemoteConn *rc, int fence_id, FenceState state, const char *what)
{
	RemoteCommandParams(rc, psprintf("SELECT %s($1::pg_catalog.int4, $2::pg_catalog.text)",
									 MoveRemoteExt(rc, "snowseq_fence_state")),
						SQL_ARGS(psprintf("%d", fence_id), FenceStateName(state)), what);
}

/*
 * In the transaction that is about to lock a server's tables for the switch
 * (the router holds its parent's lock, so every writer waits): an
 * autovacuum of those tables, likely on tables a move has just filled, is
 * cancelled by a waiting lock only after deadlock_timeout (1 s by default),
 * and the writers would wait that long.  One running now is cancelled
 * (MoveCancelAutovacuum), and the switch waits MOVE_AUTOVACUUM_WAIT_MS for
 * one that starts before its lock, where its role may set deadlock_timeout
 * (a superuser, or one granted SET on it).
 */
static void
SwitchCancelsAutovacuum(RemoteConn *rc, List *tables)
{
	MoveCancelAutovacuum(rc, tables);
	RemoteCommandParams(rc, "SELECT pg_catalog.set_config('deadlock_timeout', $1::pg_catalog.text, true) "
						"WHERE pg_catalog.has_parameter_privilege('deadlock_timeout', 'SET')",
						SQL_ARGS(psprintf("%dms", MOVE_AUTOVACUUM_WAIT_MS)), "shorten the wait for an autovacuum");
}

/* Commit or roll back the prepared transaction of a move on one server, if it is there. */
static void
MoveResolvePreparedOn(Move *m, RemoteConn *rc, const char *server, bool commit)
{
	if (!TwoPhaseExists(rc, MoveGid(m), "look up the prepared source transaction"))
		return;
	TwoPhaseEnd(rc, MoveGid(m), commit,
				commit ? "commit the prepared source transaction" : "roll back the prepared source transaction");
	MoveNote(m, server, psprintf("prepared transaction %s", m->op.token),
			 commit ? "committed" : "rolled back");
}

/*
 * Commit or roll back the prepared source transaction of a move, if it is
 * there: the router's committed state decides (switched: commit).  Until
 * then it holds the source table, so no query reads a half-moved state.  A
 * revert prepares one on each server, under the same name
 * (MoveRevertDestTransaction).
 */
void
MoveResolvePrepared(Move *m, bool commit)
{
	MoveResolvePreparedOn(m, MoveSrc(m), m->src_name, commit);
	if (m->revert.reverts != 0)
		MoveResolvePreparedOn(m, MoveDst(m), m->dst_name, commit);
}

/* Create the fence triggers of a remote table (waiting for writers briefly). */
void
MoveFenceTrigger(RemoteConn *rc, const char *table, const char *col)
{
	char	   *sql;
	char	   *v;

	v = RemoteValueParams(rc, "SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger WHERE tgrelid "
						  "OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND tgname OPERATOR(pg_catalog.=) 'snowseq_fence'",
						  SQL_ARGS(table), "look up the fence trigger");
	if (strcmp(v, "0") != 0)
		return;
	/* CREATE TRIGGER takes no parameters: its argument is quoted */
	sql = psprintf("CREATE TRIGGER snowseq_fence BEFORE INSERT OR UPDATE OR DELETE ON %s "
				   "FOR EACH ROW EXECUTE FUNCTION %s(%s); "
				   "CREATE TRIGGER snowseq_fence_truncate BEFORE TRUNCATE ON %s "
				   "FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)",
				   table, MoveRemoteExt(rc, "snowseq_fence"), quote_literal_cstr(col),
				   table, MoveRemoteExt(rc, "snowseq_fence"), quote_literal_cstr(col));
	MoveTriggerDdl(rc, sql, "create the fence trigger");
}

/*
 * Run DDL that locks a remote table against writes (creating or dropping a
 * trigger): its lock waits for the writes under way, and every later query
 * of the table would wait behind it, so each try waits briefly
 * (lock_timeout) and the tries go on while writers keep it from the lock.
 */
void
MoveTriggerDdl(RemoteConn *rc, const char *ddl, const char *what)
{
	char	   *sql = psprintf("SET LOCAL lock_timeout = %d; %s", MOVE_TRIGGER_LOCK_MS, ddl);
	char		state[6];

	for (int attempt = 1;; attempt++)
	{
		if (RemoteTry(rc, sql, what, state))
			return;
		if (strcmp(state, "55P03") != 0 || attempt == MOVE_TRIGGER_ATTEMPTS)
			RemoteCommand(rc, sql, what);
		MoveSleep(20 * attempt);
	}
}

/* Set the fences of the move (one per table of its group) on the source. */
static void
MoveFence(Move *m, FenceState state)
{
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
		SwitchFenceState(MoveSrc(m), ((Move *) lfirst(lc))->hold.fence_id, state, "set the fence");
}

/*
 * Hold the fence of every table of the group on the holder session
 * (snowseq_fence_hold), or let go of it (the writers waiting on it go on).
 */
static void
MoveFenceLocks(Move *m, bool hold)
{
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
		RemoteCommand(MoveHolder(m), psprintf("SELECT %s(%d)",
											  MoveRemoteExt(MoveHolder(m), hold ? "snowseq_fence_hold" : "snowseq_fence_let_go"),
											  ((Move *) lfirst(lc))->hold.fence_id),
					  hold ? "hold the fence" : "let go of the fence");
}

/* Wait for running writes of every fenced table: "t" if they all ended in time. */
static char *
MoveFenceWait(Move *m)
{
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
	{
		char	   *done = RemoteValue(MoveSrc(m), psprintf("SELECT %s(%d, %d)", MoveRemoteExt(MoveSrc(m), "snowseq_fence_wait"),
															((Move *) lfirst(lc))->hold.fence_id, MOVE_LOCKERS_WAIT_MS),
									   "wait for running writes");

		if (strcmp(done, "t") != 0)
			return done;
	}
	return "t";
}

/* A referential action of pg_constraint as SQL. */
static const char *
MoveFkAction(char c)
{
	switch (c)
	{
		case 'r':
			return "RESTRICT";
		case 'c':
			return "CASCADE";
		case 'n':
			return "SET NULL";
		case 'd':
			return "SET DEFAULT";
		default:
			return "NO ACTION";
	}
}

/*
 * Once the initial copy is done (with the indexes): the foreign keys
 * between tables of the group, which move together, made on the
 * destination between their new tables, NOT VALID.  The copies still have
 * the source tables' names (the block renames them).  Logical apply does
 * not fire the keys' triggers (it runs as a replica, as the source's
 * cascades arrive as rows of their own), and nothing else writes to those
 * tables before the switch; the keys hold for every write after it, and
 * MoveValidateGroupKeys validates them once the move has switched.  Only
 * between tables the move created; one already there is left as it is.
 */
void
MoveGroupForeignKeys(Move *m)
{
	List	   *group = MoveGroup(m);
	PGresult   *res;

	if (list_length(group) < 2)
		return;
	res = RemoteExecParams(MoveSrc(m), "SELECT c.conname, pg_catalog.array_position(g.t, c.conrelid), "
										  "pg_catalog.array_position(g.t, c.confrelid), "
										  "(SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY k.n) "
										  "FROM ROWS FROM (pg_catalog.unnest(c.conkey)) WITH ORDINALITY k(att, n) "
										  "JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.conrelid "
										  "AND a.attnum OPERATOR(pg_catalog.=) k.att), "
										  "(SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY k.n) "
										  "FROM ROWS FROM (pg_catalog.unnest(c.confkey)) WITH ORDINALITY k(att, n) "
										  "JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.confrelid "
										  "AND a.attnum OPERATOR(pg_catalog.=) k.att), "
										  "c.confupdtype, c.confdeltype, c.confmatchtype, c.condeferrable, c.condeferred, "
										  "(SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY k.n) "
										  "FROM ROWS FROM (pg_catalog.unnest(c.confdelsetcols)) WITH ORDINALITY k(att, n) "
										  "JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.conrelid "
										  "AND a.attnum OPERATOR(pg_catalog.=) k.att), c.convalidated "
										  "FROM (SELECT " MOVE_GROUP_OIDS(1) " AS t) g, pg_catalog.pg_constraint c "
										  "WHERE c.contype OPERATOR(pg_catalog.=) 'f' "
										  "AND c.conrelid OPERATOR(pg_catalog.=) ANY (g.t) AND c.confrelid OPERATOR(pg_catalog.=) ANY (g.t) "
										  "ORDER BY 1", SQL_ARGS(MoveGroupRelations(m, false, false)),
					 "read the foreign keys between the tables of the move");
	for (int i = 0; i < PQntuples(res); i++)
	{
		Move	   *child = list_nth(group, atoi(PQgetvalue(res, i, 1)) - 1);
		Move	   *parent = list_nth(group, atoi(PQgetvalue(res, i, 2)) - 1);
		char	   *conname = PQgetvalue(res, i, 0);
		char	   *name;
		char	   *v;
		char	   *sql;
		int			attempt;

		if (child->dest_created != 1 || parent->dest_created != 1)
			continue;
		/* named after the new table, as its other constraints are */
		name = strncmp(conname, child->src_rel, strlen(child->src_rel)) == 0 ?
			psprintf("%s%s", child->dst_rel, conname + strlen(child->src_rel)) : psprintf("%s_%s", child->dst_rel, conname);
		if (strlen(name) >= NAMEDATALEN)
			name = conname;
		v = RemoteValueParams(MoveDst(m), "SELECT pg_catalog.count(*) FROM pg_catalog.pg_constraint "
							  "WHERE contype OPERATOR(pg_catalog.=) 'f' "
							  "AND conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
							  "AND confrelid OPERATOR(pg_catalog.=) $2::pg_catalog.regclass",
							  SQL_ARGS(child->src_table, parent->src_table),
							  "look up the foreign keys of the destination table");
		if (strcmp(v, "0") != 0)
			continue;
		/*
		 * Apply writes to these tables meanwhile: both locks at once, never
		 * queued (a queued ALTER and the apply worker, each holding one of
		 * the tables, would deadlock), tried again while apply holds them.
		 */
		sql = psprintf("LOCK TABLE %s, %s IN SHARE ROW EXCLUSIVE MODE NOWAIT; "
					   "ALTER TABLE %s ADD CONSTRAINT %s FOREIGN KEY (%s) REFERENCES %s (%s) "
					   "MATCH %s ON UPDATE %s ON DELETE %s%s%s%s NOT VALID",
					   parent->src_table, child->src_table,
					   child->src_table, quote_identifier(name), PQgetvalue(res, i, 3),
					   parent->src_table, PQgetvalue(res, i, 4),
					   PQgetvalue(res, i, 7)[0] == 'f' ? "FULL" : "SIMPLE",
					   MoveFkAction(PQgetvalue(res, i, 5)[0]), MoveFkAction(PQgetvalue(res, i, 6)[0]),
					   PQgetisnull(res, i, 10) ? "" : psprintf(" (%s)", PQgetvalue(res, i, 10)),
					   PQgetvalue(res, i, 8)[0] == 't' ? " DEFERRABLE" : "",
					   PQgetvalue(res, i, 9)[0] == 't' ? " INITIALLY DEFERRED" : "");
		for (attempt = 1;; attempt++)
		{
			char		state[6];

			if (RemoteTry(MoveDst(m), sql, "create a foreign key between the moved tables", state))
				break;
			if (strcmp(state, "55P03") != 0)
				RemoteCommand(MoveDst(m), sql, "create a foreign key between the moved tables");
			if (attempt == MOVE_FK_ATTEMPTS)
				break;
			MoveSleep(20);
		}
		if (attempt == MOVE_FK_ATTEMPTS)
		{
			ereport(WARNING,
					(errmsg("foreign key %s of table %s is not created on server \"%s\"", name, child->dst_table, m->dst_name),
					 errdetail("Replication kept the tables busy for %d s.", MOVE_FK_ATTEMPTS / 50),
					 errhint("Create it once the move is done: ALTER TABLE ... ADD CONSTRAINT ... NOT VALID, then VALIDATE CONSTRAINT.")));
			continue;
		}
		/* validated after the switch, unless the source's key is not valid either */
		if (PQgetvalue(res, i, 11)[0] != 't')
			RemoteCommand(MoveDst(m), psprintf("COMMENT ON CONSTRAINT %s ON %s IS 'snowseq: not valid on the source'",
											   quote_identifier(name), child->src_table),
						  "mark a foreign key not valid on the source");
		MoveNote(child, m->dst_name, psprintf("foreign key %s of %s", name, child->dst_table), "created");
	}
	PQclear(res);
}

/*
 * After the switch: validate the foreign keys that MoveGroupForeignKeys
 * made between the destination tables of the group (those the move made,
 * but the ones not valid on the source either).  VALIDATE CONSTRAINT
 * takes no lock that writers wait for; called before the router takes any
 * lock of its own.  A key that does not validate (rows that break it came
 * with the copy) stays NOT VALID, with a WARNING: it still holds for new
 * rows.
 */
void
MoveValidateGroupKeys(Move *m)
{
	char	   *tables = MoveGroupRelations(m, true, true);
	PGresult   *res;

	if (list_length(MoveGroup(m)) < 2 || tables == NULL)
		return;
	res = RemoteExecParams(MoveDst(m), "SELECT conrelid::pg_catalog.regclass::pg_catalog.text, pg_catalog.quote_ident(conname) "
						   "FROM pg_catalog.pg_constraint c WHERE contype OPERATOR(pg_catalog.=) 'f' AND NOT convalidated "
						   "AND conrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
						   "AND confrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(1) ") "
						   "AND coalesce(pg_catalog.obj_description(c.oid, 'pg_constraint'), '') "
						   "OPERATOR(pg_catalog.<>) 'snowseq: not valid on the source' ORDER BY 1, 2",
						   SQL_ARGS(tables),
					 "read the foreign keys to validate");
	for (int i = 0; i < PQntuples(res); i++)
	{
		char		state[6];
		char	   *err = RemoteTryMessage(MoveDst(m), psprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s",
																PQgetvalue(res, i, 0), PQgetvalue(res, i, 1)),
										   "validate a foreign key between the moved tables", state);

		if (err != NULL)
			ereport(WARNING,
					(errmsg("foreign key %s of table %s on server \"%s\" stays NOT VALID: %s",
							PQgetvalue(res, i, 1), PQgetvalue(res, i, 0), m->dst_name, err),
					 errhint("It holds for new rows; fix the rows that break it, then ALTER TABLE ... VALIDATE CONSTRAINT.")));
	}
	PQclear(res);
}

/*
 * Step: hold back writes to the range, catch up for the last time, stop
 * replicating, and let the held writers fail (and any later ones, until the
 * switch).
 */
void
MoveBlock(Move *m)
{
	char	   *lsn;
	int			attempt;
	ListCell   *lc;

	for (attempt = 1;; attempt++)
	{
		char	   *done;

		/* the locks first: a writer that sees the fence finds them held */
		if (!RemoteUsable(m->sess.lock))
		{
			char	   *pid;

			(void) MoveSession(m, &m->sess.lock, m->src_name);
			pid = RemoteValue(MoveHolder(m), "SELECT pg_catalog.pg_backend_pid()", "read the session's process");
			m->sess.lock_pid = pg_strtoint32(pid);
		}
		MoveFenceLocks(m, true);
		MoveFence(m, FENCE_BLOCK);
		m->hold.blocked_at = GetCurrentTimestamp();
		done = MoveFenceWait(m);
		if (strcmp(done, "t") == 0)
		{
			lsn = MoveSourceLsn(m);
			if (MoveWaitApplied(m, lsn, MOVE_FINAL_CATCHUP_MS))
				break;
		}
		/* let writes go on and try again later; replication carries on */
		MoveFence(m, FENCE_OPEN);
		MoveFenceLocks(m, false);
		if (attempt == MOVE_BLOCK_ATTEMPTS)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not hold back writes to genes %d to %d of table %s on server \"%s\" long enough to catch up",
							m->first, m->last, m->src_table, m->src_name),
					 errdetail("%s", strcmp(done, "t") == 0 ?
							   "The subscription did not catch up in time." :
							   "Transactions writing to the table ran for more than 2 seconds."),
					 errhint("Retry when the source is less busy.")));
		ereport(NOTICE,
				(errmsg("writes to genes %d to %d go on: %s; trying again",
						m->first, m->last, strcmp(done, "t") == 0 ?
						"the subscription did not catch up in time" : "long transactions were writing")));
		MoveSleep(1000L * attempt);
	}

	/*
	 * Everything up to the block is on the destination: stop replicating
	 * (a revert keeps the slot of the way back, in case it does not switch).
	 */
	if (m->revert.reverts != 0)
		MoveBackDetach(m);
	else
		MoveDropSubscription(m);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		if (t->dest_created == 1)
			MoveSchemaTriggersOn(MoveTables(t));
		if (m->revert.reverts == 0 && strcmp(t->src_table, t->dst_table) != 0)
			RemoteCommand(MoveDst(m), psprintf("ALTER TABLE %s RENAME TO %s", t->src_table, quote_identifier(t->dst_rel)),
						  "rename the destination table");
	}
	if (m->revert.window > 0)
		MoveBackAttach(m);
	MoveFence(m, FENCE_REJECT);
	MoveFenceLocks(m, false);
	MoveRecordStep(m, MOVE_STEP_BLOCK, NULL);
	/* back_lsn: only a revertable move has one (NULL keeps the record's) */
	MoveRecordSetParams(m, "blocked_at = $1::pg_catalog.timestamptz, back_lsn = coalesce($2::pg_catalog.pg_lsn, back_lsn)",
						SQL_ARGS(timestamptz_to_str(m->hold.blocked_at), m->revert.back_lsn));
}

/* Rewrite the router's partitions of one table of the group. */
static void
MoveSwitchPartitions(Move *m)
{
	bool		has_lo,
				has_hi;
	int64		lo_id,
				hi_id;
	char	   *lo;
	char	   *hi;
	char	   *plo = BoundSql(m->part.has_lo, m->part.lo, "MINVALUE");
	char	   *phi = BoundSql(m->part.has_hi, m->part.hi, "MAXVALUE");

	/* the moving IDs: the partition's bounds, cut at the genes that move */
	MoveIds(m, &has_lo, &lo_id, &has_hi, &hi_id);
	lo = BoundSql(has_lo, lo_id, "MINVALUE");
	hi = BoundSql(has_hi, hi_id, "MAXVALUE");

	SpiRun(psprintf("ALTER TABLE %s DETACH PARTITION %s", m->parent_q, m->part.q), SPI_OK_UTILITY);
	if (m->kind == MOVE_KIND_PREFIX)
		SpiRun(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
						m->parent_q, m->part.q, hi, phi), SPI_OK_UTILITY);
	else if (m->kind == MOVE_KIND_SUFFIX)
		SpiRun(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
						m->parent_q, m->part.q, plo, lo), SPI_OK_UTILITY);
	/* the rest of the genes: the rows that stay, until the moved ones are deleted */
	if (m->kind != MOVE_KIND_WHOLE)
		MovePointPartition(m, true);
	SpiRun(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
					m->parent_q, m->newpart.q, lo, hi), SPI_OK_UTILITY);
	if (m->kind == MOVE_KIND_WHOLE)
		SpiRun(psprintf("DROP FOREIGN TABLE %s", m->part.q), SPI_OK_UTILITY);
}

/*
 * A revert: give the partitions of one table back what they had before
 * the move it reverts.  The new partition goes; a split's partition takes
 * its old bounds again and reads its table; a whole partition, dropped at
 * the switch, is made again on the source, reading the table it read,
 * with the options the new one had.
 */
static void
MoveUnswitchPartitions(Move *r)
{
	Move	   *o = r->revert.of;
	char	   *plo = BoundSql(o->part.has_lo, o->part.lo, "MINVALUE");
	char	   *phi = BoundSql(o->part.has_hi, o->part.hi, "MAXVALUE");
	char	   *opts;
	char	   *colopts;

	MoveForeignOptions(o, pg_strtoint64(SpiValueParams(o->op.cxt, "SELECT $1::pg_catalog.regclass::pg_catalog.oid",
													   SQL_ARGS(o->newpart.q))),
					   &opts, &colopts);
	SpiRun(psprintf("ALTER TABLE %s DETACH PARTITION %s", o->parent_q, o->newpart.q), SPI_OK_UTILITY);
	SpiRun(psprintf("DROP FOREIGN TABLE %s", o->newpart.q), SPI_OK_UTILITY);
	if (o->kind == MOVE_KIND_WHOLE)
	{
		SpiRun(psprintf("CREATE FOREIGN TABLE %s PARTITION OF %s FOR VALUES FROM (%s) TO (%s) "
						"SERVER %s OPTIONS (schema_name %s, table_name %s%s)",
						o->part.q, o->parent_q, plo, phi, quote_identifier(o->src_name),
						quote_literal_cstr(o->dst_nsp), quote_literal_cstr(o->src_rel), opts ? opts : ""),
			   SPI_OK_UTILITY);
		if (colopts != NULL)
			SpiRun(psprintf("ALTER FOREIGN TABLE %s %s", o->part.q, colopts + 1), SPI_OK_UTILITY);
		return;
	}
	SpiRun(psprintf("ALTER TABLE %s DETACH PARTITION %s", o->parent_q, o->part.q), SPI_OK_UTILITY);
	SpiRun(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
					o->parent_q, o->part.q, plo, phi), SPI_OK_UTILITY);
	MovePointPartition(o, false);
}

/*
 * The map: genes first..last to a server, in rows ending at first - 1 and
 * last; neighbours on the same server become one row.
 */
static void
MoveMapGenes(Move *m, const char *server)
{
	char	   *map = MoveExt(m, "snowseq_shard_map");

	if (m->first > 0)
		SpiRun(psprintf("INSERT INTO %s (upper_gene, shard) SELECT %d, (SELECT shard FROM %s WHERE upper_gene "
						"OPERATOR(pg_catalog.>=) %d ORDER BY upper_gene LIMIT 1) ON CONFLICT (upper_gene) DO NOTHING",
						map, m->first - 1, map, m->first - 1), SPI_OK_INSERT);
	SpiRun(psprintf("INSERT INTO %s (upper_gene, shard) SELECT %d, (SELECT shard FROM %s WHERE upper_gene "
					"OPERATOR(pg_catalog.>=) %d ORDER BY upper_gene LIMIT 1) ON CONFLICT (upper_gene) DO NOTHING",
					map, m->last, map, m->last), SPI_OK_INSERT);
	SpiRun(psprintf("DELETE FROM %s WHERE upper_gene OPERATOR(pg_catalog.>=) %d AND upper_gene OPERATOR(pg_catalog.<) %d",
					map, m->first, m->last), SPI_OK_DELETE);
	SpiRunParams(psprintf("UPDATE %s SET shard = $1::pg_catalog.text WHERE upper_gene OPERATOR(pg_catalog.=) %d",
						  map, m->last), SQL_ARGS(server), SPI_OK_UPDATE);
	SpiRunParams(psprintf("DELETE FROM %s WHERE upper_gene OPERATOR(pg_catalog.=) %d AND shard OPERATOR(pg_catalog.=) $1::pg_catalog.text",
						  map, m->first - 1), SQL_ARGS(server), SPI_OK_DELETE);
	SpiRun(psprintf("DELETE FROM %s WHERE upper_gene OPERATOR(pg_catalog.=) %d AND shard OPERATOR(pg_catalog.=) "
					"(SELECT shard FROM %s WHERE upper_gene OPERATOR(pg_catalog.>) %d ORDER BY upper_gene LIMIT 1)",
					map, m->last, map, m->last), SPI_OK_DELETE);
}

/*
 * Rewrite the router, in one transaction: the partitions of every table of
 * the group (bounds, new foreign tables), then the map, once; a revert
 * gives them back what they had before its move.  Idempotent: nothing
 * happens if the lead's new table is attached already (still, for a
 * revert).
 */
void
MoveSwitchRouter(Move *m)
{
	Move	   *lead = MoveLead(m);
	const char *new_part = m->revert.reverts != 0 ? m->revert.of->newpart.q : m->newpart.q;
	bool		attached;
	ListCell   *lc;

	attached = strcmp(SpiValueParams(m->op.cxt, psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_inherits WHERE inhparent "
													  "OPERATOR(pg_catalog.=) %u AND inhrelid OPERATOR(pg_catalog.=) "
													  "pg_catalog.to_regclass($1::pg_catalog.text)", m->parent),
									 SQL_ARGS(new_part)), "0") != 0;
	if (attached == (m->revert.reverts == 0))
		return;
	foreach(lc, MoveGroup(m))
	{
		if (m->revert.reverts != 0)
			MoveUnswitchPartitions(lfirst(lc));
		else
			MoveSwitchPartitions(lfirst(lc));
	}
	/* the map: the genes to the destination (for a revert, the source of its move) */
	MoveMapGenes(lead, lead->dst_name);
}

/*
 * One try at the parent's lock: without queueing (NOWAIT), or with a short
 * lock_timeout, since a lock request that waits makes every later query of
 * the table wait behind it.
 */
static void
MoveLockParentOnce(Move *m)
{
	StringInfoData parents;
	ListCell   *lc;

	/* the parents of every table of the group, in one statement */
	initStringInfo(&parents);
	foreach(lc, MoveGroup(m))
		appendStringInfo(&parents, "%s%s", parents.len ? ", " : "", ((Move *) lfirst(lc))->parent_q);
	if (m->hold.wait_ms == 0)
		SpiRun(psprintf("LOCK TABLE ONLY %s IN ACCESS EXCLUSIVE MODE NOWAIT", parents.data), SPI_OK_UTILITY);
	else
	{
		SpiRun(psprintf("SELECT pg_catalog.set_config('lock_timeout', '%d', true)", m->hold.wait_ms), SPI_OK_SELECT);
		SpiRun(psprintf("LOCK TABLE ONLY %s IN ACCESS EXCLUSIVE MODE", parents.data), SPI_OK_UTILITY);
	}
	/* with the parent locked, nothing else should wait long */
	SpiRun(psprintf("SELECT pg_catalog.set_config('lock_timeout', '%d', true)", MOVE_SWITCH_MAX_WAIT_MS), SPI_OK_SELECT);
}

/* Whether a backend on the source waits for the source transaction. */
static bool
MoveSourceStuck(Move *m)
{
	char	   *n = RemoteValue(MoveSrc(m), psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity "
												 "WHERE %d OPERATOR(pg_catalog.=) ANY (pg_catalog.pg_blocking_pids(pid))",
												 m->sess.lock_pid),
							  "look for writers waiting on the move");

	return strcmp(n, "0") != 0;
}

/*
 * Take the parent's lock, first without queueing, then queueing briefly.
 * With check_stuck, give up (false) as soon as a backend on the source waits
 * for the open source transaction: a router statement doing so holds the
 * parent's lock, and would never let go of it.
 */
bool
MoveLockParent(Move *m, bool check_stuck)
{
	TimestampTz start = GetCurrentTimestamp();
	int			tries = 0;

	m->hold.wait_ms = 0;
	for (;;)
	{
		ErrorData  *err = MoveTry(m, MoveLockParentOnce);

		tries++;
		if (err == NULL)
			break;
		if (err->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE || MsSince(start) > MOVE_SWITCH_BUDGET_MS)
			ReThrowError(err);
		if (check_stuck && tries % 10 == 0 && MoveSourceStuck(m))
			return false;
		/* long queries on the table: queue behind them, briefly, more and more */
		if (MsSince(start) > MOVE_SWITCH_NOWAIT_MS)
			m->hold.wait_ms = Min(Max(m->hold.wait_ms * 2, 100), MOVE_SWITCH_MAX_WAIT_MS);
		MoveSleep(m->hold.wait_ms == 0 ? 2 : 20);
	}
	if (MsSince(start) > MOVE_SWITCH_NOWAIT_MS)
		ereport(NOTICE,
				(errmsg("the switch waited %.1f s (%d tries) for queries on table \"%s\" to end",
						MsSince(start) / 1000, tries, m->parent_rel)));
	return true;
}

/*
 * Open the source transaction: the fence becomes moved (a split's moved
 * rows stay until after the switch; its keep view is there already).
 */
static void
MoveSourceTransaction(Move *m)
{
	ListCell   *lc;

	RemoteCommand(MoveHolder(m), "BEGIN", "begin the source transaction");
	MoveCheckGroupKeys(m, MoveHolder(m), true);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		SwitchFenceState(MoveHolder(m), t->hold.fence_id, FENCE_MOVED, "mark the fence moved");
	}
}

/*
 * Hold the parent's lock beyond the router's commit, until the prepared
 * source transaction has committed: a reader planning on the new bounds in
 * between would otherwise read the source table with a snapshot taken
 * before the commit (the snapshot comes before the lock it then waits for)
 * and see the moved rows twice.  A session lock, released by
 * MoveReleaseParent or, if the mover dies, with its backend.
 */
void
MoveHoldParent(Move *m)
{
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
	{
		LockRelId	rel = {((Move *) lfirst(lc))->parent, MyDatabaseId};

		LockRelationIdForSession(&rel, AccessExclusiveLock);
	}
	m->hold.parent_held = true;
}

/* Let go of the parent's session lock, if held. */
void
MoveReleaseParent(Move *m)
{
	ListCell   *lc;

	if (!m->hold.parent_held)
		return;
	foreach(lc, MoveGroup(m))
	{
		LockRelId	rel = {((Move *) lfirst(lc))->parent, MyDatabaseId};

		UnlockRelationIdForSession(&rel, AccessExclusiveLock);
	}
	m->hold.parent_held = false;
}

/*
 * A revert's transaction on its destination (the source of the move it
 * reverts), prepared with the one on its source and committed after the
 * router's commit (MoveResolvePrepared): the fences of the moved genes
 * there, tombstones since the move, go, so that the writes the router sends
 * there once it has switched back pass; until the commit they wait for the
 * tables' lock, as readers of the source wait for the other transaction.
 * The router holds the parents' locks, so no query of its holds them.
 */
static void
MoveRevertDestTransaction(Move *m)
{
	RemoteConn *rc;
	StringInfoData tables;
	ListCell   *lc;

	RemoteClose(m->sess.dst_lock);
	m->sess.dst_lock = NULL;
	rc = MoveSession(m, &m->sess.dst_lock, m->dst_name);
	RemoteCommand(rc, "BEGIN", "begin the transaction of the revert on its destination");
	initStringInfo(&tables);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		Move	   *ot = t->revert.of;

		SwitchFenceState(rc, ot->hold.fence_id, FENCE_OPEN, "remove the fence of the moved genes");
		RemoteCommandParams(rc, psprintf("SELECT %s($1::pg_catalog.text)", MoveRemoteExt(rc, "snowseq_fence_drop")),
							SQL_ARGS(ot->op.token), "remove the fence of the moved genes");
		appendStringInfo(&tables, "%s%s", tables.len ? ", " : "", t->dst_table);
	}
	SwitchCancelsAutovacuum(rc, MoveGroupTables(m, true, false));
	RemoteCommand(rc, psprintf("SET LOCAL lock_timeout = %d; LOCK TABLE %s IN ACCESS EXCLUSIVE MODE",
							   MOVE_SWITCH_MAX_WAIT_MS, tables.data),
				  "lock the tables of the revert's destination");
	TwoPhasePrepare(rc, MoveGid(m), "prepare the transaction of the revert on its destination");
}

/*
 * Step: the switch, in one router transaction.  The source transaction
 * (a split's keep view appears in it, the fence becomes moved; no row is
 * deleted) runs first, then the router takes the parent's lock, rewrites
 * partitions and map, and prepares the source transaction while it still
 * holds the lock; the router commits state 'switched' when the step ends,
 * and only then is the prepared source transaction committed (MoveFinish),
 * so the router's record decides, whenever either side dies.  The moved
 * rows are deleted after the switch (MoveFinish), while the router reads
 * the rows that stay through the keep view: the pause of the moved genes
 * does not grow with their rows.  If the source transaction locked the
 * tables of a foreign key (MoveCheckGroupKeys) and a router statement
 * writing to them waits on it while holding the parent's lock, the source
 * transaction is rolled back and opened again once the router holds the
 * lock.
 */
void
MoveSwitch(Move *m)
{
	ListCell   *lc;

	/* a revert's partitions read the source tables again: no view */
	foreach(lc, MoveGroup(m))
		if (((Move *) lfirst(lc))->kind != MOVE_KIND_WHOLE && m->revert.reverts == 0)
			MoveCreateKeepView(lfirst(lc), MoveSrc(m));
	m->hold.keys_locked = false;
	MoveSourceTransaction(m);
	/* writers of tables whose foreign key the source transaction locked may wait on it */
	if (!MoveLockParent(m, m->hold.keys_locked))
	{
		ereport(NOTICE,
				(errmsg("writes waited on the source transaction of the switch: opening it again under the router's lock")));
		RemoteCommand(MoveHolder(m), "ROLLBACK", "roll back the source transaction");
		(void) MoveLockParent(m, false);
		MoveSourceTransaction(m);
	}
	MoveSwitchRouter(m);

	/*
	 * Two commits, one decision: the source transaction is prepared, and
	 * holds the source table until it is resolved; the router's commit of
	 * state 'switched' decides whether it commits (MoveFinish) or rolls back
	 * (MoveRollback).  A router that dies in between leaves no half-moved
	 * state readable: the source table waits for the resolution, which the
	 * router runs at its next start.  No router query runs on the source
	 * now (the router holds the parent's lock), so the lock is quick; it
	 * also keeps foreign keys from appearing between the check and the
	 * commit.
	 */
	{
		StringInfoData tables;

		initStringInfo(&tables);
		foreach(lc, MoveGroup(m))
			appendStringInfo(&tables, "%s%s", tables.len ? ", " : "", ((Move *) lfirst(lc))->src_table);
		SwitchCancelsAutovacuum(MoveHolder(m), MoveGroupTables(m, false, false));
		RemoteCommand(MoveHolder(m), psprintf("SET LOCAL lock_timeout = %d; LOCK TABLE %s IN ACCESS EXCLUSIVE MODE",
											  MOVE_SWITCH_MAX_WAIT_MS, tables.data),
					  "lock the source tables");
		foreach(lc, MoveGroup(m))
			MoveRefuseReferenced(lfirst(lc), MoveHolder(m));
	}
	if (m->revert.reverts != 0)
		MoveRevertDestTransaction(m);
	TwoPhasePrepare(MoveHolder(m), MoveGid(m), "prepare the source transaction");
	MoveHoldParent(m);
	SNOWSEQ_TESTPOINT("move_after_source_commit");
	MoveRecordStep(m, MOVE_STEP_SWITCH, "switched_at = pg_catalog.clock_timestamp(), "
				  "pause_ms = pg_catalog.round((extract(epoch FROM pg_catalog.clock_timestamp() "
				  "OPERATOR(pg_catalog.-) blocked_at) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1)");
}
