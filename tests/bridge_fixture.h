/*
 * What the cases of the outside-thread bridge (bridge_cases.h) stand on:
 * what handlers saw, the messages, the actors (servers, locks, echoes, the
 * busy ring), new systems, bounded waits for other threads, senders on
 * threads of their own, and finish(). Included by bridge_cases.h; it uses
 * the includer's backend_setup and backend_pause (see there).
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
#ifndef TESTS_BRIDGE_FIXTURE_H
#define TESTS_BRIDGE_FIXTURE_H

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

/* ---- the busy ring of case 10: tokens passed around, CPU burnt per hop ----------- */

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
#endif
