/*
 * Bugs the original design of this runtime had, which it must not repeat,
 * one scenario each. Each is written so that it fails if its bug comes
 * back; the comment above each says what the bug was and how it would show.
 * Here the two about asks:
 *
 *   bug1_future_count   the futures table's count and growth
 *   bug3_batch_recycle   batched asks are answered to their own askers
 *
 * (bug2_flag_clear, a message put during the drain, is bug2_flag_clear.c.
 * The fourth, a put back at the head of an empty mailbox that lost the
 * message, has no scenario: the mailbox no longer puts messages back.)
 *
 * Counters the actors share are seq_cst (the default) unless marked: they
 * are few, off any hot path, and each end condition reads them together.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

/* Actors here are sh_scn_actors; asks and replies carry numbers
 * (sh_scn_num_ask, sh_scn_num), start notices are sh_scn_go. */

static uint64_t answer_of(uint64_t v) { return 3 * v + 1; }

/* An echo server: answers 3v + 1 at once. */
static sh_yield echo_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_scn_answer(st, answer_of(sh_stack_msg_as(st, sh_scn_num_ask)->v));
}

static const sh_actor_class echo_class = {
    .name = "echo",
    .size = sizeof(sh_actor),
    .ask = echo_ask,
};

/*
 * A holder answers nothing: its first ask becomes a barrier stack waiting on
 * an ask to the holder itself, which the barrier holds like every later
 * ask, until the holder stops (shutdown). Then every ask it holds is
 * answered -ESHUTDOWN, after its askers may have stopped waiting.
 */
typedef struct holder {
  sh_scn_actor sa;
  bool locked;
} holder;

typedef struct one_future {
  sh_future *f;
} one_future;

static bool holder_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((holder *)self)->locked;
}

static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  holder *h = (holder *)self;
  one_future *l = sh_stack_locals(st);
  if (sh_stack_state(st) != SH_START) return sh_throw(st, sh_future_error(l->f));
  if (!SH_SCN_CHECK(h->sa.s, !h->locked, "an ask passed the holder's barrier"))
    return sh_throw(st, -EPROTO);
  h->locked = true;
  l->f = sh_scn_ask_num(st, sh_self(self), 0, SH_FOREVER);
  if (!SH_SCN_CHECK(h->sa.s, l->f != NULL, "the holder's pin failed")) return sh_throw(st, -ENOMEM);
  return sh_suspend(st, 1);
}

static const sh_actor_class holder_class = {
    .name = "holder",
    .size = sizeof(holder),
    .locals_size = sizeof(one_future),
    .init = sh_scn_actor_init,
    .ask = holder_ask,
    .barrier = holder_barrier,
};

/* ============================================================================
 * bug1_future_count
 *
 * The original's futures table never incremented its count: it never grew,
 * and "no pending future" (a priority rule, and here also what the stop
 * path drains) was wrong. One actor P makes B1_HELD asks to a holder (they
 * stay pending) and then, from another stack, B1_ECHO asks to echo servers
 * on every worker: B1_HELD + B1_ECHO futures pending at once, several
 * doublings past the table's initial size. P checks:
 *   - right after the asks, the table's count is exactly the number pending
 *     and its capacity kept the load factor (it grew);
 *   - every echo reply is matched to its own ask (value 3v + 1), none lost;
 *   - when P stops itself, every held ask fails with -ESHUTDOWN and its
 *     stack resumes before P's stop hook runs (the stop path drains the
 *     table by its count).
 * After shutdown: replies_unknown == B1_HELD + 1 exactly (the held asks'
 * refusals, which come after P stopped waiting, and the holder's own pin):
 * no echo reply went unmatched.
 * With the bug: the count check fails at once; the table stays at its
 * initial size; and the stop finds "no pending future", so the held stack
 * never resumes and the stop hook's check fails (asks != asks_resolved too).
 * ========================================================================== */

#define B1_HELD 100
#define B1_ECHO 150

typedef struct b1_world {
  const sh_addr *holder, *echo;
  atomic_int held_resumes;  /* the held stack's resumes */
  atomic_int held_shut;     /* held asks it saw fail with -ESHUTDOWN */
  atomic_int echo_ok;       /* echo replies matched */
  atomic_int stops;
} b1_world;

typedef struct b1_locals {
  sh_future *f[B1_ECHO];
  uint64_t v[B1_ECHO];
} b1_locals;

enum { B1_HOLD = 0, B1_ECHOES = 1 };

/* From P's own handlers: its table of pending asks. */
static void b1_check_table(sh_actor *self, uint32_t want) {
  sh_actor_probe p;
  sh_actor_probe_get(self, &p);
  sh_scn *s = sh_scn_of(self);
  SH_SCN_CHECK(s, p.asks_pending == want, "futures table counts %u, %u pending",
               p.asks_pending, want);
  SH_SCN_CHECK(s, want < p.ask_buckets * p.ask_load,
               "futures table of %u buckets holds %u futures: it did not grow", p.ask_buckets,
               want);
}

static sh_yield b1_hold_stack(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  b1_world *wd = sh_scn_state(s);
  b1_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    for (int i = 0; i < B1_HELD; i++) {
      l->f[i] = sh_scn_ask_num(st, wd->holder, (uint64_t)i, SH_FOREVER);
      if (!SH_SCN_CHECK(s, l->f[i] != NULL, "held ask %d failed", i)) return sh_return(st, NULL);
    }
    b1_check_table(self, B1_HELD);
    return sh_suspend(st, 1);
  }
  atomic_fetch_add(&wd->held_resumes, 1);
  for (int i = 0; i < B1_HELD; i++) {
    int err = sh_future_error(l->f[i]);
    if (SH_SCN_CHECK(s, err == -ESHUTDOWN, "held ask %d ended with %d", i, err))
      atomic_fetch_add(&wd->held_shut, 1);
  }
  return sh_return(st, NULL);
}

static sh_yield b1_echo_stack(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  b1_world *wd = sh_scn_state(s);
  b1_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    for (int i = 0; i < B1_ECHO; i++) {
      l->v[i] = sh_scn_rand(s) >> 4;
      l->f[i] = sh_scn_ask_num(st, wd->echo, l->v[i], SH_FOREVER);
      if (!SH_SCN_CHECK(s, l->f[i] != NULL, "echo ask %d failed", i)) return sh_return(st, NULL);
    }
    b1_check_table(self, B1_HELD + B1_ECHO);
    return sh_suspend(st, 1);
  }
  for (int i = 0; i < B1_ECHO; i++) {
    uint64_t v = 0;
    if (SH_SCN_CHECK(s, sh_scn_num_of(l->f[i], &v) && v == answer_of(l->v[i]),
                     "echo ask %d: error %d, wrong reply", i, sh_future_error(l->f[i])))
      atomic_fetch_add(&wd->echo_ok, 1);
  }
  b1_check_table(self, B1_HELD);
  /* The held asks stay pending: stopping P must fail every one of them. */
  sh_stop(sh_self(self));
  return sh_return(st, NULL);
}

static sh_yield b1_notice(sh_actor *self, sh_stack *st) {
  return sh_scn_go_n(st) == B1_HOLD ? b1_hold_stack(self, st) : b1_echo_stack(self, st);
}

static void b1_stop(sh_actor *self) {
  sh_scn *s = sh_scn_of(self);
  b1_world *wd = sh_scn_state(s);
  atomic_fetch_add(&wd->stops, 1);
  SH_SCN_CHECK(s, atomic_load(&wd->held_resumes) == 1 && atomic_load(&wd->held_shut) == B1_HELD,
               "at P's stop the held stack resumed %d times, saw %d of %d asks fail",
               atomic_load(&wd->held_resumes), atomic_load(&wd->held_shut), B1_HELD);
  sh_actor_probe p;
  sh_actor_probe_get(self, &p);
  SH_SCN_CHECK(s, p.asks_pending == 0, "%u futures left after the stop", p.asks_pending);
  sh_scn_done(s, sh_actor_system(self));
}

static const sh_actor_class b1_class = {
    .name = "asker",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(b1_locals),
    .init = sh_scn_actor_init,
    .stop = b1_stop,
    .notice = b1_notice,
};

static int b1_setup(sh_scn *s, sh_system *sys) {
  b1_world *wd = sh_scn_state(s);
  const sh_addr *p;
  int rc = sh_scn_spawn(s, sys, &holder_class, 0, 1, &wd->holder);
  if (rc == 0) rc = sh_spawn(sys, &echo_class, NULL, sh_scn_workers(s), &wd->echo);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &b1_class, 0, 0, &p);
  /* One sender: P takes the hold notice first. */
  if (rc == 0) rc = sh_scn_kick_n(p, B1_HOLD);
  if (rc == 0) rc = sh_scn_kick_n(p, B1_ECHOES);
  return rc;
}

static void b1_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  b1_world *wd = sh_scn_state(s);
  SH_SCN_CHECK(s, atomic_load(&wd->echo_ok) == B1_ECHO, "%d of %d echo replies matched",
               atomic_load(&wd->echo_ok), B1_ECHO);
  SH_SCN_CHECK(s, atomic_load(&wd->stops) == 1, "P's stop ran %d times", atomic_load(&wd->stops));
  SH_SCN_CHECK(s, st->replies_unknown == B1_HELD + 1, "%llu replies unknown, want %d",
               (unsigned long long)st->replies_unknown, B1_HELD + 1);
  SH_SCN_CHECK(s, st->asks == B1_HELD + B1_ECHO + 1, "%llu asks, want %d",
               (unsigned long long)st->asks, B1_HELD + B1_ECHO + 1);
}

static const sh_scenario bug1_future_count = {
    .name = "bug1_future_count",
    .summary = "known bug 1: 250 pending asks on one actor, table counted and grown, all matched",
    .workers = 2,
    .state_size = sizeof(b1_world),
    .setup = b1_setup,
    .verify = b1_verify,
};
SH_SCENARIO(bug1_future_count);

/* ============================================================================
 * bug3_batch_recycle
 *
 * The original's batched asks read sender and ask id from envelopes already
 * recycled, so replies could go to the wrong asker or the wrong ask. Here
 * askers on every worker each run B3_ROUNDS fan-outs of B3_FAN asks to one
 * batching server, so its ask mailbox interleaves many askers. The server's
 * batch stack first asks a helper and waits -- the batch's messages are held
 * across a suspension while new asks are allocated (from the same pools)
 * and arrive -- and only then answers: each ask with its own value
 * (sh_batch_reply, 3v + 1), except asks with v % 5 == 0, which get the
 * batch's common reply (B3_COMMON) through sh_return. Some asks are of a
 * type the filter refuses, answered singly, which splits batches.
 * Every asker checks each reply against its own ask; after shutdown no reply
 * is unknown and at least one batch held more than one ask.
 * With the bug a reply reaches another ask or another asker: a wrong value
 * there, an unknown reply, or an ask never answered, which its guard
 * timeout (B3_GUARD_MS, never reached otherwise) turns into a failed check
 * rather than a hang.
 * ========================================================================== */

#define B3_ASKERS_MAX 32
#define B3_ROUNDS 4
#define B3_FAN 8
#define B3_COMMON UINT64_C(0xC0FFEE)
/* Never reached unless an ask goes unanswered; then the asker wakes and its
 * checks fail the run (instead of a hang). */
#define B3_GUARD_MS 5000u

/* Asks the server's batch filter refuses. */
typedef sh_scn_num_ask b3_solo;
static SH_MSG_DEFINE(b3_solo, SH_ASK, 0);

typedef struct b3_world {
  const sh_addr *server, *helper;
  uint32_t naskers;
  atomic_int replies_ok, askers_done, batches, batched_asks, max_batch;
} b3_world;

typedef struct b3_locals {
  sh_future *f[B3_FAN];
  uint64_t v[B3_FAN];
  uint32_t round;
} b3_locals;

static bool b3_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &sh_scn_num_ask_type);
}

/* relaxed: only the server's handlers write these, one at a time; verify
 * reads them after the workers joined. */
static void b3_note_batch(b3_world *wd, int n) {
  atomic_fetch_add_explicit(&wd->batches, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&wd->batched_asks, n, memory_order_relaxed);
  if (n > atomic_load_explicit(&wd->max_batch, memory_order_relaxed))
    atomic_store_explicit(&wd->max_batch, n, memory_order_relaxed);
}

static sh_yield b3_batch(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  b3_world *wd = sh_scn_state(s);
  one_future *l = sh_stack_locals(st);
  size_t n = sh_stack_batch_len(st);
  if (sh_stack_state(st) == SH_START) {
    b3_note_batch(wd, (int)n);
    l->f = sh_scn_ask_num(st, wd->helper, n, SH_FOREVER);
    if (!SH_SCN_CHECK(s, l->f != NULL, "helper ask failed")) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  uint64_t hv = 0;
  SH_SCN_CHECK(s, sh_scn_num_of(l->f, &hv) && hv == answer_of(n), "helper reply wrong");
  for (size_t i = 0; i < n; i++) {
    const sh_scn_num_ask *q = (const sh_scn_num_ask *)sh_stack_batch_msg(st, i);
    if (!SH_SCN_CHECK(s, sh_msg_is(&q->hdr, &sh_scn_num_ask_type),
                      "batch message %zu of another type", i))
      continue;
    if (q->v % 5 == 0) continue; /* the common reply */
    sh_msg *r = sh_scn_num_new(answer_of(q->v));
    SH_SCN_CHECK(s, r != NULL && sh_batch_reply(st, i, r) == 0, "batch reply %zu failed", i);
  }
  return sh_scn_answer(st, B3_COMMON);
}

static sh_yield b3_solo_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_scn_answer(st, answer_of(sh_stack_msg_as(st, b3_solo)->v));
}

static const sh_actor_class b3_server_class = {
    .name = "batcher",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(one_future),
    .init = sh_scn_actor_init,
    .ask = b3_solo_ask,
    .batch_ask = b3_batch,
    .batch_ask_filter = b3_filter,
};

static bool b3_is_solo(uint32_t j) { return j % 4 == 3; }

static void b3_fan_out(sh_actor *self, sh_stack *st, uint32_t asker) {
  sh_scn *s = sh_scn_of(self);
  b3_world *wd = sh_scn_state(s);
  b3_locals *l = sh_stack_locals(st);
  for (uint32_t j = 0; j < B3_FAN; j++) {
    /* Unique per ask: asker, round and slot in the low bits. */
    l->v[j] = (sh_scn_rand(s) >> 24) << 20 | (uint64_t)asker << 10 | l->round << 4 | j;
    const sh_msg_type *t = b3_is_solo(j) ? &b3_solo_type : &sh_scn_num_ask_type;
    l->f[j] = sh_scn_ask_num_as(st, t, wd->server, l->v[j], B3_GUARD_MS);
    SH_SCN_CHECK(s, l->f[j] != NULL, "asker %u: ask failed", asker);
  }
}

static sh_yield b3_asker_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  b3_world *wd = sh_scn_state(s);
  b3_locals *l = sh_stack_locals(st);
  uint32_t asker = sh_scn_id(self);
  if (sh_stack_state(st) == SH_START) {
    l->round = 0;
    b3_fan_out(self, st, asker);
    return sh_suspend(st, 1);
  }
  for (uint32_t j = 0; j < B3_FAN; j++) {
    const sh_scn_num *r = sh_future_reply(l->f[j], sh_scn_num);
    uint64_t want = l->v[j] % 5 == 0 && !b3_is_solo(j) ? B3_COMMON : answer_of(l->v[j]);
    if (SH_SCN_CHECK(s, r != NULL && r->v == want,
                     "asker %u round %u ask %u: error %d, reply %llu, want %llu", asker, l->round,
                     j, sh_future_error(l->f[j]), r != NULL ? (unsigned long long)r->v : 0ull,
                     (unsigned long long)want))
      atomic_fetch_add(&wd->replies_ok, 1);
  }
  if (++l->round < B3_ROUNDS) {
    b3_fan_out(self, st, asker);
    return sh_suspend(st, 1);
  }
  if (atomic_fetch_add(&wd->askers_done, 1) + 1 == (int)wd->naskers)
    sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class b3_asker_class = {
    .name = "asker",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(b3_locals),
    .init = sh_scn_actor_init,
    .notice = b3_asker_notice,
};

static int b3_setup(sh_scn *s, sh_system *sys) {
  b3_world *wd = sh_scn_state(s);
  uint32_t n = 4 * sh_scn_workers(s);
  wd->naskers = n < B3_ASKERS_MAX ? n : B3_ASKERS_MAX;
  int rc = sh_scn_spawn_on(s, sys, &b3_server_class, 0, 0, &wd->server);
  if (rc == 0) rc = sh_spawn(sys, &echo_class, NULL, 1, &wd->helper);
  if (rc == 0) rc = sh_scn_spawn_each(s, sys, &b3_asker_class, wd->naskers, SH_SCN_EACH_KICK, NULL);
  return rc;
}

static void b3_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  b3_world *wd = sh_scn_state(s);
  int total = (int)wd->naskers * B3_ROUNDS * B3_FAN;
  int batched = total / 4 * 3; /* b3_is_solo: one ask in four goes alone */
  SH_SCN_CHECK(s, atomic_load(&wd->replies_ok) == total, "%d of %d replies right",
               atomic_load(&wd->replies_ok), total);
  SH_SCN_CHECK(s, atomic_load(&wd->batched_asks) == batched, "%d asks batched, want %d",
               atomic_load(&wd->batched_asks), batched);
  SH_SCN_CHECK(s, atomic_load(&wd->max_batch) >= 2, "no batch held more than one ask");
  SH_SCN_CHECK(s, st->replies_unknown == 0 && st->asks_timed_out == 0,
               "%llu replies unknown, %llu asks timed out", (unsigned long long)st->replies_unknown,
               (unsigned long long)st->asks_timed_out);
  uint64_t asks = (uint64_t)total + (uint64_t)atomic_load(&wd->batches);
  SH_SCN_CHECK(s, st->asks == asks, "%llu asks, want %llu", (unsigned long long)st->asks,
               (unsigned long long)asks);
}

static const sh_scenario bug3_batch_recycle = {
    .name = "bug3_batch_recycle",
    .summary = "known bug 3: batched asks from many askers, each answered to its own ask",
    .workers = 2,
    .state_size = sizeof(b3_world),
    .setup = b3_setup,
    .verify = b3_verify,
};
SH_SCENARIO(bug3_batch_recycle);
