/*
 * twophase.c
 *		The two-phase commands on another server, written once.
 *
 * A move's switch prepares the source's transaction (and a revert's the
 * destination's) under the move's token, a merge's switch the server's
 * under the merge's, a schema change each server's under a name that says
 * whose it is (shard_ddl_xact.c); the router's commit decides them, and
 * until then each holds its tables.  What a dead router left prepared is
 * decided later by the records (cleanup, the resolver).  PREPARE
 * TRANSACTION, COMMIT PREPARED and ROLLBACK PREPARED take no parameters,
 * so the name is quoted into the statement; every lookup of a name goes
 * as a parameter, and only in this database.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "twophase.h"

/* The statement of one step of a prepared transaction named gid. */
char *
TwoPhaseStatement(TwoPhaseStep step, const char *gid)
{
	switch (step)
	{
		case TWOPHASE_PREPARE:
			return psprintf("PREPARE TRANSACTION %s", quote_literal_cstr(gid));
		case TWOPHASE_COMMIT:
			return psprintf("COMMIT PREPARED %s", quote_literal_cstr(gid));
		case TWOPHASE_ROLLBACK:
			return psprintf("ROLLBACK PREPARED %s", quote_literal_cstr(gid));
	}
	elog(ERROR, "unknown two-phase step %d", (int) step);
	return NULL;				/* keep the compiler quiet */
}

/* Prepare the transaction open on rc under the name gid. */
void
TwoPhasePrepare(RemoteConn *rc, const char *gid, const char *what)
{
	RemoteCommand(rc, TwoPhaseStatement(TWOPHASE_PREPARE, gid), what);
}

/* Commit or roll back the transaction prepared on rc as gid. */
void
TwoPhaseEnd(RemoteConn *rc, const char *gid, bool commit, const char *what)
{
	RemoteCommand(rc, TwoPhaseStatement(commit ? TWOPHASE_COMMIT : TWOPHASE_ROLLBACK, gid), what);
}

/* Whether a transaction named gid is prepared in rc's database. */
bool
TwoPhaseExists(RemoteConn *rc, const char *gid, const char *what)
{
	char	   *v = RemoteValueParams(rc, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_xacts "
									  "WHERE gid OPERATOR(pg_catalog.=) $1::pg_catalog.text "
									  "AND database OPERATOR(pg_catalog.=) pg_catalog.current_database())",
									  SQL_ARGS(gid), what);

	return strcmp(v, "t") == 0;
}

/* The names of the transactions prepared in rc's database, one column, in order. */
PGresult *
TwoPhaseList(RemoteConn *rc, const char *what)
{
	return RemoteExec(rc, "SELECT gid FROM pg_catalog.pg_prepared_xacts "
					  "WHERE database OPERATOR(pg_catalog.=) pg_catalog.current_database() ORDER BY gid",
					  what);
}
