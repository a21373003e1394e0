/*
 * Unit tests of the ActorHouse (core/house.c), driven single-threaded: the
 * system has 2 workers that are never started; the test thread takes a
 * worker's identity (sh_plat_set_local) and runs queued houses by hand, one
 * run at a time when it matters (th_step) or to quiet (th_drain).
 *
 * Covered: the state machine (CREATED -> mounted WAITING -> READY, queued
 * exactly once however many puts); a put while the house runs does not
 * queue it, and the message is still handled without a second external
 * message (bug 2 of the original); a put during the mount hook; the strict
 * dispatch order reply, exception, ask, notice, event; the barrier
 * predicate and a barrier stack holding asks and notices back; the priority
 * rules (decided at put and at settle); max_per_run bounding a run; a
 * stopped house refusing asks, dropping notices, failing its own pending
 * asks and running its stop hook once.
 *
 * Handlers never call cmocka (a failed assert would longjmp out of the
 * runtime): they record into globals, the test asserts afterwards.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "actor/house.h"
#include "sched/housequeue.h"
#include "plat.h"
#include "support/manual.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "time/timer.h"
#include "sched/worker.h"

/* ---- messages ------------------------------------------------------------ */

typedef struct note { sh_msg hdr; int tag; int count; } note;
typedef struct req { sh_msg hdr; int mode; } req;
typedef struct resp { sh_msg hdr; int v; } resp;
SH_MSG_DEFINE(note, SH_NOTICE, 0);
SH_MSG_DEFINE(req, SH_ASK, 0);
SH_MSG_DEFINE(resp, SH_REPLY, 0);
/* The same body as a note, but a barrier. */
static const sh_msg_type bnote_type = {"bnote", sizeof(note), SH_NOTICE, SH_MSG_BARRIER, NULL, NULL};

/* What a probe's notice does. */
enum {
  PLAIN = 0, /* log 'N' */
  GO_REPLY,  /* ask the responder for a reply; on resume log 'R' (or 'X' if it failed) */
  GO_THROW,  /* ask the responder for an exception; on resume the same */
  GO_TIMER,  /* start a 0 ms one-shot timer */
  SELF,      /* send `count` PLAIN notices to itself, log 'S' */
};
enum { MODE_REPLY = 0, MODE_THROW = 1 };
enum { START = SH_START, GOT };

/* ---- recorded by the handlers -------------------------------------------- */

static const sh_addr *responder; /* answers asks (worker 1 unless a test says otherwise) */
static const sh_addr *target;    /* what clients ask */
static char trace[64];
static size_t ntrace;
static int mounts, stops, mount_self;
static int last_error;           /* error a probe's GO stack saw */
static int client_err[4];        /* errors a client's asks ended with */
static int in_run_state[2];      /* SELF: house state before and after its puts */
static uint32_t in_run_queued;   /* SELF: houses on worker 0's queues after the puts */

static void log_ch(char c) {
  if (ntrace + 1 < sizeof(trace)) trace[ntrace++] = c;
}

/* ---- actors -------------------------------------------------------------- */

static sh_msg *make_note(const sh_msg_type *t, int tag, int count) {
  return sh_msg_fill(sh_msg_alloc(t), &(note){.tag = tag, .count = count}, sizeof(note));
}

static sh_house *house_of(const sh_addr *a) {
  uint32_t gen;
  return sh_addr_member(a, 0, &gen);
}
static int state_of(const sh_house *h) { return atomic_load(&h->state); }

static uint32_t queued_on(uint32_t i) {
  sh_worker *w = th_worker(i);
  return sh_hq_count(&w->mounting) + sh_hq_count(&w->io) + sh_hq_count(&w->state);
}

typedef struct probe_locals { sh_future *f; } probe_locals;

static sh_yield probe_self(sh_actor *self, sh_stack *st, int count) {
  sh_house *h = self->house;
  in_run_state[0] = state_of(h);
  for (int i = 0; i < count; i++) sh_notice(sh_self(self), make_note(&note_type, PLAIN, 0));
  in_run_state[1] = state_of(h);
  in_run_queued = queued_on(h->owner);
  log_ch('S');
  return sh_return(st, NULL);
}

static sh_yield probe_notice(sh_actor *self, sh_stack *st) {
  probe_locals *l = sh_stack_locals(st);
  const note *n = sh_stack_msg_as(st, note);
  if (sh_stack_state(st) == GOT) {
    last_error = sh_future_error(l->f);
    log_ch(last_error != 0 ? 'X' : 'R');
    return sh_return(st, NULL);
  }
  switch (n->tag) {
  case GO_REPLY:
  case GO_THROW:
    l->f = sh_ask(st, responder,
                  &sh_msg_new(req, .mode = n->tag == GO_THROW ? MODE_THROW : MODE_REPLY)->hdr, SH_FOREVER);
    return sh_suspend(st, GOT);
  case GO_TIMER:
    sh_timer_start(self, 0, 0, NULL, NULL);
    return sh_return(st, NULL);
  case SELF:
    return probe_self(self, st, n->count);
  default:
    log_ch('N');
    return sh_return(st, NULL);
  }
}

static sh_yield probe_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  log_ch('A');
  return sh_return(st, &sh_msg_new(resp, .v = 1)->hdr);
}

static void probe_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)self, (void)id, (void)arg;
  log_ch('E');
}

static void probe_mount(sh_actor *self) {
  mounts++;
  if (mount_self) sh_notice(sh_self(self), make_note(&note_type, PLAIN, 0));
}

static void probe_stop(sh_actor *self) {
  (void)self;
  stops++;
}

#define PROBE_CLASS(budget)                                                                  \
  {.name = "probe", .size = sizeof(sh_actor), .locals_size = sizeof(probe_locals),           \
   .mount = probe_mount, .stop = probe_stop, .notice = probe_notice, .ask = probe_ask,       \
   .timeout = probe_timeout, .max_per_run = (budget)}
static const sh_actor_class probe_class = PROBE_CLASS(0);
static const sh_actor_class slow_class = PROBE_CLASS(1);
static const sh_actor_class four_class = PROBE_CLASS(4);

static sh_yield responder_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  if (sh_stack_msg_as(st, req)->mode == MODE_THROW) return sh_throw(st, -EPERM);
  return sh_return(st, &sh_msg_new(resp, .v = 2)->hdr);
}
static const sh_actor_class responder_class = {.name = "responder", .size = sizeof(sh_actor),
                                               .ask = responder_ask};

/* A client asks `target` note.count times from one stack and records how
 * each ask ended. */
typedef struct client_locals { sh_future *f[4]; int n; } client_locals;

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  client_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == START) {
    l->n = sh_stack_msg_as(st, note)->count;
    for (int i = 0; i < l->n; i++) l->f[i] = sh_ask(st, target, &sh_msg_new(req, .mode = 0)->hdr, SH_FOREVER);
    return sh_suspend(st, GOT);
  }
  for (int i = 0; i < l->n; i++) client_err[i] = sh_future_error(l->f[i]);
  return sh_return(st, NULL);
}
static const sh_actor_class client_class = {.name = "client", .size = sizeof(sh_actor),
                                            .locals_size = sizeof(client_locals),
                                            .notice = client_notice};

/* ---- harness ------------------------------------------------------------- */

static void notice(const sh_addr *to, int tag, int count) {
  assert_int_equal(sh_notice(to, make_note(&note_type, tag, count)), 0);
}

/* Where h is queued on q: 1 high, 0 normal, -1 nowhere. Fails if it is
 * queued more than once. */
static int queued_in(const sh_house_queue *q, const sh_house *h) {
  int where = -1, seen = 0;
  for (int s = 0; s < 2; s++)
    for (const sh_hq_link *x = q->sub[s].head; x != NULL; x = x->next)
      if (x == &h->qlink) {
        where = s;
        seen++;
      }
  assert_true(seen <= 1);
  return where;
}

/* A probe on worker 0 (returned), the target of a client *c on worker 1 that
 * is spawned before the responder; all mounted. */
static const sh_addr *spawn_with_client(const sh_addr **c) {
  const sh_addr *a = th_spawn(&probe_class, 0);
  *c = th_spawn(&client_class, 1);
  responder = th_spawn(&responder_class, 1);
  target = a;
  th_mount_all();
  return a;
}

static void expect_trace(const char *want) {
  trace[ntrace] = '\0';
  assert_string_equal(trace, want);
}

static int setup(void **state) {
  (void)state;
  ntrace = 0;
  mounts = stops = mount_self = last_error = 0;
  memset(client_err, 0, sizeof(client_err));
  th_sys = th_system(2);
  th_act_as(0);
  return 0;
}

/* ---- state machine ------------------------------------------------------- */

static void test_spawn_then_mount(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&probe_class, 1);
  sh_house *h = house_of(a);
  assert_int_equal(state_of(h), SH_CREATED);
  assert_int_equal(sh_hq_count(&th_worker(1)->mounting), 1);
  assert_int_equal(queued_on(0), 0);
  assert_false(h->mounted);
  assert_int_equal(mounts, 0);

  th_drain(0); /* not its owner: nothing happens */
  assert_int_equal(state_of(h), SH_CREATED);
  th_drain(1);
  assert_int_equal(mounts, 1);
  assert_true(h->mounted);
  assert_int_equal(state_of(h), SH_WAITING);
  assert_int_equal(queued_on(1), 0);
}

static void test_puts_queue_once(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&probe_class, 0);
  sh_house *h = house_of(a);
  th_mount_all();
  for (int i = 0; i < 3; i++) {
    notice(a, PLAIN, 0);
    assert_int_equal(state_of(h), SH_READY);
    assert_int_equal(sh_hq_count(&th_worker(0)->state), 1);
    assert_int_not_equal(queued_in(&th_worker(0)->state, h), -1);
  }
  assert_ptr_equal(th_step(0), h);
  expect_trace("NNN");
  assert_int_equal(state_of(h), SH_WAITING);
  assert_int_equal(queued_on(0), 0);
}

/* A put during the mount hook sees MOUNTING and does not queue; the mount's
 * settle finds the message and queues the house itself. */
static void test_put_during_mount(void **state) {
  (void)state;
  mount_self = 1;
  sh_house *h = house_of(th_spawn(&probe_class, 0));
  sh_worker *w = th_worker(0);
  sh_house_mount(sh_house_of_link(sh_hq_pop(&w->mounting)));
  assert_int_equal(state_of(h), SH_READY);
  assert_int_equal(sh_hq_count(&w->state), 1);
  assert_ptr_equal(th_step(0), h);
  expect_trace("N");
  assert_int_equal(state_of(h), SH_WAITING);
}

/* Bug 2 at unit level: a message put while the house runs is handled
 * without any further external message. */
static void test_put_while_running_is_handled(void **state) {
  (void)state;
  sh_house *h = house_of(th_spawn(&probe_class, 0));
  th_mount_all();
  notice(sh_self(h->actor), SELF, 1);
  assert_ptr_equal(th_step(0), h);
  /* The put saw RUNNING and queued nothing... */
  assert_int_equal(in_run_state[0], SH_RUNNING);
  assert_int_equal(in_run_state[1], SH_RUNNING);
  assert_int_equal(in_run_queued, 0);
  /* ...and the same run still took the message. */
  expect_trace("SN");
  assert_int_equal(state_of(h), SH_WAITING);
  assert_int_equal(queued_on(0), 0);
}

/* The same with a budget of one message per run: the settle after the run
 * must requeue the house (once, for two puts) until the puts are handled. */
static void test_put_while_running_requeues(void **state) {
  (void)state;
  sh_house *h = house_of(th_spawn(&slow_class, 0));
  th_mount_all();
  notice(sh_self(h->actor), SELF, 2);
  assert_ptr_equal(th_step(0), h);
  assert_int_equal(in_run_state[1], SH_RUNNING);
  assert_int_equal(in_run_queued, 0);
  expect_trace("S");
  assert_int_equal(state_of(h), SH_READY);
  assert_int_equal(sh_hq_count(&th_worker(0)->state), 1);
  assert_ptr_equal(th_step(0), h);
  assert_int_equal(state_of(h), SH_READY);
  assert_int_equal(sh_hq_count(&th_worker(0)->state), 1);
  assert_ptr_equal(th_step(0), h);
  expect_trace("SNN");
  assert_int_equal(state_of(h), SH_WAITING);
  assert_null(th_step(0));
}

/* ---- dispatch order ------------------------------------------------------ */

/* All five mailboxes filled before one run, arriving as event, notice,
 * ask, exception, reply (the exception's ask was made first): the run must
 * still see reply, exception, ask, notice, event. */
static void test_dispatch_order(void **state) {
  (void)state;
  const sh_addr *c;
  const sh_addr *a = spawn_with_client(&c);
  sh_house *h = house_of(a);

  notice(c, PLAIN, 1);  /* the client is queued on worker 1 first */
  notice(a, GO_TIMER, 0);
  notice(a, GO_THROW, 0); /* asked first, so answered first */
  notice(a, GO_REPLY, 0);
  assert_ptr_equal(th_step(0), h); /* the responder is now queued behind the client */
  assert_int_equal(sh_wheel_count(&th_worker(0)->wheel), 1);

  assert_int_equal(sh_timer_advance(th_worker(0), sh_plat_now_ns() + 1000000000ull), 1);
  notice(a, PLAIN, 0);
  assert_ptr_equal(th_step(1), house_of(c)); /* the client asks a */
  assert_ptr_equal(th_step(1), house_of(responder)); /* exception, then reply */
  for (int b = 0; b < SH_BOXES; b++) assert_int_equal(sh_mailbox_size(&h->mb, b), 1);
  assert_int_equal(sh_hq_count(&th_worker(0)->state), 1);

  expect_trace("");
  assert_ptr_equal(th_step(0), h);
  expect_trace("RXANE");
  assert_int_equal(state_of(h), SH_WAITING);
  th_drain(1);
  assert_int_equal(client_err[0], 0);
}

/* ---- barrier ------------------------------------------------------------- */

/* has_work for one message in box b, with or without the barrier held. The
 * message goes straight into the mailbox (no poke): only the predicate is
 * under test. */
static bool has_work_with(sh_house *h, sh_box b, bool barrier) {
  sh_msg *m = b == SH_BOX_EVENT ? sh_msg_alloc(&sh_tick_type.msg)
              : b == SH_BOX_ASK ? &sh_msg_new(req, .mode = 0)->hdr
              : b == SH_BOX_NOTICE ? make_note(&note_type, PLAIN, 0)
                                   : &sh_msg_new(resp, .v = 0)->hdr;
  assert_false(sh_house_has_work(h));
  sh_mailbox_push(&h->mb, b, m);
  h->barrier = barrier;
  bool r = sh_house_has_work(h);
  h->barrier = false;
  sh_msg_free(sh_mailbox_take(&h->mb, b));
  return r;
}

static void test_barrier_predicate(void **state) {
  (void)state;
  sh_house *h = house_of(th_spawn(&probe_class, 0));
  th_mount_all();
  for (int b = 0; b < SH_BOXES; b++) assert_true(has_work_with(h, (sh_box)b, false));
  assert_true(has_work_with(h, SH_BOX_REPLY, true));
  assert_true(has_work_with(h, SH_BOX_EXCEPTION, true));
  assert_true(has_work_with(h, SH_BOX_EVENT, true));
  assert_false(has_work_with(h, SH_BOX_ASK, true));
  assert_false(has_work_with(h, SH_BOX_NOTICE, true));
  /* A stopped house no longer holds anything back: it must refuse them. */
  uint32_t live = atomic_load(&h->life);
  atomic_store(&h->life, live | SH_LIFE_STOPPED);
  h->stop_done = true;
  assert_true(has_work_with(h, SH_BOX_ASK, true));
  assert_true(has_work_with(h, SH_BOX_NOTICE, true));
  atomic_store(&h->life, live);
}

/* A barrier stack waiting on its reply holds a later ask and notice back;
 * when it completes they are handled in the same run, asks first. */
static void test_barrier_holds_requests(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&probe_class, 0);
  sh_house *h = house_of(a);
  responder = th_spawn(&responder_class, 1);
  const sh_addr *c = th_spawn(&client_class, 1);
  target = a;
  th_mount_all();

  assert_int_equal(sh_notice(a, make_note(&bnote_type, GO_REPLY, 0)), 0);
  assert_ptr_equal(th_step(0), h);
  assert_true(h->barrier);
  notice(a, PLAIN, 0);
  notice(c, PLAIN, 1);
  assert_ptr_equal(th_step(1), house_of(responder)); /* the reply is on its way */
  assert_ptr_equal(th_step(1), house_of(c));         /* the ask is queued */
  assert_true(h->barrier);
  assert_true(sh_house_has_work(h));
  assert_int_equal(sh_mailbox_size(&h->mb, SH_BOX_ASK), 1);
  assert_int_equal(sh_mailbox_size(&h->mb, SH_BOX_NOTICE), 1);

  /* Without the reply the run handles nothing. */
  sh_msg *r = sh_mailbox_take(&h->mb, SH_BOX_REPLY);
  assert_non_null(r);
  assert_false(sh_house_has_work(h));
  assert_ptr_equal(th_step(0), h);
  expect_trace("");
  assert_int_equal(state_of(h), SH_WAITING);

  sh_house_push(h, SH_BOX_REPLY, r);
  assert_true(sh_house_has_work(h));
  assert_ptr_equal(th_step(0), h);
  expect_trace("RAN");
  assert_false(h->barrier);
  th_drain(1);
  assert_int_equal(client_err[0], 0);
}

/* ---- priority ------------------------------------------------------------ */

static void put_fake(sh_house *h, sh_box b, uint64_t id) {
  sh_msg *m = b == SH_BOX_EVENT ? sh_msg_alloc(&sh_tick_type.msg) : &sh_msg_new(resp, .v = 0)->hdr;
  assert_non_null(m);
  m->id = id; /* no pending ask, no timer: dropped when handled */
  sh_house_push(h, b, m);
}

static bool high(const sh_house *h) { return atomic_load(&h->high); }

/* n puts into box b of a house with a pending promise: normal up to the
 * threshold, high past it. */
static void check_threshold(sh_house *h, sh_box b, int threshold) {
  sh_house_queue *q = &th_worker(0)->state;
  for (int i = 1; i <= threshold; i++) {
    put_fake(h, b, 1000 + (uint64_t)i);
    assert_false(high(h));
    assert_int_equal(queued_in(q, h), 0);
  }
  put_fake(h, b, 2000);
  assert_true(high(h));
  assert_ptr_equal(th_step(0), h);
  assert_false(high(h)); /* settled: still a pending promise */
  assert_int_equal(state_of(h), SH_WAITING);
}

static void test_priority_at_put(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&probe_class, 0);
  sh_house *h = house_of(a);
  responder = th_spawn(&responder_class, 1);
  th_mount_all();
  sh_house_queue *q = &th_worker(0)->state;

  /* No pending promise: high. */
  assert_true(high(h));
  notice(a, GO_REPLY, 0);
  assert_int_equal(queued_in(q, h), 1);
  assert_ptr_equal(th_step(0), h);
  assert_int_equal(sh_futtable_count(&h->futures), 1);
  assert_false(high(h));

  uint64_t unknown = th_stats().replies_unknown;
  check_threshold(h, SH_BOX_REPLY, SH_HIGH_REPLIES);
  assert_int_equal(th_stats().replies_unknown, unknown + SH_HIGH_REPLIES + 1);
  check_threshold(h, SH_BOX_EVENT, SH_HIGH_EVENTS);

  /* One real reply: still normal; once the promise is gone, high again. */
  th_drain(1);
  assert_int_equal(queued_in(q, h), 0);
  assert_ptr_equal(th_step(0), h);
  expect_trace("R");
  assert_int_equal(sh_futtable_count(&h->futures), 0);
  assert_true(high(h));
  notice(a, PLAIN, 0);
  assert_int_equal(queued_in(q, h), 1);
  assert_ptr_equal(th_step(0), h);
}

/* The settle after a run decides again from what is left. */
static void test_priority_at_settle(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&slow_class, 0);
  sh_house *h = house_of(a);
  responder = th_spawn(&responder_class, 1);
  th_mount_all();
  sh_house_queue *q = &th_worker(0)->state;
  notice(a, GO_REPLY, 0);
  assert_ptr_equal(th_step(0), h);
  for (uint64_t i = 0; i < 4; i++) put_fake(h, SH_BOX_REPLY, 100 + i);
  assert_ptr_equal(th_step(0), h); /* one handled, three left: high */
  assert_int_equal(queued_in(q, h), 1);
  assert_ptr_equal(th_step(0), h); /* two left and a promise: normal */
  assert_int_equal(queued_in(q, h), 0);
  assert_ptr_equal(th_step(0), h);
  assert_ptr_equal(th_step(0), h);
  assert_int_equal(state_of(h), SH_WAITING);
  assert_false(high(h));
}

/* ---- budget -------------------------------------------------------------- */

static void test_max_per_run(void **state) {
  (void)state;
  const sh_addr *a = th_spawn(&four_class, 0);
  sh_house *h = house_of(a);
  th_mount_all();
  for (int i = 0; i < 12; i++) notice(a, PLAIN, 0);
  assert_int_equal(h->max_per_run, 4);
  for (size_t run = 1; run <= 3; run++) {
    assert_ptr_equal(th_step(0), h);
    assert_int_equal(ntrace, 4 * run);
  }
  assert_int_equal(state_of(h), SH_WAITING);
  assert_null(th_step(0));
}

/* ---- stop ---------------------------------------------------------------- */

static void test_stopped_house(void **state) {
  (void)state;
  const sh_addr *c;
  const sh_addr *a = spawn_with_client(&c);
  sh_house *h = house_of(a);

  notice(c, PLAIN, 2); /* queued on worker 1 ahead of the responder */
  notice(a, GO_REPLY, 0);
  assert_ptr_equal(th_step(0), h); /* a now waits on the responder */
  assert_ptr_equal(th_step(1), house_of(c)); /* two asks into a */
  for (int i = 0; i < 3; i++) notice(a, PLAIN, 0);

  uint64_t dropped = th_stats().dropped_stopped;
  assert_int_equal(sh_stop(a), 0);
  th_drain(0);
  expect_trace("X"); /* its own pending ask failed; no ask or notice handled */
  assert_int_equal(last_error, -ESHUTDOWN);
  assert_int_equal(stops, 1);
  assert_int_equal(th_stats().dropped_stopped, dropped + 5);
  assert_int_equal(sh_futtable_count(&h->futures), 0);

  uint64_t unknown = th_stats().replies_unknown;
  th_drain(1); /* the client hears -ESHUTDOWN; the responder's late reply goes to a */
  assert_int_equal(client_err[0], -ESHUTDOWN);
  assert_int_equal(client_err[1], -ESHUTDOWN);
  th_drain(0);
  assert_int_equal(th_stats().replies_unknown, unknown + 1);

  assert_int_equal(sh_notice(a, make_note(&note_type, PLAIN, 0)), -ESHUTDOWN);
  assert_int_equal(th_stats().dropped_stopped, dropped + 6);
  sh_house_poke(h);
  th_drain(0);
  sh_worker_enter(NULL);
  assert_int_equal(sh_system_shutdown(th_sys), 0);
  assert_int_equal(stops, 1); /* not again at shutdown */
  expect_trace("X");
}

int main(void) {
  alarm(120);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_sys_teardown)
  const struct CMUnitTest tests[] = {
      T(test_spawn_then_mount),
      T(test_puts_queue_once),
      T(test_put_during_mount),
      T(test_put_while_running_is_handled),
      T(test_put_while_running_requeues),
      T(test_dispatch_order),
      T(test_barrier_predicate),
      T(test_barrier_holds_requests),
      T(test_priority_at_put),
      T(test_priority_at_settle),
      T(test_max_per_run),
      T(test_stopped_house),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
