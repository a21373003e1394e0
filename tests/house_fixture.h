/*
 * What the ActorHouse's unit tests (test_house.c, test_house_order.c)
 * share: the system has 2 workers that are never started; the test thread
 * takes a worker's identity (sh_plat_set_local) and runs queued houses by
 * hand, one run at a time when it matters (th_step) or to quiet
 * (th_drain). A probe actor logs what it handles into `trace` (N notice,
 * A ask, R reply, X exception, E event, S puts to itself); a responder
 * answers asks; a client asks `target` and records how each ask ended.
 *
 * Handlers never call cmocka (a failed assert would longjmp out of the
 * runtime): they record into globals, the test asserts afterwards.
 */
#ifndef TESTS_HOUSE_FIXTURE_H
#define TESTS_HOUSE_FIXTURE_H

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

#endif
