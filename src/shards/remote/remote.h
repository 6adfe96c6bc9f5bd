/*
 * remote.h
 *		Sessions on other servers over libpq (remote.c): one typed helper per
 *		kind of remote command.
 */
#ifndef SNOWSEQ_REMOTE_H
#define SNOWSEQ_REMOTE_H

#include "libpq-fe.h"
#include "sqlrun.h"
#include "shard_locks.h"

/* a session on another server, opened from a postgres_fdw server */
typedef struct RemoteConn
{
	PGconn	   *conn;
	char	   *server;			/* foreign server name, for messages */
	Oid			serverid;
	char	   *extschema;		/* quoted schema of snowseq there, or NULL */
	char	   *extversion;		/* its version, or NULL */
	bool		password_required;	/* the mapping's password_required (default
									 * true; only a superuser sets false) */
} RemoteConn;

/* remote.c */
extern RemoteConn *RemoteConnect(Oid serverid);
extern void RemoteClose(RemoteConn *rc);
extern bool RemoteUsable(RemoteConn *rc);
extern PGresult *RemoteExec(RemoteConn *rc, const char *sql, const char *what);
extern PGresult *RemoteExecParams(RemoteConn *rc, const char *sql, int nargs,
								  const char *const *values, const char *what);
extern void RemoteCommandParams(RemoteConn *rc, const char *sql, int nargs,
								const char *const *values, const char *what);
extern char *RemoteValueParams(RemoteConn *rc, const char *sql, int nargs,
							   const char *const *values, const char *what);
extern void RemoteCommand(RemoteConn *rc, const char *sql, const char *what);
extern void RemoteCommandSingle(RemoteConn *rc, const char *sql, const char *what);
extern bool RemoteTry(RemoteConn *rc, const char *sql, const char *what, char *sqlstate);
extern bool RemoteTryParams(RemoteConn *rc, const char *sql, int nargs,
							const char *const *values, const char *what, char *sqlstate);
extern PGresult *RemoteTryExecParams(RemoteConn *rc, const char *sql, int nargs, const char *const *values,
									 const char *what, char *sqlstate);
extern char *RemoteTryMessage(RemoteConn *rc, const char *sql, const char *what, char *sqlstate);
extern char *RemoteTryMessageParams(RemoteConn *rc, const char *sql, int nargs,
									const char *const *values, const char *what,
									char *sqlstate);
extern char *RemoteValue(RemoteConn *rc, const char *sql, const char *what);

/* what RemoteAsk runs on a server, with the caller's argument */
typedef void (*RemoteAskFn) (RemoteConn *rc, void *arg);
extern char *RemoteAsk(Oid serverid, RemoteAskFn ask, void *arg);
extern char *RemoteConninfo(Oid serverid);
extern void RemoteCheckUsableAs(RemoteConn *rc);

#endif							/* SNOWSEQ_REMOTE_H */
