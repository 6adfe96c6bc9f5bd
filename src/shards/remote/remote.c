/*
 * remote.c
 *		Commands on other servers over libpq, for gene-range moves.
 *
 * A connection is made from a postgres_fdw foreign server and the current
 * user's user mapping, the way postgres_fdw and dblink make theirs, so no
 * address or password ever appears in SQL text.  Every wait is on the
 * backend's latch: a cancelled statement cancels the remote command and
 * drops the connection.  Remote errors keep their SQLSTATE, message, detail
 * and hint.
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

#include "remote.h"

static PQconninfoOption *libpq_options = NULL;

/* A libpq connection keyword that a server or user mapping may set. */
static bool
IsLibpqOption(const char *keyword)
{
	if (libpq_options == NULL)
	{
		libpq_options = PQconndefaults();
		if (libpq_options == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
	}
	/* these are ours to set, or must not be set at all */
	if (strcmp(keyword, "replication") == 0 ||
		strcmp(keyword, "client_encoding") == 0 ||
		strcmp(keyword, "fallback_application_name") == 0)
		return false;
	for (PQconninfoOption *o = libpq_options; o->keyword != NULL; o++)
		if (strcmp(o->keyword, keyword) == 0)
			return true;
	return false;
}

/*
 * The options of a server and the current user's mapping for it.  Only a
 * postgres_fdw server: its validator lets only a superuser set
 * password_required 'false' in a mapping, which this honours as
 * postgres_fdw does; a server of another wrapper is refused.
 */
static List *
RemoteOptionList(Oid serverid, bool *password_required, bool *has_password)
{
	ForeignServer *server = GetForeignServer(serverid);
	UserMapping *um;
	List	   *opts = NIL;
	ListCell   *lc;

	if (strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "postgres_fdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a postgres_fdw server", server->servername),
				 errhint("snowseq reaches the servers of a sharded table through postgres_fdw servers and their user mappings.")));
	um = GetUserMapping(GetUserId(), serverid);

	*password_required = true;
	*has_password = false;
	foreach(lc, server->options)
	{
		DefElem    *d = lfirst(lc);

		if (IsLibpqOption(d->defname))
			opts = lappend(opts, d);
	}
	foreach(lc, um->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "password_required") == 0)
			*password_required = defGetBoolean(d);
		else if (IsLibpqOption(d->defname))
		{
			if (strcmp(d->defname, "password") == 0 && defGetString(d)[0] != '\0')
				*has_password = true;
			opts = lappend(opts, d);
		}
	}
	return opts;
}

/* Wait for the socket or the latch; a cancel or timeout raises here. */
static void
RemoteWaitSocket(PGconn *conn, int events)
{
	int			rc;

	rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events,
						   PQsocket(conn), -1L, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* Discard notices of remote sessions (DROP SUBSCRIPTION and friends). */
static void
RemoteNotice(void *arg, const PGresult *res)
{
	ereport(DEBUG1,
			(errmsg_internal("notice from server \"%s\": %s", (char *) arg,
							 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY))));
}

/*
 * Refuse a non-superuser connection that used no password, as postgres_fdw
 * does, unless a superuser set password_required 'false' in the mapping.
 */
void
RemoteCheckUsableAs(RemoteConn *rc)
{
	if (!superuser() && rc->password_required && !PQconnectionUsedPassword(rc->conn))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to connect to server \"%s\"", rc->server),
				 errdetail("Non-superuser cannot connect if the server does not request a password."),
				 errhint("Target server's authentication method must be changed or password_required=false set in the user mapping attributes.")));
}

/* Open a session on a postgres_fdw server as the current user's mapping says. */
RemoteConn *
RemoteConnect(Oid serverid)
{
	ForeignServer *server = GetForeignServer(serverid);
	bool		password_required;
	bool		has_password;
	List	   *opts = RemoteOptionList(serverid, &password_required, &has_password);
	int			n = list_length(opts) + 4;
	const char **kw = palloc0(sizeof(char *) * (n + 1));
	const char **val = palloc0(sizeof(char *) * (n + 1));
	bool		has_timeout = false;
	int			i = 0;
	ListCell   *lc;
	PGconn	   *conn;
	RemoteConn *rc;
	PGresult   *res;

	if (!superuser() && password_required && !has_password)
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to connect to server \"%s\"", server->servername),
				 errdetail("Non-superusers must provide a password in the user mapping.")));
	foreach(lc, opts)
	{
		DefElem    *d = lfirst(lc);

		kw[i] = d->defname;
		val[i] = defGetString(d);
		has_timeout |= strcmp(d->defname, "connect_timeout") == 0;
		i++;
	}
	kw[i] = "fallback_application_name";
	val[i++] = "snowseq";
	kw[i] = "client_encoding";
	val[i++] = GetDatabaseEncodingName();
	if (!has_timeout)
	{
		/* a server that is down must not hang the move */
		kw[i] = "connect_timeout";
		val[i++] = "10";
	}
	kw[i] = NULL;
	val[i] = NULL;

	conn = PQconnectStartParams(kw, val, false);
	if (conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	PG_TRY();
	{
		PostgresPollingStatusType st = PGRES_POLLING_WRITING;

		while (PQstatus(conn) != CONNECTION_BAD && st != PGRES_POLLING_OK &&
			   st != PGRES_POLLING_FAILED)
		{
			RemoteWaitSocket(conn, st == PGRES_POLLING_READING ?
							 WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE);
			st = PQconnectPoll(conn);
		}
		if (PQstatus(conn) != CONNECTION_OK)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to server \"%s\"", server->servername),
					 errdetail_internal("%s", pchomp(PQerrorMessage(conn)))));
	}
	PG_CATCH();
	{
		PQfinish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	rc = palloc0(sizeof(RemoteConn));
	rc->conn = conn;
	rc->server = pstrdup(server->servername);
	rc->serverid = serverid;
	rc->password_required = password_required;
	PQsetNoticeReceiver(conn, RemoteNotice, rc->server);
	PG_TRY();
	{
		RemoteCheckUsableAs(rc);
		/* a known environment: qualified names only, no timeouts of ours */
		RemoteCommand(rc,
					  "SET search_path = pg_catalog; SET statement_timeout = 0; "
					  "SET lock_timeout = 0; SET idle_in_transaction_session_timeout = 0; "
					  "SET application_name = 'snowseq move'",
					  "set up the session");
		res = RemoteExec(rc,
						 "SELECT pg_catalog.quote_ident(n.nspname), e.extversion "
						 "FROM pg_catalog.pg_extension e "
						 "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
						 "WHERE e.extname = 'snowseq'",
						 "look up snowseq");
		if (PQntuples(res) == 1)
		{
			rc->extschema = pstrdup(PQgetvalue(res, 0, 0));
			rc->extversion = pstrdup(PQgetvalue(res, 0, 1));
		}
		PQclear(res);
	}
	PG_CATCH();
	{
		RemoteClose(rc);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return rc;
}

/* Close a session (no-op if already closed). */
void
RemoteClose(RemoteConn *rc)
{
	if (rc != NULL && rc->conn != NULL)
	{
		PQfinish(rc->conn);
		rc->conn = NULL;
	}
}

/* Whether a session is still open and idle. */
bool
RemoteUsable(RemoteConn *rc)
{
	return rc != NULL && rc->conn != NULL && PQstatus(rc->conn) == CONNECTION_OK;
}

/* Cancel what the session is running and drop it: its state is unknown. */
static void
RemoteAbandon(RemoteConn *rc)
{
	PGcancel   *cancel = PQgetCancel(rc->conn);
	char		errbuf[256];

	if (cancel != NULL)
	{
		(void) PQcancel(cancel, errbuf, sizeof(errbuf));
		PQfreeCancel(cancel);
	}
	RemoteClose(rc);
}

/* Raise the error of a result (or of the connection), naming what failed. */
static void
RemoteReportError(RemoteConn *rc, PGresult *res, const char *what)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
	const char *hint = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
	int			code = ERRCODE_CONNECTION_FAILURE;
	char	   *message;

	if (state != NULL && strlen(state) == 5)
		code = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
	message = pstrdup(primary ? primary :
					  rc->conn ? pchomp(PQerrorMessage(rc->conn)) : "connection lost");
	detail = detail ? pstrdup(detail) : NULL;
	hint = hint ? pstrdup(hint) : NULL;
	PQclear(res);
	ereport(ERROR,
			(errcode(code),
			 errmsg("could not %s on server \"%s\": %s", what, rc->server, message),
			 detail ? errdetail_internal("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0));
}

/*
 * Run SQL (one or more statements; exactly one if it has parameters: nargs
 * text values for $1..$n, a NULL one is SQL NULL; or, with nargs -1, one
 * statement and no parameters) and return the last
 * result, or the first failed one: the caller clears it.  Raises only for a lost
 * connection or an interrupt.
 */
static PGresult *
RemoteRun(RemoteConn *rc, const char *sql, int nargs, const char *const *values,
		  const char *what)
{
	PGresult   *volatile last = NULL;
	PGresult   *volatile failed = NULL;

	if (!RemoteUsable(rc))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not %s on server \"%s\": the connection was lost", what,
						rc ? rc->server : "?")));
	if (nargs == 0 ? !PQsendQuery(rc->conn, sql) :
		!PQsendQueryParams(rc->conn, sql, Max(nargs, 0), NULL, values, NULL, NULL, 0))
		RemoteReportError(rc, NULL, what);
	PG_TRY();
	{
		for (;;)
		{
			PGresult   *res;

			while (PQisBusy(rc->conn))
			{
				RemoteWaitSocket(rc->conn, WL_SOCKET_READABLE);
				if (!PQconsumeInput(rc->conn))
					break;
			}
			res = PQgetResult(rc->conn);
			if (res == NULL)
				break;
			if (PQresultStatus(res) == PGRES_FATAL_ERROR && failed == NULL)
				failed = res;
			else if (res != failed)
			{
				PQclear(last);
				last = res;
			}
			if (PQstatus(rc->conn) == CONNECTION_BAD)
				break;
		}
	}
	PG_CATCH();
	{
		PQclear(last);
		PQclear(failed);
		RemoteAbandon(rc);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (failed != NULL)
	{
		PQclear(last);
		return failed;
	}
	if (last == NULL || PQstatus(rc->conn) == CONNECTION_BAD)
		RemoteReportError(rc, last, what);
	return last;
}

/* Whether a result is a success. */
static bool
RemoteOk(PGresult *res)
{
	return PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
}

/*
 * Run SQL and return the last result, which is a success: the caller
 * clears it.  "what" names the action in errors; the SQL itself is never
 * shown, since it may hold a password.  The *Params forms pass values as
 * parameters $1..$n of one statement (SQL_ARGS in sqlrun.h): a value is
 * never spliced into SQL text, and the SQL casts each $n to its type.
 */
PGresult *
RemoteExecParams(RemoteConn *rc, const char *sql, int nargs, const char *const *values,
				 const char *what)
{
	PGresult   *res = RemoteRun(rc, sql, nargs, values, what);

	if (!RemoteOk(res))
		RemoteReportError(rc, res, what);
	return res;
}

PGresult *
RemoteExec(RemoteConn *rc, const char *sql, const char *what)
{
	return RemoteExecParams(rc, sql, 0, NULL, what);
}

/*
 * Run SQL for its effect; on a remote error return false and its SQLSTATE
 * (in a buffer of 6) instead of raising.  A lost connection still raises.
 */
bool
RemoteTry(RemoteConn *rc, const char *sql, const char *what, char *sqlstate)
{
	return RemoteTryParams(rc, sql, 0, NULL, what, sqlstate);
}

bool
RemoteTryParams(RemoteConn *rc, const char *sql, int nargs, const char *const *values,
				const char *what, char *sqlstate)
{
	char	   *message = RemoteTryMessageParams(rc, sql, nargs, values, what, sqlstate);

	if (message == NULL)
		return true;
	pfree(message);				/* a caller may try many times */
	return false;
}

/*
 * Run SQL for its effect; on a remote error return its message (and its
 * SQLSTATE, in a buffer of 6) instead of raising, NULL on success.
 */
char *
RemoteTryMessage(RemoteConn *rc, const char *sql, const char *what, char *sqlstate)
{
	return RemoteTryMessageParams(rc, sql, 0, NULL, what, sqlstate);
}

char *
RemoteTryMessageParams(RemoteConn *rc, const char *sql, int nargs, const char *const *values,
					   const char *what, char *sqlstate)
{
	PGresult   *res = RemoteRun(rc, sql, nargs, values, what);
	char	   *message = NULL;

	sqlstate[0] = '\0';
	if (!RemoteOk(res))
	{
		const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

		strlcpy(sqlstate, st ? st : "", 6);
		message = pstrdup(primary ? primary : "unknown error");
	}
	PQclear(res);
	return message;
}

/*
 * Run one statement with parameters and return its result, a success (the
 * caller clears it); on a remote error return NULL and its SQLSTATE (in a
 * buffer of 6) instead of raising.  A lost connection still raises.
 */
PGresult *
RemoteTryExecParams(RemoteConn *rc, const char *sql, int nargs, const char *const *values,
					const char *what, char *sqlstate)
{
	PGresult   *res = RemoteRun(rc, sql, nargs, values, what);
	const char *st;

	sqlstate[0] = '\0';
	if (RemoteOk(res))
		return res;
	st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	strlcpy(sqlstate, st ? st : "", 6);
	PQclear(res);
	return NULL;
}

/* Run SQL for its effect. */
void
RemoteCommandParams(RemoteConn *rc, const char *sql, int nargs, const char *const *values,
					const char *what)
{
	PQclear(RemoteExecParams(rc, sql, nargs, values, what));
}

void
RemoteCommand(RemoteConn *rc, const char *sql, const char *what)
{
	RemoteCommandParams(rc, sql, 0, NULL, what);
}

/*
 * Run SQL text that is one statement, and must stay one (text taken from a
 * user's statement): the extended protocol refuses several.
 */
void
RemoteCommandSingle(RemoteConn *rc, const char *sql, const char *what)
{
	PGresult   *res = RemoteRun(rc, sql, -1, NULL, what);

	if (!RemoteOk(res))
		RemoteReportError(rc, res, what);
	PQclear(res);
}

/* The first column of the first row, or NULL for no row or a NULL value. */
char *
RemoteValueParams(RemoteConn *rc, const char *sql, int nargs, const char *const *values,
				  const char *what)
{
	PGresult   *res = RemoteExecParams(rc, sql, nargs, values, what);
	char	   *v = NULL;

	if (PQntuples(res) > 0 && PQnfields(res) > 0 && !PQgetisnull(res, 0, 0))
		v = pstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

char *
RemoteValue(RemoteConn *rc, const char *sql, const char *what)
{
	return RemoteValueParams(rc, sql, 0, NULL, what);
}

/* Append a conninfo value, quoted as libpq wants. */
static void
AppendConninfoValue(StringInfo buf, const char *v)
{
	appendStringInfoChar(buf, '\'');
	for (const char *p = v; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '\'');
}

/*
 * The connection string another server uses to reach this foreign server,
 * for CREATE SUBSCRIPTION: the server's options and the user mapping's, but
 * never a secret (password, sslpassword).  SQL text shows up in statistics,
 * activity views and sampled logs that no setting of one session can turn
 * off, so the other server authenticates with what it holds itself: a
 * password file (passfile, PGPASSFILE or ~/.pgpass of its operating system
 * user), a certificate, or a trusted address.
 */
char *
RemoteConninfo(Oid serverid)
{
	bool		password_required;
	bool		has_password;
	List	   *opts = RemoteOptionList(serverid, &password_required, &has_password);
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, opts)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "password") == 0 || strcmp(d->defname, "sslpassword") == 0)
			continue;
		appendStringInfo(&buf, "%s%s=", buf.len > 0 ? " " : "", d->defname);
		AppendConninfoValue(&buf, defGetString(d));
	}
	return buf.data;
}

/*
 * Ask a foreign server something for a report that must go on past a
 * server that cannot answer: connect, run ask(rc, arg), close, all in a
 * subtransaction.  Returns NULL, or the message of what went wrong (an
 * unreachable server, a failed query), the subtransaction rolled back.  A
 * cancelled statement stays cancelled.
 */
char *
RemoteAsk(Oid serverid, RemoteAskFn ask, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	RemoteConn *volatile rc = NULL;
	char	   *volatile problem = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		rc = RemoteConnect(serverid);
		ask(rc, arg);
		RemoteClose(rc);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		if (e->sqlerrcode == ERRCODE_QUERY_CANCELED || e->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			PG_RE_THROW();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		RemoteClose(rc);
		problem = e->message;
	}
	PG_END_TRY();
	return problem;
}
