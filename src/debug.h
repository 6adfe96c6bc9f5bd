/*
 * debug.h
 *		A test build with snowseq's own assertions checked, on a server built
 *		without them: make SNOWSEQ_DEBUG=1 (test/check.sh: DEBUG_BUILD=1).
 *
 * make COPT=-DUSE_ASSERT_CHECKING is not enough for that: the server's
 * assertion machinery (ExceptionalCondition) is absent from a non-assert
 * server, and the server's own headers would then assert on fields it does
 * not have.  Instead the Makefile force-includes this header first in every
 * source file of the module (-include), so every Assert() of snowseq and of
 * the inline functions of the headers it uses becomes a check that ERRORs:
 * a broken invariant fails the statement with "assertion failed: ..." and
 * the test that caused it, and the server stays up (a failure inside a
 * critical section is a PANIC, as a real assertion would be).  Without
 * SNOWSEQ_DEBUG this header is not included and nothing changes.
 */
#ifndef SNOWSEQ_DEBUG_H
#define SNOWSEQ_DEBUG_H

#include "postgres.h"

#if defined(SNOWSEQ_DEBUG) && !defined(USE_ASSERT_CHECKING)

/* ERROR for a failed assertion (a function, so that expressions can use it). */
pg_attribute_noreturn()
static inline void
SnowseqAssertFailed(const char *condition, const char *file, int line)
{
	elog(ERROR, "assertion failed: %s at %s:%d", condition, file, line);
	pg_unreachable();
}

#undef Assert
#undef AssertMacro
#undef AssertArg
#undef AssertState

#define Assert(condition) \
	do { \
		if (unlikely(!(condition))) \
			SnowseqAssertFailed(CppAsString(condition), __FILE__, __LINE__); \
	} while (0)
#define AssertMacro(condition) \
	((void) (likely(condition) || \
			 (SnowseqAssertFailed(CppAsString(condition), __FILE__, __LINE__), 0)))
#define AssertArg(condition)	Assert(condition)
#define AssertState(condition)	Assert(condition)

#endif							/* SNOWSEQ_DEBUG && !USE_ASSERT_CHECKING */

#endif							/* SNOWSEQ_DEBUG_H */
