/*
 * twophase.h
 *		The two-phase commands on another server (twophase.c): prepare a
 *		transaction under a name, commit or roll it back, find it.  The one
 *		place that writes them: a move's switch and revert, a merge's switch,
 *		cleanup by records and a schema change's servers all go through it.
 */
#ifndef SNOWSEQ_TWOPHASE_H
#define SNOWSEQ_TWOPHASE_H

#include "remote.h"

typedef enum TwoPhaseStep
{
	TWOPHASE_PREPARE,			/* PREPARE TRANSACTION */
	TWOPHASE_COMMIT,			/* COMMIT PREPARED */
	TWOPHASE_ROLLBACK			/* ROLLBACK PREPARED */
} TwoPhaseStep;

extern char *TwoPhaseStatement(TwoPhaseStep step, const char *gid);
extern void TwoPhasePrepare(RemoteConn *rc, const char *gid, const char *what);
extern void TwoPhaseEnd(RemoteConn *rc, const char *gid, bool commit, const char *what);
extern bool TwoPhaseExists(RemoteConn *rc, const char *gid, const char *what);
extern PGresult *TwoPhaseList(RemoteConn *rc, const char *what);

#endif
