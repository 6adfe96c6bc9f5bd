/*
 * move_repl.c
 *		Elastic shards: the logical-replication plumbing of a move, one
 *		function per remote command.
 *
 * The source publishes the moving ID range, the destination subscribes
 * (copy, then stream); these functions wait for the copy to be applied up
 * to a WAL position of the source, read its errors, and drop the
 * subscription, the publication and the replication slots, whatever state
 * the servers are in.  Every object is named after the move's token.
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "move_common.h"
#include "move_plan.h"
#include "move_repl.h"
#include "snowseq.h"

#define MOVE_DETACH_ATTEMPTS	20	/* tries when a deadlock aborts the detach of the way back */
#define MOVE_STALL_MS			(300 * 1000)	/* no progress for so long: fail */
#define MOVE_SUB_FAILURES		5	/* the same error so often in a row, no progress: it persists */

/* Create the publication of the moving range of every table of the group on the source. */
void
MoveCreatePublication(Move *m)
{
	RemoteConn *src = MoveSrc(m);
	StringInfoData tables;
	ListCell   *lc;

	initStringInfo(&tables);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);

		appendStringInfo(&tables, "%sTABLE ONLY %s WHERE (%s)", tables.len ? ", " : "",
						 t->src_table, MoveIdCondition(t));
	}
	RemoteCommand(src, psprintf("CREATE PUBLICATION %s FOR %s WITH (publish = 'insert, update, delete')",
								quote_identifier(m->op.token), tables.data),
				  "create the publication");
}

/*
 * The replication catalog of another server, one call each: values go as
 * parameters, never into the SQL text.
 */

/*
 * SQL for the oid of the subscription named by parameter n in the database
 * of the session: pg_subscription is shared by the databases of a server,
 * and a subscription name is unique in one database only, so another
 * database's subscription of the same name (a move of another router
 * database, say) is never taken for this one.
 */
#define REPL_SUBSCRIPTION(n) \
	"(SELECT s.oid FROM pg_catalog.pg_subscription s WHERE s.subname OPERATOR(pg_catalog.=) $" #n "::pg_catalog.name " \
	"AND s.subdbid OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d " \
	"WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()))"

/* The oid of a subscription of this database on a server, or NULL if there is none. */
char *
MoveSubscriptionOid(RemoteConn *rc, const char *name)
{
	return RemoteValueParams(rc, "SELECT " REPL_SUBSCRIPTION(1), SQL_ARGS(name), "look up the subscription");
}

/*
 * Whether CREATE SUBSCRIPTION failed to connect to its publisher (SQLSTATE
 * class 08), not on the publisher once connected: PostgreSQL reports a slot
 * it could not create there ("already exists") as 08P01, which no password
 * file mends.
 */
static bool
ReplConnectFailed(const char *sqlstate)
{
	return strncmp(sqlstate, "08", 2) == 0 && strcmp(sqlstate, "08P01") != 0;
}

/* Whether a server has a replication slot of this name. */
static bool
ReplSlotExists(RemoteConn *rc, const char *name)
{
	return RemoteValueParams(rc, "SELECT 1 FROM pg_catalog.pg_replication_slots "
							 "WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name",
							 SQL_ARGS(name), "look up the replication slot") != NULL;
}

/*
 * Create the subscription on the destination: it copies the range, then
 * streams its changes.  The connection string holds no secret: the
 * destination authenticates to the source with its own password file or
 * certificate, so nothing in this SQL text is worth hiding.
 */
void
MoveCreateSubscription(Move *m)
{
	RemoteConn *dst = MoveDst(m);
	char	   *v;
	char	   *err;
	char		state[6];

	err = RemoteTryMessage(dst, psprintf("CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION %s "
													 "WITH (slot_name = %s, create_slot = true, copy_data = true, enabled = false, "
													 "streaming = off, binary = false)",
													 quote_identifier(m->op.token),
													 quote_literal_cstr(RemoteConninfo(GetForeignServerByName(m->src_name, false)->serverid)),
													 quote_identifier(m->op.token), quote_literal_cstr(m->op.token)),
									   "create the subscription", state);

	if (err != NULL && ReplConnectFailed(state))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("server \"%s\" could not connect to server \"%s\" to copy the genes", m->dst_name, m->src_name),
				 errdetail_internal("%s", err),
				 errhint("Moves send no password: give the operating system user of server \"%s\" a password file entry "
						 "for server \"%s\" (~/.pgpass, or the file named by the passfile option of the foreign server), "
						 "or use certificate authentication between shard servers.", m->dst_name, m->src_name)));
	if (err != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("could not create the subscription on server \"%s\": %s", m->dst_name, err)));
	v = MoveSubscriptionOid(dst, m->op.token);
	m->copy.sub_oid = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;
}

/*
 * Record the table-sync slots the subscription will make on the source,
 * before it is enabled (MoveEnableSubscription, in the next step): one per
 * table, named by PostgreSQL after the subscription, the table on the
 * destination and the destination's system identifier
 * (ReplicationSlotNameForTablesync, PostgreSQL 14 and later), all known
 * once the disabled subscription lists its tables.  A table whose copy is
 * done (ready) has none.
 */
void
MoveRecordSyncSlots(Move *m)
{
	PGresult   *res = RemoteExec(MoveDst(m),
								 psprintf("SELECT pg_catalog.format('pg_%%s_sync_%%s_%%s', r.srsubid, r.srrelid, "
										  /* printed unsigned, as PostgreSQL names the slot */
										  "CASE WHEN s.system_identifier OPERATOR(pg_catalog.<) 0 "
										  "THEN s.system_identifier::pg_catalog.numeric OPERATOR(pg_catalog.+) 18446744073709551616 "
										  "ELSE s.system_identifier::pg_catalog.numeric END) "
										  "FROM pg_catalog.pg_subscription_rel r, pg_catalog.pg_control_system() s "
										  "WHERE r.srsubid OPERATOR(pg_catalog.=) %u AND r.srsubstate OPERATOR(pg_catalog.<>) 'r' "
										  "ORDER BY r.srrelid", m->copy.sub_oid),
								 "list the tables of the subscription");

	for (int i = 0; i < PQntuples(res); i++)
		MoveRecordObject(m, m->src_name, MOVE_OBJECT_SLOT, PQgetvalue(res, i, 0));
	PQclear(res);
}

/* Enable the subscription: its copy begins. */
void
MoveEnableSubscription(Move *m)
{
	RemoteCommand(MoveDst(m), psprintf("ALTER SUBSCRIPTION %s ENABLE", quote_identifier(m->op.token)),
				  "enable the subscription");
}

/*
 * What the subscription has done for good, as text that changes whenever
 * it gets further: the state of each of its tables, the position its apply
 * worker's replication origin has applied up to, and that of each table
 * whose copy is done and catching up (PostgreSQL names the origins after
 * the subscription and the table).  A table still copying has done nothing
 * for good: a copy that fails starts again from nothing.
 */
static char *
MoveSubscriptionDone(Move *m)
{
	return RemoteValue(MoveDst(m),
					   psprintf("SELECT coalesce(pg_catalog.string_agg(r.srrelid::pg_catalog.text OPERATOR(pg_catalog.||) ' ' "
								"OPERATOR(pg_catalog.||) r.srsubstate::pg_catalog.text OPERATOR(pg_catalog.||) ' ' "
								"OPERATOR(pg_catalog.||) coalesce(r.srsublsn::pg_catalog.text, '') OPERATOR(pg_catalog.||) ' ' "
								"OPERATOR(pg_catalog.||) CASE WHEN r.srsubstate OPERATOR(pg_catalog.=) ANY (ARRAY['f', 's']::pg_catalog.\"char\"[]) "
								"THEN coalesce((SELECT o.remote_lsn::pg_catalog.text FROM pg_catalog.pg_replication_origin_status o "
								"WHERE o.external_id OPERATOR(pg_catalog.=) pg_catalog.format('pg_%%s_%%s', r.srsubid, r.srrelid)), '') "
								"ELSE '' END, ',' ORDER BY r.srrelid), '') OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) "
								"coalesce((SELECT o.remote_lsn::pg_catalog.text FROM pg_catalog.pg_replication_origin_status o "
								"WHERE o.external_id OPERATOR(pg_catalog.=) 'pg_%u'), '') "
								"FROM pg_catalog.pg_subscription_rel r WHERE r.srsubid OPERATOR(pg_catalog.=) %u",
								m->copy.sub_oid, m->copy.sub_oid),
					   "read what the subscription has done");
}

/*
 * Whether an error of a subscription's worker is one that PostgreSQL's
 * retry cannot heal: data exceptions, integrity constraint violations (a
 * conflict with a row on the destination), syntax and access rule
 * violations (a missing relation or column, a missing privilege).
 */
static bool
MoveErrorCannotHeal(const char *sqlstate)
{
	return strncmp(sqlstate, "22", 2) == 0 || strncmp(sqlstate, "23", 2) == 0 ||
		strncmp(sqlstate, "42", 2) == 0;
}

/*
 * Watch the subscription's errors (errors: the count PostgreSQL keeps for
 * it).  PostgreSQL restarts a worker that failed, and the copy or the
 * streaming goes on from where it had got: a walsender or worker that was
 * terminated, a connection that broke, a timeout.  Such an error gets a
 * NOTICE and the move goes on.  The move fails on an error that persists:
 * one that cannot heal (MoveErrorCannotHeal), or the same error
 * MOVE_SUB_FAILURES times in a row while the subscription gets no further
 * (MoveSubscriptionDone); its message carries the error's text, which the
 * destination's snowseq keeps (snowseq_subscription_error).
 */
void
MoveCheckSubscription(Move *m, const char *errors)
{
	Move	   *lead = MoveLead(m);
	int64		n = errors ? pg_strtoint64(errors) : 0;
	RemoteConn *dst;
	PGresult   *res;
	char	   *sqlstate = NULL;
	char	   *text = NULL;
	char	   *error;
	char	   *done;

	if (n <= lead->copy.sub_errors)
		return;
	dst = MoveDst(m);
	res = RemoteExec(dst, psprintf("SELECT sqlstate, message FROM %s(%u)",
								   MoveRemoteExt(dst, "snowseq_subscription_error"), lead->copy.sub_oid),
					 "read the error of the subscription");
	if (PQntuples(res) == 1)
	{
		sqlstate = pstrdup(PQgetvalue(res, 0, 0));
		text = pstrdup(PQgetvalue(res, 0, 1));
	}
	PQclear(res);
	error = psprintf("%s %s", sqlstate ? sqlstate : "?", text ? text : "?");
	done = MoveSubscriptionDone(m);
	if (lead->copy.sub_error != NULL && strcmp(lead->copy.sub_error, error) == 0 &&
		lead->copy.sub_done != NULL && strcmp(lead->copy.sub_done, done) == 0)
		lead->copy.sub_failures += n - lead->copy.sub_errors;
	else
		lead->copy.sub_failures = n - lead->copy.sub_errors;
	lead->copy.sub_errors = n;
	lead->copy.sub_error = MemoryContextStrdup(lead->op.cxt, error);
	lead->copy.sub_done = MemoryContextStrdup(lead->op.cxt, done);

	if ((sqlstate != NULL && MoveErrorCannotHeal(sqlstate)) || lead->copy.sub_failures >= MOVE_SUB_FAILURES)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("copying genes %d to %d of table \"%s\" to server \"%s\" failed: %s",
						m->first, m->last, m->parent_rel, m->dst_name,
						text ? text : "the subscription reported errors"),
				 text == NULL ?
				 errdetail("The subscription's workers failed %d times in a row, making no progress in between.",
						   lead->copy.sub_failures) :
				 sqlstate != NULL && MoveErrorCannotHeal(sqlstate) ?
				 errdetail("The subscription's worker failed with SQLSTATE %s, an error that retrying does not heal.",
						   sqlstate) :
				 errdetail("The subscription's workers failed %d times in a row with this error (SQLSTATE %s), "
						   "making no progress in between.", lead->copy.sub_failures, sqlstate),
				 errhint("Remove its cause on server \"%s\" (its log has the context), then move the genes again: "
						 "the move was undone.", m->dst_name)));
	ereport(NOTICE,
			(errmsg("copying genes %d to %d to server \"%s\": a replication worker failed (%s); "
					"PostgreSQL restarts it and the move goes on",
					m->first, m->last, m->dst_name, text ? text : "see the server log")));
}

/* The source's WAL position now, flushed, so the walsender can send it. */
char *
MoveSourceLsn(Move *m)
{
	/* taking an xid makes the commit flush everything before the position */
	return RemoteValue(MoveSrc(m), "SELECT pg_catalog.pg_current_wal_insert_lsn()::text, pg_catalog.txid_current()",
					   "read the WAL position");
}

/*
 * SQL for the errors of a subscription on server rc, summed from its row
 * "alias" of pg_stat_subscription_stats: its apply errors and those of its
 * table copies, which PostgreSQL 19 counts as sync_table_error_count (and
 * its sequences' apart) where 15 to 18 have sync_error_count.  Read by the
 * server's version, not this one's: they may differ.
 */
char *
MoveSubErrorsSql(RemoteConn *rc, const char *alias)
{
	return psprintf("coalesce(%s.%s, 0) OPERATOR(pg_catalog.+) coalesce(%s.apply_error_count, 0)",
					alias, PQserverVersion(rc->conn) >= 190000 ? "sync_table_error_count" : "sync_error_count",
					alias);
}

/*
 * Wait until the subscription has applied everything the source wrote
 * before lsn; false after timeout_ms (0: fail only if nothing moves for
 * MOVE_STALL_MS).
 */
bool
MoveWaitApplied(Move *m, const char *lsn, int timeout_ms)
{
	TimestampTz start = GetCurrentTimestamp();
	char	   *sql = psprintf("SELECT coalesce(w.latest_end_lsn OPERATOR(pg_catalog.>=) $1::pg_catalog.pg_lsn, false), "
							   "coalesce(w.latest_end_lsn::pg_catalog.text, ''), "
							   "(SELECT %s "
							   "FROM pg_catalog.pg_stat_subscription_stats st WHERE st.subid OPERATOR(pg_catalog.=) " REPL_SUBSCRIPTION(2) ") "
							   "FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_stat_subscription w ON w.subid OPERATOR(pg_catalog.=) " REPL_SUBSCRIPTION(2) " "
							   "AND w.relid IS NULL",
							   MoveSubErrorsSql(MoveDst(m), "st"));
	char	   *last = NULL;
	TimestampTz progress = start;

	for (;;)
	{
		PGresult   *res = RemoteExecParams(MoveDst(m), sql, SQL_ARGS(lsn, m->op.token),
										   "read the subscription's progress");
		bool		done = strcmp(PQgetvalue(res, 0, 0), "t") == 0;

		MoveCheckSubscription(m, PQgetisnull(res, 0, 2) ? NULL : PQgetvalue(res, 0, 2));
		if (last == NULL || strcmp(last, PQgetvalue(res, 0, 1)) != 0)
		{
			last = pstrdup(PQgetvalue(res, 0, 1));
			progress = GetCurrentTimestamp();
		}
		PQclear(res);
		if (done)
			return true;
		if (timeout_ms > 0 && MsSince(start) > timeout_ms)
			return false;
		if (timeout_ms == 0 && MsSince(progress) > MOVE_STALL_MS)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_EXCEPTION),
					 errmsg("the subscription on server \"%s\" made no progress for %d seconds",
							m->dst_name, MOVE_STALL_MS / 1000)));
		MoveSleep(timeout_ms > 0 ? 2 : 50);
	}
}

/*
 * Drop the subscription: its worker stops, its slot on the source goes (and
 * its table-sync slots, when the source can be reached).  Its table-sync
 * slots are recorded first, for MoveDropSlots: a move that began under 1.2
 * recorded none before it enabled the subscription.
 */
void
MoveDropSubscription(Move *m)
{
	char	   *oid = MoveSubscriptionOid(MoveDst(m), m->op.token);

	if (oid == NULL)
		return;
	m->copy.sub_oid = (Oid) strtoul(oid, NULL, 10);
	MoveRecordSyncSlots(m);
	(void) MoveDropSubscriptionNamed(MoveDst(m), m->op.token, false);
}

/*
 * Drop a subscription of a server by name, if it is there, with its slot
 * (keep_slot false) if the publisher can be reached, else without it;
 * returns its oid, or NULL if there was none.  With keep_slot, the slot
 * stays on the publisher.
 */
char *
MoveDropSubscriptionNamed(RemoteConn *rc, const char *name, bool keep_slot)
{
	const char *q = quote_identifier(name);
	char	   *oid = MoveSubscriptionOid(rc, name);
	char		state[6];

	if (oid == NULL)
		return NULL;
	if (!keep_slot && RemoteTry(rc, psprintf("DROP SUBSCRIPTION %s", q), "drop the subscription", state))
		return oid;
	/* the publisher cannot be reached, or keeps the slot: drop it without */
	RemoteCommand(rc, psprintf("ALTER SUBSCRIPTION %s DISABLE", q), "disable the subscription");
	RemoteCommand(rc, psprintf("ALTER SUBSCRIPTION %s SET (slot_name = NONE)", q), "detach the subscription from its slot");
	RemoteCommand(rc, psprintf("DROP SUBSCRIPTION %s", q), "drop the subscription");
	return oid;
}

/* Drop a replication slot, stopping the walsender that uses it first. */
void
MoveDropSlotNamed(RemoteConn *rc, const char *name)
{
	/* a slot that is gone is dropped: the statement finds no row then */
	const char *drop = "SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM pg_catalog.pg_replication_slots "
		"WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name";

	char		state[6];

	for (int i = 0;; i++)
	{
		RemoteCommandParams(rc, "SELECT pg_catalog.pg_terminate_backend(active_pid) FROM pg_catalog.pg_replication_slots "
							"WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name AND active_pid IS NOT NULL",
							SQL_ARGS(name), "stop the walsender of the slot");
		/* a terminated walsender lets go of its slot a moment later */
		if (i == 50)
		{
			RemoteCommandParams(rc, drop, SQL_ARGS(name), "drop the replication slot");
			return;
		}
		if (RemoteTryParams(rc, drop, SQL_ARGS(name), "drop the replication slot", state))
			return;
		MoveSleep(100);
	}
}

/*
 * Drop the replication slots of the move on the source, if any are left:
 * the subscription's and its table-sync slots, as the records name them.
 */
void
MoveDropSlots(Move *m)
{
	RemoteConn *src = MoveSrc(m);
	List	   *names = MoveRecordedNames(m, m->src_name, MOVE_OBJECT_SLOT);
	PGresult   *res;
	ListCell   *lc;
	bool		synced_recorded = false;
	char	   *legacy = NULL;

	foreach(lc, names)
	{
		if (strcmp(lfirst(lc), m->op.token) != 0)
			synced_recorded = true;
	}
	/* the subscription's own slot, whatever was recorded */
	names = lcons(m->op.token, names);

	/*
	 * A move that made its subscription records its table-sync slots before
	 * enabling it, so one with a subscription and none recorded began under
	 * 1.2: its table-sync slots are those PostgreSQL named after the
	 * subscription's oid (the one comparison of a name left; it goes with
	 * the update from 1.2).
	 */
	if (OidIsValid(m->copy.sub_oid) && !synced_recorded)
		legacy = psprintf("pg_%u_sync_", m->copy.sub_oid);
	res = RemoteExecParams(src, "SELECT slot_name FROM pg_catalog.pg_replication_slots "
						   "WHERE slot_name OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[]) "
						   "OR pg_catalog.starts_with(slot_name::pg_catalog.text, $2::pg_catalog.text)",
						   SQL_ARGS(SqlTextArray(names), legacy), "list the replication slots");
	for (int i = 0; i < PQntuples(res); i++)
	{
		MoveDropSlotNamed(src, PQgetvalue(res, i, 0));
		MoveNote(m, m->src_name, psprintf("replication slot %s", PQgetvalue(res, i, 0)), "dropped");
	}
	PQclear(res);
}

/* Drop the publication of the move on the source. */
void
MoveDropPublication(Move *m)
{
	RemoteCommand(MoveSrc(m), psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(m->op.token)),
				  "drop the publication");
}

/*
 * The state of the initial copy on the destination: true once it is done
 * (the table is ready); *rows, the rows the copy has written so far, when
 * the destination says.  Fails on a subscription error.
 */
bool
MoveCopyState(Move *m, char **rows)
{
	/* one row per table of the group: ready when all are; rows copied so far, summed */
	char	   *sql = psprintf("SELECT pg_catalog.bool_and(sr.srsubstate OPERATOR(pg_catalog.=) 'r'), "
							   "pg_catalog.max(%s), "
							   "pg_catalog.sum((SELECT tuples_processed FROM pg_catalog.pg_stat_progress_copy p "
							   "WHERE p.relid OPERATOR(pg_catalog.=) sr.srrelid LIMIT 1)) "
							   "FROM pg_catalog.pg_subscription s "
							   "JOIN pg_catalog.pg_subscription_rel sr ON sr.srsubid OPERATOR(pg_catalog.=) s.oid "
							   "LEFT JOIN pg_catalog.pg_stat_subscription_stats st ON st.subid OPERATOR(pg_catalog.=) s.oid "
							   "WHERE s.oid OPERATOR(pg_catalog.=) " REPL_SUBSCRIPTION(1) " GROUP BY s.oid",
							   MoveSubErrorsSql(MoveDst(m), "st"));
	PGresult   *res = RemoteExecParams(MoveDst(m), sql, SQL_ARGS(m->op.token), "read the state of the copy");
	bool		ready;

	if (PQntuples(res) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("subscription %s on server \"%s\" is gone", m->op.token, m->dst_name)));
	MoveCheckSubscription(m, PQgetvalue(res, 0, 1));
	ready = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	if (!PQgetisnull(res, 0, 2))
		*rows = pstrdup(PQgetvalue(res, 0, 2));
	PQclear(res);
	return ready;
}

/* The size of the copy on the destination so far, or NULL. */
char *
MoveCopySize(Move *m)
{
	List	   *tables = NIL;
	ListCell   *lc;

	foreach(lc, MoveGroup(m))
		tables = lappend(tables, ((Move *) lfirst(lc))->src_table);
	return RemoteValueParams(MoveDst(m), "SELECT coalesce(pg_catalog.sum(pg_catalog.pg_table_size(r)), 0) "
							 "FROM pg_catalog.unnest($1::pg_catalog.text[]) t, pg_catalog.to_regclass(t) r",
							 SQL_ARGS(SqlTextArray(tables)), "read the size of the copy");
}

/* The bytes of WAL the subscription's slot on the source has yet to confirm, or NULL. */
char *
MoveLagBytes(Move *m)
{
	return RemoteValueParams(MoveSrc(m), "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), "
							 "confirmed_flush_lsn)::pg_catalog.int8 FROM pg_catalog.pg_replication_slots "
							 "WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name",
							 SQL_ARGS(m->op.token), "read the lag of the subscription");
}

/*
 * Keeping the source current after the switch (snowseq.move_revert_window):
 * replication from the destination back to the source, until the move is
 * finalized or reverted.  Logical replication applies a change to the
 * table of the name the publisher sends; the destination table has a name
 * of its own after the block, so it becomes the one partition of a
 * partitioned table named like the source table (MoveBackAttach), and the
 * publication publishes through that root.  Every object is named
 * MoveBackName and was recorded when the move began.
 */

/* The comment that marks the partitioned tables of the way back as the move's. */
char *
MoveBackMark(Move *m)
{
	return psprintf("snowseq %s: replication back to the source", MoveBackName(MoveLead(m)));
}

/*
 * After the copy, before the catch-up: on the destination, the publication
 * of the copies (under the source tables' names until the block) and the
 * replication slot of the way back.  The slot exists before the first
 * write reaches the destination through the router; MoveBackSubscribe
 * moves it up past what the move's own subscription applied.  The
 * publication comes first: a slot decodes with the catalog as it was, and
 * would not find a publication made after it.
 */
void
MoveBackPrepare(Move *m)
{
	RemoteConn *dst = MoveDst(m);
	char	   *name = MoveBackName(MoveLead(m));
	StringInfoData tables;
	ListCell   *lc;

	initStringInfo(&tables);
	foreach(lc, MoveGroup(m))
		appendStringInfo(&tables, "%sTABLE ONLY %s", tables.len ? ", " : "", ((Move *) lfirst(lc))->src_table);
	RemoteCommand(dst, psprintf("DROP PUBLICATION IF EXISTS %s; CREATE PUBLICATION %s FOR %s "
								"WITH (publish = 'insert, update, delete', publish_via_partition_root = true)",
								quote_identifier(name), quote_identifier(name), tables.data),
				  "create the publication back to the source");
	if (!ReplSlotExists(dst, name))
		RemoteCommandParams(dst, "SELECT pg_catalog.pg_create_logical_replication_slot($1::pg_catalog.name, 'pgoutput')",
							SQL_ARGS(name), "create the replication slot back to the source");
}

/*
 * In the block, once the move's own subscription is gone and the copies
 * have their names: note the destination's WAL position (everything
 * replicated to it is before, every write through the router after), and
 * make each copy the partition of a table named like its source table,
 * with its primary key (the replica identity published through the root),
 * through which the publication of the way back publishes.  The copies
 * carry CHECK constraints for their IDs, so attaching them scans nothing,
 * and their primary keys become the partitions of the root's.
 */
void
MoveBackAttach(Move *m)
{
	RemoteConn *dst = MoveDst(m);
	StringInfoData sql;
	StringInfoData roots;
	ListCell   *lc;

	m->revert.back_lsn = MemoryContextStrdup(m->op.cxt, RemoteValue(dst, "SELECT pg_catalog.pg_current_wal_insert_lsn()::pg_catalog.text",
														  "read the WAL position of the destination"));
	initStringInfo(&sql);
	initStringInfo(&roots);
	foreach(lc, MoveGroup(m))
	{
		Move	   *t = lfirst(lc);
		bool		has_lo,
					has_hi;
		int64		lo,
					hi;

		/* a copy named like its source table (moved back) is published as it is */
		appendStringInfo(&roots, "%sTABLE %s", roots.len ? ", " : "", t->src_table);
		if (strcmp(t->src_table, t->dst_table) == 0)
			continue;
		MoveIds(t, &has_lo, &lo, &has_hi, &hi);
		/* the primary key too: the replica identity the source finds rows by, published through the root */
		appendStringInfo(&sql, "CREATE TABLE %s (LIKE %s INCLUDING GENERATED, %s) PARTITION BY RANGE (%s); "
						 "COMMENT ON TABLE %s IS %s; ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s); ",
						 t->src_table, t->dst_table, MoveRemotePkey(dst, t->dst_table), quote_identifier(t->id_col),
						 t->src_table, quote_literal_cstr(MoveBackMark(m)),
						 t->src_table, t->dst_table, BoundSql(has_lo, lo, "MINVALUE"), BoundSql(has_hi, hi, "MAXVALUE"));
	}
	appendStringInfo(&sql, "ALTER PUBLICATION %s SET %s", quote_identifier(MoveBackName(MoveLead(m))), roots.data);
	RemoteCommand(dst, sql.data, "publish the destination tables back to the source");
}

/*
 * After the switch: the subscription on the source that applies the
 * destination's changes there, on the slot made after the copy, moved up
 * to the block first (advance: once, after the switch; the slot does not
 * go back).  copy_data off: the source has the rows.  On PostgreSQL 16 and
 * later with origin = none, so that only changes made on the destination
 * come back, never ones replicated to it; on 15 every change of the
 * destination tables does.  Again after a revert that did not switch
 * (advance false), on the slot kept meanwhile.
 */
void
MoveBackSubscribe(Move *m, bool advance)
{
	Move	   *lead = MoveLead(m);
	RemoteConn *src = MoveSrc(m);
	RemoteConn *dst = MoveDst(m);
	char	   *name = MoveBackName(lead);
	char	   *v;
	char	   *err;
	char		state[6];

	if (advance)
		RemoteCommandParams(dst, "SELECT pg_catalog.pg_replication_slot_advance($1::pg_catalog.name, $2::pg_catalog.pg_lsn)",
							SQL_ARGS(name, lead->revert.back_lsn), "start the replication back to the source at the block");
	if (MoveSubscriptionOid(src, name) != NULL)
		return;
	v = RemoteValue(src, "SELECT pg_catalog.current_setting('server_version_num')::pg_catalog.int4 OPERATOR(pg_catalog.>=) 160000",
					"read the version of the source");
	err = RemoteTryMessage(src, psprintf("CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION %s "
										 "WITH (slot_name = %s, create_slot = false, copy_data = false, enabled = true, "
										 "streaming = off, binary = false%s)",
										 quote_identifier(name),
										 quote_literal_cstr(RemoteConninfo(GetForeignServerByName(m->dst_name, false)->serverid)),
										 quote_identifier(name), quote_literal_cstr(name),
										 strcmp(v, "t") == 0 ? ", origin = none" : ""),
						   "create the subscription back to the source", state);
	if (err != NULL && ReplConnectFailed(state))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("server \"%s\" could not connect to server \"%s\" to keep the source of the move current", m->src_name, m->dst_name),
				 errdetail_internal("%s", err),
				 errhint("Moves send no password: give the operating system user of server \"%s\" a password file entry "
						 "for server \"%s\", or use certificate authentication between shard servers.", m->src_name, m->dst_name)));
	if (err != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("could not create the subscription back to the source on server \"%s\": %s", m->src_name, err)));
}

/*
 * A revert's block (m is the revert, its destination the source of the
 * move it reverts): stop replicating back, keeping the slot on the
 * destination of the move, so that a revert that does not switch can
 * subscribe again where it stopped (MoveBackSubscribe).
 */
void
MoveBackDetach(Move *m)
{
	(void) MoveDropSubscriptionNamed(MoveDst(m), m->op.token, true);
}

/*
 * On the destination: a partitioned table of the way back (table, named
 * like a source table), if it is the one the move marked (mark, as
 * MoveBackMark says); its partitions, the destination tables, are detached
 * first and stay.
 */
void
MoveBackDropTable(RemoteConn *dst, const char *table, const char *mark)
{
	char	   *v = RemoteValueParams(dst, "SELECT coalesce((SELECT pg_catalog.string_agg(pg_catalog.format("
									"'ALTER TABLE %s DETACH PARTITION %s', c.oid::pg_catalog.regclass, "
									"i.inhrelid::pg_catalog.regclass), '; ') FROM pg_catalog.pg_inherits i "
									"WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid), '') "
									"FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text) "
									"AND c.relkind OPERATOR(pg_catalog.=) 'p' "
									"AND pg_catalog.obj_description(c.oid, 'pg_class') OPERATOR(pg_catalog.=) $2::pg_catalog.text",
									SQL_ARGS(table, mark), "look up the table of the way back");

	if (v == NULL)
		return;
	/*
	 * The detach locks the table of the way back, then its partitions; a
	 * writer of the group's tables (a foreign key's check) may lock them in
	 * the other order, and the deadlock detector then aborts one of the
	 * two.  Outside a transaction block the detach alone is rolled back, so
	 * it runs again; inside one (or on another error) it fails as before.
	 */
	for (int attempt = 1; v[0] != '\0'; attempt++)
	{
		char		state[6];
		char	   *err;

		if (PQtransactionStatus(dst->conn) != PQTRANS_IDLE || attempt == MOVE_DETACH_ATTEMPTS)
		{
			RemoteCommand(dst, v, "detach the destination table from the table of the way back");
			break;
		}
		err = RemoteTryMessage(dst, v, "detach the destination table from the table of the way back", state);
		if (err == NULL)
			break;
		if (strcmp(state, "40P01") != 0)
			ereport(ERROR,
					(errcode(strlen(state) == 5 ? MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]) :
							 ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not detach the destination table from the table of the way back on server \"%s\": %s",
							dst->server, err)));
		MoveSleep(Min(20 * attempt, 200));
	}
	RemoteCommand(dst, psprintf("DROP TABLE %s", table), "drop the table of the way back");
}

/*
 * Finalize, or undo a move that kept its source: drop the subscription on
 * the source (its slot with it, if the destination can be reached), the
 * slot, the publication and the partitioned tables on the destination.
 * The records of these objects go in the same transaction.
 */
void
MoveBackDrop(Move *m)
{
	Move	   *lead = MoveLead(m);
	RemoteConn *src = MoveSrc(m);
	RemoteConn *dst = MoveDst(m);
	char	   *name = MoveBackName(lead);
	ListCell   *lc;

	(void) MoveDropSubscriptionNamed(src, name, false);
	if (ReplSlotExists(dst, name))
		MoveDropSlotNamed(dst, name);
	RemoteCommand(dst, psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(name)), "drop the publication back to the source");
	foreach(lc, MoveGroup(m))
		MoveBackDropTable(dst, ((Move *) lfirst(lc))->src_table, MoveBackMark(m));
	MoveForgetObjects(m, MOVE_FORGET_BACK);
}
