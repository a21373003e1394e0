/*
 * The cases of the outside-thread bridge (sh_bridge_*), written against the
 * public API and core/plat.h's threads only, so that the same bodies run on
 * the epoll backend (test_e2e_bridge.c: pthreads, also under TSan) and in the
 * simulator (test_sim_bridge.c: fibers, under several seeds and strategies).
 *
 * The includer defines, before including this file:
 *   static void backend_setup(void)   called before every sh_system_new (the
 *                                     simulator configures its run there);
 *   static void backend_pause(void)   one step of a polling wait: lets the
 *                                     other threads (fibers) run;
 *   BUSY_ASKS, BUSY_MAX_HOPS          the size of the stealing case.
 * and lists the cases with BRIDGE_CASES(X): X(name) for each case_<name>.
 *
 * The actors, the holds and the accounting every case ends with are
 * bridge_fixture.h's.
 */
#ifndef TESTS_BRIDGE_CASES_H
#define TESTS_BRIDGE_CASES_H

#include "bridge_fixture.h"

/* ---- 1. the three ways to receive ------------------------------------------------ */

static void case_recv_modes(void) {
  sh_system *sys = new_system();
  const sh_addr *s = spawn(sys, &server_class, 1);
  sh_bridge *b = bridge(sys);
  sh_bridge_reply r;
  /* Before the start: nothing pending, then an ask nobody can answer yet. */
  assert_int_equal(sh_bridge_pending(b), 0);
  assert_int_equal(sh_bridge_recv(b, SH_NOWAIT, &r), -ENOMSG);
  assert_int_equal(sh_bridge_recv(b, SH_FOREVER, &r), -ENOMSG);
  uint64_t t0 = ask(b, s, new_ask(10), SH_NOWAIT);
  assert_int_equal(sh_bridge_pending(b), 1);
  assert_int_equal(sh_bridge_recv(b, SH_NOWAIT, &r), -EAGAIN);
  assert_int_equal(sh_bridge_recv(b, SHORT_MS, &r), -ETIMEDOUT);
  assert_int_equal(sh_system_start(sys), 0);
  recv_value(b, t0, 10);
  /* Running: a plain round trip. */
  uint64_t t1 = ask(b, s, new_ask(41), SH_FOREVER);
  assert_true(t1 != t0);
  recv_value(b, t1, 41);
  /* Held: nothing can come until the release. */
  const sh_addr *lock = hold(sys, b, s);
  uint64_t t2 = ask(b, s, new_ask(7), SH_FOREVER);
  assert_int_equal(sh_bridge_recv(b, SH_NOWAIT, &r), -EAGAIN);
  assert_int_equal(sh_bridge_recv(b, SHORT_MS, &r), -ETIMEDOUT);
  assert_int_equal(sh_bridge_pending(b), 1);
  release(lock);
  recv_value(b, t2, 7);
  /* No ticket asked for: the reply still comes. */
  assert_int_equal(sh_bridge_ask(b, s, new_ask(3), SH_FOREVER, NULL), 0);
  assert_int_equal(sh_bridge_recv(b, SH_FOREVER, &r), 0);
  assert_true(r.ticket > t2);
  assert_int_equal(((num_reply *)r.msg)->v, 4);
  sh_msg_free(r.msg);
  assert_int_equal(sh_bridge_pending(b), 0);
  assert_int_equal(sh_bridge_recv(b, SH_NOWAIT, &r), -ENOMSG);
  assert_int_equal(sh_bridge_recv(b, SHORT_MS, &r), -ENOMSG);
  sh_bridge_free(b);
  sh_stats st = finish(sys);
  assert_int_equal(st.replies_unknown, LOCK_RELEASE_UNKNOWN);
}

/* ---- 2. many asks in flight ----------------------------------------------------- */

static void case_many_asks(void) {
  sh_system *sys = new_system();
  const sh_addr *to[4] = {
      spawn(sys, &server_class, 4), /* round robin */
      spawn(sys, &server_class, SH_SPAWN_PER_WORKER),
      spawn(sys, &server_class, 1),
      spawn(sys, &server_class, 1),
  };
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *b = bridge(sys);
  uint64_t ticket[MANY_ASKS];
  bool answered[MANY_ASKS] = {false};
  for (int i = 0; i < MANY_ASKS; i++) {
    /* Unbounded mailboxes: a send that may not wait never has to. */
    ticket[i] = ask(b, to[i % 4], new_ask(i), SH_NOWAIT);
    for (int j = 0; j < i; j++) assert_true(ticket[j] != ticket[i]);
  }
  assert_int_equal(sh_bridge_pending(b), MANY_ASKS);
  for (int n = 0; n < MANY_ASKS; n++) {
    sh_bridge_reply r;
    assert_int_equal(sh_bridge_recv(b, SH_FOREVER, &r), 0);
    int i = 0;
    while (i < MANY_ASKS && ticket[i] != r.ticket) i++;
    assert_true(i < MANY_ASKS);
    assert_false(answered[i]);
    answered[i] = true;
    assert_int_equal(r.error, 0);
    assert_non_null(r.msg);
    assert_int_equal(((num_reply *)r.msg)->v, i + 1);
    sh_msg_free(r.msg);
  }
  assert_int_equal(sh_bridge_pending(b), 0);
  assert_int_equal(sh_bridge_recv(b, SH_NOWAIT, &(sh_bridge_reply){0}), -ENOMSG);
  sh_bridge_free(b);
  sh_stats st = finish(sys);
  assert_int_equal(st.asks, MANY_ASKS);
}

/* ---- 3. exceptions and stopped actors ---------------------------------------------- */

static void expect_error(sh_bridge *b, uint64_t ticket, int error) {
  sh_bridge_reply r = {.msg = (sh_msg *)&r};
  assert_int_equal(sh_bridge_recv(b, SH_FOREVER, &r), 0);
  assert_int_equal(r.ticket, ticket);
  assert_int_equal(r.error, error);
  assert_null(r.msg);
}

static void case_exceptions(void) {
  sh_system *sys = new_system();
  const sh_addr *s = spawn(sys, &server_class, 1);
  const sh_addr *mute = spawn(sys, &mute_class, 1);
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *b = bridge(sys);
  throw_ask *ta = sh_msg_new(throw_ask, .error = -EDOM);
  assert_non_null(ta);
  expect_error(b, ask(b, s, &ta->hdr, SH_FOREVER), -EDOM);
  /* Untracked: the runtime frees it when it likes, after the answer. */
  expect_error(b, ask(b, mute, th_new_ask(1), SH_FOREVER), -ENOTSUP);
  /* Stopped: refused at once; a _try leaves the message ours to reuse... */
  assert_int_equal(sh_stop(s), 0);
  sh_msg *a = new_ask(5), *n = new_note(6);
  assert_int_equal(sh_bridge_ask_try(b, s, a, NULL), -ESHUTDOWN);
  assert_int_equal(sh_bridge_notice_try(b, s, n), -ESHUTDOWN);
  assert_int_equal(sh_bridge_pending(b), 0);
  assert_int_equal(atomic_load(&g.drops), 0);
  assert_int_equal(item_v(a) + item_v(n), 11);
  /* ... the other sends take it and free it. */
  assert_int_equal(sh_bridge_ask(b, s, a, SH_FOREVER, NULL), -ESHUTDOWN);
  assert_int_equal(sh_bridge_notice(b, s, n, SH_NOWAIT), -ESHUTDOWN);
  assert_int_equal(atomic_load(&g.drops), 2);
  assert_int_equal(sh_bridge_pending(b), 0);
  assert_int_equal(sh_bridge_recv(b, SH_NOWAIT, &(sh_bridge_reply){0}), -ENOMSG);
  sh_bridge_free(b);
  finish(sys);
}

/* ---- 4. blocking sends into bounded mailboxes --------------------------------------- */

/* The held, full box refuses a send that may not wait (-EAGAIN: a _try,
 * m stays ours) or may wait only a little (-ETIMEDOUT: the send took its
 * message, a copy of m, and freed it); each is counted refused. */
static void refuse_twice(sh_bridge *b, const sh_addr *s, sh_msg *m) {
  int drops = atomic_load(&g.drops);
  bool is_ask = sh_msg_type_of(m)->kind == SH_ASK;
  int rc = is_ask ? sh_bridge_ask_try(b, s, m, NULL) : sh_bridge_notice_try(b, s, m);
  assert_int_equal(rc, -EAGAIN);
  assert_int_equal(atomic_load(&g.drops), drops);
  sh_msg *c = is_ask ? new_ask(item_v(m)) : new_note(item_v(m));
  rc = is_ask ? sh_bridge_ask(b, s, c, SHORT_MS, NULL) : sh_bridge_notice(b, s, c, SHORT_MS);
  assert_int_equal(rc, -ETIMEDOUT);
  assert_int_equal(atomic_load(&g.drops), drops + 1);
  sh_mailbox_stats st = box_stats(s, is_ask ? SH_ASK : SH_NOTICE);
  assert_int_equal(st.capacity, 1);
  assert_int_equal(st.depth, 1);
  assert_int_equal(st.refused, 2);
  assert_int_equal(st.waiting, 0);
  assert_int_equal(st.suspended, 1); /* the timed send waited */
}

static void case_bounded_send(void) {
  sh_system *sys = new_system();
  const sh_addr *s = spawn(sys, &bounded_class, 1);
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *b = bridge(sys);
  const sh_addr *lock = hold(sys, b, s);
  /* Fill both boxes, then try them. */
  assert_int_equal(sh_bridge_notice(b, s, new_note(1), SH_NOWAIT), 0);
  uint64_t t1 = ask(b, s, new_ask(100), SH_NOWAIT);
  sh_msg *n2 = new_note(2), *a2 = new_ask(200);
  refuse_twice(b, s, n2);
  refuse_twice(b, s, a2);
  /* The refused messages, still ours, go with threads that wait for good. */
  static sender tn, ta;
  tn = sender_of(sys, s, n2);
  ta = sender_of(sys, s, a2);
  ta.recv = true;
  sh_plat_thread *th_n = thread_start(sender_main, &tn);
  sh_plat_thread *th_a = thread_start(sender_main, &ta);
  wait_waiting(s, SH_NOTICE, 1);
  wait_waiting(s, SH_ASK, 1);
  assert_int_equal(box_stats(s, SH_NOTICE).suspended, 2);
  release(lock);
  sh_plat_thread_join(th_n);
  sh_plat_thread_join(th_a);
  recv_value(b, t1, 100);
  assert_int_equal(tn.new_rc, 0);
  assert_int_equal(tn.rc, 0);
  assert_int_equal(ta.rc, 0);
  assert_int_equal(ta.recv_rc, 0);
  assert_int_equal(ta.reply.ticket, ta.ticket);
  assert_int_equal(ta.reply.error, 0);
  assert_int_equal(ta.reply_v, 201);
  wait_count(&g.items, 2, "both items handled");
  sh_mailbox_stats st = box_stats(s, SH_NOTICE);
  assert_int_equal(st.high_water, 1);
  assert_int_equal(st.refused, 2);
  sh_bridge_free(b);
  finish(sys);
  assert_int_equal(g.order[0], 1);
  assert_int_equal(g.order[1], 2);
}

/* ---- 5. FIFO among blocked threads ---------------------------------------------------- */

static void case_fifo(void) {
  sh_system *sys = new_system();
  const sh_addr *s = spawn(sys, &bounded_class, 1);
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *b = bridge(sys);
  const sh_addr *lock = hold(sys, b, s);
  assert_int_equal(sh_bridge_notice(b, s, new_note(0), SH_NOWAIT), 0);
  static sender snd[FIFO_THREADS];
  sh_plat_thread *th[FIFO_THREADS];
  /* Thread k starts only once k - 1 are seen waiting: they queue in order. */
  for (int k = 0; k < FIFO_THREADS; k++) {
    snd[k] = sender_of(sys, s, new_note(k + 1));
    th[k] = thread_start(sender_main, &snd[k]);
    wait_waiting(s, SH_NOTICE, (uint32_t)k + 1);
  }
  /* A newcomer does not overtake them. */
  sh_msg *late = new_note(99);
  assert_int_equal(sh_bridge_notice_try(b, s, late), -EAGAIN);
  sh_msg_free(late);
  release(lock);
  for (int k = 0; k < FIFO_THREADS; k++) sh_plat_thread_join(th[k]);
  for (int k = 0; k < FIFO_THREADS; k++) assert_int_equal(snd[k].rc, 0);
  wait_count(&g.items, FIFO_THREADS + 1, "every item handled");
  sh_bridge_free(b);
  finish(sys);
  for (int k = 0; k <= FIFO_THREADS; k++) assert_int_equal(g.order[k], k);
}

/* ---- 6. sh_stop wakes blocked senders -------------------------------------------------- */

static void case_stop_wakes(void) {
  sh_system *sys = new_system();
  const sh_addr *s = NULL;
  assert_int_equal(sh_spawn_on(sys, &bounded_class, NULL, 0, &s), 0);
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *b = bridge(sys);
  /* Busy: the stop meets the server running, as it may in any program. */
  hold_busy(sys, b, s);
  assert_int_equal(sh_bridge_notice(b, s, new_note(1), SH_NOWAIT), 0);
  uint64_t t = ask(b, s, new_ask(100), SH_NOWAIT);
  enum { N = 3 };
  static sender snd[N];
  snd[0] = sender_of(sys, s, new_note(2));
  snd[1] = sender_of(sys, s, new_note(3));
  snd[2] = sender_of(sys, s, new_ask(200));
  sh_plat_thread *th[N];
  for (int k = 0; k < N; k++) th[k] = thread_start(sender_main, &snd[k]);
  wait_waiting(s, SH_NOTICE, 2);
  wait_waiting(s, SH_ASK, 1);
  assert_int_equal(sh_stop(s), 0);
  for (int k = 0; k < N; k++) sh_plat_thread_join(th[k]);
  for (int k = 0; k < N; k++) {
    /* Each was waiting before the stop began: woken, never admitted (its
     * message freed by the send: finish() counts the drops). */
    assert_int_equal(snd[k].rc, -ESHUTDOWN);
  }
  /* The queued ask is answered with the stop; the queued notice dropped. */
  expect_error(b, t, -ESHUTDOWN);
  sh_bridge_free(b);
  sh_stats st = finish(sys);
  assert_int_equal(atomic_load(&g.items), 0);
  assert_true(st.dropped_stopped >= 1);
}

/* ---- 7. shutdown wakes blocked threads ------------------------------------------------- */

static void case_shutdown(void) {
  sh_system *sys = new_system();
  const sh_addr *s = spawn(sys, &bounded_class, 1);
  const sh_addr *never = spawn(sys, &lock_class, 1);
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *b = bridge(sys);
  hold(sys, b, s);
  assert_int_equal(sh_bridge_notice(b, s, new_note(1), SH_NOWAIT), 0);
  /* One thread waits for a reply that never comes, one for room. */
  static sender rcv, put;
  rcv = sender_of(sys, never, new_ask(5));
  put = sender_of(sys, s, new_note(2));
  rcv.recv = true;
  sh_plat_thread *th_r = thread_start(sender_main, &rcv);
  sh_plat_thread *th_p = thread_start(sender_main, &put);
  wait_count(&g.held, 2, "the thread's ask to be held"); /* and the server's */
  wait_waiting(s, SH_NOTICE, 1);
  assert_int_equal(sh_system_shutdown(sys), 0);
  sh_plat_thread_join(th_r);
  sh_plat_thread_join(th_p);
  assert_int_equal(rcv.rc, 0);
  /* The held ask's end: the receive says the system is gone, or (the lock
   * throws as the shutdown stops it) the reply is that error. */
  if (rcv.recv_rc == 0) {
    assert_int_equal(rcv.reply.error, -ESHUTDOWN);
    assert_null(rcv.reply.msg);
    assert_int_equal(rcv.recv_rc2, -ENOMSG);
  } else {
    assert_int_equal(rcv.recv_rc, -ESHUTDOWN);
    assert_int_equal(rcv.recv_rc2, -ESHUTDOWN);
  }
  assert_int_equal(put.rc, -ESHUTDOWN);
  sh_bridge *late = NULL;
  assert_int_equal(sh_bridge_new(sys, &late), -ESHUTDOWN);
  assert_null(late);
  sh_bridge_free(b);
  finish(sys);
}

/* ---- 8. a freed bridge's late reply does not reach its next user ---------------------- */

static void case_reuse(void) {
  sh_system *sys = new_system();
  const sh_addr *held = spawn(sys, &server_class, 1);
  const sh_addr *echo = spawn(sys, &server_class, 1);
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *admin = bridge(sys);
  const sh_addr *lock = hold(sys, admin, held);
  sh_bridge *b1 = bridge(sys);
  uint64_t old = ask(b1, held, new_ask(1), SH_FOREVER);
  sh_bridge_free(b1);
  sh_bridge *b2 = bridge(sys);
  /* The closed bridge is kept for the next user (bridge.h): this reuse is
   * what the case is about. */
  assert_ptr_equal(b2, b1);
  sh_bridge_reply r;
  assert_int_equal(sh_bridge_pending(b2), 0);
  assert_int_equal(sh_bridge_recv(b2, SH_NOWAIT, &r), -ENOMSG);
  uint64_t mine = ask(b2, echo, new_ask(100), SH_FOREVER);
  assert_true(mine != old);
  recv_value(b2, mine, 100);
  /* Queued behind the old ask: its reply comes after the old one's. */
  uint64_t next = ask(b2, held, new_ask(200), SH_FOREVER);
  assert_int_equal(sh_bridge_recv(b2, SH_NOWAIT, &r), -EAGAIN);
  release(lock);
  recv_value(b2, next, 200);
  assert_int_equal(sh_bridge_recv(b2, SH_NOWAIT, &r), -ENOMSG);
  sh_bridge_free(b2);
  sh_bridge_free(admin);
  sh_stats st = finish(sys);
  /* The old ask's reply, besides what the release makes (as in case 1). */
  assert_int_equal(st.replies_unknown, LOCK_RELEASE_UNKNOWN + 1);
}

/* ---- 9. misuse ------------------------------------------------------------------------ */

/* Every wrong call is -EINVAL; a _try leaves m the caller's, the other
 * sends free it. */
static void misuse_sends(sh_bridge *b, const sh_addr *s) {
  sh_msg *n = new_note(1), *a = new_ask(2);
  uint64_t t = 77;
  assert_int_equal(sh_bridge_notice_try(NULL, s, n), -EINVAL);
  assert_int_equal(sh_bridge_notice_try(b, NULL, n), -EINVAL);
  assert_int_equal(sh_bridge_notice_try(b, s, NULL), -EINVAL);
  assert_int_equal(sh_bridge_notice_try(b, s, a), -EINVAL); /* an ask */
  assert_int_equal(sh_bridge_ask_try(NULL, s, a, &t), -EINVAL);
  assert_int_equal(sh_bridge_ask_try(b, NULL, a, &t), -EINVAL);
  assert_int_equal(sh_bridge_ask_try(b, s, NULL, &t), -EINVAL);
  assert_int_equal(sh_bridge_ask_try(b, s, n, &t), -EINVAL); /* a notice */
  assert_int_equal(t, 77);
  assert_int_equal(sh_bridge_pending(b), 0);
  assert_int_equal(atomic_load(&g.drops), 0);
  assert_int_equal(sh_bridge_notice(b, s, new_ask(3), SH_FOREVER), -EINVAL);
  assert_int_equal(sh_bridge_ask(b, s, new_note(4), SH_NOWAIT, &t), -EINVAL);
  assert_int_equal(sh_bridge_notice(b, s, new_note(5), -2), -EINVAL); /* a bad timeout */
  assert_int_equal(t, 77);
  assert_int_equal(atomic_load(&g.drops), 3);
  assert_int_equal(item_v(n) + item_v(a), 3);
  /* Still ours: sent properly now. */
  assert_int_equal(sh_bridge_notice(b, s, n, SH_FOREVER), 0);
  recv_value(b, ask(b, s, a, SH_FOREVER), 2);
}

static void case_misuse(void) {
  sh_system *sys = new_system();
  const sh_addr *s = spawn(sys, &server_class, 1);
  sh_bridge *b = NULL;
  assert_int_equal(sh_bridge_new(NULL, &b), -EINVAL);
  assert_int_equal(sh_bridge_new(sys, NULL), -EINVAL);
  assert_null(b);
  assert_int_equal(sh_system_start(sys), 0);
  b = bridge(sys);
  sh_bridge_reply r;
  assert_int_equal(sh_bridge_recv(NULL, SH_NOWAIT, &r), -EINVAL);
  assert_int_equal(sh_bridge_recv(b, SH_NOWAIT, NULL), -EINVAL);
  assert_int_equal(sh_bridge_pending(NULL), 0);
  sh_bridge_free(NULL);
  misuse_sends(b, s);
  /* From a worker: refused, nothing made. */
  probe_note *p = sh_msg_new(probe_note);
  assert_non_null(p);
  assert_int_equal(sh_bridge_notice(b, s, &p->hdr, SH_FOREVER), 0);
  wait_count(&g.probe_rc, 1, "the probe");
  assert_int_equal(atomic_load(&g.probe_rc) - 1000, -EINVAL);
  assert_true(atomic_load(&g.probe_left_null));
  sh_bridge_free(b);
  finish(sys);
}

/* ---- 10. an outside thread asks while workers steal ------------------------------------ */

typedef struct asker { sh_system *sys; int asked, wrong; } asker;

static void asker_main(void *arg) {
  asker *k = arg;
  sh_bridge *b = NULL;
  if (sh_bridge_new(k->sys, &b) != 0) {
    k->wrong = -1;
    return;
  }
  for (int i = 0; i < BUSY_ASKS; i++) {
    uint64_t t = 0;
    sh_bridge_reply r = {0};
    int rc = sh_bridge_ask(b, busy_ring[i % BUSY_ACTORS], th_new_ask(i), SH_FOREVER, &t);
    if (rc == 0) rc = sh_bridge_recv(b, SH_FOREVER, &r);
    bool ok = rc == 0 && r.ticket == t && r.error == 0 && sh_msg_is(r.msg, &num_reply_type) &&
              ((num_reply *)r.msg)->v == i + 1;
    k->wrong += !ok;
    k->asked++;
    sh_msg_free(r.msg);
  }
  atomic_store(&g.busy_stop, true);
  sh_bridge_free(b);
}

static void case_busy_steal(void) {
  sh_config cfg = th_config(WORKERS);
  cfg.max_per_run = 2;
  cfg.steal_floor = BUSY_STEAL_FLOOR;
  sh_system *sys = new_system_cfg(&cfg);
  for (uint32_t i = 0; i < BUSY_ACTORS; i++)
    assert_int_equal(sh_spawn_on(sys, &busy_class, &i, 0, &busy_ring[i]), 0);
  for (uint32_t i = 0; i < BUSY_TOKENS; i++) {
    busy_note *n = sh_msg_new(busy_note, .hops = 0);
    assert_non_null(n);
    assert_int_equal(sh_notice(busy_ring[i % BUSY_ACTORS], &n->hdr), 0);
  }
  assert_int_equal(sh_system_start(sys), 0);
  static asker k;
  k = (asker){.sys = sys};
  sh_plat_thread *t = thread_start(asker_main, &k);
  sh_plat_thread_join(t);
  finish(sys);
  assert_int_equal(k.asked, BUSY_ASKS);
  assert_int_equal(k.wrong, 0);
}

/* ---- 11. bridges made while the system shuts down --------------------------------------- */

/* Threads make and free bridges (at most CHURN_MAX) during a shutdown, which
 * stores `shut` without the registry lock: each new one works or is -ESHUTDOWN. */
#define CHURN_MAX 20000
typedef struct churner { sh_system *sys; int rc; } churner;

static void churner_main(void *arg) {
  churner *c = arg;
  sh_bridge *b = NULL;
  for (int i = 0; i < CHURN_MAX && (c->rc = sh_bridge_new(c->sys, &b)) == 0; i++) sh_bridge_free(b);
}

static void case_new_vs_shutdown(void) {
  sh_system *sys = new_system();
  assert_int_equal(sh_system_start(sys), 0);
  static churner c[2];
  sh_plat_thread *t[2];
  for (int k = 0; k < 2; k++) {
    c[k] = (churner){.sys = sys};
    t[k] = thread_start(churner_main, &c[k]);
  }
  backend_pause();
  assert_int_equal(sh_system_shutdown(sys), 0);
  for (int k = 0; k < 2; k++) {
    sh_plat_thread_join(t[k]);
    assert_true(c[k].rc == 0 || c[k].rc == -ESHUTDOWN);
  }
  finish(sys);
}

#define BRIDGE_CASES(X) \
  X(recv_modes)         \
  X(many_asks)          \
  X(exceptions)         \
  X(bounded_send)       \
  X(fifo)               \
  X(stop_wakes)         \
  X(shutdown)           \
  X(reuse)              \
  X(misuse)             \
  X(busy_steal)         \
  X(new_vs_shutdown)

#endif
