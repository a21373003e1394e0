/*
 * Test scenarios for shsim's classification of a run's end: each fails on
 * purpose, in one way, from inside an actor, and shsim must name that way.
 * Hidden (never in `all` or a sweep) and simulator only (on the epoll
 * backend an assert or a crash would take the runner down).
 *
 *   test_assert     an actor's assert() fails: the process aborts
 *                   (FAIL:assert);
 *   test_crash      an actor reads through a NULL pointer: SIGSEGV
 *                   (FAIL:crash; FAIL:sanitizer in sanitizer builds, where
 *                   the sanitizer reports the fault first);
 *   test_invariant  an actor's SH_SCN_CHECK fails, then it ends the
 *                   workload (FAIL:invariant);
 *   test_nondeterministic  passes, but each run in one process places its
 *                   actor on another worker than the run before: it
 *                   keeps state across runs, the way a workload that
 *                   reads the real clock or an address is not a function
 *                   of its seed (FAIL:nondeterministic under
 *                   --check-determinism, which runs a seed twice).
 *
 * Only test_invariant sets `expect`: the simulator's own tests run every
 * hidden scenario with an `expect` in-process and read the kind from
 * sh_scn_result, and the other two end the process instead of reporting.
 * Their summaries say what they must end with.
 */
#include <assert.h>
#include <stddef.h>

#include <stackhouse/scenario.h>

/* How the failer fails: the n of its start notice. Never 0, so that a
 * notice without one (n = 0) fails no way at all and the run passes,
 * which the tests would notice. */
typedef enum tf_how {
  TF_ASSERT = 1,
  TF_CRASH,
  TF_INVARIANT,
  TF_PASS,
} tf_how;

/* The compiler must not see that the pointer is NULL, or it may drop the
 * read or put a trap in its place: it is read from a volatile object. */
static int tf_crash(void) {
  int *volatile nowhere = NULL;
  return *(volatile int *)nowhere;
}

/* The way is known at run time only (it comes in the notice), so none of
 * the failures below can be folded away at compile time. If one does not
 * happen (an assert compiled out by NDEBUG), the run ends ok: a test
 * expecting the failure sees that. */
static sh_yield tf_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  uint32_t how = sh_scn_go_n(st);
  if (how == TF_ASSERT) assert(how != TF_ASSERT && "test_assert fails on purpose");
  if (how == TF_CRASH) SH_SCN_CHECK(s, tf_crash() == 0, "test_crash read through NULL and lived");
  /* A mark on the trace's timeline (shsim run test_invariant --trace F). */
  if (how == TF_INVARIANT) sh_scn_note(s, "failer: the check below fails on purpose");
  if (how == TF_INVARIANT) SH_SCN_CHECK(s, false, "test_invariant fails on purpose");
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class tf_class = {
    .name = "failer",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = tf_notice,
};

/* One failer on `worker`, told how to fail. */
static int tf_start_on(sh_scn *s, sh_system *sys, tf_how how, uint32_t worker) {
  const sh_addr *a;
  int rc = sh_scn_spawn_on(s, sys, &tf_class, 0, worker, &a);
  return rc == 0 ? sh_scn_kick_n(a, how) : rc;
}

static int tf_start(sh_scn *s, sh_system *sys, tf_how how) { return tf_start_on(s, sys, how, 0); }

/* Deliberately outside the run's state, which is zeroed for each run. */
static uint32_t tf_runs;

static int tf_nondeterministic_setup(sh_scn *s, sh_system *sys) {
  return tf_start_on(s, sys, TF_PASS, tf_runs++ % 2);
}

static int tf_assert_setup(sh_scn *s, sh_system *sys) { return tf_start(s, sys, TF_ASSERT); }
static int tf_crash_setup(sh_scn *s, sh_system *sys) { return tf_start(s, sys, TF_CRASH); }
static int tf_invariant_setup(sh_scn *s, sh_system *sys) { return tf_start(s, sys, TF_INVARIANT); }

static const sh_scenario test_assert = {
    .name = "test_assert",
    .summary = "must fail (FAIL:assert): an actor's assert() fails",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    /* No `expect`: it aborts the process (see the top of the file). */
    .setup = tf_assert_setup,
};
SH_SCENARIO(test_assert);

static const sh_scenario test_crash = {
    .name = "test_crash",
    .summary = "must fail (FAIL:crash, or FAIL:sanitizer under one): an actor reads through NULL",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    /* No `expect`: it kills the process (see the top of the file). */
    .setup = tf_crash_setup,
};
SH_SCENARIO(test_crash);

static const sh_scenario test_invariant = {
    .name = "test_invariant",
    .summary = "must fail: an actor's invariant check fails, then it ends the workload",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "invariant",
    .setup = tf_invariant_setup,
};
SH_SCENARIO(test_invariant);

static const sh_scenario test_nondeterministic = {
    .name = "test_nondeterministic",
    .summary = "must fail under --check-determinism: each run places its actor elsewhere",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    /* No `expect`: one run passes; only two runs in one process differ. */
    .setup = tf_nondeterministic_setup,
};
SH_SCENARIO(test_nondeterministic);
