/*
 * End-to-end scheduling tests on the production backend (epoll, pthreads),
 * through the public API only (the actors: sched_fixture.h):
 *   - priority decided at enqueue: an actor with no pending future, or with
 *     more than two replies queued, runs before a normal one queued earlier;
 *   - the per-run message budget (regression for known bug 5: configured but
 *     never applied, so a flooding actor starved its neighbours);
 *   - a message put during the actor's own drain is delivered (regression for
 *     known bug 2: "has messages" cleared after draining).
 * Where actors run (stealing, placement) is test_e2e_placement.c's.
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

/* ---- priority ------------------------------------------------------------- */

/* One worker. P has an ask pending (normal priority), Q none (high). While a
 * blocker holds the worker, P's notice is queued before Q's; Q must run first. */
static void test_no_pending_future_is_high(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(1, 0);
  const sh_addr *h = th_spawn_on(sys, &holder_class, NULL, 0);
  const sh_addr *blocker = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  const sh_addr *p = th_spawn_on(sys, &probe_class, NULL, 0);       /* id 1 */
  const sh_addr *q = th_spawn_on(sys, &probe_class, NULL, 0);       /* id 2 */
  assert_int_equal(sh_system_start(sys), 0);

  notify(p, OP_ASK_HOLD, 0, h);
  th_wait_for(&g.held, 1); /* P has run and settled with one pending future */
  notify(blocker, OP_SPIN, 0, NULL);
  th_wait_for(&g.spinning, 1);
  th_set_goal(2);
  notify(p, OP_MARK, 0, NULL);
  notify(q, OP_MARK, 0, NULL);
  atomic_store(&g.release, 1);
  finish(sys);

  int op = atomic_load(&g.order[1]), oq = atomic_load(&g.order[2]);
  assert_true(op > 0 && oq > 0);
  assert_true(oq < op); /* Q (high) before P (normal), though queued after it */
}

/* Two workers. R, on worker 0, asks an echo on worker 1 k times and blocks its
 * worker while the k replies arrive; then P (normal, a pending ask) is queued.
 * When R settles with k > 2 replies queued it is high and runs before P; with
 * k = 2 it stays normal and runs after P. A budget of one message a run ends
 * R's run with its blocking handler: a run with budget left would take the
 * replies that came meanwhile at once (mailbox order holds for every take),
 * and R would never settle with them queued. R marks its first run after
 * that, where it takes one reply. */
static void check_replies_priority(int k, bool r_first) {
  reset_globals();
  sh_system *sys = new_system(2, 1);
  const sh_addr *h = th_spawn_on(sys, &holder_class, NULL, 1);
  const sh_addr *echo = th_spawn_on(sys, &echo_class, NULL, 1);
  const sh_addr *r = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  const sh_addr *p = th_spawn_on(sys, &probe_class, NULL, 0); /* id 1 */
  assert_int_equal(sh_system_start(sys), 0);

  notify(p, OP_ASK_HOLD, 0, h);
  th_wait_for(&g.held, 1);
  notify(r, OP_FANOUT_SPIN, k, echo);
  th_wait_for(&g.spinning, 1);
  th_wait_for(&g.replied, k); /* all k replies sit in R's mailbox */
  th_set_goal(2);
  notify(p, OP_MARK, 0, NULL);
  atomic_store(&g.release, 1);
  finish(sys);

  int at_r = atomic_load(&g.order[0]), at_p = atomic_load(&g.order[1]);
  assert_true(at_r > 0 && at_p > 0);
  assert_true(r_first ? at_r < at_p : at_p < at_r);
}

static void test_more_than_two_replies_is_high(void **state) {
  (void)state;
  check_replies_priority(3, true);
}

static void test_two_replies_stay_normal(void **state) {
  (void)state;
  check_replies_priority(2, false);
}

/* ---- the per-run budget (known bug 5) ------------------------------------ */

/* One worker, max_per_run 8. F has 10,000 notices queued before start, G one
 * (G queued after F). G must run after at most a few of F's runs, not after
 * all of F's notices. */
static void test_max_per_run_bounds_a_flooder(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(1, FLOOD_BUDGET);
  const sh_addr *f = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  const sh_addr *gg = th_spawn_on(sys, &probe_class, NULL, 0); /* id 1 */
  th_set_goal(FLOOD_NOTICES + 1);
  for (int i = 0; i < FLOOD_NOTICES; i++) notify(f, OP_COUNT, 0, NULL);
  notify(gg, OP_PEEK, 0, NULL);
  notify(gg, OP_COUNT, 0, NULL);
  assert_int_equal(sh_system_start(sys), 0);
  sh_stats s = finish(sys);

  assert_int_equal(atomic_load(&g.count[0]), FLOOD_NOTICES);
  assert_int_equal(atomic_load(&g.count[1]), 1);
  int seen = atomic_load(&g.peek);
  assert_true(seen >= 0);
  assert_true(seen <= 4 * FLOOD_BUDGET);
  assert_int_equal(s.delivered, FLOOD_NOTICES + 2);
  /* F alone needs at least 10,000 / 8 runs. */
  assert_true(s.runs >= FLOOD_NOTICES / FLOOD_BUDGET);
}

/* ---- messages put during the drain (known bug 2) ------------------------- */

/* A chain of notices each sent by the actor to itself while it handles the
 * previous one: every link is put during the actor's own drain. Nothing else
 * sends, so a lost "has messages" signal stalls the chain (watchdog). */
static void test_self_notice_chain_completes(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *a = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  atomic_store(&g.chain_len[0], CHAIN_LEN);
  th_set_goal(CHAIN_LEN);
  assert_int_equal(sh_system_start(sys), 0);
  notify(a, OP_CHAIN, 1, NULL);
  sh_stats s = finish(sys);
  assert_int_equal(th_done_count(), CHAIN_LEN);
  assert_int_equal(s.delivered, CHAIN_LEN);
}

/* The same chain on worker 0, while an actor on worker 1 runs its own chain
 * and sends every link to A too: puts from the owner and from another
 * thread land during A's drains. */
static void test_self_chain_with_remote_sender(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *a = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  const sh_addr *b = th_spawn_on(sys, &probe_class, NULL, 1); /* id 1 */
  atomic_store(&g.chain_len[0], CHAIN_LEN);
  atomic_store(&g.chain_len[1], FEED_LEN);
  th_set_goal(CHAIN_LEN + 2 * FEED_LEN); /* A's links, B's links, A's OP_EXT */
  assert_int_equal(sh_system_start(sys), 0);
  notify(b, OP_FEED, 1, a);
  notify(a, OP_CHAIN, 1, NULL);
  sh_stats s = finish(sys);
  assert_int_equal(th_done_count(), CHAIN_LEN + 2 * FEED_LEN);
  assert_int_equal(s.delivered, CHAIN_LEN + 2 * FEED_LEN);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_pending_future_is_high),
      cmocka_unit_test(test_more_than_two_replies_is_high),
      cmocka_unit_test(test_two_replies_stay_normal),
      cmocka_unit_test(test_max_per_run_bounds_a_flooder),
      cmocka_unit_test(test_self_notice_chain_completes),
      cmocka_unit_test(test_self_chain_with_remote_sender),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
