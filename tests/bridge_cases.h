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
 * Holding an actor. A server is "held" by a barrier notice (block_note)
 * whose stack asks a lock actor that never answers (th_hold) until the test
 * stops the lock: while the barrier stack waits the server takes no asks or
 * notices, so a bounded mailbox stays full and an ask stays unanswered for
 * as long as the test wants, on any schedule. Releasing is sh_stop(lock).
 * A busy hold (spin_note) is a barrier stack that asks an echo actor again
 * and again until its ask fails: the server stays held and yet runs all
 * the time, so that a stop meets it running; only stopping the server ends
 * it.
 *
 * Handlers never call cmocka (a failed assertion longjmps): they record in
 * `g` and CHECK(); threads record in their own struct, read after the join.
 * Every case ends with finish(): shutdown, then the accounting invariants
 * (asks == asks_resolved, sent == delivered + replies_unknown +
 * dropped_stopped, pool_outstanding == 0), every item message the test
 * made was freed exactly once (its drop hook counts), every hold ended.
 */
#ifndef TESTS_BRIDGE_CASES_H
#define TESTS_BRIDGE_CASES_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/stackhouse.h>

#include "plat.h"
#include "support/harness.h"

/* Polling steps before a wait for another thread is a failure (the
 * watchdog is the real bound; this one names the wait that hung). */
#define WAIT_STEPS 400000L
#define WORKERS 2
#define SHORT_MS 10 /* a timeout that must expire: what it waits for cannot come */
#define MAX_ITEMS 64
#define MANY_ASKS 100
#define FIFO_THREADS 4
#define BUSY_ACTORS 48  /* above the steal floor set below */
#define BUSY_TOKENS 96  /* two per actor: worker 0 always has a backlog */
#define BUSY_BURN 500   /* xorshift steps per token: a microsecond or so */
#define BUSY_STEAL_FLOOR 8
/* Replies nobody waits for that a lock's release makes, once the lock
 * holds: none. The stopped lock refuses its own queued self-ask (th_hold),
 * and the run takes that refusal back from its exception mailbox ahead of
 * the rest and of its stop work, so it still finds the ask's future. */
#define LOCK_RELEASE_UNKNOWN 0

/* ---- what handlers saw ----------------------------------------------------- */

static struct {
  atomic_int blocked;   /* barrier stacks started (the server is held) */
  atomic_int unblocked; /* barrier stacks ended (released) */
  atomic_int held;      /* asks a lock sits on (th_hold) */
  atomic_int items;     /* item notices handled */
  long order[MAX_ITEMS]; /* their values, in handling order (read after shutdown) */
  atomic_int created;   /* item messages the test made */
  atomic_int drops;     /* item messages freed: drop hook */
  atomic_int probe_rc;  /* sh_bridge_new on a worker, + 1000 once recorded */
  atomic_bool probe_left_null;
  atomic_bool busy_stop; /* the stealing case's asker is done */
} g;

static void reset(void) {
  atomic_store(&g.blocked, 0);
  atomic_store(&g.unblocked, 0);
  atomic_store(&g.held, 0);
  atomic_store(&g.items, 0);
  atomic_store(&g.created, 0);
  atomic_store(&g.drops, 0);
  atomic_store(&g.probe_rc, 0);
  atomic_store(&g.probe_left_null, false);
  atomic_store(&g.busy_stop, false);
  th_reset(0);
}

/* ---- messages -------------------------------------------------------------- */

/* Items: a notice and an ask whose drop hook counts, so that a message
 * freed twice, or never, shows in g.drops; v tells them apart. */
typedef struct item_note { sh_msg hdr; long v; } item_note;
typedef struct item_ask { sh_msg hdr; long v; } item_ask;
/* Holds its server until `lock` is stopped (a barrier). */
typedef struct block_note { sh_msg hdr; const sh_addr *lock; } block_note;
/* Holds its server, busy asking `echo`, until the server stops (a barrier). */
typedef struct spin_note { sh_msg hdr; const sh_addr *echo; } spin_note;
/* The server throws `error`. */
typedef struct throw_ask { sh_msg hdr; int error; } throw_ask;
/* The server tries sh_bridge_new from its worker. */
typedef struct probe_note { sh_msg hdr; } probe_note;
/* The stealing case's busy work, passed around a ring. */
typedef struct busy_note { sh_msg hdr; uint32_t hops; } busy_note;

static void count_drop(sh_msg *m) {
  (void)m;
  atomic_fetch_add(&g.drops, 1);
}

static SH_MSG_DEFINE_DROP(item_note, SH_NOTICE, 0, count_drop);
static SH_MSG_DEFINE_DROP(item_ask, SH_ASK, 0, count_drop);
static SH_MSG_DEFINE(block_note, SH_NOTICE, SH_MSG_BARRIER);
static SH_MSG_DEFINE(spin_note, SH_NOTICE, SH_MSG_BARRIER);
static SH_MSG_DEFINE(throw_ask, SH_ASK, 0);
static SH_MSG_DEFINE(probe_note, SH_NOTICE, 0);
static SH_MSG_DEFINE(busy_note, SH_NOTICE, 0);

static sh_msg *new_item(const sh_msg_type *t, long v) {
  atomic_fetch_add(&g.created, 1);
  sh_msg *m = t == &item_ask_type ? &sh_msg_new(item_ask, .v = v)->hdr
                                  : &sh_msg_new(item_note, .v = v)->hdr;
  assert_non_null(m);
  return m;
}

static sh_msg *new_note(long v) { return new_item(&item_note_type, v); }
static sh_msg *new_ask(long v) { return new_item(&item_ask_type, v); }

/* An item's value: a read of freed memory here is an ASan report. */
static long item_v(const sh_msg *m) {
  if (sh_msg_is(m, &item_note_type)) return ((const item_note *)m)->v;
  if (sh_msg_is(m, &item_ask_type)) return ((const item_ask *)m)->v;
  return sh_msg_is(m, &num_ask_type) ? ((const num_ask *)m)->v : -1;
}

/* ---- actors ------------------------------------------------------------------ */

/* Lock: sits on every ask until stopped (th_hold). */
typedef struct lock_actor { sh_actor base; bool locked; } lock_actor;

static bool lock_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((lock_actor *)self)->locked;
}

static sh_yield lock_ask(sh_actor *self, sh_stack *st) {
  return th_hold(self, st, &((lock_actor *)self)->locked, &g.held);
}

static const sh_actor_class lock_class = {.name = "lock", .size = sizeof(lock_actor),
    .locals_size = sizeof(th_hold_locals), .ask = lock_ask, .barrier = lock_barrier};

/* Server: answers asks with v + 1 (or throws), records item notices, and
 * is held by a block_note. */
typedef struct server_locals { sh_future *f; uint32_t rounds; } server_locals;
enum { BLOCK_RELEASED = 1, SPIN_ANSWERED = 2 };
/* A busy hold's round trips, at most: a guard only (a stop ends it). */
#define SPIN_MAX_ROUNDS 10000000u

static sh_yield server_block(sh_stack *st) {
  server_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, sh_stack_msg_as(st, block_note)->lock, th_new_ask(0), SH_FOREVER);
    CHECK(l->f != NULL);
    atomic_fetch_add(&g.blocked, 1);
    return sh_suspend(st, BLOCK_RELEASED);
  }
  /* Released by stopping the lock, or the server itself was stopped. */
  CHECK(sh_future_error(l->f) == -ESHUTDOWN);
  atomic_fetch_add(&g.unblocked, 1);
  return sh_return(st, NULL);
}

/* A busy hold: one more round trip to the echo, until the server stops
 * (sh_ask from a stopped house fails at once). */
static sh_yield server_spin(sh_stack *st) {
  server_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    atomic_fetch_add(&g.blocked, 1);
  } else if (sh_future_failed(l->f)) {
    CHECK(sh_future_error(l->f) == -ESHUTDOWN);
    atomic_fetch_add(&g.unblocked, 1);
    return sh_return(st, NULL);
  }
  CHECK(++l->rounds < SPIN_MAX_ROUNDS);
  l->f = sh_ask(st, sh_stack_msg_as(st, spin_note)->echo, th_new_ask(0), SH_FOREVER);
  CHECK(l->f != NULL);
  return sh_suspend(st, SPIN_ANSWERED);
}

static void record_item(long v) {
  int i = atomic_load(&g.items);
  if (i < MAX_ITEMS) g.order[i] = v;
  /* One server records per case; its handlers never overlap. */
  atomic_store(&g.items, i + 1);
}

static void probe(sh_actor *self) {
  sh_bridge *b = NULL;
  int rc = sh_bridge_new(sh_actor_system(self), &b);
  atomic_store(&g.probe_left_null, b == NULL);
  atomic_store(&g.probe_rc, rc + 1000);
}

static sh_yield server_notice(sh_actor *self, sh_stack *st) {
  const sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &block_note_type)) return server_block(st);
  if (sh_msg_is(m, &spin_note_type)) return server_spin(st);
  if (sh_msg_is(m, &item_note_type)) record_item(item_v(m));
  else if (sh_msg_is(m, &probe_note_type)) probe(self);
  else CHECK(!"unexpected notice");
  return sh_return(st, NULL);
}

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  const sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &throw_ask_type)) return sh_throw(st, ((const throw_ask *)m)->error);
  return th_reply_with(st, item_v(m) + 1);
}

#define SERVER_CLASS(name_, ask_cap, notice_cap)                                       \
  {.name = (name_), .size = sizeof(sh_actor), .locals_size = sizeof(server_locals),   \
   .ask = server_ask, .notice = server_notice, .ask_capacity = (ask_cap),              \
   .notice_capacity = (notice_cap)}

static const sh_actor_class server_class = SERVER_CLASS("server", 0, 0);
/* Bounded: one ask and one notice may wait. */
static const sh_actor_class bounded_class = SERVER_CLASS("bounded", 1, 1);
/* Takes notices, has no ask handler. */
static const sh_actor_class mute_class = {.name = "mute", .size = sizeof(sh_actor),
    .locals_size = sizeof(server_locals), .notice = server_notice};

/* ---- systems, waits, threads ------------------------------------------------- */

static sh_system *new_system_cfg(const sh_config *cfg) {
  reset();
  backend_setup();
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(cfg, &sys), 0);
  return sys;
}

static sh_system *new_system(void) {
  sh_config cfg = th_config(WORKERS);
  return new_system_cfg(&cfg);
}

static const sh_addr *spawn(sh_system *sys, const sh_actor_class *c, uint32_t instances) {
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(sys, c, NULL, instances, &a), 0);
  assert_non_null(a);
  return a;
}

static sh_bridge *bridge(sh_system *sys) {
  sh_bridge *b = NULL;
  assert_int_equal(sh_bridge_new(sys, &b), 0);
  assert_non_null(b);
  return b;
}

/* Shuts down (if not yet), checks the accounting, frees. Bridges must have
 * been freed: a forgotten ask is resolved only then. */
static sh_stats finish(sh_system *sys) {
  sh_stats st = th_end_exact(sys);
  assert_int_equal(atomic_load(&g.drops), atomic_load(&g.created));
  /* Every hold ended once: released, or failed by the stop or shutdown. */
  assert_int_equal(atomic_load(&g.unblocked), atomic_load(&g.blocked));
  return st;
}

typedef bool (*cond_fn)(const void *arg);

/* Polls cond until it holds; bounded by WAIT_STEPS. */
static void wait_until(cond_fn cond, const void *arg, const char *what) {
  for (long i = 0; !cond(arg); i++) {
    if (i == WAIT_STEPS) fail_msg("gave up waiting for %s", what);
    backend_pause();
  }
}

typedef struct count_at_least { atomic_int *v; int want; } count_at_least;

static bool count_reached(const void *arg) {
  const count_at_least *c = arg;
  return atomic_load(c->v) >= c->want;
}

static void wait_count(atomic_int *v, int want, const char *what) {
  count_at_least c = {v, want};
  wait_until(count_reached, &c, what);
}

typedef struct box_waiting { const sh_addr *a; sh_msg_kind kind; uint32_t want; } box_waiting;

static sh_mailbox_stats box_stats(const sh_addr *a, sh_msg_kind kind) {
  sh_mailbox_stats s;
  assert_int_equal(sh_mailbox_stats_get(a, 0, kind, &s), 0);
  return s;
}

static bool waiting_reached(const void *arg) {
  const box_waiting *w = arg;
  sh_mailbox_stats s;
  return sh_mailbox_stats_get(w->a, 0, w->kind, &s) == 0 && s.waiting >= w->want;
}

/* Waits until `want` senders wait for room in a's mailbox of that kind. */
static void wait_waiting(const sh_addr *a, sh_msg_kind kind, uint32_t want) {
  box_waiting w = {a, kind, want};
  wait_until(waiting_reached, &w, "senders waiting for room");
}

static sh_plat_thread *thread_start(void (*fn)(void *), void *arg) {
  sh_plat_thread *t = NULL;
  assert_int_equal(sh_plat_thread_start(fn, arg, &t), 0);
  assert_non_null(t);
  return t;
}

/* Holds server s (see the file comment): returns the lock to stop. */
static const sh_addr *hold(sh_system *sys, sh_bridge *b, const sh_addr *s) {
  const sh_addr *lock = spawn(sys, &lock_class, 1);
  int blocked = atomic_load(&g.blocked) + 1, held = atomic_load(&g.held) + 1;
  block_note *n = sh_msg_new(block_note, .lock = lock);
  assert_non_null(n);
  assert_int_equal(sh_bridge_notice(b, s, &n->hdr, SH_FOREVER), 0);
  wait_count(&g.blocked, blocked, "the server to be held");
  /* The lock sits on the ask too: what its release does no longer depends
   * on the schedule (LOCK_RELEASE_UNKNOWN). */
  wait_count(&g.held, held, "the lock to hold");
  return lock;
}

/* Holds server s, on worker 0, busy with an echo on worker 1 (see the file
 * comment): only stopping s ends it. */
static void hold_busy(sh_system *sys, sh_bridge *b, const sh_addr *s) {
  const sh_addr *echo = NULL;
  assert_int_equal(sh_spawn_on(sys, &server_class, NULL, 1, &echo), 0);
  int blocked = atomic_load(&g.blocked) + 1;
  spin_note *n = sh_msg_new(spin_note, .echo = echo);
  assert_non_null(n);
  assert_int_equal(sh_bridge_notice(b, s, &n->hdr, SH_FOREVER), 0);
  wait_count(&g.blocked, blocked, "the server to be held");
}

static void release(const sh_addr *lock) { assert_int_equal(sh_stop(lock), 0); }

/* Receives one reply (waiting as long as it takes) and checks it answers
 * `ticket` with v + 1; frees it. */
static void recv_value(sh_bridge *b, uint64_t ticket, long v) {
  sh_bridge_reply r;
  assert_int_equal(sh_bridge_recv(b, SH_FOREVER, &r), 0);
  assert_int_equal(r.ticket, ticket);
  assert_int_equal(r.error, 0);
  assert_non_null(r.msg);
  assert_true(sh_msg_is(r.msg, &num_reply_type));
  assert_int_equal(((num_reply *)r.msg)->v, v + 1);
  sh_msg_free(r.msg);
}

static uint64_t ask(sh_bridge *b, const sh_addr *to, sh_msg *m, int64_t timeout_ms) {
  uint64_t t = 0;
  assert_int_equal(sh_bridge_ask(b, to, m, timeout_ms, &t), 0);
  return t;
}

/* A thread that sends one item with SH_FOREVER on a bridge of its own (and,
 * for an ask, receives the reply when `recv` is set). Cases keep senders
 * in static storage and join every thread before asserting on any: a
 * failed assertion must not leave a running thread writing to a dead
 * stack frame. */
typedef struct sender {
  sh_system *sys;
  const sh_addr *to;
  sh_msg *m; /* the thread's from the start */
  long v;    /* m's value */
  bool recv;
  /* Results, read after the join. */
  int new_rc, rc, recv_rc, recv_rc2;
  uint64_t ticket;
  sh_bridge_reply reply;
  long reply_v;
} sender;

static void sender_receive(sh_bridge *b, sender *s) {
  s->recv_rc = sh_bridge_recv(b, SH_FOREVER, &s->reply);
  if (s->recv_rc == 0 && s->reply.msg != NULL) {
    s->reply_v = sh_msg_is(s->reply.msg, &num_reply_type) ? ((num_reply *)s->reply.msg)->v : -1;
    sh_msg_free(s->reply.msg);
  }
  s->recv_rc2 = sh_bridge_recv(b, SH_NOWAIT, &(sh_bridge_reply){0});
}

static void sender_main(void *arg) {
  sender *s = arg;
  sh_bridge *b = NULL;
  s->new_rc = sh_bridge_new(s->sys, &b);
  if (s->new_rc != 0) {
    sh_msg_free(s->m);
    return;
  }
  bool is_ask = sh_msg_type_of(s->m)->kind == SH_ASK;
  s->rc = is_ask ? sh_bridge_ask(b, s->to, s->m, SH_FOREVER, &s->ticket)
                 : sh_bridge_notice(b, s->to, s->m, SH_FOREVER);
  /* A failed send took m and freed it: finish() checks every item was
   * freed exactly once. */
  if (s->rc == 0 && is_ask && s->recv) {
    sender_receive(b, s);
  }
  sh_bridge_free(b);
}

static sender sender_of(sh_system *sys, const sh_addr *to, sh_msg *m) {
  return (sender){.sys = sys, .to = to, .m = m, .v = item_v(m), .rc = 1, .recv_rc = 1};
}

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

static const sh_addr *busy_ring[BUSY_ACTORS];

typedef struct busy_actor { sh_actor base; uint32_t id; uint64_t sink; } busy_actor;

static int busy_init(sh_actor *self, void *arg) {
  ((busy_actor *)self)->id = *(const uint32_t *)arg;
  return 0;
}

static uint64_t burn(uint64_t x) {
  for (int i = 0; i < BUSY_BURN; i++) x = th_xorshift(&x);
  return x;
}

/* Work that keeps worker 0's backlog up until the asker is done (or the
 * token's hop budget is spent). */
static sh_yield busy_notice(sh_actor *self, sh_stack *st) {
  busy_actor *a = (busy_actor *)self;
  a->sink = burn(a->sink | 1);
  uint32_t hops = sh_stack_msg_as(st, busy_note)->hops + 1;
  if (!atomic_load(&g.busy_stop) && hops < BUSY_MAX_HOPS) {
    busy_note *n = sh_msg_new(busy_note, .hops = hops);
    CHECK(n != NULL && sh_notice(busy_ring[(a->id + 1) % BUSY_ACTORS], &n->hdr) == 0);
  }
  return sh_return(st, NULL);
}

static sh_yield busy_ask(sh_actor *self, sh_stack *st) {
  busy_actor *a = (busy_actor *)self;
  a->sink = burn(a->sink | 1);
  return th_reply_with(st, sh_stack_msg_as(st, num_ask)->v + 1);
}

static const sh_actor_class busy_class = {.name = "busy", .size = sizeof(busy_actor),
    .init = busy_init, .notice = busy_notice, .ask = busy_ask};

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
  X(busy_steal)

#endif
