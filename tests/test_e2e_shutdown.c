/*
 * End-to-end tests of the end of a system's life on the production backend
 * (epoll, pthreads), through the public API:
 *   - sh_system_shutdown with asks in flight: asks that can never be answered
 *     (held behind a barrier that waits on itself, a deliberate deadlock that
 *     costs no CPU), asks relayed to them, asks queued behind a busy worker.
 *     Every asking stack resumes exactly once and sees each of its futures
 *     completed with a reply or -ESHUTDOWN, every stop hook runs once, the
 *     pools get everything back, and ASan/LSan find no leak;
 *   - shutdown of a system that was never started (spawned actors, queued
 *     notices);
 *   - sh_system_wait / sh_system_shutdown from a worker thread: -EINVAL;
 *   - sh_stop of an actor with pending asks: its stack sees -ESHUTDOWN.
 *
 * Handlers run on worker threads (or, during shutdown, on the thread calling
 * sh_system_shutdown), where cmocka's asserts cannot be used: they record
 * what they saw in the global `g` and the test thread asserts afterwards.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

/* A hang becomes a failed run, not a stuck CI job. */
#define WATCHDOG_S 120

#define MAX_ACTORS 64
#define MAX_STACKS 64
#define MAX_FANOUT 16
#define CLIENTS_PER_WORKER 4
#define LATE_ASKS 6 /* per client, queued at a server whose worker is busy */

/* ---- messages ------------------------------------------------------------ */

/* Asks are num_asks (support/harness.h). */
typedef struct val_reply {
  sh_msg hdr;
  uint64_t v;
} val_reply;
SH_MSG_DEFINE(val_reply, SH_REPLY, 0);

/* Where a client's asks go. */
enum target { T_HOLDER = 0, T_SERVER, T_RELAY, T_KINDS };

/* Tells a client to start one asking stack (number `stack_no`), or a blocker
 * to spin (all counts zero). */
typedef struct go {
  sh_msg hdr;
  int stack_no;
  int n[T_KINDS];
  const sh_addr *to[T_KINDS];
} go;
SH_MSG_DEFINE(go, SH_NOTICE, 0);

/* A plain notice for counting. */
typedef struct ping {
  sh_msg hdr;
  int v;
} ping;
SH_MSG_DEFINE(ping, SH_NOTICE, 0);

/* ---- what the handlers saw ----------------------------------------------- */

static struct {
  atomic_int next_id;
  atomic_int stops[MAX_ACTORS];
  atomic_int held;       /* barrier stacks a holder is sitting in */
  atomic_int sent;       /* asking stacks that made all their asks */
  atomic_int replied;    /* replies servers have sent */
  atomic_int release, spinning;
  atomic_int resumes[MAX_STACKS];      /* final resumes of each asking stack */
  atomic_int ok[T_KINDS];              /* futures completed with the right reply */
  atomic_int shut[T_KINDS];            /* futures failed with -ESHUTDOWN */
  atomic_int handled;                  /* notices handled by counting actors */
  atomic_int wait_rc, shutdown_rc;     /* called from a worker */
} g;

static void reset_globals(void) {
  /* No system exists between tests: nothing races with this. */
  memset(&g, 0, sizeof(g));
  th_reset(0); /* a test that waits for an exit sets its goal */
}

/* ---- every actor here: an id, a counted stop hook ------------------------- */

typedef struct tracked {
  sh_actor base;
  int id;
  bool locked; /* holder: its barrier was taken */
} tracked;

static int tracked_init(sh_actor *self, void *arg) {
  (void)arg;
  tracked *t = (tracked *)self;
  t->id = atomic_fetch_add(&g.next_id, 1);
  return t->id < MAX_ACTORS ? 0 : -ENOSPC;
}

static void tracked_stop(sh_actor *self) { atomic_fetch_add(&g.stops[((tracked *)self)->id], 1); }

/* What every class here has: a tracked actor, its stop hook counted. */
#define TRACKED .size = sizeof(tracked), .init = tracked_init, .stop = tracked_stop

static uint64_t answer_of(uint64_t v) { return 3 * v + 1; }

/* ---- server: answers 3v+1 ---------------------------------------------------- */

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  uint64_t v = sh_stack_msg_as(st, num_ask)->v;
  sh_yield y = sh_return(st, &sh_msg_new(val_reply, .v = answer_of(v))->hdr);
  atomic_fetch_add(&g.replied, 1);
  return y;
}

/* Counts notices (for the never-started test, where it must count none). */
static sh_yield server_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  (void)st;
  atomic_fetch_add(&g.handled, 1);
  return sh_return(st, NULL);
}

static const sh_actor_class server_class = {.name = "server", TRACKED, .ask = server_ask,
    .notice = server_notice};

/* ---- holder: never answers (th_hold) --------------------------------------
 * A deadlock that costs no CPU, ended only by shutdown (or sh_stop). */

typedef struct one_future {
  sh_future *f;
} one_future;

static bool holder_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((tracked *)self)->locked;
}

static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  th_hold_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) != SH_START) CHECK(sh_future_error(l->f) == -ESHUTDOWN);
  return th_hold(self, st, &((tracked *)self)->locked, &g.held);
}

static const sh_actor_class holder_class = {.name = "holder", TRACKED,
    .locals_size = sizeof(th_hold_locals), .ask = holder_ask, .barrier = holder_barrier};

/* ---- relay: forwards an ask to the holder (its own stack then waits too) --- */

static const sh_addr *relay_target; /* set before the relay's first ask */

static sh_yield relay_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  one_future *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, relay_target, th_new_ask(sh_stack_msg_as(st, num_ask)->v), SH_FOREVER);
    return sh_suspend(st, 1);
  }
  CHECK(sh_future_error(l->f) == -ESHUTDOWN);
  return sh_throw(st, sh_future_failed(l->f) ? sh_future_error(l->f) : -EPROTO);
}

static const sh_actor_class relay_class = {.name = "relay", TRACKED,
    .locals_size = sizeof(one_future), .ask = relay_ask};

/* ---- client: one asking stack per `go`; a `go` with no asks spins ---------- */

typedef struct client_locals {
  sh_future *f[MAX_FANOUT];
  uint64_t v[MAX_FANOUT];
  int kind[MAX_FANOUT];
  int n;
} client_locals;

static void spin_until_released(void) {
  atomic_fetch_add(&g.spinning, 1);
  while (atomic_load(&g.release) == 0) {
  }
}

static void client_send(sh_stack *st, const go *m) {
  client_locals *l = sh_stack_locals(st);
  l->n = 0;
  for (int k = 0; k < T_KINDS; k++) {
    for (int i = 0; i < m->n[k]; i++) {
      CHECK(l->n < MAX_FANOUT);
      if (l->n >= MAX_FANOUT) return;
      uint64_t v = (uint64_t)m->stack_no * 100 + (uint64_t)l->n;
      l->v[l->n] = v;
      l->kind[l->n] = k;
      l->f[l->n] = sh_ask(st, m->to[k], th_new_ask((long)v), SH_FOREVER);
      CHECK(l->f[l->n] != NULL);
      l->n++;
    }
  }
}

/* Every future is complete now: count each outcome once. */
static void client_collect(sh_stack *st, const go *m) {
  client_locals *l = sh_stack_locals(st);
  CHECK(m->stack_no >= 0 && m->stack_no < MAX_STACKS);
  atomic_fetch_add(&g.resumes[m->stack_no], 1);
  for (int i = 0; i < l->n; i++) {
    sh_future *f = l->f[i];
    CHECK(sh_future_done(f));
    int err = sh_future_error(f);
    if (err == -ESHUTDOWN) {
      atomic_fetch_add(&g.shut[l->kind[i]], 1);
    } else {
      const val_reply *r = sh_future_reply(f, val_reply);
      CHECK(err == 0 && r != NULL && r->v == answer_of(l->v[i]));
      atomic_fetch_add(&g.ok[l->kind[i]], 1);
    }
  }
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  const go *m = sh_stack_msg_as(st, go);
  if (sh_stack_state(st) == SH_START) {
    client_send(st, m);
    client_locals *l = sh_stack_locals(st);
    if (l->n == 0) {
      spin_until_released();
      return sh_return(st, NULL);
    }
    atomic_fetch_add(&g.sent, 1);
    return sh_suspend(st, 1);
  }
  client_collect(st, m);
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class client_class = {.name = "client", TRACKED,
    .locals_size = sizeof(client_locals), .notice = client_notice};

/* ---- test-thread helpers ------------------------------------------------- */

static void send_go(const sh_addr *to, int stack_no, const int n[T_KINDS],
                    const sh_addr *const dst[T_KINDS]) {
  go *m = sh_msg_new(go, .stack_no = stack_no);
  assert_non_null(m);
  for (int k = 0; k < T_KINDS; k++) {
    m->n[k] = n != NULL ? n[k] : 0;
    m->to[k] = dst != NULL ? dst[k] : NULL;
  }
  assert_int_equal(sh_notice(to, &m->hdr), 0);
}

static void send_ping(const sh_addr *to) {
  ping *m = sh_msg_new(ping, .v = 1);
  assert_non_null(m);
  assert_int_equal(sh_notice(to, &m->hdr), 0);
}

/* Shuts down, checks the pools and the stop hooks, frees; the statistics. */
static sh_stats shut_and_free(sh_system *sys) {
  sh_stats s = th_end(sys);
  int n = atomic_load(&g.next_id);
  for (int i = 0; i < n; i++) assert_int_equal(atomic_load(&g.stops[i]), 1);
  return s;
}

/* ---- shutdown with asks in flight ---------------------------------------- */

/*
 * Two workers. Holder H on worker 1, server S and a blocker on worker 0, a
 * relay R, clients on both workers. Phase 1: every client asks H, R and S;
 * H takes one ask as its barrier and holds the rest (and R's) forever; S
 * answers. Phase 2: the blocker holds worker 0 while the clients of worker 1
 * queue more asks at S. Then shutdown, with the blocker released just before:
 * S's queued asks are answered or refused, everything held fails.
 */
static void test_shutdown_with_asks_in_flight(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = th_system(2);
  const sh_addr *h = th_spawn_on(sys, &holder_class, NULL, 1);
  const sh_addr *s = th_spawn_on(sys, &server_class, NULL, 0);
  const sh_addr *r = th_spawn_on(sys, &relay_class, NULL, 1);
  const sh_addr *blocker = th_spawn_on(sys, &client_class, NULL, 0);
  relay_target = h;
  const sh_addr *c[2 * CLIENTS_PER_WORKER];
  for (int i = 0; i < 2 * CLIENTS_PER_WORKER; i++)
    c[i] = th_spawn_on(sys, &client_class, NULL, (uint32_t)i % 2);
  assert_int_equal(sh_system_start(sys), 0);

  const sh_addr *const dst[T_KINDS] = {h, s, r};
  const int early[T_KINDS] = {3, 2, 2};
  for (int i = 0; i < 2 * CLIENTS_PER_WORKER; i++) send_go(c[i], i, early, dst);
  int nclients = 2 * CLIENTS_PER_WORKER;
  th_wait_for(&g.sent, nclients);
  th_wait_for(&g.held, 1);
  th_wait_for(&g.replied, nclients * early[T_SERVER]);

  send_go(blocker, 0, NULL, NULL);
  th_wait_for(&g.spinning, 1);
  const int late[T_KINDS] = {0, LATE_ASKS, 0};
  int late_stacks = 0;
  for (int i = 1; i < nclients; i += 2, late_stacks++) send_go(c[i], nclients + i, late, dst);
  th_wait_for(&g.sent, nclients + late_stacks);

  atomic_store(&g.release, 1);
  sh_stats st = shut_and_free(sys);

  for (int i = 0; i < nclients; i++) assert_int_equal(atomic_load(&g.resumes[i]), 1);
  for (int i = 1; i < nclients; i += 2) assert_int_equal(atomic_load(&g.resumes[nclients + i]), 1);
  /* Nothing held was ever answered; S answered phase 1 for sure. */
  assert_int_equal(atomic_load(&g.shut[T_HOLDER]), nclients * early[T_HOLDER]);
  assert_int_equal(atomic_load(&g.ok[T_HOLDER]), 0);
  assert_int_equal(atomic_load(&g.shut[T_RELAY]), nclients * early[T_RELAY]);
  assert_int_equal(atomic_load(&g.ok[T_RELAY]), 0);
  int to_server = nclients * early[T_SERVER] + late_stacks * LATE_ASKS;
  assert_int_equal(atomic_load(&g.ok[T_SERVER]) + atomic_load(&g.shut[T_SERVER]), to_server);
  assert_true(atomic_load(&g.ok[T_SERVER]) >= nclients * early[T_SERVER]);
  /* The stopped holder refused what it held (counted as dropped). */
  assert_true(st.dropped_stopped > 0);
}

/* ---- a system that never started ----------------------------------------- */

static void test_shutdown_never_started(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = th_system(2);
  const sh_addr *one = NULL, *per = NULL, *rr = NULL;
  assert_int_equal(sh_spawn(sys, &server_class, NULL, 1, &one), 0);
  assert_int_equal(sh_spawn(sys, &server_class, NULL, SH_SPAWN_PER_WORKER, &per), 0);
  assert_int_equal(sh_spawn(sys, &server_class, NULL, 3, &rr), 0);
  const sh_addr *all[] = {one, per, rr};
  int queued = 0;
  for (int i = 0; i < 10; i++)
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++, queued++) send_ping(all[k]);

  sh_stats s = shut_and_free(sys); /* also: each of the 6 stop hooks ran once */
  assert_int_equal(atomic_load(&g.next_id), 6);
  assert_int_equal(atomic_load(&g.handled), 0);
  assert_int_equal(s.delivered, 0);
  assert_int_equal(s.dropped_stopped, queued);
}

/* A stopped (shut down) system refuses to start or to take new work. */
static void test_after_shutdown_refuses(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = th_system(1);
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(sys, &server_class, NULL, 1, &a), 0);
  assert_int_equal(sh_system_shutdown(sys), 0);
  assert_int_equal(sh_system_shutdown(sys), 0); /* idempotent */
  assert_int_equal(sh_system_start(sys), -EINVAL);
  ping *m = sh_msg_new(ping, .v = 1);
  assert_int_equal(sh_notice(a, &m->hdr), -ESHUTDOWN); /* m freed by sh_notice */
  const sh_addr *b = NULL;
  assert_int_equal(sh_spawn(sys, &server_class, NULL, 1, &b), -ESHUTDOWN);
  shut_and_free(sys);
}

/* ---- calls that must not come from a worker ------------------------------ */

static sh_yield waiter_notice(sh_actor *self, sh_stack *st) {
  sh_system *sys = sh_actor_system(self);
  atomic_store(&g.wait_rc, sh_system_wait(sys));
  atomic_store(&g.shutdown_rc, sh_system_shutdown(sys));
  sh_system_exit(sys, 5);
  return sh_return(st, NULL);
}

static const sh_actor_class waiter_class = {.name = "waiter", TRACKED, .notice = waiter_notice};

static void test_wait_from_worker_is_einval(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = th_system(2);
  const sh_addr *a = th_spawn_on(sys, &waiter_class, NULL, 1);
  assert_int_equal(sh_system_start(sys), 0);
  send_ping(a);
  assert_int_equal(sh_system_wait(sys), 5);
  assert_int_equal(atomic_load(&g.wait_rc), -EINVAL);
  assert_int_equal(atomic_load(&g.shutdown_rc), -EINVAL);
  shut_and_free(sys);
}

/* ---- sh_stop of an actor with pending asks ------------------------------- */

/* Client A (worker 0) asks the holder (worker 1) three times and a server
 * twice; the server answers, the holder never does. sh_stop(A) must resume
 * A's stack with -ESHUTDOWN for the three, run A's stop hook once, and
 * refuse later notices to A. */
static void test_stop_fails_pending_asks(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = th_system(2);
  const sh_addr *h = th_spawn_on(sys, &holder_class, NULL, 1);   /* id 0 */
  const sh_addr *s = th_spawn_on(sys, &server_class, NULL, 1);   /* id 1 */
  const sh_addr *a = th_spawn_on(sys, &client_class, NULL, 0);   /* id 2 */
  assert_int_equal(sh_system_start(sys), 0);

  const sh_addr *const dst[T_KINDS] = {h, s, NULL};
  const int n[T_KINDS] = {3, 2, 0};
  send_go(a, 0, n, dst);
  th_wait_for(&g.held, 1);
  th_wait_for(&g.replied, 2);
  th_set_goal(1);
  assert_int_equal(sh_stop(a), 0);
  assert_int_equal(sh_system_wait(sys), 0); /* A's stack resumed and ended the run */

  th_assert_checks();
  /* A's stop hook runs after its stack's last handler, so possibly after the
   * exit above: shut_and_free checks that it ran exactly once. */
  assert_int_equal(atomic_load(&g.resumes[0]), 1);
  assert_int_equal(atomic_load(&g.shut[T_HOLDER]), 3);
  assert_int_equal(atomic_load(&g.ok[T_SERVER]), 2);
  ping *m = sh_msg_new(ping, .v = 1);
  assert_int_equal(sh_notice(a, &m->hdr), -ESHUTDOWN);
  assert_int_equal(sh_stop(NULL), -EINVAL);

  shut_and_free(sys);
  assert_int_equal(atomic_load(&g.resumes[0]), 1); /* not again at shutdown */
}

/* sh_stop of the holder while the system runs: the asks queued behind its
 * barrier are answered with -ESHUTDOWN (the askers are alive: nobody else
 * would fail their futures), and its barrier stack fails the first one. */
static void test_stop_refuses_queued_asks(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = th_system(2);
  const sh_addr *h = th_spawn_on(sys, &holder_class, NULL, 1); /* id 0 */
  const sh_addr *c[2 * CLIENTS_PER_WORKER];
  for (int i = 0; i < 2 * CLIENTS_PER_WORKER; i++)
    c[i] = th_spawn_on(sys, &client_class, NULL, (uint32_t)i % 2);
  assert_int_equal(sh_system_start(sys), 0);

  int nclients = 2 * CLIENTS_PER_WORKER;
  const sh_addr *const dst[T_KINDS] = {h, NULL, NULL};
  const int n[T_KINDS] = {3, 0, 0};
  for (int i = 0; i < nclients; i++) send_go(c[i], i, n, dst);
  th_wait_for(&g.sent, nclients);
  th_wait_for(&g.held, 1);
  th_set_goal(nclients);
  assert_int_equal(sh_stop(h), 0);
  assert_int_equal(sh_system_wait(sys), 0); /* every client resumed */

  th_assert_checks();
  assert_int_equal(atomic_load(&g.stops[0]), 1);
  assert_int_equal(atomic_load(&g.shut[T_HOLDER]), nclients * n[T_HOLDER]);
  for (int i = 0; i < nclients; i++) assert_int_equal(atomic_load(&g.resumes[i]), 1);
  shut_and_free(sys);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shutdown_with_asks_in_flight),
      cmocka_unit_test(test_shutdown_never_started),
      cmocka_unit_test(test_after_shutdown_refuses),
      cmocka_unit_test(test_wait_from_worker_is_einval),
      cmocka_unit_test(test_stop_fails_pending_asks),
      cmocka_unit_test(test_stop_refuses_queued_asks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
