/*
 * What the end-to-end tests of asks (test_e2e_ask.c, test_e2e_ask_fail.c)
 * share: a trace of the three phases across workers, servers whose ask
 * stack echoes, relays, throws or ends badly as configured, and clients
 * whose notice stack asks (one ask in single_class; each test file defines
 * the other client classes it uses with CLIENT_CLASS).
 *
 * Actors never call cmocka (a failed assertion longjmps, which must not
 * happen on a worker thread): they record what they saw, and CHECK() counts
 * failures. The main thread asserts after sh_system_shutdown, when the
 * workers are joined and the statistics are exact.
 */
#ifndef TESTS_ASK_FIXTURE_H
#define TESTS_ASK_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

/* A hang (a lost reply, a stack never resumed) fails the run instead of
 * blocking CI; the whole file normally runs in well under a second. */
#define WATCHDOG_S 120
#define MAX_FAN 100

/* ---- harness ------------------------------------------------------------- */

static atomic_int g_served;  /* ask stacks started by servers */
static atomic_int g_noticed; /* notices handled by servers */
static atomic_int g_drops;   /* drop hooks run on stray messages */

/* The trace: events in the order they happened, across workers. The atomic
 * index orders them; the events it orders are themselves causally ordered
 * by the messages between them. */
#define TRACE_MAX 256
enum { PH_SEND = 1, PH_PROCESS = 2, PH_RESUME = 3 };
enum { TAG_A = 1, TAG_B = 2, TAG_C = 3 };
#define EV(tag, ph) ((tag) * 16 + (ph))
static atomic_int g_trace_n;
static int g_trace[TRACE_MAX];
static pthread_t g_thread[4]; /* by tag: the thread that last traced it */

static void trace(int tag, int phase) {
  int i = atomic_fetch_add(&g_trace_n, 1);
  if (i < TRACE_MAX) g_trace[i] = EV(tag, phase);
  if (tag > 0 && tag < 4) g_thread[tag] = pthread_self();
}

/* A fresh system of `workers` workers whose run ends after `goal` th_done. */
static sh_system *env_new(uint32_t workers, int goal) {
  atomic_store(&g_served, 0);
  atomic_store(&g_noticed, 0);
  atomic_store(&g_drops, 0);
  atomic_store(&g_trace_n, 0);
  return th_env(workers, goal);
}

/* ---- messages -------------------------------------------------------------- */

typedef struct kick_msg { sh_msg hdr; long v; } kick_msg;       /* main -> actor */
typedef struct release_msg { sh_msg hdr; long v; } release_msg; /* actor -> itself */
/* Messages whose drop hook counts: they show that a refused message was freed. */
typedef struct stray_notice { sh_msg hdr; long v; } stray_notice;
typedef struct stray_ask { sh_msg hdr; long v; } stray_ask;

static void count_drop(sh_msg *m) {
  (void)m;
  atomic_fetch_add(&g_drops, 1);
}

SH_MSG_DEFINE(kick_msg, SH_NOTICE, 0);
SH_MSG_DEFINE(release_msg, SH_NOTICE, 0);
SH_MSG_DEFINE_DROP(stray_notice, SH_NOTICE, 0, count_drop);
SH_MSG_DEFINE_DROP(stray_ask, SH_ASK, 0, count_drop);
/* Asks and replies: num_ask, num_reply (support/harness.h). */

static void kick(const sh_addr *to, long v) {
  kick_msg *k = sh_msg_new(kick_msg, .v = v);
  assert_non_null(k);
  assert_int_equal(sh_notice(to, &k->hdr), 0);
}

/* ---- servers: what an ask stack does with its ask ------------------------ */

typedef enum srv_mode {
  SRV_ECHO,        /* reply v + 1 */
  SRV_RELAY,       /* ask `next` with v, then reply its answer + 10 */
  SRV_THROW,       /* sh_throw(error) */
  SRV_NOT_A_REPLY, /* sh_return with a notice */
  SRV_NULL,        /* sh_return(st, NULL) */
  SRV_BARE_RETURN, /* return SH_RETURN without sh_return */
  SRV_IDLE,        /* sh_suspend with nothing to wait for */
} srv_mode;

typedef struct srv_cfg {
  srv_mode mode;
  int tag; /* trace tag, 0: do not trace */
  int error;
  const sh_addr *next;
} srv_cfg;

typedef struct server { sh_actor base; srv_cfg cfg; } server;
typedef struct server_locals { sh_future *f; } server_locals;
enum { SRV_RESUMED = 1 };

TH_CFG_INIT(server_init, server, srv_cfg);

static sh_yield server_resumed(server *s, sh_stack *st) {
  server_locals *l = sh_stack_locals(st);
  if (s->cfg.tag) trace(s->cfg.tag, PH_RESUME);
  if (sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
  return th_reply_with(st, sh_future_reply(l->f, num_reply)->v + 10);
}

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  server *s = (server *)self;
  if (sh_stack_state(st) == SRV_RESUMED) return server_resumed(s, st);
  long v = sh_stack_msg_as(st, num_ask)->v;
  if (s->cfg.tag) trace(s->cfg.tag, PH_PROCESS);
  atomic_fetch_add(&g_served, 1);
  switch (s->cfg.mode) {
  case SRV_ECHO: return th_reply_with(st, v + 1);
  case SRV_RELAY: {
    server_locals *l = sh_stack_locals(st);
    l->f = sh_ask(st, s->cfg.next, th_new_ask(v), SH_FOREVER);
    CHECK(l->f != NULL && !sh_future_done(l->f));
    return sh_suspend(st, SRV_RESUMED);
  }
  case SRV_THROW: return sh_throw(st, s->cfg.error);
  case SRV_NOT_A_REPLY: return sh_return(st, &sh_msg_new(stray_notice, .v = v)->hdr);
  case SRV_NULL: return sh_return(st, NULL);
  case SRV_BARE_RETURN: return SH_RETURN;
  case SRV_IDLE: return sh_suspend(st, SRV_RESUMED);
  }
  CHECK(!"unknown server mode");
  return sh_throw(st, -EPROTO);
}

static sh_yield server_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  (void)st;
  atomic_fetch_add(&g_noticed, 1);
  return sh_return(st, NULL);
}

static const sh_actor_class server_class = {
    .name = "server", .size = sizeof(server), .locals_size = sizeof(server_locals),
    .init = server_init, .ask = server_ask, .notice = server_notice};

/* Takes notices but has no ask handler. */
static const sh_actor_class mute_class = {
    .name = "mute", .size = sizeof(server), .init = server_init, .notice = server_notice};

static const sh_addr *spawn_server(sh_system *sys, srv_mode mode, int tag, const sh_addr *next,
                                   uint32_t worker) {
  srv_cfg c = {.mode = mode, .tag = tag, .next = next};
  return th_spawn_on(sys, &server_class, &c, worker);
}

/* ---- clients: a notice from main starts a stack that asks ---------------- */

/* What a client saw; written by the client only, read by main after shutdown. */
typedef struct client_result {
  int invocations;    /* handler entries of the kicked stack */
  bool done_at_send;  /* the future was already complete right after sh_ask */
  int error;          /* sh_future_error when resumed */
  bool reply_null;
  long value;         /* the reply's v */
  int first_done;     /* suspend_any: futures complete at the first resume */
  int any_mismatch;   /* suspend_any: resumes that did not see exactly one more */
  int notice_rc;      /* sh_notice from the actor */
} client_result;

typedef struct client_cfg {
  const sh_addr *targets[MAX_FAN];
  int n;
  client_result *res;
} client_cfg;

typedef struct client { sh_actor base; client_cfg cfg; sh_msg *kept; } client;
typedef struct client_locals { sh_future *f[MAX_FAN]; } client_locals;
enum { C_GOT = 1, C_REST = 2, C_GOT2 = 3 };

TH_CFG_INIT(client_init, client, client_cfg);

/* What a client stack works with: its actor, record, locals, kicked value. */
typedef struct call {
  client *c;
  client_result *r;
  client_locals *l;
  long v;
} call;

/* Common entry bookkeeping: counts the invocation. */
static call enter(sh_actor *self, sh_stack *st) {
  client *c = (client *)self;
  c->cfg.res->invocations++;
  return (call){c, c->cfg.res, sh_stack_locals(st), sh_stack_msg_as(st, kick_msg)->v};
}

static void record_outcome(client_result *r, const sh_future *f) {
  r->error = sh_future_error(f);
  const num_reply *rep = sh_future_reply(f, num_reply);
  r->reply_null = rep == NULL;
  r->value = rep != NULL ? rep->v : 0;
}

/* The run's event done: the stack ends. */
static sh_yield end_stack(sh_actor *self, sh_stack *st) {
  th_done(self);
  return sh_return(st, NULL);
}

/* The last step of a one-ask stack: how f ended is recorded, the stack ends. */
static sh_yield end_with_outcome(sh_actor *self, sh_stack *st, client_result *r,
                                 const sh_future *f) {
  record_outcome(r, f);
  return end_stack(self, st);
}

/* One ask to targets[0]; the three phases are traced under TAG_A. */
static sh_yield single_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  if (sh_stack_state(st) == SH_START) {
    trace(TAG_A, PH_SEND);
    k.l->f[0] = sh_ask(st, k.c->cfg.targets[0], th_new_ask(k.v), SH_FOREVER);
    CHECK(k.l->f[0] != NULL);
    k.r->done_at_send = sh_future_done(k.l->f[0]);
    return sh_suspend(st, C_GOT);
  }
  trace(TAG_A, PH_RESUME);
  CHECK(sh_stack_state(st) == C_GOT);
  CHECK(sh_future_done(k.l->f[0]));
  return end_with_outcome(self, st, k.r, k.l->f[0]);
}

/* Checks futures [0, n) made with v = i: each done with reply i + 1. */
static int count_done(client_locals *l, int n) {
  int done = 0;
  for (int i = 0; i < n; i++) done += l->f[i] != NULL && sh_future_done(l->f[i]);
  return done;
}

static void check_echo(const sh_future *f, long v) {
  CHECK(sh_future_error(f) == 0);
  const num_reply *rep = sh_future_reply(f, num_reply);
  CHECK(rep != NULL && rep->v == v + 1);
}

static void ask_all(sh_stack *st, const client_cfg *cfg, client_locals *l) {
  for (int i = 0; i < cfg->n; i++) {
    l->f[i] = sh_ask(st, cfg->targets[i], th_new_ask(i), SH_FOREVER);
    CHECK(l->f[i] != NULL);
  }
}

#define CLIENT_CLASS(name_, fn_)                                                       \
  static const sh_actor_class name_ = {.name = #name_, .size = sizeof(client),        \
                                       .locals_size = sizeof(client_locals),          \
                                       .init = client_init, .notice = fn_}
CLIENT_CLASS(single_class, single_notice);

/* A client of class c on worker 0 asking `target`, kicked with v = 41. */
static void start_client(sh_system *sys, const sh_actor_class *c, const sh_addr *target,
                         client_result *res) {
  client_cfg cc = {.targets = {target}, .n = 1, .res = res};
  kick(th_spawn_on(sys, c, &cc, 0), 41);
}

/* A client of class c on worker 0 asking n servers spread over both workers. */
static void fan(const sh_actor_class *c, int n, client_result *res, sh_stats *st) {
  sh_system *sys = env_new(2, 1);
  client_cfg cc = {.n = n, .res = res};
  for (int i = 0; i < n; i++) cc.targets[i] = spawn_server(sys, SRV_ECHO, 0, NULL, (uint32_t)i % 2);
  kick(th_spawn_on(sys, c, &cc, 0), 0);
  th_run(sys);
  *st = th_end(sys);
}

#endif
