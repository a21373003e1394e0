/*
 * Unit tests of the ActorHouse (core/actor/house.c), driven single-threaded
 * (house_fixture.h): what a run takes first and what it holds back.
 *
 * Covered: the strict dispatch order reply, exception, ask, notice,
 * event; the barrier predicate and a barrier stack holding asks and
 * notices back; the priority rules (decided at put and at settle).
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

/* ---- dispatch order ------------------------------------------------------ */

/* All five mailboxes filled before one run, arriving as event, notice,
 * ask, exception, reply (the exception's ask was made first): the run must
 * still see reply, exception, ask, notice, event. */
static void test_dispatch_order(void **state) {
  (void)state;
  const sh_addr *c;
  const sh_addr *a = spawn_with_client(&c);
  sh_house *h = house_of(a);

  notice(c, PLAIN, 1);  /* the client is queued on worker 1 first */
  notice(a, GO_TIMER, 0);
  notice(a, GO_THROW, 0); /* asked first, so answered first */
  notice(a, GO_REPLY, 0);
  assert_ptr_equal(th_step(0), h); /* the responder is now queued behind the client */
  assert_int_equal(sh_wheel_count(&th_worker(0)->wheel), 1);

  assert_int_equal(sh_timer_advance(th_worker(0), sh_plat_now_ns() + 1000000000ull), 1);
  notice(a, PLAIN, 0);
  assert_ptr_equal(th_step(1), house_of(c)); /* the client asks a */
  assert_ptr_equal(th_step(1), house_of(responder)); /* exception, then reply */
  for (int b = 0; b < SH_BOXES; b++) assert_int_equal(sh_mailbox_size(&h->mb, b), 1);
  assert_int_equal(sh_hq_count(&th_worker(0)->state), 1);

  expect_trace("");
  assert_ptr_equal(th_step(0), h);
  expect_trace("RXANE");
  assert_int_equal(state_of(h), SH_WAITING);
  th_drain(1);
  assert_int_equal(client_err[0], 0);
}

/* ---- barrier ------------------------------------------------------------- */

/* has_work for one message in box b, with or without the barrier held. The
 * message goes straight into the mailbox (no poke): only the predicate is
 * under test. */
static bool has_work_with(sh_house *h, sh_box b, bool barrier) {
  sh_msg *m = b == SH_BOX_EVENT ? sh_msg_alloc(&sh_tick_type.msg)
              : b == SH_BOX_ASK ? &sh_msg_new(req, .mode = 0)->hdr
              : b == SH_BOX_NOTICE ? make_note(&note_type, PLAIN, 0)
                                   : &sh_msg_new(resp, .v = 0)->hdr;
  assert_false(sh_house_has_work(h));
  sh_mailbox_push(&h->mb, b, m);
  h->barrier = barrier;
  bool r = sh_house_has_work(h);
  h->barrier = false;
  sh_msg_free(sh_mailbox_take(&h->mb, b));
  return r;
}

static void test_barrier_predicate(void **state) {
  (void)state;
  sh_house *h = house_of(th_spawn(&probe_class, 0));
  th_mount_all();
  for (int b = 0; b < SH_BOXES; b++) assert_true(has_work_with(h, (sh_box)b, false));
  assert_true(has_work_with(h, SH_BOX_REPLY, true));
  assert_true(has_work_with(h, SH_BOX_EXCEPTION, true));
  assert_true(has_work_with(h, SH_BOX_EVENT, true));
  assert_false(has_work_with(h, SH_BOX_ASK, true));
  assert_false(has_work_with(h, SH_BOX_NOTICE, true));
  /* A stopped house no longer holds anything back: it must refuse them. */
  uint32_t live = atomic_load(&h->life);
  atomic_store(&h->life, live | SH_LIFE_STOPPED);
  h->stop_done = true;
  assert_true(has_work_with(h, SH_BOX_ASK, true));
  assert_true(has_work_with(h, SH_BOX_NOTICE, true));
  atomic_store(&h->life, live);
}

/* A barrier stack waiting on its reply holds a later ask and notice back;
 * when it completes they are handled in the same run, asks first. */
static void test_barrier_holds_requests(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&probe_class, 0);
  sh_house *h = house_of(a);
  responder = th_spawn(&responder_class, 1);
  const sh_addr *c = th_spawn(&client_class, 1);
  target = a;
  th_mount_all();

  assert_int_equal(sh_notice(a, make_note(&bnote_type, GO_REPLY, 0)), 0);
  assert_ptr_equal(th_step(0), h);
  assert_true(h->barrier);
  notice(a, PLAIN, 0);
  notice(c, PLAIN, 1);
  assert_ptr_equal(th_step(1), house_of(responder)); /* the reply is on its way */
  assert_ptr_equal(th_step(1), house_of(c));         /* the ask is queued */
  assert_true(h->barrier);
  assert_true(sh_house_has_work(h));
  assert_int_equal(sh_mailbox_size(&h->mb, SH_BOX_ASK), 1);
  assert_int_equal(sh_mailbox_size(&h->mb, SH_BOX_NOTICE), 1);

  /* Without the reply the run handles nothing. */
  sh_msg *r = sh_mailbox_take(&h->mb, SH_BOX_REPLY);
  assert_non_null(r);
  assert_false(sh_house_has_work(h));
  assert_ptr_equal(th_step(0), h);
  expect_trace("");
  assert_int_equal(state_of(h), SH_WAITING);

  sh_house_push(h, SH_BOX_REPLY, r);
  assert_true(sh_house_has_work(h));
  assert_ptr_equal(th_step(0), h);
  expect_trace("RAN");
  assert_false(h->barrier);
  th_drain(1);
  assert_int_equal(client_err[0], 0);
}

/* ---- priority ------------------------------------------------------------ */

static void put_fake(sh_house *h, sh_box b, uint64_t id) {
  sh_msg *m = b == SH_BOX_EVENT ? sh_msg_alloc(&sh_tick_type.msg) : &sh_msg_new(resp, .v = 0)->hdr;
  assert_non_null(m);
  m->id = id; /* no pending ask, no timer: dropped when handled */
  sh_house_push(h, b, m);
}

static bool high(const sh_house *h) { return atomic_load(&h->high); }

/* n puts into box b of a house with a pending future: normal up to the
 * threshold, high past it. */
static void check_threshold(sh_house *h, sh_box b, int threshold) {
  sh_house_queue *q = &th_worker(0)->state;
  for (int i = 1; i <= threshold; i++) {
    put_fake(h, b, 1000 + (uint64_t)i);
    assert_false(high(h));
    assert_int_equal(queued_in(q, h), 0);
  }
  put_fake(h, b, 2000);
  assert_true(high(h));
  assert_ptr_equal(th_step(0), h);
  assert_false(high(h)); /* settled: still a pending future */
  assert_int_equal(state_of(h), SH_WAITING);
}

static void test_priority_at_put(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&probe_class, 0);
  sh_house *h = house_of(a);
  responder = th_spawn(&responder_class, 1);
  th_mount_all();
  sh_house_queue *q = &th_worker(0)->state;

  /* No pending future: high. */
  assert_true(high(h));
  notice(a, GO_REPLY, 0);
  assert_int_equal(queued_in(q, h), 1);
  assert_ptr_equal(th_step(0), h);
  assert_int_equal(sh_futtable_count(&h->futures), 1);
  assert_false(high(h));

  uint64_t unknown = th_stats().replies_unknown;
  check_threshold(h, SH_BOX_REPLY, SH_HIGH_REPLIES);
  assert_int_equal(th_stats().replies_unknown, unknown + SH_HIGH_REPLIES + 1);
  check_threshold(h, SH_BOX_EVENT, SH_HIGH_EVENTS);

  /* One real reply: still normal; once the future is gone, high again. */
  th_drain(1);
  assert_int_equal(queued_in(q, h), 0);
  assert_ptr_equal(th_step(0), h);
  expect_trace("R");
  assert_int_equal(sh_futtable_count(&h->futures), 0);
  assert_true(high(h));
  notice(a, PLAIN, 0);
  assert_int_equal(queued_in(q, h), 1);
  assert_ptr_equal(th_step(0), h);
}

/* The settle after a run decides again from what is left. */
static void test_priority_at_settle(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&slow_class, 0);
  sh_house *h = house_of(a);
  responder = th_spawn(&responder_class, 1);
  th_mount_all();
  sh_house_queue *q = &th_worker(0)->state;
  notice(a, GO_REPLY, 0);
  assert_ptr_equal(th_step(0), h);
  for (uint64_t i = 0; i < 4; i++) put_fake(h, SH_BOX_REPLY, 100 + i);
  assert_ptr_equal(th_step(0), h); /* one handled, three left: high */
  assert_int_equal(queued_in(q, h), 1);
  assert_ptr_equal(th_step(0), h); /* two left and a future: normal */
  assert_int_equal(queued_in(q, h), 0);
  assert_ptr_equal(th_step(0), h);
  assert_ptr_equal(th_step(0), h);
  assert_int_equal(state_of(h), SH_WAITING);
  assert_false(high(h));
}

int main(void) {
  alarm(120);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_sys_teardown)
  const struct CMUnitTest tests[] = {
      T(test_dispatch_order),
      T(test_barrier_predicate),
      T(test_barrier_holds_requests),
      T(test_priority_at_put),
      T(test_priority_at_settle),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
