/*
 * The chaos run's workload (test_e2e_chaos.c says what it is and what it
 * checks), part one: its sizes, its messages, what the handlers saw (the
 * global `g` and its counters), the actor classes' profiles and state, and
 * the operations a handler may take (notices, timers, stops, held replies,
 * a round of asks). Its stacks and hooks are chaos_stacks.h's.
 */
#ifndef TESTS_CHAOS_WORKLOAD_H
#define TESTS_CHAOS_WORKLOAD_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define N_PLAIN 24           /* actors placed with sh_spawn_on */
#define ROBIN_K 3            /* instances behind the round-robin address */
#define MAX_WORKERS 4
#define N_ADDRS (N_PLAIN + 2)
#define MAX_ACTORS (N_PLAIN + MAX_WORKERS + ROBIN_K)
#define MAX_FAN 4            /* asks per round */
#define MAX_ROUNDS 3         /* rounds of asks per stack */
#define MAX_SLOTS (MAX_FAN * MAX_ROUNDS)
#define MAX_TIMO_MS 20       /* ask timeouts are 1..MAX_TIMO_MS */
#define MAX_TIMERS 6         /* live timers per actor */
#define MAX_PERIODIC 2
#define MAX_HELD 4           /* replies an actor holds after sh_future_take */
#define STOP_MAX 3           /* addresses stopped per run, at most */
#define STOP_ODDS 5000       /* a round stops someone with odds 1 in this */
#define LIVE_CAP 256         /* above this many live stacks, no new rounds */
#define KICKER UINT32_MAX    /* `from` of the test thread's kicks */
#define PHASES 4             /* the budget is spent in phases, with a quiesce after each */
#define QUIET_POLLS 30000    /* 2 ms polls (a minute) for a quiesce */

/* ---- messages ------------------------------------------------------------ */

enum {
  F_BATCH = 1u << 0,   /* batching classes' filters take it */
  F_BARRIER = 1u << 1, /* barrier classes' predicates take it */
  F_KICK = 1u << 2,    /* from the test thread */
};

/* Every ask and notice: its tag (asks: unique in the run), sender, flags. */
typedef struct chaos_msg {
  sh_msg hdr;
  uint64_t tag;
  uint32_t from;
  uint32_t flags;
} chaos_msg;
typedef chaos_msg chaos_ask, chaos_bask, chaos_note, chaos_bnote;
SH_MSG_DEFINE(chaos_ask, SH_ASK, 0);
SH_MSG_DEFINE(chaos_bask, SH_ASK, SH_MSG_BARRIER); /* a barrier for every class */
SH_MSG_DEFINE(chaos_note, SH_NOTICE, 0);
SH_MSG_DEFINE(chaos_bnote, SH_NOTICE, SH_MSG_BARRIER);

typedef struct chaos_reply {
  sh_msg hdr;
  uint64_t v;
} chaos_reply;
SH_MSG_DEFINE(chaos_reply, SH_REPLY, 0);

/* What an ask with tag t is answered with. */
static uint64_t answer_of(uint64_t t) { return (t + 1) * 0x9e3779b97f4a7c15ull; }
static int thrown_for(uint64_t t) { return -(4000 + (int)(t % 1000)); } /* no errno is that large */
#define BATCH_COMMON 0xc0ffee0000000001ull /* the reply a batch copies to its rest */
#define BATCH_THROW (-3999)                /* what a batch throws to its rest */

/* ---- what the handlers saw ----------------------------------------------- */

enum {
  C_STARTED, C_ENDED, C_BARRIER_STACKS, C_BATCH_STACKS,
  C_ASKS_MADE, C_OBSERVED, C_ABANDONED,
  C_GOT_REPLY, C_GOT_COMMON, C_GOT_THROWN, C_GOT_BATCH_THROWN, C_GOT_TIMEOUT, C_GOT_SHUTDOWN,
  C_TAKEN, C_ASKS_HANDLED, C_NOTICES_SENT, C_NOTICES_HANDLED,
  C_SENT_REPLY, C_SENT_THROW, C_SENT_COMMON, C_SENT_BATCH_THROW,
  C_TIMERS, C_CANCELS, C_FIRED, C_TICKS, C_STOPS,
  C_COUNT
};

static struct {
  /* Written by the test thread before the workers start. */
  uint64_t seed;
  long budget;
  bool abrupt;
  const sh_addr *addr[N_ADDRS];
  int nactors;
  atomic_uchar *handled; /* per ask tag: times an ask handler got it */

  atomic_long ops;   /* operations taken from the budget */
  atomic_long limit; /* the current phase's end: ops stop there until the pause ends */
  atomic_int stops;
  atomic_bool stopped[N_ADDRS]; /* set before sh_stop, so a refusal always finds it */
  atomic_bool shutting_down;
  atomic_uint_fast64_t next_tag;
  atomic_int mounts[MAX_ACTORS], stop_hooks[MAX_ACTORS], live[MAX_ACTORS];
  atomic_uint_fast64_t c[C_COUNT];
} g;

static void count_n(int k, uint64_t n) { atomic_fetch_add_explicit(&g.c[k], n, memory_order_relaxed); }
static void count(int k) { count_n(k, 1); }
static uint64_t cval(int k) { return atomic_load(&g.c[k]); }

/* A CHECK that also prints the offending value. */
#define BAD(what, v) bad(__FILE__, __LINE__, what, (long long)(v))
static void bad(const char *file, int line, const char *what, long long v) {
  fprintf(stderr, "chaos: %s (value %lld)\n", what, v);
  th_check_failed(file, line, what);
}

/* ---- actor classes --------------------------------------------------------- */

typedef struct profile {
  const char *name;
  bool batch, barrier;
  uint32_t max_per_run, max_batch;
} profile;

enum { P_PLAIN, P_BATCH, P_BARRIER, P_SMALL, P_MIXED, P_COUNT };
static const profile profiles[P_COUNT] = {
    [P_PLAIN] = {"plain", false, false, 0, 0},   [P_BATCH] = {"batch", true, false, 0, 4},
    [P_BARRIER] = {"barrier", false, true, 0, 0}, [P_SMALL] = {"small", false, false, 1, 0},
    [P_MIXED] = {"mixed", true, true, 2, 3},
};

typedef struct timer_rec {
  uint64_t id;
  uintptr_t cookie; /* the timer's arg */
  bool periodic, live;
} timer_rec;

typedef struct chaos_actor {
  sh_actor base;
  const profile *p;
  int id;
  int addr; /* index of its address in g.addr */
  uint64_t rng;
  bool mounted, stop_ran, in_barrier;
  int live; /* its stacks that started and did not end */
  atomic_int inside; /* a handler of this actor is running */
  timer_rec tm[MAX_TIMERS];
  uint64_t dead_timer; /* a timer cancelled or fired: cancelling it again is -ENOENT */
  sh_msg *held[MAX_HELD];
  int nheld;
} chaos_actor;

typedef struct spawn_arg {
  const profile *p;
  int addr;
} spawn_arg;

/* One ask a stack made. Once `seen`, its future is never touched again: the
 * runtime may recycle it. */
typedef struct slot {
  sh_future *f;
  uint64_t tag;
  uint16_t to;     /* address index */
  uint8_t flags;   /* the ask's F_* */
  uint8_t timeout; /* ms; 0: none */
  bool seen;
} slot;

typedef struct chaos_locals {
  bool barrier; /* this stack holds its actor's barrier */
  uint8_t rounds_left, nslots;
  slot s[MAX_SLOTS];
} chaos_locals;

typedef enum { K_NOTICE, K_ASK, K_BATCH_NOTICE, K_BATCH_ASK } stack_kind;
enum { WAIT_A = 1, WAIT_B = 2 }; /* wait states (SH_START is 0) */

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t rnd(chaos_actor *a, uint64_t n) { return th_xorshift(&a->rng) % n; }
static bool one_in(chaos_actor *a, uint64_t n) { return rnd(a, n) == 0; }

static uint32_t msg_flags(const sh_msg *m) { return ((const chaos_msg *)m)->flags; }

static bool is_barrier_msg(const chaos_actor *a, const sh_msg *m) {
  return (sh_msg_type_of(m)->flags & SH_MSG_BARRIER) != 0 ||
         (a->p->barrier && (msg_flags(m) & F_BARRIER) != 0);
}

static bool batch_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return (msg_flags(m) & F_BATCH) != 0;
}

static bool barrier_pred(sh_actor *self, const sh_msg *m) {
  (void)self;
  return (msg_flags(m) & F_BARRIER) != 0;
}

/* Takes one operation from the current phase; the budget's last one ends an
 * abrupt run. */
static bool op_take(chaos_actor *a) {
  long n = atomic_load(&g.ops);
  do {
    if (n >= atomic_load(&g.limit)) return false;
  } while (!atomic_compare_exchange_weak(&g.ops, &n, n + 1));
  if (n == g.budget - 1 && g.abrupt) th_done(&a->base);
  return true;
}

/* Between phases (and after the budget) no operation is taken. */
static bool paused(void) { return atomic_load(&g.ops) >= atomic_load(&g.limit); }

static bool addr_stopped(int i) { return atomic_load(&g.stopped[i]); }

static sh_msg *new_msg(const sh_msg_type *t, uint64_t tag, uint32_t from, uint32_t flags) {
  chaos_msg *m = (chaos_msg *)sh_msg_alloc(t);
  if (m != NULL) {
    m->tag = tag;
    m->from = from;
    m->flags = flags;
  }
  return m != NULL ? &m->hdr : NULL;
}

static uint32_t draw_flags(chaos_actor *a) {
  uint32_t f = 0;
  if (one_in(a, 3)) f |= F_BATCH;
  if (one_in(a, 24)) f |= F_BARRIER;
  return f;
}

/* Every handler brackets its work with these: one runner at a time, only
 * between the mount and the stop hook. */
static void enter(chaos_actor *a) {
  CHECK(atomic_exchange(&a->inside, 1) == 0);
  CHECK(a->mounted);
  CHECK(!a->stop_ran);
}
static void leave(chaos_actor *a) { atomic_store(&a->inside, 0); }

/* ---- operations ------------------------------------------------------------ */

static void send_notice(chaos_actor *a) {
  if (!op_take(a)) return;
  int to = (int)rnd(a, N_ADDRS);
  const sh_msg_type *t = one_in(a, 48) ? &chaos_bnote_type : &chaos_note_type;
  sh_msg *m = new_msg(t, 0, (uint32_t)a->id, draw_flags(a));
  CHECK(m != NULL);
  count(C_NOTICES_SENT);
  int rc = sh_notice(g.addr[to], m);
  if (rc != 0 && !(rc == -ESHUTDOWN && addr_stopped(to))) BAD("sh_notice failed", rc);
}

static timer_rec *find_timer(chaos_actor *a, uint64_t id) {
  for (int i = 0; i < MAX_TIMERS; i++)
    if (a->tm[i].live && a->tm[i].id == id) return &a->tm[i];
  return NULL;
}

static timer_rec *timer_slot(chaos_actor *a, bool *may_period) {
  timer_rec *free_rec = NULL;
  int periodic = 0;
  for (int i = 0; i < MAX_TIMERS; i++) {
    if (!a->tm[i].live)
      free_rec = &a->tm[i];
    else if (a->tm[i].periodic)
      periodic++;
  }
  *may_period = periodic < MAX_PERIODIC;
  return free_rec;
}

static void start_timer(chaos_actor *a) {
  bool may_period;
  timer_rec *t = timer_slot(a, &may_period);
  if (t == NULL) return;
  bool periodic = may_period && one_in(a, 2);
  uintptr_t cookie = (uintptr_t)th_xorshift(&a->rng);
  uint64_t id = 0;
  int rc = sh_timer_start(&a->base, rnd(a, 11), periodic ? 2 + rnd(a, 9) : 0, (void *)cookie, &id);
  if (rc == -ESHUTDOWN && addr_stopped(a->addr)) return;
  if (rc != 0) {
    BAD("sh_timer_start failed", rc);
    return;
  }
  *t = (timer_rec){.id = id, .cookie = cookie, .periodic = periodic, .live = true};
  count(C_TIMERS);
}

static void forget_timer(chaos_actor *a, timer_rec *t) {
  t->live = false;
  a->dead_timer = t->id;
}

/* A live timer (its handler has not run, or it is periodic): cancel says 0,
 * unless the actor's stop already cancelled every timer. */
static void cancel_timer(chaos_actor *a, timer_rec *t) {
  int rc = sh_timer_cancel(&a->base, t->id);
  if (rc != 0 && !(rc == -ENOENT && addr_stopped(a->addr))) BAD("sh_timer_cancel of a live timer", rc);
  forget_timer(a, t);
  count(C_CANCELS);
}

static void timer_op(chaos_actor *a) {
  int pick = (int)rnd(a, MAX_TIMERS);
  switch (rnd(a, 3)) {
  case 0:
    start_timer(a);
    break;
  case 1:
    if (a->tm[pick].live) cancel_timer(a, &a->tm[pick]);
    break;
  default:
    if (a->dead_timer != 0) {
      int rc = sh_timer_cancel(&a->base, a->dead_timer);
      if (rc != -ENOENT) BAD("cancel of a dead timer", rc);
    }
    break;
  }
}

/* At most STOP_MAX addresses per run, each stopped once. */
static void stop_op(chaos_actor *a) {
  int n = atomic_load(&g.stops);
  do {
    if (n >= STOP_MAX) return;
  } while (!atomic_compare_exchange_weak(&g.stops, &n, n + 1));
  int to = (int)rnd(a, N_ADDRS);
  if (atomic_exchange(&g.stopped[to], true)) return;
  count(C_STOPS);
  int rc = sh_stop(g.addr[to]);
  if (rc != 0) BAD("sh_stop failed", rc);
}

static void free_held(chaos_actor *a) {
  int i = (int)rnd(a, (uint64_t)a->nheld);
  sh_msg_free(a->held[i]);
  a->held[i] = a->held[--a->nheld];
}

static void side_ops(chaos_actor *a) {
  for (int n = (int)rnd(a, 2); n > 0; n--) send_notice(a);
  if (one_in(a, 3) && op_take(a)) timer_op(a);
  if (a->nheld > 0 && one_in(a, 3)) free_held(a);
  if (one_in(a, STOP_ODDS) && op_take(a)) stop_op(a);
}

/* Asks 1..MAX_FAN random addresses; how many futures it made. */
static int fan_out(chaos_actor *a, sh_stack *st, chaos_locals *l) {
  int want = 1 + (int)rnd(a, MAX_FAN), made = 0;
  for (int i = 0; i < want && l->nslots < MAX_SLOTS && op_take(a); i++) {
    slot *s = &l->s[l->nslots];
    s->to = (uint16_t)rnd(a, N_ADDRS);
    s->tag = atomic_fetch_add(&g.next_tag, 1); /* < budget: one per operation */
    s->flags = (uint8_t)draw_flags(a);
    /* A barrier stack must not wait for ever: its own actor, or another
     * barrier waiting on it, cannot answer until it ends. */
    s->timeout = (uint8_t)(l->barrier || one_in(a, 3) ? 1 + rnd(a, MAX_TIMO_MS) : 0);
    s->seen = false;
    const sh_msg_type *t = one_in(a, 48) ? &chaos_bask_type : &chaos_ask_type;
    s->f = sh_ask(st, g.addr[s->to], new_msg(t, s->tag, (uint32_t)a->id, s->flags),
                  s->timeout > 0 ? s->timeout : SH_FOREVER);
    if (s->f == NULL) {
      BAD("sh_ask returned NULL", s->tag);
      continue;
    }
    l->nslots++;
    made++;
    count(C_ASKS_MADE);
  }
  return made;
}

#endif
