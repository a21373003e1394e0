/*
 * Assertions. SH_ASSERT is for programming errors and stated bounds, and
 * stays on in every build, release included: each one is a compare and a
 * predicted branch, and a runtime that silently runs on past a broken
 * invariant corrupts memory far from the cause. SH_DEBUG_ASSERT is for
 * checks that cost more than that (a walk of a list or a table): it is
 * compiled only into the test builds (SH_DEBUG: the asan, tsan and
 * coverage configurations). A failed check prints the expression and its
 * place, then aborts.
 */
#ifndef SH_CHECK_H
#define SH_CHECK_H

_Noreturn void sh_check_fail(const char *expr, const char *file, int line);

#define SH_ASSERT(c) (__builtin_expect(!!(c), 1) ? (void)0 : sh_check_fail(#c, __FILE__, __LINE__))

#ifdef SH_DEBUG
#define SH_DEBUG_ASSERT(c) SH_ASSERT(c)
#else
#define SH_DEBUG_ASSERT(c) ((void)0)
#endif

/* SH_INVARIANT is for a check that needs bookkeeping of its own (who holds
 * a lock, how many links a list has): the simulation and test builds keep
 * it (SH_CHECKED is then defined, for the bookkeeping's #if), the
 * production library carries neither. */
#if defined(SH_SIM) || defined(SH_DEBUG)
#define SH_CHECKED 1
#define SH_INVARIANT(c) SH_ASSERT(c)
#else
#define SH_INVARIANT(c) ((void)0)
#endif

#endif
