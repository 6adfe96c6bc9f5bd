/*
 * remote.h
 *		Sessions on other servers over libpq (remote.c), and what the files
 *		of elastic shards share with each other and with the rest of
 *		snowseq: the advisory lock classes of a move (fence.c is the source
 *		side, move*.c the router side) and the resolver's entry point.
 */
#ifndef SNOWSEQ_REMOTE_H
#define SNOWSEQ_REMOTE_H

#include "libpq-fe.h"

/*
 * Advisory lock classes (the first key of the two-int4 form).  A move holds
 * SNOWSEQ_LOCK_MOVE on the router for its whole life, so a record whose lock
 * is free belongs to a move that ended or died.  On the source, the mover's
 * session holds SNOWSEQ_LOCK_ALIVE from the first block to the end, and
 * SNOWSEQ_LOCK_BLOCK while writers of the fenced range must wait.
 */
#define SNOWSEQ_LOCK_MOVE		0x534E4D31
#define SNOWSEQ_LOCK_BLOCK		0x534E4D32
#define SNOWSEQ_LOCK_ALIVE		0x534E4D33

/* a session on another server, opened from a postgres_fdw server */
typedef struct RemoteConn
{
	PGconn	   *conn;
	char	   *server;			/* foreign server name, for messages */
	Oid			serverid;
	char	   *extschema;		/* quoted schema of snowseq there, or NULL */
	char	   *extversion;		/* its version, or NULL */
} RemoteConn;

/* remote.c */
extern RemoteConn *RemoteConnect(Oid serverid);
extern void RemoteClose(RemoteConn *rc);
extern bool RemoteUsable(RemoteConn *rc);
extern PGresult *RemoteExec(RemoteConn *rc, const char *sql, const char *what);
extern void RemoteCommand(RemoteConn *rc, const char *sql, const char *what);
extern bool RemoteTry(RemoteConn *rc, const char *sql, const char *what, char *sqlstate);
extern char *RemoteTryMessage(RemoteConn *rc, const char *sql, const char *what, char *sqlstate);
extern char *RemoteValue(RemoteConn *rc, const char *sql, const char *what);
extern char *RemoteConninfo(Oid serverid);
extern void RemoteCheckUsableAs(RemoteConn *rc);

/* move.c */
extern int	MoveResolveSwitches(int elevel);

#endif							/* SNOWSEQ_REMOTE_H */
