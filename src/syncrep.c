/*
 * syncrep.c
 *		Waiting for the synchronous standby to confirm a reservation record,
 *		whatever the session's synchronous_commit says.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/lwlock.h"

#include "compat.h"
#include "shmem.h"
#include "syncrep.h"

/*
 * Wait until the synchronous standby has flushed lsn; ERROR if the wait was
 * cancelled, so that nothing is handed out under an unconfirmed bound.
 */
void
SyncRepWaitReservation(XLogRecPtr lsn)
{
	int			saved = synchronous_commit;
	bool		confirmed;

	if (max_wal_senders == 0 || SyncRepStandbyNames == NULL || SyncRepStandbyNames[0] == '\0')
		return;

	/*
	 * SyncRepWaitForLSN waits in the mode the assign hook of
	 * synchronous_commit derives, not in the variable: run the hook too, or
	 * a session (or server) with synchronous_commit = off, local or
	 * remote_write would not wait for the standby's flush.
	 */
	synchronous_commit = SYNCHRONOUS_COMMIT_REMOTE_FLUSH;
	assign_synchronous_commit(SYNCHRONOUS_COMMIT_REMOTE_FLUSH, NULL);
	PG_TRY();
	{
		SyncRepWaitForLSN(lsn, false);
	}
	PG_FINALLY();
	{
		synchronous_commit = saved;
		assign_synchronous_commit(saved, NULL);
	}
	PG_END_TRY();

	LWLockAcquire(SyncRepLock, LW_SHARED);
	confirmed = !SnowseqSyncStandbysDefined() ||
		WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH] >= lsn;
	LWLockRelease(SyncRepLock);
	if (!confirmed)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("snowseq reservation was not confirmed by the synchronous standby"),
				 errdetail("The wait for the standby was cancelled; no ID was issued under the new reservation."),
				 errhint("Check that the synchronous standby is connected, then retry.")));
}
