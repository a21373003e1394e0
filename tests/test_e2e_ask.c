/*
 * End-to-end tests of asks on the production backend (epoll, pthreads),
 * through the public API only:
 *   - the three phases of the Stack model (send: a stack asks and suspends;
 *     process: the target's ask stack returns a reply; resume: the asker's
 *     stack resumes in its next state with the reply), on one worker and
 *     across workers, and a chain A -> B -> C where B's ask stack asks C;
 *   - fan-out: sh_suspend resumes once, when all N asks completed;
 *     sh_suspend_any resumes on each single completion;
 *   - failures: sh_throw, no ask handler (-ENOTSUP), stopped actors
 *     (-ESHUTDOWN, counted), bad returns from an ask stack (-EINVAL,
 *     -ENODATA, -EDEADLK);
 *   - misuse of sh_notice / sh_ask (the message is freed, its drop hook runs);
 *   - reply ownership with sh_future_take.
 *
 * Actors never call cmocka (a failed assertion longjmps, which must not
 * happen on a worker thread): they record what they saw, and CHECK() counts
 * failures. The main thread asserts after sh_system_shutdown, when the
 * workers are joined and the statistics are exact. Every test ends with
 * pool_outstanding == 0: a message or stack the runtime forgot to free shows.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

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

static void assert_trace(const int *want, int n) {
  assert_int_equal(atomic_load(&g_trace_n), n);
  for (int i = 0; i < n; i++) assert_int_equal(g_trace[i], want[i]);
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

/* N asks, one sh_suspend: resumed once, with all N complete. */
static sh_yield fanout_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  if (sh_stack_state(st) == SH_START) {
    ask_all(st, &k.c->cfg, k.l);
    return sh_suspend(st, C_GOT);
  }
  CHECK(count_done(k.l, k.c->cfg.n) == k.c->cfg.n);
  /* Every server's stack ran before its reply was sent, so all N ran. */
  CHECK(atomic_load(&g_served) == k.c->cfg.n);
  for (int i = 0; i < k.c->cfg.n; i++) check_echo(k.l->f[i], i);
  return end_stack(self, st);
}

/* N asks, sh_suspend_any: resumed by the first completion alone; then the
 * rest with sh_suspend. The first future is recycled when the stack moves
 * on (stack.h), so it is forgotten here. */
static sh_yield first_of_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  int n = k.c->cfg.n;
  switch (sh_stack_state(st)) {
  case SH_START:
    ask_all(st, &k.c->cfg, k.l);
    return sh_suspend_any(st, C_GOT);
  case C_GOT:
    k.r->first_done = count_done(k.l, n);
    for (int i = 0; i < n; i++) {
      if (k.l->f[i] == NULL || !sh_future_done(k.l->f[i])) continue;
      check_echo(k.l->f[i], i);
      k.l->f[i] = NULL;
    }
    /* Resumed too late (all done): end now, main sees first_done. */
    if (k.r->first_done < n) return sh_suspend(st, C_REST);
    return end_stack(self, st);
  default:
    for (int i = 0; i < n; i++) {
      if (k.l->f[i] == NULL) continue;
      CHECK(sh_future_done(k.l->f[i]));
      check_echo(k.l->f[i], i);
    }
    return end_stack(self, st);
  }
}

/* N asks, sh_suspend_any in the same state each time: every resume sees
 * exactly one more completed future, and the seen ones stay valid. */
static sh_yield each_of_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  int n = k.c->cfg.n;
  if (sh_stack_state(st) == SH_START) {
    ask_all(st, &k.c->cfg, k.l);
    return sh_suspend_any(st, C_GOT);
  }
  int done = count_done(k.l, n);
  if (done != k.r->invocations - 1) k.r->any_mismatch++;
  if (done < n) return sh_suspend_any(st, C_GOT);
  for (int i = 0; i < n; i++) check_echo(k.l->f[i], i);
  return end_stack(self, st);
}

/* Against a stopped target: the ask fails at once, the notice is refused. */
static sh_yield stopped_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  if (sh_stack_state(st) == SH_START) {
    k.l->f[0] = sh_ask(st, k.c->cfg.targets[0], &sh_msg_new(stray_ask, .v = k.v)->hdr, SH_FOREVER);
    CHECK(k.l->f[0] != NULL);
    k.r->done_at_send = sh_future_done(k.l->f[0]);
    k.r->notice_rc = sh_notice(k.c->cfg.targets[0], &sh_msg_new(stray_notice, .v = k.v)->hdr);
    return sh_suspend(st, C_GOT);
  }
  return end_with_outcome(self, st, k.r, k.l->f[0]);
}

/* Sends an ask and a notice to a target on its own worker, then stops it:
 * the target cannot run in between, so both are still queued. */
static sh_yield stop_queued_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  if (sh_stack_state(st) == SH_START) {
    k.l->f[0] = sh_ask(st, k.c->cfg.targets[0], &sh_msg_new(stray_ask, .v = k.v)->hdr, SH_FOREVER);
    k.r->notice_rc = sh_notice(k.c->cfg.targets[0], &sh_msg_new(stray_notice, .v = k.v)->hdr);
    CHECK(sh_stop(k.c->cfg.targets[0]) == 0);
    k.r->done_at_send = sh_future_done(k.l->f[0]);
    return sh_suspend(st, C_GOT);
  }
  return end_with_outcome(self, st, k.r, k.l->f[0]);
}

/* Two asks, sh_suspend_any, and return at the first completion: the other
 * ask is forgotten with the stack, its answer is dropped and counted. */
static sh_yield abandon_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  if (sh_stack_state(st) == SH_START) {
    ask_all(st, &k.c->cfg, k.l);
    return sh_suspend_any(st, C_GOT);
  }
  k.r->first_done = count_done(k.l, k.c->cfg.n);
  return end_stack(self, st);
}

/* Every misuse of the send calls from a stack; then one good ask, to show
 * the stack still works. */
static sh_yield misuse_notice(sh_actor *self, sh_stack *st) {
  call k = enter(self, st);
  const sh_addr *t = k.c->cfg.targets[0];
  if (sh_stack_state(st) == SH_START) {
    CHECK(sh_notice(NULL, &sh_msg_new(stray_notice, .v = 1)->hdr) == -EINVAL);
    CHECK(sh_notice(t, &sh_msg_new(stray_ask, .v = 2)->hdr) == -EINVAL);
    CHECK(sh_notice(t, NULL) == -EINVAL);
    CHECK(sh_ask(st, t, &sh_msg_new(stray_notice, .v = 3)->hdr, SH_FOREVER) == NULL);
    CHECK(sh_ask(st, NULL, &sh_msg_new(stray_ask, .v = 4)->hdr, SH_FOREVER) == NULL);
    CHECK(sh_ask(st, t, NULL, SH_FOREVER) == NULL);
    k.l->f[0] = sh_ask(st, t, th_new_ask(k.v), SH_FOREVER);
    CHECK(k.l->f[0] != NULL);
    return sh_suspend(st, C_GOT);
  }
  return end_with_outcome(self, st, k.r, k.l->f[0]);
}

/* Takes the first reply, keeps it across a second ask (which recycles the
 * first future) and past the stack's end, and frees it in a later notice. */
static sh_yield take_notice(sh_actor *self, sh_stack *st) {
  client *c = (client *)self;
  if (sh_msg_is(sh_stack_msg(st), &release_msg_type)) {
    long want = sh_stack_msg_as(st, release_msg)->v;
    CHECK(c->kept != NULL && sh_msg_is(c->kept, &num_reply_type));
    CHECK(((num_reply *)c->kept)->v == want);
    sh_msg_free(c->kept);
    c->kept = NULL;
    return end_stack(self, st);
  }
  call k = enter(self, st);
  switch (sh_stack_state(st)) {
  case SH_START:
    k.l->f[0] = sh_ask(st, c->cfg.targets[0], th_new_ask(k.v), SH_FOREVER);
    return sh_suspend(st, C_GOT);
  case C_GOT:
    c->kept = sh_future_take(k.l->f[0]);
    CHECK(c->kept != NULL);
    CHECK(sh_future_msg(k.l->f[0]) == NULL); /* the future gave it up */
    CHECK(sh_future_take(k.l->f[0]) == NULL);
    CHECK(sh_future_error(k.l->f[0]) == 0);
    k.l->f[1] = sh_ask(st, c->cfg.targets[0], th_new_ask(k.v + 100), SH_FOREVER);
    return sh_suspend(st, C_GOT2);
  default:
    /* The first future is gone; had it still owned the reply, the reply
     * would be freed (and its memory likely reused by the second one). */
    CHECK(((num_reply *)c->kept)->v == k.v + 1);
    check_echo(k.l->f[1], k.v + 100);
    record_outcome(k.r, k.l->f[1]);
    CHECK(sh_notice(sh_self(self), &sh_msg_new(release_msg, .v = k.v + 1)->hdr) == 0);
    return sh_return(st, NULL);
  }
}

#define CLIENT_CLASS(name_, fn_)                                                       \
  static const sh_actor_class name_ = {.name = #name_, .size = sizeof(client),        \
                                       .locals_size = sizeof(client_locals),          \
                                       .init = client_init, .notice = fn_}
CLIENT_CLASS(single_class, single_notice);
CLIENT_CLASS(fanout_class, fanout_notice);
CLIENT_CLASS(first_of_class, first_of_notice);
CLIENT_CLASS(each_of_class, each_of_notice);
CLIENT_CLASS(stopped_class, stopped_notice);
CLIENT_CLASS(stop_queued_class, stop_queued_notice);
CLIENT_CLASS(abandon_class, abandon_notice);
CLIENT_CLASS(misuse_class, misuse_notice);
CLIENT_CLASS(take_class, take_notice);

/* A client of class c on worker 0 asking `target`, kicked with v = 41. */
static void start_client(sh_system *sys, const sh_actor_class *c, const sh_addr *target,
                         client_result *res) {
  client_cfg cc = {.targets = {target}, .n = 1, .res = res};
  kick(th_spawn_on(sys, c, &cc, 0), 41);
}

/* ---- the three phases ---------------------------------------------------- */

static void lifecycle(uint32_t server_worker) {
  sh_system *sys = env_new(2, 1);
  client_result res = {0};
  start_client(sys, &single_class, spawn_server(sys, SRV_ECHO, TAG_B, NULL, server_worker), &res);
  th_run(sys);
  sh_stats st = th_end(sys);

  const int want[] = {EV(TAG_A, PH_SEND), EV(TAG_B, PH_PROCESS), EV(TAG_A, PH_RESUME)};
  assert_trace(want, 3);
  assert_int_equal(res.invocations, 2); /* entered once, resumed once */
  assert_false(res.done_at_send);       /* the send phase ends suspended */
  assert_int_equal(res.error, 0);
  assert_int_equal(res.value, 42);
  assert_int_equal(st.delivered, 3);    /* kick, ask, reply */
  assert_int_equal(st.replies_unknown, 0);
  /* Placement holds (nothing to steal in so small a system). */
  assert_int_equal(pthread_equal(g_thread[TAG_A], g_thread[TAG_B]) != 0, server_worker == 0);
}

static void test_lifecycle_same_worker(void **state) {
  (void)state;
  lifecycle(0);
}

static void test_lifecycle_cross_worker(void **state) {
  (void)state;
  lifecycle(1);
}

/* A (w0) asks B (w1), whose ask stack asks C (w0) before replying. */
static void test_chain_across_workers(void **state) {
  (void)state;
  sh_system *sys = env_new(2, 1);
  const sh_addr *c = spawn_server(sys, SRV_ECHO, TAG_C, NULL, 0);
  const sh_addr *b = spawn_server(sys, SRV_RELAY, TAG_B, c, 1);
  client_result res = {0};
  start_client(sys, &single_class, b, &res);
  th_run(sys);
  sh_stats st = th_end(sys);

  const int want[] = {EV(TAG_A, PH_SEND), EV(TAG_B, PH_PROCESS), EV(TAG_C, PH_PROCESS),
                      EV(TAG_B, PH_RESUME), EV(TAG_A, PH_RESUME)};
  assert_trace(want, 5);
  assert_int_equal(res.invocations, 2);
  assert_int_equal(res.error, 0);
  assert_int_equal(res.value, 41 + 1 + 10);
  assert_int_equal(st.delivered, 5); /* kick, two asks, two replies */
  assert_false(pthread_equal(g_thread[TAG_A], g_thread[TAG_B]));
  assert_false(pthread_equal(g_thread[TAG_B], g_thread[TAG_C]));
}

/* ---- fan-out ------------------------------------------------------------- */

/* A client on worker 0 asking n servers spread over both workers. */
static void fan(const sh_actor_class *c, int n, client_result *res, sh_stats *st) {
  sh_system *sys = env_new(2, 1);
  client_cfg cc = {.n = n, .res = res};
  for (int i = 0; i < n; i++) cc.targets[i] = spawn_server(sys, SRV_ECHO, 0, NULL, (uint32_t)i % 2);
  kick(th_spawn_on(sys, c, &cc, 0), 0);
  th_run(sys);
  *st = th_end(sys);
}

static void fanout(int n) {
  client_result res = {0};
  sh_stats st;
  fan(&fanout_class, n, &res, &st);
  assert_int_equal(atomic_load(&g_served), n);
  assert_int_equal(res.invocations, 2); /* never resumed before all N completed */
  assert_int_equal(st.delivered, 1 + 2 * (uint64_t)n);
}

static void test_fanout_1(void **state) {
  (void)state;
  fanout(1);
}

static void test_fanout_5(void **state) {
  (void)state;
  fanout(5);
}

static void test_fanout_100(void **state) {
  (void)state;
  fanout(100);
}

static void test_suspend_any_first(void **state) {
  (void)state;
  client_result res = {0};
  sh_stats st;
  fan(&first_of_class, 5, &res, &st);
  assert_int_equal(atomic_load(&g_served), 5);
  assert_int_equal(res.first_done, 1); /* resumed by the first completion alone */
  assert_int_equal(res.invocations, 3);
}

static void test_suspend_any_each(void **state) {
  (void)state;
  client_result res = {0};
  sh_stats st;
  fan(&each_of_class, 5, &res, &st);
  assert_int_equal(atomic_load(&g_served), 5);
  assert_int_equal(res.invocations, 1 + 5);
  assert_int_equal(res.any_mismatch, 0);
}

/* ---- failures ------------------------------------------------------------- */

/* A client on worker 0 asks a server of mode `mode` on worker 1. */
static void ask_failing(srv_mode mode, int thrown, client_result *res) {
  sh_system *sys = env_new(2, 1);
  srv_cfg sc = {.mode = mode, .error = thrown};
  start_client(sys, &single_class, th_spawn_on(sys, &server_class, &sc, 1), res);
  th_run(sys);
  sh_stats st = th_end(sys);
  assert_int_equal(res->invocations, 2);
  assert_true(res->reply_null);
  assert_int_equal(st.replies_unknown, 0);
}

static void expect_failure(srv_mode mode, int thrown, int want) {
  client_result res = {0};
  ask_failing(mode, thrown, &res);
  assert_int_equal(res.error, want);
}

static void test_throw_fails_asker_with_that_error(void **state) {
  (void)state;
  expect_failure(SRV_THROW, -EXDEV, -EXDEV);
  expect_failure(SRV_THROW, -ECONNRESET, -ECONNRESET);
}

static void test_return_not_a_reply_is_einval(void **state) {
  (void)state;
  expect_failure(SRV_NOT_A_REPLY, 0, -EINVAL);
  assert_int_equal(atomic_load(&g_drops), 1); /* the notice it returned was freed */
}

static void test_return_null_is_enodata(void **state) {
  (void)state;
  expect_failure(SRV_NULL, 0, -ENODATA);
  expect_failure(SRV_BARE_RETURN, 0, -ENODATA);
}

static void test_suspend_with_nothing_pending_is_edeadlk(void **state) {
  (void)state;
  expect_failure(SRV_IDLE, 0, -EDEADLK);
}

static void test_no_ask_handler_is_enotsup(void **state) {
  (void)state;
  sh_system *sys = env_new(2, 1);
  srv_cfg sc = {.mode = SRV_ECHO};
  client_result res = {0};
  start_client(sys, &single_class, th_spawn_on(sys, &mute_class, &sc, 1), &res);
  th_run(sys);
  th_end(sys);
  assert_int_equal(res.error, -ENOTSUP);
  assert_true(res.reply_null);
  assert_int_equal(res.invocations, 2);
}

static sh_msg *stray(long v) { return &sh_msg_new(stray_notice, .v = v)->hdr; }

static void test_stopped_actor_refuses(void **state) {
  (void)state;
  sh_system *sys = env_new(2, 1);
  const sh_addr *x = spawn_server(sys, SRV_ECHO, 0, NULL, 1);
  /* Queued before the stop: dropped (and counted) when x runs. */
  assert_int_equal(sh_notice(x, stray(1)), 0);
  assert_int_equal(sh_notice(x, stray(2)), 0);
  assert_int_equal(sh_stop(x), 0);
  assert_int_equal(sh_notice(x, stray(3)), -ESHUTDOWN); /* from a plain thread */
  client_result res = {0};
  start_client(sys, &stopped_class, x, &res);
  th_run(sys);
  sh_stats st = th_end(sys);

  assert_true(res.done_at_send); /* an ask to a stopped actor fails at once */
  assert_int_equal(res.error, -ESHUTDOWN);
  assert_true(res.reply_null);
  assert_int_equal(res.notice_rc, -ESHUTDOWN); /* from an actor */
  assert_int_equal(res.invocations, 2);
  /* 2 queued notices, main's notice, the client's ask and notice. */
  assert_int_equal(st.dropped_stopped, 5);
  assert_int_equal(atomic_load(&g_drops), 5);
  assert_int_equal(atomic_load(&g_served), 0);
  assert_int_equal(atomic_load(&g_noticed), 0);
}

static void test_stop_answers_queued_asks(void **state) {
  (void)state;
  sh_system *sys = env_new(2, 1);
  client_result res = {0};
  start_client(sys, &stop_queued_class, spawn_server(sys, SRV_ECHO, 0, NULL, 0), &res);
  th_run(sys);
  sh_stats st = th_end(sys);
  assert_int_equal(res.notice_rc, 0);   /* accepted: the stop came after */
  assert_false(res.done_at_send);       /* queued, not failed at once */
  assert_int_equal(res.error, -ESHUTDOWN);
  assert_true(res.reply_null);
  assert_int_equal(st.dropped_stopped, 2);
  assert_int_equal(atomic_load(&g_drops), 2);
  assert_int_equal(atomic_load(&g_served), 0);
  assert_int_equal(atomic_load(&g_noticed), 0);
}

/* The first completion ends the stack at once (sh_stack_complete resumes it
 * before the next reply is taken), so exactly one answer is left over:
 * a reply, or -ESHUTDOWN from the shutdown, counted either way. */
static void test_returning_stack_drops_late_reply(void **state) {
  (void)state;
  client_result res = {0};
  sh_stats st;
  fan(&abandon_class, 2, &res, &st);
  assert_int_equal(res.first_done, 1);
  assert_int_equal(res.invocations, 2);
  assert_int_equal(st.replies_unknown, 1);
}

/* ---- misuse and ownership -------------------------------------------------- */

static void test_misuse_frees_the_message(void **state) {
  (void)state;
  sh_system *sys = env_new(2, 1);
  const sh_addr *t = spawn_server(sys, SRV_ECHO, 0, NULL, 1);
  /* From the main thread (malloc'd messages: ASan reports a leak if kept). */
  assert_int_equal(sh_notice(NULL, stray(1)), -EINVAL);
  assert_int_equal(sh_notice(t, &sh_msg_new(stray_ask, .v = 2)->hdr), -EINVAL);
  assert_int_equal(sh_notice(t, NULL), -EINVAL);
  assert_int_equal(atomic_load(&g_drops), 2);
  /* From a stack (pooled messages: pool_outstanding shows a leak). */
  client_result res = {0};
  start_client(sys, &misuse_class, t, &res);
  th_run(sys);
  sh_stats st = th_end(sys);

  assert_int_equal(atomic_load(&g_drops), 2 + 4);
  assert_int_equal(atomic_load(&g_noticed), 0); /* nothing misused got through */
  assert_int_equal(atomic_load(&g_served), 1);  /* only the good ask */
  assert_int_equal(res.error, 0);
  assert_int_equal(res.value, 42);
  assert_int_equal(st.dropped_stopped, 0);
}

static void test_future_take_transfers_ownership(void **state) {
  (void)state;
  sh_system *sys = env_new(2, 1);
  client_result res = {0};
  /* Same worker: a reply freed too early would be reused by the next one. */
  start_client(sys, &take_class, spawn_server(sys, SRV_ECHO, 0, NULL, 0), &res);
  th_run(sys);
  th_end(sys);
  assert_int_equal(res.invocations, 3);
  assert_int_equal(res.value, 41 + 100 + 1);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lifecycle_same_worker),
      cmocka_unit_test(test_lifecycle_cross_worker),
      cmocka_unit_test(test_chain_across_workers),
      cmocka_unit_test(test_fanout_1),
      cmocka_unit_test(test_fanout_5),
      cmocka_unit_test(test_fanout_100),
      cmocka_unit_test(test_suspend_any_first),
      cmocka_unit_test(test_suspend_any_each),
      cmocka_unit_test(test_throw_fails_asker_with_that_error),
      cmocka_unit_test(test_return_not_a_reply_is_einval),
      cmocka_unit_test(test_return_null_is_enodata),
      cmocka_unit_test(test_suspend_with_nothing_pending_is_edeadlk),
      cmocka_unit_test(test_no_ask_handler_is_enotsup),
      cmocka_unit_test(test_stopped_actor_refuses),
      cmocka_unit_test(test_stop_answers_queued_asks),
      cmocka_unit_test(test_returning_stack_drops_late_reply),
      cmocka_unit_test(test_misuse_frees_the_message),
      cmocka_unit_test(test_future_take_transfers_ownership),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
