/*
 * Chaos: a seeded random workload on the production backend (epoll,
 * pthreads) that uses every feature at once, to find what the focused tests
 * miss.
 *
 * Per seed: 2-4 workers, 24 actors placed with sh_spawn_on over five classes
 * (plain; batching notices and asks with a filter; a barrier predicate;
 * max_per_run 1; batching + barrier + max_per_run 2), plus one batching
 * class behind a per-worker address (SH_SPAWN_PER_WORKER) and one mixed
 * class behind a round-robin address of 3 instances. Every actor draws from
 * its own xorshift (seeded from the run's seed and its id); on each notice,
 * ask, batch or timer it handles it may: ask 1..4 random addresses (itself
 * included) with or without a 1..20 ms timeout and wait for all of them
 * (sh_suspend) or any (sh_suspend_any), over up to 3 rounds, moving between
 * two wait states or staying, sometimes walking away from asks still out;
 * send notices (some batchable, some barriers by flag or by type); start,
 * cancel and re-cancel one-shot and periodic timers; take a reply with
 * sh_future_take and free it later (or in its stop hook); rarely sh_stop a
 * random address (at most 3 per run, itself included). Ask handlers reply
 * or throw; batch ask handlers answer some asks one by one and the rest with
 * a copied reply or a throw. Barrier stacks ask only with timeouts: an ask
 * to itself (or a cycle of barriers) would otherwise wait forever by design.
 * A cap on live stacks keeps the load bounded; the test thread kicks random
 * actors every millisecond so the workload never dies out.
 *
 * A run spends a global budget of operations (sends, timer operations,
 * stops) in 4 phases. After each phase the workload pauses: no operation is
 * taken, periodic timers cancel themselves at their next tick, and every
 * stack must end, since a lost reply, timeout or wakeup shows as a stack
 * that never does (a minute's bound). Half the seeds end abruptly in the
 * last phase (the actor that spends the last operation calls
 * sh_system_exit, and shutdown meets everything in flight); the others end
 * after the last pause. The seed also decides the configuration: stealing made
 * easy (steal_floor 2), tight pools (32 cached objects, trimmed after 1 ms
 * idle), idle workers that park at once (spin_ns 0).
 *
 * Invariants, checked in the handlers (CHECK) and after shutdown:
 *   - every future a stack made is observed complete exactly once, or was
 *     left behind when its stack returned: asks made == observed + abandoned;
 *     every observed outcome is legal: a reply carrying the value computed
 *     from its ask's unique tag (or the batch's copied reply, for a
 *     batchable ask), the error thrown for that tag (or the batch's throw),
 *     -ETIMEDOUT only for an ask with a timeout, -ESHUTDOWN only when the
 *     target or the asker was stopped or the system is shutting down;
 *   - every ask is handled at most once; every handled ask is answered once;
 *   - every stack that started returned or threw (started == ended), and
 *     no handler ran concurrently with another on the same actor, before its
 *     mount hook, or after its stop hook;
 *   - no ask or notice stack starts while the actor is in a barrier; batches
 *     hold only messages that pass the filter, are no barriers, and are at
 *     most max_batch long;
 *   - a timer's handler never runs after sh_timer_cancel returned 0 or after
 *     its one-shot ran, and gets its own arg; cancelling such a timer again
 *     says -ENOENT;
 *   - mount and stop hooks ran exactly once per actor, the stop hook after
 *     the actor's last stack;
 *   - the runtime's counters agree: asks_timed_out == timeouts observed;
 *     dropped_stopped == notices sent - handled + asks made - handled;
 *     replies_unknown <= what could legitimately arrive late;
 *   - no CHECK failed, the pools got every object back (th_end), and no
 *     leak (ASan) or data race (TSan).
 *
 * A second test keeps the first bug the chaos run found (a timer node read
 * after another worker could free it) as a focused regression.
 *
 * Soak mode, for long runs (environment):
 *   CHAOS_SEEDS=A..B   run seeds A to B inclusive (or CHAOS_SEEDS=A: one seed)
 *   CHAOS_OPS=N        operations per seed (default 32000, 16000 under TSan)
 * e.g. CHAOS_SEEDS=1..500 CHAOS_OPS=50000 build/tsan/tests/test_e2e_chaos
 * Each seed prints a line (workers, ending, options) to stderr before it
 * runs, so a failure names its seed, and one with its counts after
 * shutdown. CHAOS_SEEDS=1..0 (an empty range) runs only the regression. A
 * run is not replayable (threads interleave differently every time); a seed
 * fixes the workload's shape.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

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

#define WATCHDOG_S 120
#define DEFAULT_OPS (TH_UNDER_TSAN ? 16000 : 32000)
static const uint64_t default_seeds[] = {10, 11, 14, 20}; /* 2-4 workers, every option */

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
#define BAD(what, v) bad(__LINE__, what, (long long)(v))
static void bad(int line, const char *what, long long v) {
  fprintf(stderr, "chaos: %s (value %lld)\n", what, v);
  th_check_failed(__FILE__, line, what);
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

/* ---- observing futures ------------------------------------------------------ */

static void got_reply(chaos_actor *a, slot *s) {
  const chaos_reply *r = sh_future_reply(s->f, chaos_reply);
  if (r == NULL || !sh_msg_is(&r->hdr, &chaos_reply_type)) {
    BAD("a future without error has no chaos_reply", s->tag);
    return;
  }
  if (r->v == answer_of(s->tag))
    count(C_GOT_REPLY);
  else if (r->v == BATCH_COMMON && (s->flags & F_BATCH))
    count(C_GOT_COMMON);
  else
    BAD("a reply carries another ask's value", s->tag);
  if (a->nheld < MAX_HELD && one_in(a, 6)) {
    sh_msg *m = sh_future_take(s->f);
    CHECK(m == &r->hdr && sh_future_msg(s->f) == NULL);
    a->held[a->nheld++] = m;
    count(C_TAKEN);
  }
}

static void observe(chaos_actor *a, slot *s) {
  if (s->seen || !sh_future_done(s->f)) return;
  s->seen = true;
  count(C_OBSERVED);
  int err = sh_future_error(s->f);
  if (err == 0) {
    got_reply(a, s);
  } else if (err == -ETIMEDOUT) {
    count(C_GOT_TIMEOUT);
    if (s->timeout == 0) BAD("-ETIMEDOUT for an ask without timeout", s->tag);
  } else if (err == -ESHUTDOWN) {
    count(C_GOT_SHUTDOWN);
    if (!addr_stopped(s->to) && !addr_stopped(a->addr) && !atomic_load(&g.shutting_down))
      BAD("-ESHUTDOWN with nobody stopped", s->tag);
  } else if (err == thrown_for(s->tag)) {
    count(C_GOT_THROWN);
  } else if (err == BATCH_THROW && (s->flags & F_BATCH)) {
    count(C_GOT_BATCH_THROWN);
  } else {
    BAD("an ask failed with an error nobody threw", err);
  }
}

static int unseen(const chaos_locals *l) {
  int n = 0;
  for (int i = 0; i < l->nslots; i++) n += !l->s[i].seen;
  return n;
}

/* ---- stacks ---------------------------------------------------------------- */

/* An ask or notice reached a handler: asks must be new, senders real. */
static void note_request(const sh_msg *m, bool ask) {
  const chaos_msg *c = (const chaos_msg *)m;
  CHECK(sh_msg_type_of(m)->kind == (ask ? SH_ASK : SH_NOTICE));
  CHECK(c->from < (uint32_t)g.nactors || c->from == KICKER);
  if (!ask) {
    count(C_NOTICES_HANDLED);
    return;
  }
  count(C_ASKS_HANDLED);
  if (c->tag >= (uint64_t)g.budget)
    BAD("an ask tag out of range", c->tag);
  else if (atomic_fetch_add(&g.handled[c->tag], 1) != 0)
    BAD("an ask handled twice", c->tag);
}

static void begin_batch(chaos_actor *a, sh_stack *st, bool ask) {
  size_t n = sh_stack_batch_len(st);
  count(C_BATCH_STACKS);
  CHECK(sh_stack_msg(st) == NULL);
  if (n < 1 || n > a->p->max_batch) BAD("batch length", n);
  for (size_t i = 0; i < n; i++) {
    const sh_msg *m = sh_stack_batch_msg(st, i);
    if (m == NULL) {
      BAD("batch entry missing", i);
      continue;
    }
    CHECK(batch_filter(&a->base, m) && !is_barrier_msg(a, m));
    note_request(m, ask);
  }
}

static uint8_t draw_rounds(chaos_actor *a, stack_kind k, const sh_msg *m, bool barrier) {
  if (cval(C_STARTED) - cval(C_ENDED) > LIVE_CAP) return 0;
  if (barrier) return 1; /* the barrier stays up while its timed asks are out */
  switch (k) {
  case K_NOTICE: return (uint8_t)((msg_flags(m) & F_KICK) ? 1 + rnd(a, MAX_ROUNDS) : rnd(a, 3));
  case K_ASK: return (uint8_t)(one_in(a, 3) ? 1 + rnd(a, 2) : 0);
  default: return (uint8_t)rnd(a, 2);
  }
}

static void begin(chaos_actor *a, sh_stack *st, stack_kind k, chaos_locals *l) {
  count(C_STARTED);
  atomic_fetch_add(&g.live[a->id], 1);
  a->live++;
  /* A barrier holds back every other ask and notice until it ends. */
  if (a->in_barrier) BAD("a stack started during a barrier", a->id);
  memset(l, 0, sizeof(*l));
  const sh_msg *m = sh_stack_msg(st);
  if (k == K_BATCH_NOTICE || k == K_BATCH_ASK) {
    begin_batch(a, st, k == K_BATCH_ASK);
  } else if (m == NULL) {
    BAD("a single stack without message", k);
  } else {
    note_request(m, k == K_ASK);
    l->barrier = is_barrier_msg(a, m);
  }
  if (l->barrier) {
    a->in_barrier = true;
    count(C_BARRIER_STACKS);
  }
  l->rounds_left = draw_rounds(a, k, m, l->barrier);
}

static sh_msg *new_reply(uint64_t v) { return &sh_msg_new(chaos_reply, .v = v)->hdr; }

static sh_yield answer_ask(chaos_actor *a, sh_stack *st) {
  uint64_t tag = sh_stack_msg_as(st, chaos_ask)->tag;
  if (one_in(a, 4)) {
    count(C_SENT_THROW);
    return sh_throw(st, thrown_for(tag));
  }
  count(C_SENT_REPLY);
  return sh_return(st, new_reply(answer_of(tag)));
}

/* Some asks answered one by one (a second answer is refused), the rest with
 * a copied reply or a throw. */
static sh_yield answer_batch(chaos_actor *a, sh_stack *st) {
  size_t n = sh_stack_batch_len(st), left = 0;
  for (size_t i = 0; i < n; i++) {
    if (!one_in(a, 2)) {
      left++;
      continue;
    }
    uint64_t tag = ((const chaos_msg *)sh_stack_batch_msg(st, i))->tag;
    CHECK(sh_batch_reply(st, i, new_reply(answer_of(tag))) == 0);
    count(C_SENT_REPLY);
    if (one_in(a, 4)) CHECK(sh_batch_reply(st, i, new_reply(0)) == -EINVAL);
  }
  if (left == 0) return sh_return(st, NULL);
  if (one_in(a, 3)) {
    count_n(C_SENT_BATCH_THROW, left);
    return sh_throw(st, BATCH_THROW);
  }
  count_n(C_SENT_COMMON, left);
  return sh_return(st, new_reply(BATCH_COMMON));
}

static sh_yield finish(chaos_actor *a, sh_stack *st, stack_kind k, chaos_locals *l) {
  count_n(C_ABANDONED, (uint64_t)unseen(l)); /* late answers are dropped by the runtime */
  if (l->barrier) a->in_barrier = false;
  a->live--;
  atomic_fetch_sub(&g.live[a->id], 1);
  count(C_ENDED);
  switch (k) {
  case K_ASK: return answer_ask(a, st);
  case K_BATCH_ASK: return answer_batch(a, st);
  default: return sh_return(st, NULL);
  }
}

/* Waits for all or any, in the same state or another. */
static sh_yield wait_some(chaos_actor *a, sh_stack *st) {
  int next = one_in(a, 2) ? WAIT_A : WAIT_B;
  return one_in(a, 2) ? sh_suspend_any(st, next) : sh_suspend(st, next);
}

static sh_yield step(chaos_actor *a, sh_stack *st, stack_kind k, chaos_locals *l) {
  if (l->rounds_left > 0) {
    l->rounds_left--;
    side_ops(a);
    if (fan_out(a, st, l) > 0) return wait_some(a, st);
  }
  /* Sometimes walk away from asks still out. */
  if (unseen(l) > 0 && !one_in(a, 8)) return wait_some(a, st);
  return finish(a, st, k, l);
}

static sh_yield drive(sh_actor *self, sh_stack *st, stack_kind k) {
  chaos_actor *a = (chaos_actor *)self;
  enter(a);
  chaos_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    begin(a, st, k, l);
  } else {
    for (int i = 0; i < l->nslots; i++) observe(a, &l->s[i]);
  }
  sh_yield y = step(a, st, k, l);
  leave(a);
  return y;
}

static sh_yield on_notice(sh_actor *self, sh_stack *st) { return drive(self, st, K_NOTICE); }
static sh_yield on_ask(sh_actor *self, sh_stack *st) { return drive(self, st, K_ASK); }
static sh_yield on_batch_notice(sh_actor *self, sh_stack *st) { return drive(self, st, K_BATCH_NOTICE); }
static sh_yield on_batch_ask(sh_actor *self, sh_stack *st) { return drive(self, st, K_BATCH_ASK); }

static void on_timeout(sh_actor *self, uint64_t id, void *arg) {
  chaos_actor *a = (chaos_actor *)self;
  enter(a);
  timer_rec *t = find_timer(a, id);
  if (t == NULL) {
    BAD("a timer ran after its cancel or its one-shot run", id);
  } else {
    CHECK(t->cookie == (uintptr_t)arg);
    if (!t->periodic) {
      forget_timer(a, t);
      count(C_FIRED);
    } else {
      count(C_TICKS);
      /* From its own tick; always in a pause, so that nothing arrives then
       * to wake a house a lost wakeup left waiting. */
      if (paused() || one_in(a, 8)) cancel_timer(a, t);
    }
  }
  if (one_in(a, 3)) send_notice(a);
  leave(a);
}

/* ---- hooks ------------------------------------------------------------------ */

static int chaos_init(sh_actor *self, void *arg) {
  chaos_actor *a = (chaos_actor *)self;
  const spawn_arg *sa = arg;
  if (g.nactors >= MAX_ACTORS) return -ENOSPC;
  a->p = sa->p;
  a->addr = sa->addr;
  a->id = g.nactors++; /* spawns run on the test thread, before the start */
  a->rng = mix64(g.seed ^ mix64((uint64_t)a->id + 1)) | 1; /* its own stream, never 0 */
  return 0;
}

static void chaos_mount(sh_actor *self) {
  chaos_actor *a = (chaos_actor *)self;
  CHECK(!a->mounted);
  a->mounted = true;
  atomic_fetch_add(&g.mounts[a->id], 1);
}

static void chaos_stop(sh_actor *self) {
  chaos_actor *a = (chaos_actor *)self;
  CHECK(atomic_load(&a->inside) == 0);
  CHECK(!a->stop_ran);
  if (a->live != 0) BAD("the stop hook ran before the actor's last stack ended", a->live);
  a->stop_ran = true;
  atomic_fetch_add(&g.stop_hooks[a->id], 1);
  while (a->nheld > 0) free_held(a);
}

static sh_actor_class classes[P_COUNT];

static sh_actor_class class_of(const profile *p) {
  return (sh_actor_class){
      .name = p->name,
      .size = sizeof(chaos_actor),
      .locals_size = sizeof(chaos_locals),
      .init = chaos_init,
      .mount = chaos_mount,
      .stop = chaos_stop,
      .notice = on_notice,
      .ask = on_ask,
      .batch_notice = p->batch ? on_batch_notice : NULL,
      .batch_ask = p->batch ? on_batch_ask : NULL,
      .batch_notice_filter = p->batch ? batch_filter : NULL,
      .batch_ask_filter = p->batch ? batch_filter : NULL,
      .barrier = p->barrier ? barrier_pred : NULL,
      .timeout = on_timeout,
      .max_batch = p->max_batch,
      .max_per_run = p->max_per_run,
  };
}

/* ---- the run ---------------------------------------------------------------- */

typedef struct run_cfg {
  uint64_t seed;
  long ops;
  uint32_t workers;
  bool abrupt;      /* else quiesced at the end too */
  bool steal_happy; /* steal_floor 2: houses change workers all the time */
  bool tight_pools; /* pools overflow to malloc and are trimmed while running */
  bool no_spin;     /* idle workers park at once: the park/wake handshake works hard */
} run_cfg;

static run_cfg derive(uint64_t seed, long ops) {
  uint64_t h = mix64(seed);
  return (run_cfg){.seed = seed,
                   .ops = ops,
                   .workers = 2 + (uint32_t)(h % 3),
                   .abrupt = (h >> 8) & 1,
                   .steal_happy = (h >> 9) & 1,
                   .tight_pools = (h >> 10) & 1,
                   .no_spin = ((h >> 11) & 3) == 0};
}

static sh_config config_of(const run_cfg *rc) {
  sh_config cfg = th_config(rc->workers);
  if (rc->steal_happy) {
    cfg.steal_floor = 2;
    cfg.steal_aggression = 4;
  }
  if (rc->tight_pools) {
    cfg.pool_max_cached = 32;
    cfg.pool_keep = 2;
    cfg.pool_idle_ns = 1000000;
  }
  if (rc->no_spin) cfg.spin_ns = 0;
  return cfg;
}

/* Fresh run state; the tag table only grows and stays reachable, so a failed
 * assertion leaks nothing. */
static void reset_run(const run_cfg *rc) {
  static atomic_uchar *handled;
  static long handled_len;
  if (handled_len < rc->ops) {
    free(handled);
    handled = malloc((size_t)rc->ops);
    assert_non_null(handled);
    handled_len = rc->ops;
  }
  memset(&g, 0, sizeof(g)); /* no system exists: nothing reads it */
  for (long i = 0; i < rc->ops; i++) atomic_init(&handled[i], 0);
  g.handled = handled;
  g.seed = rc->seed;
  g.budget = rc->ops;
  g.abrupt = rc->abrupt;
  for (int p = 0; p < P_COUNT; p++) classes[p] = class_of(&profiles[p]);
  th_reset(rc->abrupt ? 1 : 0); /* abrupt: the last operation ends the run */
}

static void spawn_all(sh_system *sys, const run_cfg *rc, uint64_t *rng) {
  static spawn_arg args[N_ADDRS];
  for (int i = 0; i < N_PLAIN; i++) {
    args[i] = (spawn_arg){&profiles[i % P_COUNT], i};
    uint32_t w = (uint32_t)i < rc->workers ? (uint32_t)i : (uint32_t)(th_xorshift(rng) % rc->workers);
    g.addr[i] = th_spawn_on(sys, &classes[i % P_COUNT], &args[i], w);
  }
  args[N_PLAIN] = (spawn_arg){&profiles[P_BATCH], N_PLAIN};
  assert_int_equal(sh_spawn(sys, &classes[P_BATCH], &args[N_PLAIN], SH_SPAWN_PER_WORKER,
                            &g.addr[N_PLAIN]),
                   0);
  args[N_PLAIN + 1] = (spawn_arg){&profiles[P_MIXED], N_PLAIN + 1};
  assert_int_equal(
      sh_spawn(sys, &classes[P_MIXED], &args[N_PLAIN + 1], ROBIN_K, &g.addr[N_PLAIN + 1]), 0);
  assert_int_equal(g.nactors, N_PLAIN + (int)rc->workers + ROBIN_K);
}

/* From the test thread: a notice that starts 1..MAX_ROUNDS rounds. */
static void kick(uint64_t *rng) {
  int to = (int)(th_xorshift(rng) % N_ADDRS);
  count(C_NOTICES_SENT);
  int rc = sh_notice(g.addr[to], new_msg(&chaos_note_type, 0, KICKER, F_KICK));
  if (rc != 0 && !(rc == -ESHUTDOWN && addr_stopped(to))) BAD("kick failed", rc);
}

/* Kicks (the workload never dies out) until the phase's operations are
 * spent; false when no operation was taken for a minute: the workload
 * stalled (stacks stuck above LIVE_CAP). */
static bool kick_until(long limit, uint64_t *rng) {
  long last = -1;
  for (int idle = 0; atomic_load(&g.ops) < limit; idle++) {
    long now = atomic_load(&g.ops);
    if (now != last) idle = 0;
    if (idle == 60000) return false;
    last = now;
    kick(rng);
    kick(rng);
    th_sleep_ms(1);
  }
  return true;
}

/* Polls until no stack is live (and none started) for three polls in a row;
 * false when that never happens: some stack waits for ever. */
static bool wait_quiet(void) {
  uint64_t last = UINT64_MAX;
  for (int i = 0, calm = 0; i < QUIET_POLLS; i++) {
    uint64_t ended = cval(C_ENDED), started = cval(C_STARTED);
    calm = started == ended && started == last ? calm + 1 : 0;
    if (calm == 3) return true;
    last = started;
    th_sleep_ms(2);
  }
  return false;
}

static void print_stuck(const run_cfg *rc, int phase) {
  fprintf(stderr, "chaos seed %" PRIu64 ", phase %d: live stacks:", rc->seed, phase);
  for (int i = 0; i < g.nactors; i++)
    if (atomic_load(&g.live[i]) != 0) fprintf(stderr, " actor %d: %d;", i, atomic_load(&g.live[i]));
  fprintf(stderr, "\n");
}

/* Spends the budget in PHASES phases, each followed by a pause in which no
 * operation is taken: every stack must then end, with nothing new arriving
 * to hide a message a house was left waiting with. An abrupt run ends in its
 * last phase instead (its last operation exits). False when a pause never
 * became quiet, or a phase stalled. */
static bool run_phases(const run_cfg *rc, uint64_t *rng) {
  for (int p = 1; p <= PHASES; p++) {
    atomic_store(&g.limit, g.budget / PHASES * p + (p == PHASES ? g.budget % PHASES : 0));
    bool spent = kick_until(atomic_load(&g.limit), rng);
    if (spent && p == PHASES && rc->abrupt) return true;
    if (!spent || !wait_quiet()) {
      print_stuck(rc, p);
      return false;
    }
  }
  return true;
}

/* Before the run, so that any failure that follows names its seed. */
static void print_start(const run_cfg *rc) {
  fprintf(stderr, "chaos seed %" PRIu64 ": %u workers, %s%s%s%s, %ld ops\n", rc->seed, rc->workers,
          rc->abrupt ? "abrupt" : "quiesced", rc->steal_happy ? ", steal-happy" : "",
          rc->tight_pools ? ", tight pools" : "", rc->no_spin ? ", no spin" : "", rc->ops);
}

static void print_run(const run_cfg *rc, const sh_stats *st) {
  fprintf(stderr,
          "chaos seed %" PRIu64 ": %" PRIu64 " stacks (%" PRIu64 " barrier, %" PRIu64
          " batch), %" PRIu64 " asks: %" PRIu64 " replies, %" PRIu64 " copied, %" PRIu64
          " thrown, %" PRIu64 " timeouts, %" PRIu64 " shutdown, %" PRIu64 " abandoned; %" PRIu64
          " notices, %" PRIu64 " timers, %" PRIu64 " ticks, %" PRIu64 " stops; steals %" PRIu64
          ", unknown replies %" PRIu64 "\n",
          rc->seed, cval(C_STARTED), cval(C_BARRIER_STACKS), cval(C_BATCH_STACKS),
          cval(C_ASKS_MADE), cval(C_GOT_REPLY), cval(C_GOT_COMMON),
          cval(C_GOT_THROWN) + cval(C_GOT_BATCH_THROWN), cval(C_GOT_TIMEOUT), cval(C_GOT_SHUTDOWN),
          cval(C_ABANDONED), cval(C_NOTICES_SENT), cval(C_TIMERS), cval(C_TICKS), cval(C_STOPS),
          st->steals, st->replies_unknown);
}

static void check_invariants(const sh_stats *st) {
  /* Every stack ended; every future was observed once or left behind. */
  assert_int_equal(cval(C_STARTED), cval(C_ENDED));
  assert_int_equal(cval(C_ASKS_MADE), cval(C_OBSERVED) + cval(C_ABANDONED));
  assert_int_equal(cval(C_OBSERVED), cval(C_GOT_REPLY) + cval(C_GOT_COMMON) + cval(C_GOT_THROWN) +
                                         cval(C_GOT_BATCH_THROWN) + cval(C_GOT_TIMEOUT) +
                                         cval(C_GOT_SHUTDOWN));
  /* Every handled ask was answered once; nothing arrived that was not sent. */
  assert_int_equal(cval(C_ASKS_HANDLED), cval(C_SENT_REPLY) + cval(C_SENT_THROW) +
                                             cval(C_SENT_COMMON) + cval(C_SENT_BATCH_THROW));
  assert_true(cval(C_ASKS_HANDLED) <= cval(C_ASKS_MADE));
  assert_true(cval(C_GOT_REPLY) <= cval(C_SENT_REPLY));
  assert_true(cval(C_GOT_THROWN) <= cval(C_SENT_THROW));
  assert_true(cval(C_GOT_COMMON) <= cval(C_SENT_COMMON));
  assert_true(cval(C_GOT_BATCH_THROWN) <= cval(C_SENT_BATCH_THROW));
  /* The runtime's own accounting agrees. */
  assert_int_equal(st->asks_timed_out, cval(C_GOT_TIMEOUT));
  assert_int_equal(st->dropped_stopped, cval(C_NOTICES_SENT) - cval(C_NOTICES_HANDLED) +
                                            cval(C_ASKS_MADE) - cval(C_ASKS_HANDLED));
  /* A reply finds no promise only when its ask timed out, was left behind,
   * or was failed by a stop. */
  assert_true(st->replies_unknown <=
              cval(C_GOT_TIMEOUT) + cval(C_ABANDONED) + cval(C_GOT_SHUTDOWN));
  for (int i = 0; i < g.nactors; i++) {
    assert_int_equal(atomic_load(&g.mounts[i]), 1);
    assert_int_equal(atomic_load(&g.stop_hooks[i]), 1);
    assert_int_equal(atomic_load(&g.live[i]), 0);
  }
  assert_true(cval(C_STOPS) <= STOP_MAX);
  /* The mix happened: these depend on message flags only, not on timing. */
  assert_true(cval(C_GOT_REPLY) > 0);
  assert_true(cval(C_BATCH_STACKS) > 0);
  assert_true(cval(C_BARRIER_STACKS) > 0);
}

static void chaos_run(const run_cfg *rc) {
  alarm(WATCHDOG_S + (unsigned)(rc->ops / 1000));
  print_start(rc);
  reset_run(rc);
  sh_config cfg = config_of(rc);
  sh_system *sys = th_system_new(&cfg);
  uint64_t rng = mix64(rc->seed ^ 0x5eed) | 1;
  spawn_all(sys, rc, &rng);
  assert_int_equal(sh_system_start(sys), 0);
  bool quiet = run_phases(rc, &rng);
  if (!rc->abrupt || !quiet) sh_system_exit(sys, 0);
  assert_int_equal(sh_system_wait(sys), 0);
  atomic_store(&g.shutting_down, true);
  sh_stats st = th_end(sys); /* no CHECK failed; the pools got every object back */
  print_run(rc, &st);
  if (!quiet) fail_msg("seed %" PRIu64 ": stacks kept waiting, or the workload stalled", rc->seed);
  check_invariants(&st);
}

/* ---- regression: an ask's timeout cancelled from another worker ------------ */

/*
 * Found by the chaos run under TSan. An ask's timer lives in the wheel of the
 * worker that ran the asker when it asked; a stolen house answered on its
 * owner (or the reverse) cancels it from another worker. sh_timer_cancel_node
 * read the node's wheel_worker after its CAS to CANCELLED, when the wheel's
 * worker may already have freed the node and its pool handed it out again.
 * Here every client sits on worker 0 with stealing made easy, so houses move
 * between an ask and its reply all the time, and the 1 ms timeouts make the
 * wheels free cancelled nodes (for reuse by the next asks) at once. TSan
 * reported the read every run before the fix.
 */
#define XC_CLIENTS 64

static const sh_addr *xc_server;
static atomic_int xc_done, xc_replies;

static sh_yield xc_server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return th_reply_with(st, sh_stack_msg_as(st, num_ask)->v + 1);
}
static const sh_actor_class xc_server_class = {
    .name = "xc_server", .size = sizeof(sh_actor), .ask = xc_server_ask};

typedef struct xc_locals { sh_future *f; } xc_locals;

static sh_yield xc_client_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  xc_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, xc_server, th_new_ask(41), 1);
    CHECK(l->f != NULL);
    return sh_suspend(st, 1);
  }
  int err = sh_future_error(l->f);
  CHECK(err == 0 || err == -ETIMEDOUT); /* a loaded machine may be late */
  if (err == 0) {
    CHECK(sh_future_reply(l->f, num_reply)->v == 42);
    atomic_fetch_add(&xc_replies, 1);
  }
  atomic_fetch_add(&xc_done, 1);
  return sh_return(st, NULL);
}
static const sh_actor_class xc_client_class = {.name = "xc_client",
                                               .size = sizeof(sh_actor),
                                               .locals_size = sizeof(xc_locals),
                                               .notice = xc_client_notice};

static void test_ask_timeout_cancelled_across_workers(void **state) {
  (void)state;
  th_reset(0);
  sh_config cfg = th_config(2);
  cfg.steal_floor = 2;
  cfg.steal_aggression = 4;
  sh_system *sys = th_system_new(&cfg);
  xc_server = th_spawn_on(sys, &xc_server_class, NULL, 1);
  const sh_addr *clients[XC_CLIENTS];
  for (int i = 0; i < XC_CLIENTS; i++) clients[i] = th_spawn_on(sys, &xc_client_class, NULL, 0);
  atomic_store(&xc_done, 0);
  atomic_store(&xc_replies, 0);
  assert_int_equal(sh_system_start(sys), 0);
  int rounds = 150, sent = 0;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < XC_CLIENTS; i++, sent++)
      assert_int_equal(sh_notice(clients[i], &sh_msg_new(chaos_note)->hdr), 0);
    th_wait_for(&xc_done, sent - 2 * XC_CLIENTS); /* a bounded backlog */
  }
  th_wait_for(&xc_done, sent);
  sh_stats st = th_end(sys);
  assert_true(st.steals > 0); /* the race needs houses that change workers */
  assert_true(atomic_load(&xc_replies) > 0);
  assert_int_equal(st.asks_timed_out + (uint64_t)atomic_load(&xc_replies), (uint64_t)sent);
}

/* ---- seeds ------------------------------------------------------------------ */

static long env_ops(void) {
  const char *s = getenv("CHAOS_OPS");
  long n = s != NULL ? strtol(s, NULL, 10) : 0;
  return n > 0 ? n : DEFAULT_OPS;
}

/* CHAOS_SEEDS=A..B or A; false when unset. */
static bool env_seeds(uint64_t *lo, uint64_t *hi) {
  const char *s = getenv("CHAOS_SEEDS");
  if (s == NULL || *s == '\0') return false;
  char *end;
  *lo = strtoull(s, &end, 10);
  *hi = strncmp(end, "..", 2) == 0 ? strtoull(end + 2, NULL, 10) : *lo;
  return true;
}

static void test_chaos(void **state) {
  (void)state;
  long ops = env_ops();
  uint64_t lo, hi;
  if (env_seeds(&lo, &hi)) {
    for (uint64_t s = lo; s <= hi; s++) {
      run_cfg rc = derive(s, ops);
      chaos_run(&rc);
    }
    return;
  }
  for (size_t i = 0; i < sizeof(default_seeds) / sizeof(default_seeds[0]); i++) {
    run_cfg rc = derive(default_seeds[i], ops);
    chaos_run(&rc);
  }
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chaos),
      cmocka_unit_test(test_ask_timeout_cancelled_across_workers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
