/*
 * The bounded-mailbox cases whose waiting sends are refused or fail
 * (bounded_cases.h lists every case and says what each checks): 5, the
 * consumer stops while senders wait; 5b, the senders stop while they wait;
 * 6, timeouts while waiting for room; 8, misuse, and a put with room.
 */
#ifndef TESTS_BOUNDED_REFUSAL_CASES_H
#define TESTS_BOUNDED_REFUSAL_CASES_H

#include "bounded_driver.h"

/* ---- 5. the consumer stops while senders wait ------------------------------------------ */

/* Fills both of C's mailboxes (the refused messages are freed: still the
 * driver's), sets every producer going, and waits for the fill asks. */
static sh_yield fill_both_held(driver *d, sh_stack *st) {
  rig *r = d->r;
  if (sh_stack_state(st) == D_DONE) return d_finish(d, st);
  sh_msg_free(d_fill(d, st, SH_NOTICE));
  sh_msg_free(d_fill(d, st, SH_ASK));
  for (int i = 0; i < r->np; i++) b_kick(r->p[i]);
  return d_wait_all(d, st);
}

static void stop_queued(driver *d, int from) {
  (void)from;
  rig *r = d->r;
  if (d->queued < r->np) return;
  b_stats(r, SH_NOTICE, &r->seen[0]);
  b_stats(r, SH_ASK, &r->seen[1]);
  CHECK(sh_stop(r->c) == 0);
}

static const driver_plan stop_plan = {.held = fill_both_held, .queued = stop_queued};

/* C held and both its mailboxes full; np producers (puts and asks, in
 * turn) wait for room; when all of them wait, the driver stops C. Returns
 * the system, run and not yet ended: the case checks what the actors saw
 * first (its own findings say more than the accounting would). */
static sh_system *stop_run(rig *r, int np, uint32_t cap, bool after_stop) {
  r->np = np;
  r->ops = 1;
  r->report_waits = true;
  r->after_stop = after_stop;
  for (int i = 0; i < np; i++) r->op[i] = i % 2 == 0 ? OP_PUT : OP_ASK;
  sh_system *sys = b_system(np + 1); /* the producers and the driver's fill stack */
  b_spawn_consumer(sys, r, cap, cap);
  b_spawn_hold(sys, r, &stop_plan);
  b_spawn_producers(sys, r);
  b_run(sys);
  /* Every waiter was taken out of the gate. */
  sh_mailbox_stats s;
  c_stats(r, SH_NOTICE, &s);
  assert_int_equal(s.waiting, 0);
  c_stats(r, SH_ASK, &s);
  assert_int_equal(s.waiting, 0);
  return sys;
}

static void case_stop_wakes_waiters(void) {
  enum { NP = 4, CAP = 2 };
  rig *r = rig_new();
  sh_system *sys = stop_run(r, NP, CAP, false);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(r->filled[k], CAP);
    assert_int_equal(r->fill_refused[k], 1);
    assert_box(&r->seen[k], CAP, CAP, NP / 2, NP / 2, 1);
  }
  /* Nothing got through; every waiting put's notice came back. */
  assert_int_equal(r->log[0].n, 0);
  for (int i = 0; i < NP; i++) {
    assert_int_equal(r->pr[i].waits, 1);
    assert_int_equal(r->pr[i].err[0], -ESHUTDOWN);
    assert_int_equal(r->pr[i].handed_back, r->op[i] == OP_PUT ? 1 : 0);
  }
  sh_stats st = bounded_end(sys);
  assert_true(st.dropped_stopped >= CAP); /* the fill notices */
  /* The fill asks sat in the stopped mailbox: answered -ESHUTDOWN. */
  assert_int_equal(r->d_nf, CAP);
  for (int i = 0; i < CAP; i++) assert_int_equal(r->d_err[i], -ESHUTDOWN);
  assert_int_equal(r->hold_error, -ESHUTDOWN);
  free(r);
}

/* A sender told by the stop itself (its wait failed -ESHUTDOWN) sends again
 * to the stopped actor: every kind of send is refused -ESHUTDOWN (not
 * -EAGAIN: the mailbox is not full, it is closed), at once, and the
 * messages come back as the calls say. */
static void case_retry_after_stop(void) {
  enum { NP = 4, CAP = 2 };
  rig *r = rig_new();
  sh_system *sys = stop_run(r, NP, CAP, true);
  for (int i = 0; i < NP; i++) {
    const p_result *pr = &r->pr[i];
    assert_int_equal(pr->err[0], -ESHUTDOWN);
    assert_int_equal(pr->stopped_try_rc, -ESHUTDOWN);
    assert_int_equal(pr->stopped_ask_try_rc, 0); /* a future, failed at once */
    assert_int_equal(pr->stopped_ask_try_err, -ESHUTDOWN);
    assert_true(pr->stopped_put_at_once);
    assert_int_equal(pr->stopped_put_err, -ESHUTDOWN);
    assert_true(pr->stopped_put_back);
    assert_true(pr->stopped_ask_at_once);
    assert_int_equal(pr->stopped_ask_err, -ESHUTDOWN);
  }
  bounded_end(sys);
  free(r);
}

/* ---- 5b. the senders stop while they wait ------------------------------------------------ */

/* Once every producer waits, the driver stops them all (not C). */
static void stop_producers_queued(driver *d, int from) {
  (void)from;
  rig *r = d->r;
  if (d->queued < r->np) return;
  for (int i = 0; i < r->np; i++) CHECK(sh_stop(r->p[i]) == 0);
}

/* When every producer saw its wait end: the figures, then C goes on. */
static void release_when_done(driver *d, int from) {
  (void)from;
  rig *r = d->r;
  if (d->done < r->np) return;
  b_stats(r, SH_NOTICE, &r->seen[0]);
  b_stats(r, SH_ASK, &r->seen[1]);
  b_release(r);
}

static const driver_plan sender_stop_plan = {
    .held = fill_both_held, .queued = stop_producers_queued, .done = release_when_done};

/* A stopped sender takes its waiting send back out of the gate: its puts
 * fail -ESHUTDOWN with their notices handed back, its asks fail, and none
 * of them reaches C when C goes on (only the driver's fills do). */
static void case_sender_stopped(void) {
  enum { NP = 4, CAP = 2 };
  rig *r = rig_new();
  r->np = NP;
  r->ops = 1;
  r->report_waits = true;
  r->report_done = true;
  for (int i = 0; i < NP; i++) r->op[i] = i % 2 == 0 ? OP_PUT : OP_ASK;
  /* C takes the fills; the producers and the driver's fill stack end. */
  sh_system *sys = b_system(2 * CAP + NP + 1);
  b_spawn_consumer(sys, r, CAP, CAP);
  b_spawn_hold(sys, r, &sender_stop_plan);
  b_spawn_producers(sys, r);
  b_run(sys);
  for (int i = 0; i < NP; i++) {
    assert_int_equal(r->pr[i].waits, 1);
    assert_int_equal(r->pr[i].err[0], -ESHUTDOWN);
    assert_int_equal(r->pr[i].handed_back, r->op[i] == OP_PUT ? 1 : 0);
  }
  /* The gates let go of the stopped senders before C went on. */
  for (int k = 0; k < 2; k++) assert_box(&r->seen[k], CAP, CAP, 0, NP / 2, 1);
  const int want[] = {B_A(B_FILL_FROM, 0), B_A(B_FILL_FROM, 1), B_N(B_FILL_FROM, 0),
                      B_N(B_FILL_FROM, 1)};
  assert_log(&r->log[0], want, 2 * CAP);
  bounded_end(sys);
  free(r);
}

/* ---- 6. timeouts while waiting for room ------------------------------------------------- */

/* When both producers' sends timed out: the figures, then the release. */
static const driver_plan timeout_plan = {.held = fill_both_held, .done = release_when_done};

static void case_timeouts(void) {
  enum { NP = 2, CAP = 1 };
  rig *r = rig_new();
  r->np = NP;
  r->ops = 1;
  r->timeout_ms = B_TIMEOUT_MS;
  r->report_done = true;
  r->op[0] = OP_PUT;
  r->op[1] = OP_ASK;
  /* C takes the two fills; the producers and the driver's stack end. */
  sh_system *sys = b_system(2 + NP + 1);
  b_spawn_consumer(sys, r, CAP, CAP);
  b_spawn_hold(sys, r, &timeout_plan);
  b_spawn_producers(sys, r);
  b_run(sys);
  sh_stats st = bounded_end(sys);
  assert_int_equal(st.asks_timed_out, NP);

  /* Timed out: the put's notice back, the ask failed; their waits ended. */
  assert_int_equal(r->pr[0].err[0], -ETIMEDOUT);
  assert_int_equal(r->pr[0].handed_back, 1);
  assert_int_equal(r->pr[1].err[0], -ETIMEDOUT);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(r->pr[k].waits, 1);
    assert_int_equal(r->filled[k], CAP);
    assert_box(&r->seen[k], CAP, CAP, 0, 1, 1);
  }
  /* Only the fills reached C (its asks go before its notices). */
  const int want[] = {B_A(B_FILL_FROM, 0), B_N(B_FILL_FROM, 0)};
  assert_log(&r->log[0], want, 2);
  assert_int_equal(r->d_nf, 1);
  assert_int_equal(r->d_err[0], 0);
  assert_int_equal(r->d_val[0], B_A(B_FILL_FROM, 0) + 1);
  free(r);
}

/* ---- 8. misuse, and a put with room ---------------------------------------------------- */

/* From a stack: sh_put with room completes at once; the calls that must be
 * refused are, and the message is freed or kept as each call says (ASan and
 * LeakSanitizer see any other fate); the kept ask is finally sent. */
static sh_yield misuse_go(driver *d, sh_stack *st) {
  rig *r = d->r;
  misuse_result *mr = &r->mis;
  d_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == D_DONE) {
    mr->ask_try_ok = sh_future_error(l->f[0]);
    const num_reply *rep = sh_future_reply(l->f[0], num_reply);
    mr->reply = rep != NULL ? rep->v : -1;
    th_done(&d->base);
    return sh_return(st, NULL);
  }
  sh_future *f = sh_put(st, r->c, b_notice(0, 0), SH_FOREVER);
  mr->put_room_done = sh_future_done(f);
  mr->put_room_err = sh_future_error(f);
  mr->put_room_back_null = sh_future_take(f) == NULL;
  f = sh_put(st, r->u, b_notice(0, 0), SH_FOREVER);
  mr->put_unbounded_done = sh_future_done(f);
  mr->put_unbounded_err = sh_future_error(f);
  mr->put_null_msg = sh_put(st, r->c, NULL, SH_FOREVER) == NULL;
  mr->put_ask_type = sh_put(st, r->c, b_ask(0, 1), SH_FOREVER) == NULL;   /* freed */
  mr->put_null_to = sh_put(st, NULL, b_notice(0, 2), SH_FOREVER) == NULL; /* freed */
  sh_msg *m = b_ask(0, 3);
  sh_msg *n = b_notice(0, 4);
  mr->ask_try_null_out = sh_ask_try(st, r->c, m, SH_FOREVER, NULL);
  mr->ask_try_notice = sh_ask_try(st, r->c, n, SH_FOREVER, &f);
  mr->ask_try_null_to = sh_ask_try(st, NULL, m, SH_FOREVER, &f);
  sh_msg_free(n);
  /* m is still ours after three refusals: now it goes. */
  f = NULL;
  if (sh_ask_try(st, r->c, m, SH_FOREVER, &f) != 0) sh_msg_free(m);
  CHECK(f != NULL);
  if (f == NULL) {
    b_abort(&d->base);
    return sh_return(st, NULL);
  }
  d_keep(l, f);
  return sh_suspend(st, D_DONE);
}

static const driver_plan misuse_plan = {.go = misuse_go};

static int noop_init(sh_actor *self, void *arg) {
  (void)self;
  (void)arg;
  return 0;
}

/* Capacities beyond SH_MAX_CAPACITY are refused by every spawn; the
 * greatest is accepted and reported. */
static void misuse_capacities(sh_system *sys) {
  sh_actor_class big = {.name = "b_big", .size = sizeof(sh_actor), .init = noop_init};
  const sh_addr *a = NULL;
  big.notice_capacity = SH_MAX_CAPACITY + 1;
  assert_int_equal(sh_spawn(sys, &big, NULL, 1, &a), -EINVAL);
  assert_int_equal(sh_spawn_on(sys, &big, NULL, 0, &a), -EINVAL);
  big.notice_capacity = 0;
  big.ask_capacity = UINT32_MAX;
  assert_int_equal(sh_spawn(sys, &big, NULL, 3, &a), -EINVAL);
  big.ask_capacity = SH_MAX_CAPACITY;
  big.notice_capacity = SH_MAX_CAPACITY;
  /* Three instances: a round-robin address, each with its own mailboxes. */
  static sh_actor_class biggest; /* lives as long as the system */
  biggest = big;
  assert_int_equal(sh_spawn(sys, &biggest, NULL, 3, &a), 0);
  sh_mailbox_stats s;
  for (uint32_t i = 0; i < 3; i++) {
    assert_int_equal(sh_mailbox_stats_get(a, i, SH_ASK, &s), 0);
    assert_int_equal(s.capacity, SH_MAX_CAPACITY);
    assert_int_equal(sh_mailbox_stats_get(a, i, SH_NOTICE, &s), 0);
    assert_int_equal(s.capacity, SH_MAX_CAPACITY);
  }
  assert_int_equal(sh_mailbox_stats_get(a, 3, SH_ASK, &s), -EINVAL);
}

/* Off any stack (main): the calls that need no stack. */
static void misuse_outside(const rig *r) {
  sh_mailbox_stats s;
  assert_int_equal(sh_mailbox_stats_get(NULL, 0, SH_NOTICE, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, SH_NOTICE, NULL), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 1, SH_NOTICE, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, SH_REPLY, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, (sh_msg_kind)0, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, (sh_msg_kind)99, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->u, 0, SH_NOTICE, &s), 0);
  assert_int_equal(s.capacity, 0);
  sh_msg *m = b_notice(0, 10);
  assert_int_equal(sh_notice_try(NULL, m), -EINVAL);
  assert_int_equal(sh_notice_try(r->c, NULL), -EINVAL);
  sh_msg *a = b_ask(0, 11);
  assert_int_equal(sh_notice_try(r->c, a), -EINVAL);
  sh_future *f = NULL;
  assert_int_equal(sh_ask_try(NULL, r->c, a, SH_FOREVER, &f), -EINVAL);
  assert_null(sh_put(NULL, r->c, m, SH_FOREVER)); /* freed */
  assert_int_equal(sh_notice(r->c, a), -EINVAL); /* freed */
  /* Nothing of it was counted against C's mailboxes. */
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, SH_NOTICE, &s), 0);
  assert_box(&s, 2, 0, 0, 0, 0);
}

static void case_misuse(void) {
  rig *r = rig_new();
  /* C takes the put with room and the kept ask, U its put; the driver ends. */
  sh_system *sys = b_system(4);
  b_spawn_consumer(sys, r, 2, 2);
  r->cls[1] = consumer_class(0, 0);
  r->u = b_spawn(sys, &r->cls[1], &(ccfg){r, 1}, 1);
  r->plan = &misuse_plan;
  r->d = b_spawn(sys, &driver_class, r, 2);
  misuse_capacities(sys);
  misuse_outside(r);
  b_kick(r->d);
  b_run(sys);
  bounded_end(sys);
  const misuse_result *mr = &r->mis;
  assert_true(mr->put_room_done);
  assert_int_equal(mr->put_room_err, 0);
  assert_true(mr->put_room_back_null);
  assert_true(mr->put_unbounded_done);
  assert_int_equal(mr->put_unbounded_err, 0);
  assert_true(mr->put_null_msg);
  assert_true(mr->put_ask_type);
  assert_true(mr->put_null_to);
  assert_int_equal(mr->ask_try_null_out, -EINVAL);
  assert_int_equal(mr->ask_try_notice, -EINVAL);
  assert_int_equal(mr->ask_try_null_to, -EINVAL);
  assert_int_equal(mr->ask_try_ok, 0);
  assert_int_equal(mr->reply, B_A(0, 3) + 1);
  /* C got the put and the ask, in either order (two mailboxes). */
  const c_log *lg = &r->log[0];
  assert_int_equal(lg->n, 2);
  assert_int_equal(lg->e[0] + lg->e[1], B_N(0, 0) + B_A(0, 3));
  assert_true(lg->e[0] == B_N(0, 0) || lg->e[0] == B_A(0, 3));
  const int want_u[] = {B_N(0, 0)};
  assert_log(&r->log[1], want_u, 1);
  free(r);
}

#endif
