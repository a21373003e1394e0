/*
 * ask_timeouts: asks with a timeout (a future fails with a timeout when no
 * reply comes in time, and a late reply finds no future).
 *
 * A client on every worker makes ASKS_PER_CLIENT asks, each from its own
 * stack and with a timeout of TIMEOUT_MS, to servers that answer
 *   - NOW:   at once;
 *   - SOON:  SOON_MAX_MS or less after the ask arrives;
 *   - LATE:  LATE_MIN_MS..LATE_MAX_MS after it, well past the timeout;
 *   - NEVER: only when the system shuts down.
 * The kind and delay of every ask are drawn in setup. On the epoll backend
 * time is real, so the delays keep a margin of about 40 ms on both sides of
 * the timeout (stalls of a worker thread of 10-30 ms were seen on a loaded
 * two-CPU machine): NOW and SOON asks must get their reply, LATE and NEVER
 * asks must fail with -ETIMEDOUT, and every ask resolves exactly once.
 *
 * How a server delays a reply: a stack can only wait on futures, and an
 * actor timer (sh_timer_start) cannot complete one. So the server's stack
 * asks a fresh "gate" actor, which holds that ask behind a barrier (the
 * barrier stack waits on an ask to the gate itself, which the barrier holds
 * too), and starts an actor timer; the timer's handler stops the gate
 * (sh_stop), which fails the gate's own pending ask, ends its barrier stack
 * with a reply (or refuses the held ask), and so resumes the server's stack,
 * which answers the client. A NEVER ask's gate gets no timer: shutdown
 * stops it. The workload ends when every ask resolved and every LATE reply
 * was sent, so late replies reach askers that no longer wait for them.
 *
 * Accounting checked after shutdown:
 *   - asks_timed_out == LATE + NEVER asks (exactly);
 *   - asks == client asks + gate holds + gate pins (counted by the actors);
 *   - replies_unknown: each timed-out ask is answered later exactly once
 *     (by its server's stack, which always returns, at shutdown at the
 *     latest): at least timeouts. Each gate's pin that was sent is refused
 *     by the stopped gate (a pin made after the gate stopped fails at once
 *     and is never sent); the refusal comes back to the gate itself, in the
 *     same run when the gate saw the stop before the pin (a run takes what
 *     arrives in its exception mailbox ahead of its asks), where it fails
 *     the pin, or after the run's stop work already failed it, unknown: at
 *     most pins sent more. At shutdown a NEVER gate's reply may also reach
 *     a server whose stop already failed the hold: at most nevers more.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/scenario.h>

#define ASKS_PER_CLIENT 12
#define MAX_CLIENTS 16
#define MAX_ASKS (ASKS_PER_CLIENT * MAX_CLIENTS)

#define TIMEOUT_MS 40u
#define SOON_MAX_MS 2u
#define LATE_MIN_MS 80u
#define LATE_MAX_MS 85u

enum kind { K_NOW = 0, K_SOON, K_LATE, K_NEVER, K_KINDS };
static const char *const kind_name[K_KINDS] = {"now", "soon", "late", "never"};

typedef struct plan {
  uint32_t kind;
  uint32_t delay_ms;
  uint64_t v;
  atomic_uint resolved; /* client resumes that saw this ask's outcome */
  atomic_int error;     /* the outcome the client saw */
} plan;

typedef struct world {
  plan asks[MAX_ASKS];
  uint32_t nasks;
  uint32_t nkind[K_KINDS];
  const sh_addr *servers;
  atomic_uint outstanding; /* asks to resolve + LATE replies to send */
  atomic_uint holds;       /* asks servers made to gates */
  atomic_uint pins;        /* asks gates made to themselves */
  atomic_uint pins_failed; /* of those, failed at once: the gate had stopped */
  atomic_uint never_holds; /* holds of NEVER asks */
} world;

/* A client makes ask number n on an sh_scn_go. */

/* client -> server. */
typedef struct tmo_ask {
  sh_msg hdr;
  uint32_t idx, kind, delay_ms;
  uint64_t v;
} tmo_ask;
static SH_MSG_DEFINE(tmo_ask, SH_ASK, 0);

typedef struct tmo_reply {
  sh_msg hdr;
  uint32_t idx;
  uint64_t v;
} tmo_reply;
static SH_MSG_DEFINE(tmo_reply, SH_REPLY, 0);

/* server -> gate: held until the gate stops. A barrier: while its stack
 * waits, the gate takes no ask (its own pin included). */
typedef struct tmo_hold {
  sh_msg hdr;
} tmo_hold;
static SH_MSG_DEFINE(tmo_hold, SH_ASK, SH_MSG_BARRIER);

/* gate -> itself: the ask its barrier stack waits on; never handled. */
typedef struct tmo_pin {
  sh_msg hdr;
} tmo_pin;
static SH_MSG_DEFINE(tmo_pin, SH_ASK, 0);

typedef struct tmo_done {
  sh_msg hdr;
} tmo_done;
static SH_MSG_DEFINE(tmo_done, SH_REPLY, 0);

typedef struct one_future {
  sh_future *f;
} one_future;

static uint64_t answer_of(uint64_t v) { return 3 * v + 1; }

/* One of the things the workload waits for happened; the last ends it. */
static void finish_one(sh_actor *self) {
  sh_scn *s = sh_scn_of(self);
  sh_scn_count_down(s, sh_actor_system(self), &((world *)sh_scn_state(s))->outstanding);
}

/* ---- gate: holds one ask until it is stopped ------------------------------- */

static sh_yield gate_ask(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  one_future *l = sh_stack_locals(st);
  if (!sh_msg_is(sh_stack_msg(st), &tmo_hold_type)) {
    /* The pin: the barrier holds it while the gate runs, the stop refuses it. */
    SH_SCN_CHECK(s, false, "a gate handled its pin");
    return sh_throw(st, -EPROTO);
  }
  if (sh_stack_state(st) == SH_START) {
    tmo_pin *p = sh_msg_new(tmo_pin);
    l->f = sh_ask(st, sh_self(self), p != NULL ? &p->hdr : NULL, SH_FOREVER);
    if (!SH_SCN_CHECK(s, l->f != NULL, "a gate's pin failed")) return sh_throw(st, -ENOMEM);
    atomic_fetch_add_explicit(&wd->pins, 1, memory_order_relaxed);
    /* The server's timer may stop the gate while this handler runs: the
     * pin then fails at once (and is never refused later). */
    if (sh_future_done(l->f)) atomic_fetch_add_explicit(&wd->pins_failed, 1, memory_order_relaxed);
    return sh_suspend(st, 1);
  }
  /* Only the gate's stop ends the wait. */
  SH_SCN_CHECK(s, sh_future_error(l->f) == -ESHUTDOWN, "a gate's pin ended with %d",
               sh_future_error(l->f));
  tmo_done *d = sh_msg_new(tmo_done);
  return d != NULL ? sh_return(st, &d->hdr) : sh_throw(st, -ENOMEM);
}

static const sh_actor_class gate_class = {
    .name = "gate",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(one_future),
    .init = sh_scn_actor_init,
    .ask = gate_ask,
};

/* ---- server ----------------------------------------------------------------- */

/* Answers the client; a LATE answer is one of the things the workload
 * waits for (counted after the reply went out). */
static sh_yield server_answer(sh_actor *self, sh_stack *st, const tmo_ask *q) {
  tmo_reply *r = sh_msg_new(tmo_reply, .idx = q->idx, .v = answer_of(q->v));
  sh_yield y = r != NULL ? sh_return(st, &r->hdr) : sh_throw(st, -ENOMEM);
  if (q->kind == K_LATE) finish_one(self);
  return y;
}

/* The timer of a SOON or LATE ask: its gate may let the reply go. */
static void server_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)self;
  (void)id;
  sh_stop((const sh_addr *)arg);
}

/* Parks the stack on a new gate; a timer stops the gate after the delay. */
static sh_yield server_hold(sh_actor *self, sh_stack *st, const tmo_ask *q) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  one_future *l = sh_stack_locals(st);
  const sh_addr *gate;
  int rc = sh_scn_spawn(s, sh_actor_system(self), &gate_class, 0, 1, &gate);
  /* Spawns fail once the workload ended; only a NEVER ask (already timed
   * out) can still be on its way to the server by then. */
  SH_SCN_CHECK(s, rc == 0 || (rc == -ESHUTDOWN && q->kind == K_NEVER),
               "gate spawn failed: %d (%s ask)", rc, kind_name[q->kind]);
  if (rc != 0) return server_answer(self, st, q);
  tmo_hold *h = sh_msg_new(tmo_hold);
  l->f = sh_ask(st, gate, h != NULL ? &h->hdr : NULL, SH_FOREVER);
  SH_SCN_CHECK(s, l->f != NULL, "hold ask failed");
  if (l->f == NULL) return server_answer(self, st, q);
  atomic_fetch_add_explicit(&wd->holds, 1, memory_order_relaxed);
  if (q->kind == K_NEVER) {
    atomic_fetch_add_explicit(&wd->never_holds, 1, memory_order_relaxed);
  } else if (sh_timer_start(self, q->delay_ms, 0, (void *)gate, NULL) != 0) {
    /* Only a stopping server refuses a timer: let the reply go now. */
    sh_stop(gate);
  }
  return sh_suspend(st, 1);
}

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  const tmo_ask *q = sh_stack_msg_as(st, tmo_ask);
  one_future *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START)
    return q->kind == K_NOW ? server_answer(self, st, q) : server_hold(self, st, q);
  /* The gate let go: its reply, or its refusal when it stopped before it
   * took the hold, or (shutdown) this server's own stop. */
  int err = sh_future_error(l->f);
  SH_SCN_CHECK(s, err == 0 || err == -ESHUTDOWN, "a hold ended with %d", err);
  return server_answer(self, st, q);
}

static const sh_actor_class server_class = {
    .name = "server",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(one_future),
    .init = sh_scn_actor_init,
    .ask = server_ask,
    .timeout = server_timeout,
};

/* ---- client: one stack per ask ------------------------------------------------ */

static void client_check(sh_scn *s, const plan *p, uint32_t idx, const sh_future *f) {
  int err = sh_future_error(f);
  const tmo_reply *r = sh_future_reply(f, tmo_reply);
  if (p->kind == K_NOW || p->kind == K_SOON) {
    SH_SCN_CHECK(s, err == 0 && r != NULL && r->idx == idx && r->v == answer_of(p->v),
                 "%s ask %u (delay %u ms, timeout %u ms): error %d", kind_name[p->kind], idx,
                 p->delay_ms, TIMEOUT_MS, err);
  } else {
    SH_SCN_CHECK(s, err == -ETIMEDOUT && r == NULL,
                 "%s ask %u (delay %u ms, timeout %u ms): error %d, reply %s", kind_name[p->kind],
                 idx, p->delay_ms, TIMEOUT_MS, err, r != NULL ? "present" : "absent");
  }
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  one_future *l = sh_stack_locals(st);
  uint32_t idx = sh_scn_go_n(st);
  plan *p = &wd->asks[idx];
  if (sh_stack_state(st) == SH_START) {
    tmo_ask *q = sh_msg_new(tmo_ask, .idx = idx, .kind = p->kind, .delay_ms = p->delay_ms,
                            .v = p->v);
    l->f = sh_ask(st, wd->servers, q != NULL ? &q->hdr : NULL, TIMEOUT_MS);
    SH_SCN_CHECK(s, l->f != NULL, "ask %u failed", idx);
    if (l->f == NULL) return sh_return(st, NULL);
    return sh_suspend(st, 1);
  }
  SH_SCN_CHECK(s, sh_future_done(l->f), "ask %u: resumed before it resolved", idx);
  /* relaxed: read after the workers are joined. */
  atomic_fetch_add_explicit(&p->resolved, 1, memory_order_relaxed);
  atomic_store_explicit(&p->error, sh_future_error(l->f), memory_order_relaxed);
  client_check(s, p, idx, l->f);
  finish_one(self);
  return sh_return(st, NULL);
}

static const sh_actor_class client_class = {
    .name = "client",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(one_future),
    .init = sh_scn_actor_init,
    .notice = client_notice,
};

/* ---- the run ---------------------------------------------------------------------- */

static void draw_plan(sh_scn *s, world *wd, uint32_t idx) {
  plan *p = &wd->asks[idx];
  uint64_t r = sh_scn_rand(s);
  p->kind = (uint32_t)(r % K_KINDS);
  r /= K_KINDS;
  switch (p->kind) {
  case K_SOON: p->delay_ms = 1 + (uint32_t)(r % SOON_MAX_MS); break;
  case K_LATE: p->delay_ms = LATE_MIN_MS + (uint32_t)(r % (LATE_MAX_MS - LATE_MIN_MS + 1)); break;
  default: p->delay_ms = 0; break;
  }
  p->v = sh_scn_rand(s) >> 4;
  wd->nkind[p->kind]++;
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  uint32_t nclients = sh_scn_workers(s) < MAX_CLIENTS ? sh_scn_workers(s) : MAX_CLIENTS;
  wd->nasks = nclients * ASKS_PER_CLIENT;
  for (uint32_t i = 0; i < wd->nasks; i++) draw_plan(s, wd, i);
  atomic_store(&wd->outstanding, wd->nasks + wd->nkind[K_LATE]);
  int rc = sh_scn_spawn(s, sys, &server_class, 0, sh_scn_workers(s), &wd->servers);
  for (uint32_t c = 0; c < nclients && rc == 0; c++) {
    const sh_addr *a;
    rc = sh_scn_spawn_on(s, sys, &client_class, c, c, &a);
    for (uint32_t k = 0; k < ASKS_PER_CLIENT && rc == 0; k++)
      rc = sh_scn_kick_n(a, c * ASKS_PER_CLIENT + k);
  }
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  for (uint32_t i = 0; i < wd->nasks; i++) {
    unsigned n = atomic_load(&wd->asks[i].resolved);
    SH_SCN_CHECK(s, n == 1, "ask %u (%s) resolved %u times", i, kind_name[wd->asks[i].kind], n);
  }
  uint64_t timeouts = wd->nkind[K_LATE] + wd->nkind[K_NEVER];
  SH_SCN_CHECK(s, st->asks_timed_out == timeouts, "%llu asks timed out, want %llu",
               (unsigned long long)st->asks_timed_out, (unsigned long long)timeouts);
  uint64_t holds = atomic_load(&wd->holds), pins = atomic_load(&wd->pins);
  uint64_t asks = wd->nasks + holds + pins;
  SH_SCN_CHECK(s, st->asks == asks, "%llu asks, want %u + %llu holds + %llu pins",
               (unsigned long long)st->asks, wd->nasks, (unsigned long long)holds,
               (unsigned long long)pins);
  uint64_t lo = timeouts;
  uint64_t hi = lo + pins - atomic_load(&wd->pins_failed) + atomic_load(&wd->never_holds);
  SH_SCN_CHECK(s, st->replies_unknown >= lo && st->replies_unknown <= hi,
               "%llu replies unknown, want %llu..%llu", (unsigned long long)st->replies_unknown,
               (unsigned long long)lo, (unsigned long long)hi);
  SH_SCN_CHECK(s, atomic_load(&wd->outstanding) == 0, "%u outstanding at the end",
               atomic_load(&wd->outstanding));
}

static const sh_scenario ask_timeouts = {
    .name = "ask_timeouts",
    .summary = "ask timeouts: replies now, soon, late or never; each ask resolves once, in time or not",
    .workers = 2,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(ask_timeouts);
