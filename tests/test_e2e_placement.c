/*
 * End-to-end tests of where actors run on the production backend (epoll,
 * pthreads), through the public API only (the actors: sched_fixture.h):
 *   - stealing under imbalance (and never under balanced light load), with
 *     each actor still run by one worker at a time;
 *   - placement: per-worker addresses, round-robin addresses, sh_spawn_on.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#include "sched_fixture.h"

/* ---- stealing --------------------------------------------------------------- */

/* 200 busy actors all on worker 0, worker 1 idle: worker 1 must steal, every
 * notice must be handled exactly once, and no actor may run on two workers
 * at the same time. */
static void test_imbalance_is_stolen(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *a[STEAL_ACTORS];
  for (int i = 0; i < STEAL_ACTORS; i++) a[i] = th_spawn_on(sys, &probe_class, NULL, 0);
  th_set_goal(STEAL_ACTORS * STEAL_NOTICES);
  for (int n = 0; n < STEAL_NOTICES; n++)
    for (int i = 0; i < STEAL_ACTORS; i++) notify(a[i], OP_BURN, n, NULL);
  assert_int_equal(sh_system_start(sys), 0);
  sh_stats s = finish(sys);

  for (int i = 0; i < STEAL_ACTORS; i++)
    for (int n = 0; n < STEAL_NOTICES; n++) assert_int_equal(atomic_load(&g.seen[i][n]), 1);
  assert_int_equal(atomic_load(&g.overlaps), 0);
  assert_int_equal(s.delivered, STEAL_ACTORS * STEAL_NOTICES);
  assert_true(s.steals > 0);
}

/* Pairs of actors ping-ponging within their own worker, a few per worker:
 * no backlog ever passes the steal floor, so nothing is stolen. */
static void test_balanced_light_load_is_not_stolen(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *left[2 * PING_PAIRS], *right[2 * PING_PAIRS];
  for (int i = 0; i < 2 * PING_PAIRS; i++) {
    left[i] = th_spawn_on(sys, &probe_class, NULL, (uint32_t)i % 2);
    right[i] = th_spawn_on(sys, &probe_class, NULL, (uint32_t)i % 2);
  }
  th_set_goal(2 * PING_PAIRS);
  assert_int_equal(sh_system_start(sys), 0);
  for (int i = 0; i < 2 * PING_PAIRS; i++) notify(left[i], OP_PING, PING_ROUNDS, right[i]);
  sh_stats s = finish(sys);
  assert_int_equal(s.delivered, 2 * PING_PAIRS * (PING_ROUNDS + 1));
  assert_int_equal(s.steals, 0);
}

/* ---- placement --------------------------------------------------------------- */

/* A per-worker address has one instance per worker, and an ask from an actor
 * on worker w goes to the instance on worker w. */
static void test_per_worker_address_is_local(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(PLACE_WORKERS, 0);
  const sh_addr *echo = NULL;
  assert_int_equal(sh_spawn(sys, &echo_class, NULL, SH_SPAWN_PER_WORKER, &echo), 0);
  assert_int_equal(sh_addr_count(echo), PLACE_WORKERS);
  const sh_addr *prober[PLACE_WORKERS];
  for (uint32_t w = 0; w < PLACE_WORKERS; w++) prober[w] = th_spawn_on(sys, &probe_class, NULL, w);
  th_set_goal(PLACE_WORKERS);
  assert_int_equal(sh_system_start(sys), 0);
  for (uint32_t w = 0; w < PLACE_WORKERS; w++) notify(prober[w], OP_PROBE, 0, echo);
  finish(sys);
  for (int w = 0; w < PLACE_WORKERS; w++)
    assert_int_equal(atomic_load(&g.probe_reply[w]), w + 1); /* worker + 1: 0 is "none" */
}

/* K instances behind a round-robin address share notices evenly. */
static void test_round_robin_spreads_evenly(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *rr = NULL;
  assert_int_equal(sh_spawn(sys, &probe_class, NULL, ROBIN_K, &rr), 0);
  assert_int_equal(sh_addr_count(rr), ROBIN_K);
  th_set_goal(ROBIN_K * ROBIN_EACH);
  assert_int_equal(sh_system_start(sys), 0);
  for (int i = 0; i < ROBIN_K * ROBIN_EACH; i++) notify(rr, OP_COUNT, 0, NULL);
  finish(sys);
  for (int i = 0; i < ROBIN_K; i++) assert_int_equal(atomic_load(&g.count[i]), ROBIN_EACH);
}

/* sh_spawn_on puts an actor on the worker asked for: it reports that worker,
 * and actors on one worker run on one thread, distinct from the others'. */
static void test_spawn_on_places(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(PLACE_WORKERS, 0);
  const sh_addr *a[2 * PLACE_WORKERS];
  for (int i = 0; i < 2 * PLACE_WORKERS; i++)
    a[i] = th_spawn_on(sys, &probe_class, NULL, (uint32_t)(i % PLACE_WORKERS));
  th_set_goal(2 * PLACE_WORKERS);
  assert_int_equal(sh_system_start(sys), 0);
  for (int i = 0; i < 2 * PLACE_WORKERS; i++) notify(a[i], OP_WHERE, 0, NULL);
  finish(sys);
  for (int i = 0; i < 2 * PLACE_WORKERS; i++) {
    assert_int_equal(atomic_load(&g.worker[i]), i % PLACE_WORKERS);
    for (int j = 0; j < i; j++) {
      bool same_worker = i % PLACE_WORKERS == j % PLACE_WORKERS;
      assert_int_equal(pthread_equal(g.thread[i], g.thread[j]) != 0, same_worker);
    }
  }
}

static void test_spawn_on_bad_worker_is_einval(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn_on(sys, &probe_class, NULL, 2, &a), -EINVAL);
  assert_int_equal(sh_spawn_on(sys, &probe_class, NULL, UINT32_MAX, &a), -EINVAL);
  assert_null(a);
  assert_int_equal(sh_spawn_on(NULL, &probe_class, NULL, 0, &a), -EINVAL);
  assert_int_equal(atomic_load(&g.next_id), 0); /* no init hook ran */
  th_end(sys);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_imbalance_is_stolen),
      cmocka_unit_test(test_balanced_light_load_is_not_stolen),
      cmocka_unit_test(test_per_worker_address_is_local),
      cmocka_unit_test(test_round_robin_spreads_evenly),
      cmocka_unit_test(test_spawn_on_places),
      cmocka_unit_test(test_spawn_on_bad_worker_is_einval),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
