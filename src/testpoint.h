/*
 * testpoint.h
 *		Pause points for the isolation tests (testpoint.c).
 */
#ifndef SNOWSEQ_TESTPOINT_H
#define SNOWSEQ_TESTPOINT_H

/*
 * The advisory lock a paused backend waits for: a spec's controlling
 * session takes pg_advisory_lock(SNOWSEQ_TESTPOINT_LOCK) first and releases
 * it when the paused session may go on.
 */
#define SNOWSEQ_TESTPOINT_LOCK	INT64CONST(7236949375)

extern char *snowseq_test_pause_at;

extern void TestPointInit(void);
extern void TestPointWait(const char *name);

/* one comparison when no test is running */
#define SNOWSEQ_TESTPOINT(name) \
	do { \
		if (unlikely(snowseq_test_pause_at != NULL && \
					 snowseq_test_pause_at[0] != '\0')) \
			TestPointWait(name); \
	} while (0)

#endif							/* SNOWSEQ_TESTPOINT_H */
