/*
 * Unit tests of the system (core/sched/lifecycle.c), mostly on systems that are
 * never started (system_fixture.h); messages are test_msg.c's.
 *
 * Covered: the default configuration; sh_system_new rejecting bad
 * configurations and a NULL out, and 0 workers meaning one per CPU;
 * sh_spawn / sh_spawn_on validating their arguments; an init hook's error
 * (positive or negative) failing the spawn with the negative errno and
 * freeing every house made so far (ASan checks the leak); the three address
 * kinds (plain, round-robin, per worker) and how each picks a house;
 * creation order in sys->houses; spawn after shutdown; sh_system_stats
 * summing the workers' and the system's counters field by field; start
 * twice, start after shutdown, and shutdown / wait refused on a worker.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "actor/house.h"
#include "actor/hstore.h"
#include "mem/msg.h"
#include "plat.h"
#include "support/manual.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "sched/worker.h"
#include "system_fixture.h"

static sh_house *house_at(const sh_addr *a, uint32_t i) {
  uint32_t gen;
  return sh_addr_member(a, i, &gen);
}

static sh_house *pick(const sh_addr *a) {
  uint32_t gen;
  return sh_addr_pick(a, &gen);
}

/* ---- configuration ------------------------------------------------------- */

static void test_config_default(void **state) {
  (void)state;
  sh_config c;
  memset(&c, 0xab, sizeof(c));
  sh_config_default(&c);
  assert_int_equal(c.workers, 0);
  assert_int_equal(c.max_per_run, 64);
  assert_int_equal(c.max_batch, 32);
  assert_int_equal(c.steal_floor, 32);
  assert_int_equal(c.steal_aggression, 128);
  assert_int_equal(c.io_ratio, 50);
  assert_int_equal(c.spin_ns, 50000);
  assert_int_equal(c.pool_max_cached, 4096);
  assert_int_equal(c.pool_keep, 16);
  assert_int_equal(c.pool_idle_ns, 30ull * 1000000000ull);
}

static void expect_rejected(void (*edit)(sh_config *)) {
  sh_config c;
  sh_config_default(&c);
  c.workers = 1;
  edit(&c);
  sh_system *s = NULL;
  assert_int_equal(sh_system_new(&c, &s), -EINVAL);
  assert_null(s);
}

static void no_per_run(sh_config *c) { c->max_per_run = 0; }
static void no_batch(sh_config *c) { c->max_batch = 0; }
static void no_io(sh_config *c) { c->io_ratio = 0; }
static void too_much_io(sh_config *c) { c->io_ratio = 101; }
static void too_many_workers(sh_config *c) { c->workers = 1025; }

static void test_new_rejects_bad_config(void **state) {
  (void)state;
  expect_rejected(no_per_run);
  expect_rejected(no_batch);
  expect_rejected(no_io);
  expect_rejected(too_much_io);
  expect_rejected(too_many_workers);
  assert_int_equal(sh_system_new(NULL, NULL), -EINVAL);
  sh_config c;
  sh_config_default(&c);
  assert_int_equal(sh_system_new(&c, NULL), -EINVAL);
  /* The edges are accepted. */
  c.workers = 1;
  c.io_ratio = 100;
  sh_system *s = NULL;
  assert_int_equal(sh_system_new(&c, &s), 0);
  sh_system_free(s);
}

static void test_zero_workers_is_one_per_cpu(void **state) {
  (void)state;
  sh_system *s = NULL;
  assert_int_equal(sh_system_new(NULL, &s), 0);
  assert_true(sh_system_workers(s) >= 1);
  assert_int_equal(sh_system_workers(s), sh_plat_cpu_count());
  sh_system_free(s);
  assert_int_equal(sh_system_workers(th_sys), 2);
}

/* ---- spawn --------------------------------------------------------------- */

static void expect_spawn_einval(const sh_actor_class *c, uint32_t instances) {
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(th_sys, c, NULL, instances, &a), -EINVAL);
  assert_null(a);
}

static sh_yield nop(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}
static bool yes(sh_actor *self, const sh_msg *m) {
  (void)self, (void)m;
  return true;
}

/* Classes outlive the test: the system keeps pointing at them until freed. */
static const sh_actor_class small = {.name = "small", .size = sizeof(sh_actor) - 1};
static const sh_actor_class bn = {.name = "bn", .size = sizeof(sh_actor), .batch_notice = nop};
static const sh_actor_class bnf = {.name = "bnf", .size = sizeof(sh_actor), .batch_notice_filter = yes};
static const sh_actor_class ba = {.name = "ba", .size = sizeof(sh_actor), .batch_ask = nop};
static const sh_actor_class baf = {.name = "baf", .size = sizeof(sh_actor), .batch_ask_filter = yes};
static const sh_actor_class both = {.name = "both", .size = sizeof(sh_actor), .batch_notice = nop,
                                    .batch_notice_filter = yes};

static void test_spawn_validates(void **state) {
  (void)state;
  expect_spawn_einval(NULL, 1);
  expect_spawn_einval(&small, 1);
  expect_spawn_einval(&bn, 1);
  expect_spawn_einval(&bnf, 1);
  expect_spawn_einval(&ba, 1);
  expect_spawn_einval(&baf, 1);
  expect_spawn_einval(&plain_class, 0);
  expect_spawn_einval(&plain_class, (1u << 20) + 1); /* beyond any sane fan-out */
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 1, NULL), -EINVAL);
  assert_int_equal(sh_spawn(NULL, &plain_class, NULL, 1, &(const sh_addr *){NULL}), -EINVAL);
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn_on(th_sys, &plain_class, NULL, 2, &a), -EINVAL);
  assert_null(a);
  assert_int_equal(inits, 0);
  assert_int_equal(sh_hstore_count(th_sys), 0);

  assert_int_equal(sh_spawn(th_sys, &both, NULL, 1, &a), 0);
  assert_int_equal(sh_spawn_on(th_sys, &plain_class, NULL, 1, &a), 0);
  assert_int_equal(house_at(a, 0)->owner, 1);
}

/* The third of four instances fails its init: the spawn fails, nothing is
 * published, and the three houses made are freed (ASan: no leak). */
static void check_init_failure(int rc, int want) {
  fail_at = 3;
  fail_with = rc;
  inits = 0;
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 4, &a), want);
  assert_null(a);
  assert_int_equal(inits, 3);
  /* Every house made went back to the store, vacant. */
  assert_int_equal(th_sys->spare.n, sh_hstore_count(th_sys));
  assert_int_equal(sh_hq_count(&th_worker(0)->mounting) + sh_hq_count(&th_worker(1)->mounting), 0);
}

static void test_init_failure_fails_spawn(void **state) {
  (void)state;
  check_init_failure(EPERM, -EPERM);
  check_init_failure(-ENOSPC, -ENOSPC);
  fail_at = 1;
  fail_with = 7;
  inits = 0;
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 1, &a), -7);
  fail_at = 0;
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 1, &a), 0);
  assert_int_equal(th_sys->spare.n, sh_hstore_count(th_sys) - 1);
}

static void test_address_kinds(void **state) {
  (void)state;
  const sh_addr *one, *three, *each;
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 1, &one), 0);
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 3, &three), 0);
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, SH_SPAWN_PER_WORKER, &each), 0);
  assert_int_equal(inits, 1 + 3 + 2);
  assert_int_equal(sh_addr_count(one), 1);
  assert_int_equal(sh_addr_count(three), 3);
  assert_int_equal(sh_addr_count(each), 2);
  assert_int_equal(sh_addr_count(NULL), 0);
  assert_true(sh_addr_is_token(one));
  assert_int_equal(three->kind, SH_ADDR_ROBIN);
  assert_int_equal(each->kind, SH_ADDR_PER_WORKER);

  /* Every house knows its address; a per-worker address has one per worker. */
  for (uint32_t i = 0; i < 3; i++) assert_ptr_equal(sh_self(house_at(three, i)->actor), three);
  for (uint32_t i = 0; i < 2; i++) {
    assert_ptr_equal(sh_self(house_at(each, i)->actor), each);
    assert_int_equal(sh_actor_worker(house_at(each, i)->actor), i);
  }

  /* Plain: always the one house. Robin: each in turn. */
  for (int i = 0; i < 3; i++) assert_ptr_equal(pick(one), house_at(one, 0));
  sh_house *first = pick(three);
  uint32_t k = 0;
  while (house_at(three, k) != first) k++;
  for (uint32_t i = 1; i <= 6; i++) assert_ptr_equal(pick(three), house_at(three, (k + i) % 3));
  /* Per worker: the caller's own worker's instance. */
  for (uint32_t w = 0; w < 2; w++) {
    th_act_as(w);
    for (int i = 0; i < 3; i++) assert_ptr_equal(pick(each), house_at(each, w));
  }
  sh_worker_enter(NULL);
  /* Off-worker it still picks one of them. */
  sh_house *h = pick(each);
  assert_true(h == house_at(each, 0) || h == house_at(each, 1));
}

static void test_creation_order(void **state) {
  (void)state;
  const sh_addr *as[4];
  const uint32_t counts[] = {2, 1, SH_SPAWN_PER_WORKER, 3};
  for (int i = 0; i < 4; i++) assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, counts[i], &as[i]), 0);
  /* Creation numbers follow the spawns, instance by instance. */
  uint64_t seq = 0;
  for (int i = 0; i < 4; i++)
    for (uint32_t j = 0; j < sh_addr_count(as[i]); j++) assert_int_equal(house_at(as[i], j)->seq, seq++);
  assert_int_equal(atomic_load(&th_sys->nhouses), seq);
  /* The store made one slab for them. */
  assert_int_equal(sh_hstore_count(th_sys), SH_SLAB_HOUSES);
}

static void test_spawn_after_shutdown(void **state) {
  (void)state;
  assert_int_equal(sh_system_shutdown(th_sys), 0);
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 1, &a), -ESHUTDOWN);
  assert_null(a);
  assert_int_equal(inits, 0);
  assert_int_equal(sh_system_shutdown(th_sys), 0); /* again: nothing to do */
}

/* ---- statistics ---------------------------------------------------------- */

/* Each counter gets a distinct amount in each set (worker 0: k+1, worker 1:
 * 10(k+1), the system's: 100(k+1)), so a field that sums the wrong counter
 * or misses a set shows. */
static void test_stats_sum(void **state) {
  (void)state;
  sh_stats before = th_stats();
  assert_int_equal(before.runs, 0);
  for (int k = 0; k < SH_C_COUNT; k++) {
    sh_counters_own_add(&th_worker(0)->counters, (sh_counter)k, (uint64_t)k + 1);
    sh_counters_own_add(&th_worker(1)->counters, (sh_counter)k, 10 * ((uint64_t)k + 1));
    sh_counters_shared_add(&th_sys->counters, (sh_counter)k, 100 * ((uint64_t)k + 1));
  }
  sh_stats s = th_stats();
  assert_int_equal(s.delivered, 111 * (SH_C_DELIVERED + 1));
  assert_int_equal(s.replies_unknown, 111 * (SH_C_REPLIES_UNKNOWN + 1));
  assert_int_equal(s.dropped_stopped, 111 * (SH_C_DROPPED_STOPPED + 1));
  assert_int_equal(s.asks_timed_out, 111 * (SH_C_ASKS_TIMED_OUT + 1));
  assert_int_equal(s.steals, 111 * (SH_C_STEALS + 1));
  assert_int_equal(s.runs, 111 * (SH_C_RUNS + 1));
  assert_int_equal(s.parks, 111 * (SH_C_PARKS + 1));
  assert_int_equal(s.wakeups, 111 * (SH_C_WAKEUPS + 1));
  assert_int_equal(s.sent, 111 * (SH_C_SENT + 1));
  assert_int_equal(s.asks, 111 * (SH_C_ASKS + 1));
  assert_int_equal(s.asks_resolved, 111 * (SH_C_ASKS_RESOLVED + 1));

  /* Pool figures are summed over the workers' pools. */
  th_act_as(0);
  sh_msg *m0 = sh_msg_alloc(&note_type);
  th_act_as(1);
  sh_msg *m1 = sh_msg_alloc(&note_type);
  s = th_stats();
  assert_int_equal(s.pool_outstanding, before.pool_outstanding + 2);
  assert_int_equal(s.pool_mallocs, before.pool_mallocs + 2);
  sh_msg_free(m0); /* freed on worker 1: handed back to worker 0's pool */
  sh_msg_free(m1);
  assert_int_equal(th_stats().pool_outstanding, before.pool_outstanding);
}

/* sh_count goes to the calling worker's set, or the system's off-worker;
 * the sum sees all three. */
static void test_stats_from_every_thread_kind(void **state) {
  (void)state;
  const sh_addr *a;
  assert_int_equal(sh_spawn_on(th_sys, &plain_class, NULL, 0, &a), 0);
  sh_stop(a);
  for (int who = -1; who < 2; who++) {
    if (who < 0)
      sh_worker_enter(NULL);
    else
      th_act_as((uint32_t)who);
    assert_int_equal(sh_notice(a, &sh_msg_new(note, .a = 0)->hdr), -ESHUTDOWN);
  }
  assert_int_equal(sh_counters_get(&th_sys->counters, SH_C_DROPPED_STOPPED), 1);
  assert_int_equal(sh_counters_get(&th_worker(0)->counters, SH_C_DROPPED_STOPPED), 1);
  assert_int_equal(sh_counters_get(&th_worker(1)->counters, SH_C_DROPPED_STOPPED), 1);
  assert_int_equal(th_stats().dropped_stopped, 3);
}

/* ---- lifecycle ----------------------------------------------------------- */

static void test_start_twice(void **state) {
  (void)state;
  const sh_addr *a;
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 1, &a), 0);
  assert_int_equal(sh_system_start(th_sys), 0);
  assert_int_equal(sh_system_start(th_sys), -EINVAL);
  assert_int_equal(sh_notice(a, &sh_msg_new(note, .a = 1)->hdr), 0);
  assert_int_equal(sh_system_shutdown(th_sys), 0);
  assert_int_equal(sh_system_start(th_sys), -EINVAL);
  assert_int_equal(sh_system_start(NULL), -EINVAL);
  assert_int_equal(inits, 1);
}

static void test_never_started_start_after_shutdown(void **state) {
  (void)state;
  assert_int_equal(sh_system_shutdown(th_sys), 0);
  assert_int_equal(sh_system_start(th_sys), -EINVAL);
}

/* Shutdown and wait belong to a thread that is no worker. */
static void test_refused_on_a_worker(void **state) {
  (void)state;
  th_act_as(1);
  assert_int_equal(sh_system_shutdown(th_sys), -EINVAL);
  assert_int_equal(sh_system_wait(th_sys), -EINVAL);
  assert_false(th_sys->shut);
  sh_worker_enter(NULL);
  assert_int_equal(sh_system_shutdown(NULL), -EINVAL);
  assert_int_equal(sh_system_wait(NULL), -EINVAL);
}

/* The first exit decides the code; wait returns it. */
static void test_exit_code(void **state) {
  (void)state;
  sh_system_exit(th_sys, 42);
  sh_system_exit(th_sys, 7);
  assert_int_equal(sh_system_wait(th_sys), 42);
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(th_sys, &plain_class, NULL, 1, &a), -ESHUTDOWN);
}

int main(void) {
  alarm(120);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_config_default),
      T(test_new_rejects_bad_config),
      T(test_zero_workers_is_one_per_cpu),
      T(test_spawn_validates),
      T(test_init_failure_fails_spawn),
      T(test_address_kinds),
      T(test_creation_order),
      T(test_spawn_after_shutdown),
      T(test_stats_sum),
      T(test_stats_from_every_thread_kind),
      T(test_start_twice),
      T(test_never_started_start_after_shutdown),
      T(test_refused_on_a_worker),
      T(test_exit_code),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
