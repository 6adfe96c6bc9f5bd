/*
 * testpoint.c
 *		Pause points for the isolation tests: a backend whose
 *		snowseq.test_pause_at names a point stops there until a lock is free,
 *		so a spec can run another session in that instant, as Citus's
 *		ConflictWithIsolationTestingBeforeCopy lets its specs do.
 *
 * The wait is on an ordinary advisory lock (SNOWSEQ_TESTPOINT_LOCK), so the
 * isolation tester sees the paused session as blocked and the wait is
 * cancellable like any lock wait.  The setting is PGC_SUSET: only a role
 * that may change superuser settings (or was granted SET on it) can pause
 * its own backend; nobody can pause another's.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/guc.h"

#include "testpoint.h"

char	   *snowseq_test_pause_at = NULL;

/* Define the setting that names the pause point. */
void
TestPointInit(void)
{
	DefineCustomStringVariable("snowseq.test_pause_at",
							   "Pause point for isolation tests (testing only).",
							   "A backend reaching the named point waits for the "
							   "advisory lock 7236949375.",
							   &snowseq_test_pause_at, "",
							   PGC_SUSET, GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);
}

/* Wait at point name if the setting names it, for the test lock to be free. */
void
TestPointWait(const char *name)
{
	LOCKTAG		tag;
	uint64		key = (uint64) SNOWSEQ_TESTPOINT_LOCK;

	if (strcmp(snowseq_test_pause_at, name) != 0)
		return;
	/* as pg_advisory_xact_lock_shared(bigint) takes it */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32),
						 (uint32) key, 1);
	(void) LockAcquire(&tag, ShareLock, false, false);
	LockRelease(&tag, ShareLock, false);
}
