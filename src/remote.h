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
#include "sqlrun.h"

/*
 * The locks of moves: advisory lock tags whose fourth field is
 * SNOWSEQ_LOCK_FIELD4.  pg_advisory_lock() and its kin set it to 1 (one
 * bigint key) or 2 (two int4 keys), so no SQL role can take, wait for or
 * squat on these; snowseq takes them in C only: on the router for a move's
 * record (move_common.c), on the source for its fences (fence.c, through
 * snowseq_fence_hold, which is not for PUBLIC).  The classes (the second
 * field):  a move holds SNOWSEQ_LOCK_MOVE with its id on the router for its
 * whole life, so a record whose lock is free belongs to a move that ended
 * or died (with id 0, a transaction lock, it orders the start of moves).
 * On the source, the mover's session holds SNOWSEQ_LOCK_ALIVE with the
 * fence id from the first block to the end, and SNOWSEQ_LOCK_BLOCK while
 * writers of the fenced range must wait.  A merge of partitions holds
 * SNOWSEQ_LOCK_MERGE with its id on the router as a move holds its lock
 * (merge.c), and also orders its start with SNOWSEQ_LOCK_MOVE 0.  pg_locks
 * shows them as advisory locks with classid the class, objid the id and
 * objsubid 21326.
 */
#define SNOWSEQ_LOCK_FIELD4		0x534E
#define SNOWSEQ_LOCK_MOVE		0x534E4D31
#define SNOWSEQ_LOCK_BLOCK		0x534E4D32
#define SNOWSEQ_LOCK_ALIVE		0x534E4D33
#define SNOWSEQ_LOCK_MERGE		0x534E4D34

/* The lock tag of a lock of moves in this database (storage/lock.h). */
#define SET_LOCKTAG_SNOWSEQ(tag, cls, id) \
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (cls), (uint32) (id), SNOWSEQ_LOCK_FIELD4)

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
extern char *RemoteConninfo(Oid serverid);
extern void RemoteCheckUsableAs(RemoteConn *rc);

#endif							/* SNOWSEQ_REMOTE_H */
