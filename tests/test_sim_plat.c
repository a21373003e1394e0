/*
 * Tests of the simulator's seam for threads that are not workers
 * (backend-sim/plat.c): thread fibers and the events they wait on, on a real
 * simulated system (sh_system_new / start on libstackhouse-sim.a;
 * sim_plat_fixture.h):
 *   - thread fibers run fn with sh_plat_local() NULL and are joined, from
 *     the outside fiber and from a thread fiber; a worker (an actor's
 *     handler) may start one too;
 *   - no thread fiber without a started system (-EINVAL); at most
 *     SH_PLAT_MAX_THREADS alive at a time (-EAGAIN), a joined one's slot reused;
 *   - an event wait with a deadline from a thread fiber (and from the
 *     outside fiber) times out at its deadline, reached by a jump of the
 *     virtual clock; a set from a worker or from another thread fiber ends
 *     it with 0; reset clears a set; a deadline already past is a poll;
 *   - the workers can be joined (shutdown) while a thread fiber still runs;
 *   - a thread fiber blocked for good while every worker sleeps is
 *     FAIL:deadlock (in a fork()ed child: a failed simulation cannot go on).
 * Determinism, replay and traces of runs with thread fibers are
 * test_sim_plat_determinism.c's.
 * No real-time assertion: every time here is virtual.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm, mkstemp */
#endif

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/sim.h>
#include <stackhouse/stackhouse.h>

#include "plat.h"
#include "support/child.h"

#include "sim_plat_fixture.h"

/* A child simulation that should have failed by now hangs instead. */
#define CHILD_WATCHDOG_S 60
#define MS_NS UINT64_C(1000000)

static void configure(uint64_t seed, sh_sim_strategy strategy) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  sh_sim_configure(&o);
}

/* ---- thread fibers: run, join, limits -------------------------------------------- */

typedef struct rec {
  int runs;
  int local_null; /* sh_plat_local() was NULL in it: not a worker */
  int inner_rc;   /* a nested start's result (nest only) */
  int inner_runs;
} rec;

static void count_fn(void *arg) {
  rec *r = arg;
  r->local_null += sh_plat_local() == NULL;
  for (int i = 0; i < 10; i++) sh_plat_yield("test");
  r->runs++;
}

/* A thread fiber that starts and joins one of its own. */
static void nest_fn(void *arg) {
  rec *r = arg;
  static rec inner;
  inner = (rec){0};
  sh_plat_thread *t = NULL;
  r->inner_rc = sh_plat_thread_start(count_fn, &inner, &t);
  if (r->inner_rc == 0) sh_plat_thread_join(t);
  r->inner_runs = inner.runs;
  count_fn(r);
}

static void test_threads_run_and_join(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    configure(1 + k, strategies[k]);
    sh_system *sys = system_up();
    rec r[3] = {{0}}, nest = {0}, from_worker = {0};
    sh_plat_thread *t[3], *tn = NULL, *tw = NULL;
    for (int i = 0; i < 3; i++) assert_int_equal(sh_plat_thread_start(count_fn, &r[i], &t[i]), 0);
    assert_int_equal(sh_plat_thread_start(nest_fn, &nest, &tn), 0);
    /* A worker starts one: the actor's handler runs on worker 1. */
    act_cfg c = {.start = count_fn, .start_arg = &from_worker, .started = &tw, .exit_after = 1};
    const sh_addr *a = spawn_act(sys, &c, 1);
    assert_int_equal(send_poke(a), 0);
    assert_int_equal(sh_system_wait(sys), 0);
    assert_int_equal(c.start_rc, 0);
    assert_non_null(tw);
    for (int i = 2; i >= 0; i--) sh_plat_thread_join(t[i]);
    sh_plat_thread_join(tn);
    sh_plat_thread_join(tw);
    system_down(sys);
    for (int i = 0; i < 3; i++) {
      assert_int_equal(r[i].runs, 1);
      assert_int_equal(r[i].local_null, 1);
    }
    assert_int_equal(nest.runs, 1);
    assert_int_equal(nest.inner_rc, 0);
    assert_int_equal(nest.inner_runs, 1);
    assert_int_equal(from_worker.runs, 1);
    assert_int_equal(from_worker.local_null, 1);
  }
}

static void noop_fn(void *arg) { (void)arg; }

static void test_thread_needs_started_system(void **state) {
  (void)state;
  configure(1, SH_SIM_RANDOM);
  sh_plat_thread *t = (sh_plat_thread *)0x1;
  assert_int_equal(sh_plat_thread_start(noop_fn, NULL, &t), -EINVAL); /* no system */
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = WORKERS;
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(&cfg, &sys), 0);
  assert_int_equal(sh_plat_thread_start(noop_fn, NULL, &t), -EINVAL); /* not started */
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_plat_thread_start(NULL, NULL, &t), -EINVAL);
  assert_int_equal(sh_plat_thread_start(noop_fn, NULL, NULL), -EINVAL);
  assert_ptr_equal(t, (sh_plat_thread *)0x1); /* untouched on failure */
  system_down(sys);
  assert_int_equal(sh_plat_thread_start(noop_fn, NULL, &t), -EINVAL); /* freed */
}

static void test_thread_limit(void **state) {
  (void)state;
  configure(3, SH_SIM_PCT);
  sh_system *sys = system_up();
  rec r = {0};
  /* The limit counts threads alive at a time: joined ones free their slot. */
  sh_plat_thread *ts[SH_PLAT_MAX_THREADS];
  for (int i = 0; i < SH_PLAT_MAX_THREADS; i++) {
    assert_int_equal(sh_plat_thread_start(count_fn, &r, &ts[i]), 0);
  }
  sh_plat_thread *t = NULL;
  assert_int_equal(sh_plat_thread_start(count_fn, &r, &t), -EAGAIN);
  assert_null(t);
  for (int i = 0; i < SH_PLAT_MAX_THREADS; i++) sh_plat_thread_join(ts[i]);
  assert_int_equal(sh_plat_thread_start(count_fn, &r, &t), 0);
  sh_plat_thread_join(t);
  system_down(sys);
  assert_int_equal(r.runs, SH_PLAT_MAX_THREADS + 1);
  /* The next system has its own slots. */
  sys = system_up();
  assert_int_equal(sh_plat_thread_start(count_fn, &r, &t), 0);
  sh_plat_thread_join(t);
  system_down(sys);
  assert_int_equal(r.runs, SH_PLAT_MAX_THREADS + 2);
}

/* ---- events: timed waits ----------------------------------------------------------- */

typedef struct timed {
  sh_plat_event *e;
  uint64_t timeout_ns;
  uint64_t start, deadline, end; /* virtual times */
  uint64_t jumps_before, jumps_after;
  int rc;
  int waiting; /* the waiter is in (or about to enter) its wait */
} timed;

static uint64_t jumps_now(void) {
  sh_sim_report rep;
  sh_sim_report_get(&rep);
  return rep.jumps;
}

static void timed_wait(timed *w) {
  w->start = sh_plat_now_ns();
  w->deadline = w->start + w->timeout_ns;
  w->jumps_before = jumps_now();
  w->waiting = 1;
  w->rc = sh_plat_event_wait_until(w->e, w->deadline);
  w->end = sh_plat_now_ns();
  w->jumps_after = jumps_now();
}

static void timed_fn(void *arg) { timed_wait(arg); }

/* Nothing sets the event: the wait ends at its deadline, which the clock
 * reaches by a jump once every worker sleeps. */
static void check_timed_out(const timed *w) {
  assert_int_equal(w->rc, -ETIMEDOUT);
  assert_true(w->end >= w->deadline);
  assert_true(w->jumps_after > w->jumps_before);
}

static void test_wait_until_times_out(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    configure(7, strategies[k]);
    sh_system *sys = system_up();
    timed w = {.timeout_ns = 5 * MS_NS};
    assert_int_equal(sh_plat_event_new(&w.e), 0);
    sh_plat_thread *t = NULL;
    assert_int_equal(sh_plat_thread_start(timed_fn, &w, &t), 0);
    sh_plat_thread_join(t);
    check_timed_out(&w);
    /* The outside fiber waits the same way. */
    timed o = {.e = w.e, .timeout_ns = 3 * MS_NS};
    timed_wait(&o);
    check_timed_out(&o);
    sh_plat_event_free(w.e);
    system_down(sys);
  }
}

static void test_wait_until_set_by_worker(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    configure(11, strategies[k]);
    sh_system *sys = system_up();
    /* Far beyond anything else in the run: only the set can end it. */
    timed w = {.timeout_ns = 3600000 * MS_NS};
    assert_int_equal(sh_plat_event_new(&w.e), 0);
    act_cfg c = {.set = w.e};
    const sh_addr *a = spawn_act(sys, &c, 0);
    sh_plat_thread *t = NULL;
    assert_int_equal(sh_plat_thread_start(timed_fn, &w, &t), 0);
    assert_int_equal(send_poke(a), 0);
    sh_plat_thread_join(t);
    assert_int_equal(w.rc, 0);
    assert_true(w.end < w.deadline);
    assert_int_equal(c.pokes, 1);
    system_down(sys);
    sh_plat_event_free(w.e);
  }
}

/* Sets w's event once w waits: the set finds it blocked (or about to be). */
static void setter_fn(void *arg) {
  timed *w = arg;
  /* Bounded: the waiter runs whenever this one yields its CPU. */
  while (!w->waiting) sh_plat_yield_cpu();
  sh_plat_event_set(w->e);
}

static void test_wait_until_set_by_thread(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    for (uint64_t seed = 1; seed <= 5; seed++) {
      configure(seed, strategies[k]);
      sh_system *sys = system_up();
      timed w = {.timeout_ns = 3600000 * MS_NS};
      assert_int_equal(sh_plat_event_new(&w.e), 0);
      sh_plat_thread *tw = NULL, *ts = NULL;
      assert_int_equal(sh_plat_thread_start(setter_fn, &w, &ts), 0);
      assert_int_equal(sh_plat_thread_start(timed_fn, &w, &tw), 0);
      sh_plat_thread_join(ts);
      sh_plat_thread_join(tw);
      assert_int_equal(w.rc, 0);
      assert_true(w.end < w.deadline);
      sh_plat_event_free(w.e);
      system_down(sys);
    }
  }
}

static void test_event_reset_and_poll(void **state) {
  (void)state;
  configure(5, SH_SIM_RANDOM);
  sh_system *sys = system_up();
  sh_plat_event *e = NULL;
  assert_int_equal(sh_plat_event_new(&e), 0);
  sh_plat_event_set(e);
  /* Set stays set: no wait, no time passes. */
  uint64_t t0 = sh_plat_now_ns();
  assert_int_equal(sh_plat_event_wait_until(e, t0 + MS_NS), 0);
  assert_int_equal(sh_plat_event_wait_until(e, 0), 0);
  sh_plat_event_wait(e);
  assert_true(sh_plat_now_ns() == t0);
  sh_plat_event_reset(e);
  /* A deadline already past: a poll (one scheduling step), -ETIMEDOUT. */
  assert_int_equal(sh_plat_event_wait_until(e, 0), -ETIMEDOUT);
  assert_int_equal(sh_plat_event_wait_until(e, sh_plat_now_ns()), -ETIMEDOUT);
  assert_true(sh_plat_now_ns() > t0);
  /* Cleared: a wait runs to its deadline. */
  uint64_t d = sh_plat_now_ns() + 2 * MS_NS;
  assert_int_equal(sh_plat_event_wait_until(e, d), -ETIMEDOUT);
  assert_true(sh_plat_now_ns() >= d);
  sh_plat_event_set(e);
  assert_int_equal(sh_plat_event_wait_until(e, sh_plat_now_ns() + MS_NS), 0);
  sh_plat_event_free(e);
  system_down(sys);
}

/* With no worker running, a timed wait is a jump of the clock to its deadline. */
static void test_wait_until_without_system(void **state) {
  (void)state;
  configure(1, SH_SIM_RANDOM);
  sh_plat_event *e = NULL;
  assert_int_equal(sh_plat_event_new(&e), 0);
  uint64_t d = sh_plat_now_ns() + 4 * MS_NS;
  assert_int_equal(sh_plat_event_wait_until(e, d), -ETIMEDOUT);
  assert_true(sh_plat_now_ns() >= d);
  sh_plat_event_set(e);
  assert_int_equal(sh_plat_event_wait_until(e, SH_PLAT_NO_DEADLINE), 0);
  sh_plat_event_free(e);
}

/* The workers are joined (shutdown) while a thread fiber still waits; it
 * goes on alone afterwards, and is joined before the system is freed. */
static void test_shutdown_while_thread_runs(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    configure(13, strategies[k]);
    sh_system *sys = system_up();
    timed w = {.timeout_ns = 50 * MS_NS};
    assert_int_equal(sh_plat_event_new(&w.e), 0);
    sh_plat_thread *t = NULL;
    assert_int_equal(sh_plat_thread_start(timed_fn, &w, &t), 0);
    assert_int_equal(sh_system_shutdown(sys), 0);
    sh_plat_thread_join(t);
    sh_system_free(sys);
    check_timed_out(&w);
    sh_plat_event_free(w.e);
  }
}

/* ---- deadlock ------------------------------------------------------------------------ */

static void child_failure(const char *kind, const char *detail) {
  (void)detail;
  th_child_write(kind);
  _exit(0);
}

static sh_plat_event *never_set;

static void wait_forever_fn(void *arg) {
  (void)arg;
  sh_plat_event_wait(never_set);
}

/* A thread fiber waits for good; the outside joins it (how 0) or waits for
 * the system (how 1), which nothing ends: every fiber sleeps, no deadline. */
static void deadlock_body(const void *arg) {
  int how = *(const int *)arg;
  sh_sim_on_failure(child_failure);
  configure(1, SH_SIM_RANDOM);
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = WORKERS;
  sh_system *sys = NULL;
  if (sh_system_new(&cfg, &sys) != 0 || sh_system_start(sys) != 0) _exit(3);
  if (sh_plat_event_new(&never_set) != 0) _exit(3);
  sh_plat_thread *t = NULL;
  if (sh_plat_thread_start(wait_forever_fn, NULL, &t) != 0) _exit(3);
  if (how == 0)
    sh_plat_thread_join(t);
  else
    (void)sh_system_wait(sys);
  _exit(2); /* should not get here */
}

static void test_deadlock_thread_blocked(void **state) {
  (void)state;
  for (int how = 0; how < 2; how++) {
    char kind[64];
    int status = th_in_child(deadlock_body, &how, CHILD_WATCHDOG_S, kind, sizeof(kind));
    if (status != 0 || strcmp(kind, "deadlock") != 0)
      fprintf(stderr, "deadlock case %d: ended with \"%s\" (child status %d)\n", how, kind,
              status);
    assert_int_equal(status, 0);
    assert_string_equal(kind, "deadlock");
  }
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(unexpected_failure);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_run_and_join),
      cmocka_unit_test(test_thread_needs_started_system),
      cmocka_unit_test(test_thread_limit),
      cmocka_unit_test(test_wait_until_times_out),
      cmocka_unit_test(test_wait_until_set_by_worker),
      cmocka_unit_test(test_wait_until_set_by_thread),
      cmocka_unit_test(test_event_reset_and_poll),
      cmocka_unit_test(test_wait_until_without_system),
      cmocka_unit_test(test_shutdown_while_thread_runs),
      cmocka_unit_test(test_deadlock_thread_blocked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
