/*
 * Idle behaviour of the epoll backend: an idle system sleeps (no spinning,
 * no periodic wakeups), a burst of sends to a busy worker costs one wakeup
 * signal at most, and pools shrink back when their worker sits idle.
 * Counts, never durations: the sleeping is seen in the park and wakeup
 * counters, which move only when a worker goes to sleep or is signalled.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stackhouse/stackhouse.h>
#include <stdatomic.h>
#include <unistd.h>

#include "support/harness.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"

typedef struct tick { sh_msg hdr; int n; } tick;
SH_MSG_DEFINE(tick, SH_NOTICE, 0);

#define BURST 1000
#define POLL_MS 10
#define POLL_MAX 500 /* 5 s at most for the system to settle */

static atomic_int handled;
static atomic_int gate; /* the first notice holds its worker until main opens it */

static sh_yield counter_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  if (atomic_fetch_add(&handled, 1) == 0) {
    while (!atomic_load(&gate)) th_sleep_ms(1);
  }
  return sh_return(st, NULL);
}
static const sh_actor_class counter_class = {
    .name = "counter", .size = sizeof(sh_actor), .notice = counter_notice};

static sh_system *start(uint64_t pool_idle_ns) {
  sh_config cfg = th_config(2);
  cfg.pool_keep = 1;
  cfg.pool_idle_ns = pool_idle_ns;
  sh_system *sys = th_system_new(&cfg);
  atomic_store(&handled, 0);
  atomic_store(&gate, 0);
  return sys;
}

static bool all_parked(sh_system *sys) {
  for (uint32_t i = 0; i < sys->nworkers; i++)
    if (atomic_load(&sys->workers[i].parked) == 0) return false;
  return true;
}

/* Waits (bounded) until every worker sleeps; false if they never do. */
static bool settle(sh_system *sys) {
  for (int i = 0; i < POLL_MAX; i++) {
    if (all_parked(sys)) return true;
    th_sleep_ms(POLL_MS);
  }
  return false;
}

static void test_idle_system_stays_asleep(void **state) {
  (void)state;
  sh_system *sys = start(30ull * 1000000000ull);
  assert_int_equal(sh_system_start(sys), 0);
  assert_true(settle(sys));
  sh_stats before, after;
  sh_system_stats(sys, &before);
  th_sleep_ms(300);
  sh_system_stats(sys, &after);
  /* A spinning or periodically waking worker would park again. */
  assert_int_equal(after.parks, before.parks);
  assert_int_equal(after.wakeups, before.wakeups);
  assert_true(all_parked(sys));
  th_end(sys);
}

static void test_burst_to_busy_worker_costs_one_wakeup(void **state) {
  (void)state;
  sh_system *sys = start(30ull * 1000000000ull);
  const sh_addr *a = th_spawn_on(sys, &counter_class, NULL, 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_true(settle(sys));
  sh_stats before, after;
  sh_system_stats(sys, &before);
  /* The first notice wakes worker 0, whose handler then holds it: every
   * other notice of the burst finds the worker awake and signals nothing. */
  for (int i = 0; i < BURST; i++) assert_int_equal(sh_notice(a, &sh_msg_new(tick, .n = i)->hdr), 0);
  atomic_store(&gate, 1);
  for (int i = 0; i < POLL_MAX && atomic_load(&handled) < BURST; i++) th_sleep_ms(POLL_MS);
  assert_int_equal(atomic_load(&handled), BURST);
  sh_system_stats(sys, &after);
  assert_int_equal(after.wakeups - before.wakeups, 1);
  th_end(sys);
}

/* Slabs the pools hold, from their counters: the only pool figures another
 * thread may read while the workers run (relaxed: statistics). */
static uint64_t slabs_held(sh_system *sys) {
  uint64_t n = 0;
  for (uint32_t w = 0; w < sys->nworkers; w++) {
    sh_pool *p = &sys->workers[w].pool;
    n += atomic_load_explicit(&p->mallocs, memory_order_relaxed) -
         atomic_load_explicit(&p->slab_frees, memory_order_relaxed);
  }
  return n;
}

/* A sleeping worker wakes up to trim its pools once they sat idle. */
static void test_idle_pools_are_trimmed(void **state) {
  (void)state;
  sh_system *sys = start(50ull * 1000000ull);
  const sh_addr *a = th_spawn_on(sys, &counter_class, NULL, 0);
  atomic_store(&gate, 1);
  assert_int_equal(sh_system_start(sys), 0);
  for (int i = 0; i < BURST; i++) assert_int_equal(sh_notice(a, &sh_msg_new(tick, .n = i)->hdr), 0);
  for (int i = 0; i < POLL_MAX && atomic_load(&handled) < BURST; i++) th_sleep_ms(POLL_MS);
  assert_int_equal(atomic_load(&handled), BURST);
  /* Stacks came from worker 0's pool and went back to it: its slabs are
   * all free, and an idle trim gives every one back. */
  assert_true(slabs_held(sys) > 0);
  bool trimmed = false;
  for (int i = 0; i < POLL_MAX && !trimmed; i++) {
    th_sleep_ms(POLL_MS);
    trimmed = all_parked(sys) && slabs_held(sys) == 0;
  }
  assert_true(trimmed);
  th_end(sys);
}

int main(void) {
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idle_system_stays_asleep),
      cmocka_unit_test(test_burst_to_busy_worker_costs_one_wakeup),
      cmocka_unit_test(test_idle_pools_are_trimmed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
