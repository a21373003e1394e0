/*
 * Tests of the simulator's report of a program that leaves the simulated
 * world, through the public headers:
 *   - the scenarios' test_misuse_* end with their kind, and the detail names
 *     the call, the fiber and where it was called or interrupted: a real
 *     sleep in setup (blocking, usleep, the outside thread), a real pthread
 *     (blocking, pthread_create), a busy loop on a flag (hang, worker 0,
 *     its last scheduling point); this file's sched_yield in an actor names
 *     the worker it runs on;
 *   - a real thread started before the run that then enters the runtime is
 *     FAIL:thread, naming the entry point (in a forked child);
 *   - a program is not affected otherwise: the same calls work outside a
 *     run, before and after one, and a free pthread mutex taken and given
 *     back by an actor is no failure.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

#include "support/child.h"

#define WATCHDOG_S 240
#define CHILD_WATCHDOG_S 60

/* ---- this file's scenarios (hidden) ------------------------------------------ */

typedef enum tsm_how { TSM_YIELD = 1, TSM_MUTEX } tsm_how;

static pthread_mutex_t tsm_mutex = PTHREAD_MUTEX_INITIALIZER;

static sh_yield tsm_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  uint32_t how = sh_scn_go_n(st);
  if (how == TSM_YIELD) (void)sched_yield();
  if (how == TSM_MUTEX) {
    SH_SCN_CHECK(s, pthread_mutex_lock(&tsm_mutex) == 0, "lock");
    SH_SCN_CHECK(s, pthread_mutex_unlock(&tsm_mutex) == 0, "unlock");
  }
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class tsm_class = {
    .name = "tsm",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = tsm_notice,
};

/* One actor on worker 1, told what to do. */
static int tsm_start(sh_scn *s, sh_system *sys, tsm_how how) {
  const sh_addr *a;
  int rc = sh_scn_spawn_on(s, sys, &tsm_class, 0, 1, &a);
  return rc == 0 ? sh_scn_kick_n(a, how) : rc;
}

static int tsm_yield_setup(sh_scn *s, sh_system *sys) { return tsm_start(s, sys, TSM_YIELD); }
static int tsm_mutex_setup(sh_scn *s, sh_system *sys) { return tsm_start(s, sys, TSM_MUTEX); }

static const sh_scenario sim_misuse_yield = {
    .name = "sim_misuse_yield",
    .summary = "an actor on worker 1 calls sched_yield (test: FAIL:blocking)",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "blocking",
    .setup = tsm_yield_setup,
};
SH_SCENARIO(sim_misuse_yield);

static const sh_scenario sim_misuse_mutex = {
    .name = "sim_misuse_mutex",
    .summary = "an actor takes and gives back a free pthread mutex (test: passes)",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .setup = tsm_mutex_setup,
};
SH_SCENARIO(sim_misuse_mutex);

/* ---- runs of a scenario (sh_sim_run: in a child, as shsim runs it) ------------- */

static sh_sim_result run(const char *name) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  sh_sim_result r;
  assert_int_equal(sh_sim_run(name, &o, &r), 0);
  return r;
}

/* name ends with kind, and its detail has every one of the NULL-ended words. */
static void expect_failure(const char *name, const char *kind, ...) {
  sh_sim_result r = run(name);
  if (r.ok || strcmp(r.kind, kind) != 0) fprintf(stderr, "%s: %s %s\n", name, r.kind, r.detail);
  assert_false(r.ok);
  assert_string_equal(r.kind, kind);
  va_list ap;
  va_start(ap, kind);
  for (const char *w = va_arg(ap, const char *); w != NULL; w = va_arg(ap, const char *)) {
    if (strstr(r.detail, w) == NULL) fprintf(stderr, "%s: \"%s\" not in: %s\n", name, w, r.detail);
    assert_non_null(strstr(r.detail, w));
  }
  va_end(ap);
}

static void test_real_sleep(void **state) {
  (void)state;
  expect_failure("test_misuse_sleep", "blocking", "usleep", "the outside thread", "addr2line -e",
                 NULL);
}

static void test_real_thread(void **state) {
  (void)state;
  expect_failure("test_misuse_thread", "blocking", "pthread_create", "the outside thread", NULL);
}

static void test_yield_in_actor(void **state) {
  (void)state;
  expect_failure("sim_misuse_yield", "blocking", "sched_yield", "worker 1", NULL);
}

static void test_busy_loop(void **state) {
  (void)state;
  expect_failure("test_misuse_spin", "hang", "worker 0", "last scheduling point", "addr2line -e",
                 NULL);
}

/* ---- a real thread that enters the runtime ---------------------------------------- */

static int go[2];   /* the word to the foreign thread */
static int hold[2]; /* never written: the simulation's thread waits on it */
static const sh_addr *target;

static sh_yield quiet_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static const sh_actor_class quiet_class = {
    .name = "quiet",
    .size = sizeof(sh_actor),
    .notice = quiet_notice,
};

/* Started before the run: waits for the word, then sends from outside it. */
static void *foreign_main(void *arg) {
  (void)arg;
  char c;
  if (read(go[0], &c, 1) == 1) (void)sh_scn_kick(target);
  return NULL;
}

static void report(const char *kind, const char *detail) {
  char line[512];
  snprintf(line, sizeof(line), "%s: %s", kind, detail);
  th_child_write(line);
  _exit(0);
}

static void foreign_body(const void *arg) {
  (void)arg;
  sh_sim_on_failure(report);
  pthread_t th;
  if (pipe(go) != 0 || pipe(hold) != 0) _exit(3);
  if (pthread_create(&th, NULL, foreign_main, NULL) != 0) _exit(3);
  sh_sim_options o;
  sh_sim_options_default(&o);
  sh_sim_configure(&o);
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = 2;
  sh_system *sys;
  if (sh_system_new(&cfg, &sys) != 0 || sh_system_start(sys) != 0) _exit(4);
  if (sh_spawn(sys, &quiet_class, NULL, 1, &target) != 0) _exit(5);
  if (write(go[1], "g", 1) != 1) _exit(6);
  /* The simulation's thread waits (unseen: read is no call the simulator
   * checks) until the foreign thread's failure ends the process. */
  char c;
  (void)!read(hold[0], &c, 1);
  _exit(7);
}

static void test_foreign_thread(void **state) {
  (void)state;
  char out[512];
  int status = th_in_child(foreign_body, NULL, CHILD_WATCHDOG_S, out, sizeof(out));
  if (status != 0 || strncmp(out, "thread: ", 8) != 0)
    fprintf(stderr, "child status %d: %s\n", status, out);
  assert_int_equal(status, 0);
  assert_true(strncmp(out, "thread: ", 8) == 0);
  assert_non_null(strstr(out, "entered from OS thread"));
  assert_non_null(strstr(out, "sh_plat_"));
}

/* ---- a program that keeps to the rules ------------------------------------------ */

static void *nothing(void *arg) { return arg; }

/* Outside a run, the calls are the C library's. */
static void real_calls_work(void) {
  assert_int_equal(usleep(1), 0);
  assert_int_equal(sched_yield(), 0);
  struct timespec ts = {0, 1000};
  assert_int_equal(nanosleep(&ts, NULL), 0);
  assert_int_equal(poll(NULL, 0, 1), 0);
  pthread_t th;
  static int token;
  void *ret = NULL;
  assert_int_equal(pthread_create(&th, NULL, nothing, &token), 0);
  assert_int_equal(pthread_join(th, &ret), 0);
  assert_ptr_equal(ret, &token);
  assert_int_equal(pthread_mutex_lock(&tsm_mutex), 0);
  static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  struct timespec past = {0, 0};
  assert_int_equal(pthread_cond_timedwait(&cond, &tsm_mutex, &past), ETIMEDOUT);
  assert_int_equal(pthread_mutex_unlock(&tsm_mutex), 0);
  assert_int_equal(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL), 0);
  assert_int_equal(sleep(0), 0);
}

static void test_calls_outside_a_run(void **state) {
  (void)state;
  real_calls_work();
  /* A run in this process, then the calls again. */
  const sh_scenario *sc = sh_scenario_find("ask_reply");
  assert_non_null(sc);
  sh_sim_options o;
  sh_sim_options_default(&o);
  sh_sim_configure(&o);
  sh_scn_result r;
  sh_scenario_run(sc, 1, 0, &r);
  assert_true(r.ok);
  real_calls_work();
}

static void test_free_mutex_in_run(void **state) {
  (void)state;
  sh_sim_result r = run("sim_misuse_mutex");
  if (!r.ok) fprintf(stderr, "%s: %s\n", r.kind, r.detail);
  assert_true(r.ok);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_sleep),        cmocka_unit_test(test_real_thread),
      cmocka_unit_test(test_yield_in_actor),    cmocka_unit_test(test_busy_loop),
      cmocka_unit_test(test_foreign_thread),    cmocka_unit_test(test_calls_outside_a_run),
      cmocka_unit_test(test_free_mutex_in_run),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
