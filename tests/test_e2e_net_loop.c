/*
 * End-to-end test of a pipeline that loops on the production backend
 * (epoll, a loopback UDP socket), through the public API only: a handler
 * turns every message written toward the head back inbound as a new
 * request, so that each channel stack's result starts the next one. The
 * channel must not hold its worker while that goes on: what a channel
 * starts at once is what was waiting when it began (chanflow.c), the rest
 * goes round in later rounds and runs, and another actor on the same
 * worker gets its turn. Without that bound the first request never let go
 * of the worker, and the case ends by its watchdog.
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
#include <unistd.h>

#include <stackhouse/net.h>
#include <stackhouse/stackhouse.h>

#include "support/harness.h"

/* A hang fails the case instead of blocking CI. */
#define WATCHDOG_S 120

static const sh_netaddr LOOPBACK_ANY = {.ip = 0x7f000001, .port = 0};

typedef struct loop_msg { sh_msg hdr; long n; } loop_msg;
SH_MSG_DEFINE(loop_msg, SH_NOTICE, 0);

static atomic_int g_loops;    /* channel stacks run */
static atomic_int g_other;    /* the bystander ran */
static atomic_int g_told_at;  /* g_loops when the bystander was told */

/* Toward the head: a loop_msg goes back inbound as a new request (a
 * request, not a reply: to_tail gives it a stack); anything else on. */
static int loop_outbound(sh_pctx *c, sh_msg *m) {
  if (!sh_msg_is(m, &loop_msg_type)) return sh_pctx_write(c, m);
  loop_msg *r = sh_msg_new(loop_msg, .n = ((loop_msg *)m)->n + 1);
  sh_msg_free(m);
  return r != NULL ? sh_pctx_fire(c, &r->hdr) : -ENOMEM;
}

static const sh_handler loop_handler = {.name = "loop", .outbound = loop_outbound};

typedef struct looper { sh_actor base; const sh_addr *bystander; } looper;

static int looper_init(sh_actor *self, void *arg) {
  ((looper *)self)->bystander = arg;
  return 0;
}

/* Opens the channel and writes the first message, which the handler turns
 * into the first request. */
static sh_yield looper_notice(sh_actor *self, sh_stack *st) {
  sh_netaddr at = LOOPBACK_ANY;
  sh_channel_opts o = {.handlers = {&loop_handler}, .nhandlers = 1};
  sh_channel *ch = NULL;
  int rc = sh_udp_open(self, &at, &o, &ch);
  CHECK(rc == 0);
  if (rc == 0) CHECK(sh_channel_write(ch, &sh_msg_new(loop_msg, .n = 0)->hdr) == 0);
  return sh_return(st, NULL);
}

/* Each request answers with the next, until the bystander, told on the
 * tenth, has run: its worker is this one's. */
static sh_yield looper_channel(sh_actor *self, sh_stack *st) {
  int n = atomic_fetch_add(&g_loops, 1) + 1;
  if (n == 10) {
    atomic_store(&g_told_at, n);
    CHECK(sh_notice(((looper *)self)->bystander, &sh_msg_new(loop_msg, .n = -1)->hdr) == 0);
  }
  if (atomic_load(&g_other)) {
    th_done(self);
    return sh_return(st, NULL);
  }
  return sh_return(st, &sh_msg_new(loop_msg, .n = sh_stack_msg_as(st, loop_msg)->n)->hdr);
}

static const sh_actor_class looper_class = {
    .name = "looper", .size = sizeof(looper), .kind = SH_IO_ACTOR, .init = looper_init,
    .notice = looper_notice, .channel = looper_channel};

static sh_yield bystander_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  atomic_store(&g_other, 1);
  return sh_return(st, NULL);
}

/* An IO actor too: it queues behind the looper's runs, not behind the
 * worker's whole IO phase (up to SH_TURN_MAX_HOUSES runs of it). */
static const sh_actor_class bystander_class = {
    .name = "bystander", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR,
    .notice = bystander_notice};

/* One worker: the bystander runs only if the looping channel lets go of
 * it, and the loop ends only once the bystander ran. */
static void test_looping_pipeline_lets_its_worker_go(void **state) {
  (void)state;
  atomic_store(&g_loops, 0);
  atomic_store(&g_other, 0);
  atomic_store(&g_told_at, 0);
  sh_system *sys = th_env(1, 1);
  const sh_addr *b = th_spawn_on(sys, &bystander_class, NULL, 0);
  const sh_addr *l = th_spawn_on(sys, &looper_class, (void *)b, 0);
  assert_int_equal(sh_notice(l, &sh_msg_new(loop_msg, .n = 0)->hdr), 0);
  th_run(sys);
  th_end(sys);
  assert_int_equal(atomic_load(&g_other), 1);
  assert_int_equal(atomic_load(&g_told_at), 10);
  assert_true(atomic_load(&g_loops) > 10);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_looping_pipeline_lets_its_worker_go),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
