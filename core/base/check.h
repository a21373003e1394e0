/*
 * Assertions. SH_ASSERT is for programming errors and stated bounds, and
 * stays on in every build, release included: each one is a compare and a
 * predicted branch, and a runtime that silently runs on past a broken
 * invariant corrupts memory far from the cause. SH_DEBUG_ASSERT is for
 * checks that cost more than that (a walk of a list or a table): it is
 * compiled only into the test builds (SH_DEBUG: the asan, tsan and
 * coverage configurations). SH_INVARIANT states a property of the
 * runtime's bookkeeping that the production library need not pay for even
 * as a compare: it is compiled into the test builds and the simulation
 * builds (SH_SIM), where runs are made to break it. A failed check prints
 * the expression and its place, then aborts.
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

/* For a check that needs bookkeeping of its own (who holds a lock, how
 * many links a list has), SH_CHECKED is defined for the bookkeeping's #if. */
#if defined(SH_SIM) || defined(SH_DEBUG)
#define SH_CHECKED 1
#define SH_INVARIANT(c) SH_ASSERT(c)
#else
#define SH_INVARIANT(c) ((void)sizeof(!(c))) /* not evaluated; its names count as used */
#endif

#endif
