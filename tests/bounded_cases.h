/*
 * Tests of bounded mailboxes (an actor class's ask_capacity /
 * notice_capacity), written once on the public API and run on both
 * backends: tests/test_e2e_bounded.c (epoll, also under TSan) and
 * tests/test_sim_bounded.c (the simulator, several seeds and strategies).
 *
 * The including file defines, before it includes this one:
 *   BOUNDED_RUNS                   runs of every case (one per seed and strategy);
 *   static void bounded_configure(unsigned run)
 *                                  called before each run makes its system;
 *   static const char *bounded_run_name(unsigned run)
 *                                  names a run, for the message of a failed one.
 * and lists the tests with BOUNDED_CASES (cmocka_unit_test entries).
 *
 * The cases:
 *   try_full_*        sh_notice_try / sh_notice on a mailbox filled before start:
 *                     -EAGAIN, the try keeps the message, sh_notice frees it, refusals
 *                     counted; after start all delivered in order, depth back to 0;
 *   refill_*          full, drained, full again: the slots all came back;
 *   many_producers_*  producers putting into a mailbox of 1 or 2: each item once, each
 *                     producer's in its order, some puts certainly waited;
 *   fifo_*            senders (puts or asks, with or without a timeout that does not
 *                     pass) queued in a known order get in in that order; the waiting
 *                     count, suspensions and refusals are exact;
 *   stop_wakes_waiters  stopping the consumer fails every waiting put (its notice
 *                     handed back) and ask with -ESHUTDOWN;
 *   retry_after_stop  a sender woken by the stop sends again: refused -ESHUTDOWN;
 *   timeouts          a put and an ask time out while waiting for room;
 *   misuse            bad capacities, NULLs, wrong kinds; a put with room.
 *
 * The rig, its actors and how a consumer is held still: bounded_rig.h; the
 * driver and running a case: bounded_driver.h; cases 5, 5b, 6 and 8:
 * bounded_refusal_cases.h.
 */
#ifndef TESTS_BOUNDED_CASES_H
#define TESTS_BOUNDED_CASES_H

#include "bounded_driver.h"
#include "bounded_refusal_cases.h"

/* ---- 1. sh_notice_try / sh_notice on a full mailbox, filled before start ------------ */

static void case_try_full(uint32_t cap) {
  rig *r = rig_new();
  sh_system *sys = b_system((int)cap);
  b_spawn_consumer(sys, r, cap, 0);
  /* Not started: nothing is taken, so exactly cap notices get in. */
  for (uint32_t i = 0; i < cap; i++) assert_int_equal(sh_notice_try(r->c, b_notice(0, (int)i)), 0);
  sh_msg *extra = b_notice(0, (int)cap);
  assert_int_equal(sh_notice_try(r->c, extra), -EAGAIN);
  /* Still ours: write to it (ASan would see a freed one) and offer it again. */
  ((b_item *)extra)->seq = (int)cap + 1;
  assert_int_equal(sh_notice_try(r->c, extra), -EAGAIN);
  sh_mailbox_stats s;
  c_stats(r, SH_NOTICE, &s);
  assert_box(&s, cap, cap, 0, 0, 2);
  assert_int_equal(s.high_water, cap);
  /* The old API frees what it refuses (LeakSanitizer would see it kept). */
  assert_int_equal(sh_notice(r->c, extra), -EAGAIN);
  c_stats(r, SH_NOTICE, &s);
  assert_int_equal(s.refused, 3);
  c_stats(r, SH_ASK, &s);
  assert_box(&s, 0, 0, 0, 0, 0); /* the ask mailbox is not bounded */

  b_run(sys);
  /* The last handler ran after the last take: nothing is left admitted. */
  c_stats(r, SH_NOTICE, &s);
  assert_box(&s, cap, 0, 0, 0, 3);
  assert_int_equal(s.high_water, cap);
  bounded_end(sys);
  int want[B_FILL_MAX];
  for (uint32_t i = 0; i < cap; i++) want[i] = B_N(0, (int)i);
  assert_log(&r->log[0], want, (int)cap);
  free(r);
}

static void case_try_full_cap1(void) { case_try_full(1); }
static void case_try_full_cap4(void) { case_try_full(4); }

/* ---- 2. full, drained, full again ------------------------------------------------- */

static void case_refill(uint32_t cap) {
  rig *r = rig_new();
  r->refill_cap = (int)cap;
  sh_system *sys = b_system(2 * (int)cap);
  b_spawn_consumer(sys, r, cap, 0);
  for (uint32_t i = 0; i < cap; i++)
    assert_int_equal(sh_notice_try(r->c, b_notice(B_FILL_FROM, (int)i)), 0);
  b_run(sys);
  sh_mailbox_stats s;
  c_stats(r, SH_NOTICE, &s);
  assert_box(&s, cap, 0, 0, 0, 1); /* one refusal: the refill's last try */
  assert_int_equal(s.high_water, cap);
  bounded_end(sys);
  /* Every slot came back after round one: cap sends got in again. */
  for (uint32_t i = 0; i < cap; i++) assert_int_equal(r->refill_rc[i], 0);
  assert_int_equal(r->refill_rc[cap], -EAGAIN);
  int want[2 * B_FILL_MAX];
  for (uint32_t i = 0; i < 2 * cap; i++) want[i] = B_N(B_FILL_FROM, (int)i);
  assert_log(&r->log[0], want, 2 * (int)cap);
  free(r);
}

static void case_refill_cap1(void) { case_refill(1); }
static void case_refill_cap3(void) { case_refill(3); }

/* ---- 3. many producers putting into a tiny mailbox --------------------------------- */

/* C is held from its first run until the first put that has to wait, so
 * some put certainly waits (more puts than slots meet a held consumer). */
static void case_many_producers(uint32_t cap) {
  enum { NP = 4, OPS = 12 };
  rig *r = rig_new();
  r->np = NP;
  r->ops = OPS;
  r->release_on_wait = true;
  sh_system *sys = b_system(NP * OPS + NP);
  b_spawn_consumer(sys, r, cap, 0);
  b_spawn_hold(sys, r, NULL);
  b_spawn_producers(sys, r);
  for (int i = 0; i < NP; i++) b_kick(r->p[i]);
  b_run(sys);
  sh_mailbox_stats s;
  c_stats(r, SH_NOTICE, &s);
  assert_int_equal(s.depth, 0);
  assert_int_equal(s.waiting, 0);
  assert_int_equal(s.refused, 0);
  assert_int_equal(s.high_water, cap);
  assert_true(s.suspended > 0);
  int waits = 0;
  for (int i = 0; i < NP; i++) waits += r->pr[i].waits;
  assert_int_equal(s.suspended, waits);
  bounded_end(sys);
  /* Each item exactly once, each producer's in its order (c_log_item). */
  assert_int_equal(r->log[0].n, NP * OPS);
  assert_int_equal(r->log[0].order_errors, 0);
  for (int i = 0; i < NP; i++) {
    assert_int_equal(r->log[0].next_seq[i], OPS);
    assert_int_equal(r->pr[i].done, OPS);
    assert_int_equal(r->pr[i].handed_back, 0);
    for (int k = 0; k < OPS; k++) assert_int_equal(r->pr[i].err[k], 0);
  }
  assert_int_equal(r->hold_error, -ESHUTDOWN);
  free(r);
}

static void case_many_producers_cap1(void) { case_many_producers(1); }
static void case_many_producers_cap2(void) { case_many_producers(2); }

/* ---- 4, 7, 9. FIFO admission of queued senders (puts, asks) ----------------------- */

/*
 * C held and full; the driver's own refused fill message goes in line
 * first (the -EAGAIN left it the driver's: it sends it again, now waiting),
 * then the producers one after another: each is set going by the driver
 * when the one before reported that its send waits. When the last waits,
 * the driver reads C's figures and releases it. C must take the fills, then
 * the driver's, then P0, P1, ... The waiting count each producer reads
 * right after its own send queued is exact: the ones before it and itself.
 */
static sh_yield fifo_held(driver *d, sh_stack *st) {
  rig *r = d->r;
  if (sh_stack_state(st) == D_DONE) return d_finish(d, st);
  sh_msg *kept = d_fill(d, st, r->box);
  if (kept == NULL) {
    b_abort(&d->base);
    return sh_return(st, NULL);
  }
  ((b_item *)kept)->seq = B_FILL_MAX + 1; /* ours: write to it, then send it */
  sh_future *f = r->box == SH_ASK ? sh_ask(st, r->c, kept, b_timeout(r))
                                  : sh_put(st, r->c, kept, b_timeout(r));
  CHECK(f != NULL);
  r->d_waited = f != NULL && !sh_future_done(f);
  if (f != NULL) d_keep(sh_stack_locals(st), f);
  b_kick(r->p[0]);
  return d_wait_all(d, st);
}

static void fifo_queued(driver *d, int from) {
  rig *r = d->r;
  if (from + 1 < r->np) {
    b_kick(r->p[from + 1]);
    return;
  }
  b_stats(r, r->box, &r->seen[bkind(r->box)]);
  b_release(r);
}

static const driver_plan fifo_plan = {.held = fifo_held, .queued = fifo_queued};

static void case_fifo(sh_msg_kind box, uint32_t cap, uint32_t timeout_ms) {
  enum { NP = 4 };
  rig *r = rig_new();
  r->box = box;
  r->np = NP;
  r->ops = 1;
  r->timeout_ms = timeout_ms;
  r->report_waits = true;
  for (int i = 0; i < NP; i++) r->op[i] = box == SH_ASK ? OP_ASK : OP_PUT;
  /* C takes the fills, the driver's and the producers'; the producers and
   * the driver's stack end. */
  sh_system *sys = b_system((int)cap + 1 + NP + NP + 1);
  b_spawn_consumer(sys, r, box == SH_ASK ? 0 : cap, box == SH_ASK ? cap : 0);
  b_spawn_hold(sys, r, &fifo_plan);
  b_spawn_producers(sys, r);
  b_run(sys);
  sh_mailbox_stats s;
  c_stats(r, box, &s);
  assert_box(&s, cap, 0, 0, NP + 1, 1);
  assert_int_equal(s.high_water, cap);
  sh_stats st = bounded_end(sys);
  assert_int_equal(st.asks_timed_out, 0);

  int k = bkind(box);
  assert_int_equal(r->filled[k], cap);
  assert_int_equal(r->fill_refused[k], 1);
  assert_true(r->d_waited);
  /* When the last producer queued: full, all of them waiting. */
  assert_box(&r->seen[k], cap, cap, NP + 1, NP + 1, 1);
  assert_int_equal(r->seen[k].high_water, cap);
  int want[B_FILL_MAX + 2 + NP], n = 0;
  for (uint32_t i = 0; i < cap; i++) want[n++] = B_N(B_FILL_FROM, (int)i);
  want[n++] = B_N(B_FILL_FROM, B_FILL_MAX + 1);
  for (int i = 0; i < NP; i++) want[n++] = B_N(i, 0);
  if (box == SH_ASK)
    for (int i = 0; i < n; i++) want[i] += B_ASK_BASE;
  assert_log(&r->log[0], want, n);
  for (int i = 0; i < NP; i++) {
    assert_int_equal(r->pr[i].waits, 1);
    assert_int_equal(r->pr[i].waiting_seen, i + 2); /* the driver's, those before, its own */
    assert_int_equal(r->pr[i].err[0], 0);
    assert_int_equal(r->pr[i].replies, box == SH_ASK ? 1 : 0);
  }
  /* The driver's fill asks and its waiting send: all answered. */
  assert_int_equal(r->d_nf, box == SH_ASK ? (int)cap + 1 : 1);
  for (int i = 0; i < r->d_nf; i++) {
    assert_int_equal(r->d_err[i], 0);
    if (box == SH_ASK) assert_int_equal(r->d_val[i], want[i] + 1);
  }
  assert_int_equal(r->hold_error, -ESHUTDOWN);
  free(r);
}

static void case_fifo_put(void) { case_fifo(SH_NOTICE, 2, 0); }
/* A put's timeout that does not pass: the admission cancels it. */
static void case_fifo_put_timed(void) { case_fifo(SH_NOTICE, 1, B_LONG_MS); }
static void case_fifo_ask(void) { case_fifo(SH_ASK, 2, 0); }
static void case_fifo_ask_timed(void) { case_fifo(SH_ASK, 1, B_LONG_MS); }

/* ---- the list -------------------------------------------------------------------------- */

static unsigned bounded_current_run;
static bool bounded_all_ran;

/* After a failed test (cmocka runs teardowns after failures too): names
 * the run it failed in, and takes down the system it left. */
static int bounded_teardown(void **state) {
  (void)state;
  if (bounded_all_ran) return 0;
  fprintf(stderr, "  (failed in run %u: %s)\n", bounded_current_run,
          bounded_run_name(bounded_current_run));
  if (bounded_sys != NULL) {
    sh_system_shutdown(bounded_sys);
    sh_system_free(bounded_sys);
    bounded_sys = NULL;
  }
  return 0;
}

#define BOUNDED_TEST(name)                                        \
  static void test_##name(void **state) {                         \
    (void)state;                                                  \
    bounded_all_ran = false;                                      \
    for (unsigned run = 0; run < BOUNDED_RUNS; run++) {           \
      bounded_current_run = run;                                  \
      bounded_configure(run);                                     \
      case_##name();                                              \
    }                                                             \
    bounded_all_ran = true;                                       \
  }

BOUNDED_TEST(try_full_cap1)
BOUNDED_TEST(try_full_cap4)
BOUNDED_TEST(refill_cap1)
BOUNDED_TEST(refill_cap3)
BOUNDED_TEST(many_producers_cap1)
BOUNDED_TEST(many_producers_cap2)
BOUNDED_TEST(fifo_put)
BOUNDED_TEST(fifo_put_timed)
BOUNDED_TEST(fifo_ask)
BOUNDED_TEST(fifo_ask_timed)
BOUNDED_TEST(stop_wakes_waiters)
BOUNDED_TEST(retry_after_stop)
BOUNDED_TEST(sender_stopped)
BOUNDED_TEST(timeouts)
BOUNDED_TEST(misuse)

#define BOUNDED_CASE(name) cmocka_unit_test_teardown(test_##name, bounded_teardown)
#define BOUNDED_CASES                                                                     \
  BOUNDED_CASE(try_full_cap1), BOUNDED_CASE(try_full_cap4), BOUNDED_CASE(refill_cap1),    \
      BOUNDED_CASE(refill_cap3), BOUNDED_CASE(many_producers_cap1),                       \
      BOUNDED_CASE(many_producers_cap2), BOUNDED_CASE(fifo_put),                          \
      BOUNDED_CASE(fifo_put_timed), BOUNDED_CASE(fifo_ask), BOUNDED_CASE(fifo_ask_timed), \
      BOUNDED_CASE(stop_wakes_waiters), BOUNDED_CASE(retry_after_stop),                   \
      BOUNDED_CASE(sender_stopped), BOUNDED_CASE(timeouts), BOUNDED_CASE(misuse)

#endif
