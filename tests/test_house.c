/*
 * Unit tests of the ActorHouse (core/actor/house.c), driven single-threaded
 * (house_fixture.h).
 *
 * Covered: the state machine (CREATED -> mounted WAITING -> READY, queued
 * exactly once however many puts); a put while the house runs does not
 * queue it, and the message is still handled without a second external
 * message (bug 2 of the original); a put during the mount hook;
 * max_per_run bounding a run; a stopped house refusing asks, dropping
 * notices, failing its own pending asks and running its stop hook once.
 * What a run takes first and what it holds back (dispatch order, barrier,
 * priority) is test_house_order.c's.
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
#include "sched/housequeue.h"
#include "plat.h"
#include "support/manual.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "time/timer.h"
#include "sched/worker.h"
#include "house_fixture.h"

/* ---- state machine ------------------------------------------------------- */

static void test_spawn_then_mount(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&probe_class, 1);
  sh_house *h = house_of(a);
  assert_int_equal(state_of(h), SH_CREATED);
  assert_int_equal(sh_hq_count(&th_worker(1)->mounting), 1);
  assert_int_equal(queued_on(0), 0);
  assert_false(h->mounted);
  assert_int_equal(mounts, 0);

  th_drain(0); /* not its owner: nothing happens */
  assert_int_equal(state_of(h), SH_CREATED);
  th_drain(1);
  assert_int_equal(mounts, 1);
  assert_true(h->mounted);
  assert_int_equal(state_of(h), SH_WAITING);
  assert_int_equal(queued_on(1), 0);
}

static void test_puts_queue_once(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&probe_class, 0);
  sh_house *h = house_of(a);
  th_mount_all();
  for (int i = 0; i < 3; i++) {
    notice(a, PLAIN, 0);
    assert_int_equal(state_of(h), SH_READY);
    assert_int_equal(sh_hq_count(&th_worker(0)->state), 1);
    assert_int_not_equal(queued_in(&th_worker(0)->state, h), -1);
  }
  assert_ptr_equal(th_step(0), h);
  expect_trace("NNN");
  assert_int_equal(state_of(h), SH_WAITING);
  assert_int_equal(queued_on(0), 0);
}

/* A put during the mount hook sees MOUNTING and does not queue; the mount's
 * settle finds the message and queues the house itself. */
static void test_put_during_mount(void **state) {
  (void)state;
  mount_self = 1;
  sh_house *h = house_of(th_spawn(&probe_class, 0));
  sh_worker *w = th_worker(0);
  sh_house_mount(sh_house_of_link(sh_hq_pop(&w->mounting)));
  assert_int_equal(state_of(h), SH_READY);
  assert_int_equal(sh_hq_count(&w->state), 1);
  assert_ptr_equal(th_step(0), h);
  expect_trace("N");
  assert_int_equal(state_of(h), SH_WAITING);
}

/* Bug 2 at unit level: a message put while the house runs is handled
 * without any further external message. */
static void test_put_while_running_is_handled(void **state) {
  (void)state;
  sh_house *h = house_of(th_spawn(&probe_class, 0));
  th_mount_all();
  notice(sh_self(h->actor), SELF, 1);
  assert_ptr_equal(th_step(0), h);
  /* The put saw RUNNING and queued nothing... */
  assert_int_equal(in_run_state[0], SH_RUNNING);
  assert_int_equal(in_run_state[1], SH_RUNNING);
  assert_int_equal(in_run_queued, 0);
  /* ...and the same run still took the message. */
  expect_trace("SN");
  assert_int_equal(state_of(h), SH_WAITING);
  assert_int_equal(queued_on(0), 0);
}

/* The same with a budget of one message per run: the settle after the run
 * must requeue the house (once, for two puts) until the puts are handled. */
static void test_put_while_running_requeues(void **state) {
  (void)state;
  sh_house *h = house_of(th_spawn(&slow_class, 0));
  th_mount_all();
  notice(sh_self(h->actor), SELF, 2);
  assert_ptr_equal(th_step(0), h);
  assert_int_equal(in_run_state[1], SH_RUNNING);
  assert_int_equal(in_run_queued, 0);
  expect_trace("S");
  assert_int_equal(state_of(h), SH_READY);
  assert_int_equal(sh_hq_count(&th_worker(0)->state), 1);
  assert_ptr_equal(th_step(0), h);
  assert_int_equal(state_of(h), SH_READY);
  assert_int_equal(sh_hq_count(&th_worker(0)->state), 1);
  assert_ptr_equal(th_step(0), h);
  expect_trace("SNN");
  assert_int_equal(state_of(h), SH_WAITING);
  assert_null(th_step(0));
}

/* ---- budget -------------------------------------------------------------- */

static void test_max_per_run(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&four_class, 0);
  sh_house *h = house_of(a);
  th_mount_all();
  for (int i = 0; i < 12; i++) notice(a, PLAIN, 0);
  assert_int_equal(h->max_per_run, 4);
  for (size_t run = 1; run <= 3; run++) {
    assert_ptr_equal(th_step(0), h);
    assert_int_equal(ntrace, 4 * run);
  }
  assert_int_equal(state_of(h), SH_WAITING);
  assert_null(th_step(0));
}

/* ---- stop ---------------------------------------------------------------- */

static void test_stopped_house(void **state) {
  (void)state;
  const sh_addr *c;
  const sh_addr *a = spawn_with_client(&c);
  sh_house *h = house_of(a);

  notice(c, PLAIN, 2); /* queued on worker 1 ahead of the responder */
  notice(a, GO_REPLY, 0);
  assert_ptr_equal(th_step(0), h); /* a now waits on the responder */
  assert_ptr_equal(th_step(1), house_of(c)); /* two asks into a */
  for (int i = 0; i < 3; i++) notice(a, PLAIN, 0);

  uint64_t dropped = th_stats().dropped_stopped;
  assert_int_equal(sh_stop(a), 0);
  th_drain(0);
  expect_trace("X"); /* its own pending ask failed; no ask or notice handled */
  assert_int_equal(last_error, -ESHUTDOWN);
  assert_int_equal(stops, 1);
  assert_int_equal(th_stats().dropped_stopped, dropped + 5);
  assert_int_equal(sh_futtable_count(&h->futures), 0);

  uint64_t unknown = th_stats().replies_unknown;
  th_drain(1); /* the client hears -ESHUTDOWN; the responder's late reply goes to a */
  assert_int_equal(client_err[0], -ESHUTDOWN);
  assert_int_equal(client_err[1], -ESHUTDOWN);
  th_drain(0);
  assert_int_equal(th_stats().replies_unknown, unknown + 1);

  assert_int_equal(sh_notice(a, make_note(&note_type, PLAIN, 0)), -ESHUTDOWN);
  assert_int_equal(th_stats().dropped_stopped, dropped + 6);
  sh_house_poke(h);
  th_drain(0);
  sh_worker_enter(NULL);
  assert_int_equal(sh_system_shutdown(th_sys), 0);
  assert_int_equal(stops, 1); /* not again at shutdown */
  expect_trace("X");
}

int main(void) {
  alarm(120);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_sys_teardown)
  const struct CMUnitTest tests[] = {
      T(test_spawn_then_mount),
      T(test_puts_queue_once),
      T(test_put_during_mount),
      T(test_put_while_running_is_handled),
      T(test_put_while_running_requeues),
      T(test_max_per_run),
      T(test_stopped_house),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
