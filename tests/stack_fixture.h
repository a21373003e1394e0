/*
 * What the unit tests of stacks and futures (test_stack.c,
 * test_stack_endings.c) share: a 2-worker system that is never started;
 * the test thread acts as a worker and runs the queues by hand. The subject
 * actor lives on worker 0 and runs the handler a test puts in
 * subject_notice_fn / subject_ask_fn; the responders it asks live on
 * worker 1 (answering v + 1), so the test decides when each reply comes;
 * `dead` is a stopped actor, whose asks fail at once.
 *
 * Handlers never call cmocka (a failed assert would longjmp out of the
 * runtime): they record into globals, the test asserts afterwards.
 */
#ifndef TESTS_STACK_FIXTURE_H
#define TESTS_STACK_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "actor/house.h"
#include "actor/futtable.h"
#include "actor/future.h"
#include "actor/stack.h"
#include "support/manual.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "sched/worker.h"

/* ---- messages ------------------------------------------------------------ */

typedef struct go { sh_msg hdr; int mode; } go;
typedef struct req { sh_msg hdr; int v; } req;
typedef struct pong { sh_msg hdr; int v; } pong;
static int drops; /* pongs freed by the runtime or the test */
static void pong_drop(sh_msg *m) {
  (void)m;
  drops++;
}
SH_MSG_DEFINE(go, SH_NOTICE, 0);
SH_MSG_DEFINE(req, SH_ASK, 0);
SH_MSG_DEFINE_DROP(pong, SH_REPLY, 0, pong_drop);

/* ---- recorded by the handlers -------------------------------------------- */

#define MAX_CALLS 16
static const sh_addr *resp[3]; /* responders, worker 1; reply v = ask v + 1 */
static const sh_addr *dead;    /* a stopped actor: asks to it fail at once */
static const sh_addr *subject; /* worker 0 */
static sh_stack_fn subject_notice_fn, subject_ask_fn;
static int calls;              /* subject handler invocations */
static int states[MAX_CALLS];  /* the stack state at each invocation */
static int client_err, client_v;

/* Facts a handler reports; each test names its own. */
static int fact[8];
static sh_future *futs[4];
static sh_msg *taken;

static void record_call(sh_stack *st) {
  if (calls < MAX_CALLS) states[calls] = sh_stack_state(st);
  calls++;
}

/* ---- actors -------------------------------------------------------------- */

static sh_yield responder_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, &sh_msg_new(pong, .v = sh_stack_msg_as(st, req)->v + 1)->hdr);
}
static const sh_actor_class responder_class = {.name = "responder", .size = sizeof(sh_actor),
                                               .ask = responder_ask};

typedef struct subject_locals {
  sh_future *f[3];
  uint32_t pattern[8];
} subject_locals;

static sh_yield subject_notice(sh_actor *self, sh_stack *st) {
  record_call(st);
  return subject_notice_fn(self, st);
}
static sh_yield subject_ask(sh_actor *self, sh_stack *st) {
  record_call(st);
  return subject_ask_fn(self, st);
}
static const sh_actor_class subject_class = {.name = "subject", .size = sizeof(sh_actor),
                                             .locals_size = sizeof(subject_locals),
                                             .notice = subject_notice, .ask = subject_ask};

static sh_future *ask_v(sh_stack *st, const sh_addr *to, int v) {
  return sh_ask(st, to, &sh_msg_new(req, .v = v)->hdr, SH_FOREVER);
}

/* ---- harness ------------------------------------------------------------- */

/* Runs exactly one queued house of worker i, as worker i: there must be one. */
static void step(uint32_t i) { assert_non_null(th_step(i)); }

static uint64_t outstanding(void) { return th_stats().pool_outstanding; }

static void send_go(const sh_addr *to, int mode) {
  assert_int_equal(sh_notice(to, &sh_msg_new(go, .mode = mode)->hdr), 0);
}

/* Sends the subject a notice and runs it. */
static void poke_subject(void) {
  send_go(subject, 0);
  th_drain(0);
}

static sh_house *subject_house(void) {
  uint32_t gen;
  return sh_addr_member(subject, 0, &gen);
}

static int setup(void **state) {
  (void)state;
  drops = calls = client_err = client_v = 0;
  memset(states, 0xff, sizeof(states));
  memset(fact, 0, sizeof(fact));
  memset(futs, 0, sizeof(futs));
  taken = NULL;
  th_sys = th_system(2);
  th_act_as(0);
  for (int i = 0; i < 3; i++) resp[i] = th_spawn(&responder_class, 1);
  dead = th_spawn(&responder_class, 1);
  subject = th_spawn(&subject_class, 0);
  sh_stop(dead);
  th_mount_all();
  return 0;
}

/* Stack states. */
enum { S0 = SH_START, S1, S2, S3, S4 };

#endif
