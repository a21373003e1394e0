/*
 * End-to-end tests of asks on the production backend (epoll, pthreads),
 * through the public API only (servers and clients: ask_fixture.h):
 *   - the three phases of the Stack model (send: a stack asks and suspends;
 *     process: the target's ask stack returns a reply; resume: the asker's
 *     stack resumes in its next state with the reply), on one worker and
 *     across workers, and a chain A -> B -> C where B's ask stack asks C;
 *   - fan-out: sh_suspend resumes once, when all N asks completed;
 *     sh_suspend_any resumes on each single completion.
 * Failures, misuse and reply ownership are test_e2e_ask_fail.c's.
 *
 * Every test ends with pool_outstanding == 0: a message or stack the
 * runtime forgot to free shows.
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
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#include "ask_fixture.h"

static void assert_trace(const int *want, int n) {
  assert_int_equal(atomic_load(&g_trace_n), n);
  for (int i = 0; i < n; i++) assert_int_equal(g_trace[i], want[i]);
}

/* ---- clients of the fan-out ---------------------------------------------- */

/* N asks, one sh_suspend: resumed once, with all N complete. */
static sh_yield fanout_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  if (sh_stack_state(st) == SH_START) {
    ask_all(st, &k.c->cfg, k.l);
    return sh_suspend(st, C_GOT);
  }
  CHECK(count_done(k.l, k.c->cfg.n) == k.c->cfg.n);
  /* Every server's stack ran before its reply was sent, so all N ran. */
  CHECK(atomic_load(&g_served) == k.c->cfg.n);
  for (int i = 0; i < k.c->cfg.n; i++) check_echo(k.l->f[i], i);
  return end_stack(self, st);
}

/* N asks, sh_suspend_any: resumed by the first completion alone; then the
 * rest with sh_suspend. The first future is recycled when the stack moves
 * on (stack.h), so it is forgotten here. */
static sh_yield first_of_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  int n = k.c->cfg.n;
  switch (sh_stack_state(st)) {
  case SH_START:
    ask_all(st, &k.c->cfg, k.l);
    return sh_suspend_any(st, C_GOT);
  case C_GOT:
    k.r->first_done = count_done(k.l, n);
    for (int i = 0; i < n; i++) {
      if (k.l->f[i] == NULL || !sh_future_done(k.l->f[i])) continue;
      check_echo(k.l->f[i], i);
      k.l->f[i] = NULL;
    }
    /* Resumed too late (all done): end now, main sees first_done. */
    if (k.r->first_done < n) return sh_suspend(st, C_REST);
    return end_stack(self, st);
  default:
    for (int i = 0; i < n; i++) {
      if (k.l->f[i] == NULL) continue;
      CHECK(sh_future_done(k.l->f[i]));
      check_echo(k.l->f[i], i);
    }
    return end_stack(self, st);
  }
}

/* N asks, sh_suspend_any in the same state each time: every resume sees
 * exactly one more completed future, and the seen ones stay valid. */
static sh_yield each_of_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  int n = k.c->cfg.n;
  if (sh_stack_state(st) == SH_START) {
    ask_all(st, &k.c->cfg, k.l);
    return sh_suspend_any(st, C_GOT);
  }
  int done = count_done(k.l, n);
  if (done != k.r->invocations - 1) k.r->any_mismatch++;
  if (done < n) return sh_suspend_any(st, C_GOT);
  for (int i = 0; i < n; i++) check_echo(k.l->f[i], i);
  return end_stack(self, st);
}

CLIENT_CLASS(fanout_class, fanout_notice);
CLIENT_CLASS(first_of_class, first_of_notice);
CLIENT_CLASS(each_of_class, each_of_notice);

/* ---- the three phases ---------------------------------------------------- */

static void lifecycle(uint32_t server_worker) {
  sh_system *sys = env_new(2, 1);
  client_result res = {0};
  start_client(sys, &single_class, spawn_server(sys, SRV_ECHO, TAG_B, NULL, server_worker), &res);
  th_run(sys);
  sh_stats st = th_end(sys);

  const int want[] = {EV(TAG_A, PH_SEND), EV(TAG_B, PH_PROCESS), EV(TAG_A, PH_RESUME)};
  assert_trace(want, 3);
  assert_int_equal(res.invocations, 2); /* entered once, resumed once */
  assert_false(res.done_at_send);       /* the send phase ends suspended */
  assert_int_equal(res.error, 0);
  assert_int_equal(res.value, 42);
  assert_int_equal(st.delivered, 3);    /* kick, ask, reply */
  assert_int_equal(st.replies_unknown, 0);
  /* Placement holds (nothing to steal in so small a system). */
  assert_int_equal(pthread_equal(g_thread[TAG_A], g_thread[TAG_B]) != 0, server_worker == 0);
}

static void test_lifecycle_same_worker(void **state) {
  (void)state;
  lifecycle(0);
}

static void test_lifecycle_cross_worker(void **state) {
  (void)state;
  lifecycle(1);
}

/* A (w0) asks B (w1), whose ask stack asks C (w0) before replying. */
static void test_chain_across_workers(void **state) {
  (void)state;
  sh_system *sys = env_new(2, 1);
  const sh_addr *c = spawn_server(sys, SRV_ECHO, TAG_C, NULL, 0);
  const sh_addr *b = spawn_server(sys, SRV_RELAY, TAG_B, c, 1);
  client_result res = {0};
  start_client(sys, &single_class, b, &res);
  th_run(sys);
  sh_stats st = th_end(sys);

  const int want[] = {EV(TAG_A, PH_SEND), EV(TAG_B, PH_PROCESS), EV(TAG_C, PH_PROCESS),
                      EV(TAG_B, PH_RESUME), EV(TAG_A, PH_RESUME)};
  assert_trace(want, 5);
  assert_int_equal(res.invocations, 2);
  assert_int_equal(res.error, 0);
  assert_int_equal(res.value, 41 + 1 + 10);
  assert_int_equal(st.delivered, 5); /* kick, two asks, two replies */
  assert_false(pthread_equal(g_thread[TAG_A], g_thread[TAG_B]));
  assert_false(pthread_equal(g_thread[TAG_B], g_thread[TAG_C]));
}

/* ---- fan-out ------------------------------------------------------------- */

static void fanout(int n) {
  client_result res = {0};
  sh_stats st;
  fan(&fanout_class, n, &res, &st);
  assert_int_equal(atomic_load(&g_served), n);
  assert_int_equal(res.invocations, 2); /* never resumed before all N completed */
  assert_int_equal(st.delivered, 1 + 2 * (uint64_t)n);
}

static void test_fanout_1(void **state) {
  (void)state;
  fanout(1);
}

static void test_fanout_5(void **state) {
  (void)state;
  fanout(5);
}

static void test_fanout_100(void **state) {
  (void)state;
  fanout(100);
}

static void test_suspend_any_first(void **state) {
  (void)state;
  client_result res = {0};
  sh_stats st;
  fan(&first_of_class, 5, &res, &st);
  assert_int_equal(atomic_load(&g_served), 5);
  assert_int_equal(res.first_done, 1); /* resumed by the first completion alone */
  assert_int_equal(res.invocations, 3);
}

static void test_suspend_any_each(void **state) {
  (void)state;
  client_result res = {0};
  sh_stats st;
  fan(&each_of_class, 5, &res, &st);
  assert_int_equal(atomic_load(&g_served), 5);
  assert_int_equal(res.invocations, 1 + 5);
  assert_int_equal(res.any_mismatch, 0);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lifecycle_same_worker),
      cmocka_unit_test(test_lifecycle_cross_worker),
      cmocka_unit_test(test_chain_across_workers),
      cmocka_unit_test(test_fanout_1),
      cmocka_unit_test(test_fanout_5),
      cmocka_unit_test(test_fanout_100),
      cmocka_unit_test(test_suspend_any_first),
      cmocka_unit_test(test_suspend_any_each),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
