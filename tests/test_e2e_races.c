/*
 * Regressions for races and contract breaks found in review, on the epoll
 * backend (and under TSan, where the data races show):
 *   - a runner re-checking its house after storing WAITING read runner-only
 *     fields while a thief already ran the house (TSan data race);
 *   - sh_stop racing with the runner's settle could leave a stopped house
 *     waiting with its stop hook never run (release/acquire was too weak);
 *   - a batch ask stack returning a reply type with a drop hook failed every
 *     asker, even a batch of one;
 *   - the stop hook ran before the stacks resumed by the stop, so a hook that
 *     frees the actor's resources was followed by handlers using them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stackhouse/stackhouse.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "support/harness.h"

typedef struct ping { sh_msg hdr; } ping;
SH_MSG_DEFINE(ping, SH_NOTICE, 0);

static sh_system *steal_happy_system(uint32_t workers) {
  sh_config cfg = th_config(workers);
  cfg.steal_floor = 4;
  cfg.steal_aggression = 8;
  return th_system_new(&cfg);
}

/* ---- settle after a steal ------------------------------------------------ */

#define STEAL_ACTORS 128
static atomic_int handled;

static sh_yield busy_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  for (volatile int i = 0; i < 200; i++) {
  }
  atomic_fetch_add(&handled, 1);
  return sh_return(st, NULL);
}
static const sh_actor_class busy_class = {.name = "busy", .size = sizeof(sh_actor), .notice = busy_notice};

/* Many actors on worker 0 fed from main, so that worker 1 steals: under TSan
 * the old re-check raced with the thief's run on every few hundred rounds. */
static void test_settle_after_steal(void **state) {
  (void)state;
  th_reset(0);
  sh_system *sys = steal_happy_system(2);
  const sh_addr *a[STEAL_ACTORS];
  for (int i = 0; i < STEAL_ACTORS; i++) a[i] = th_spawn_on(sys, &busy_class, NULL, 0);
  assert_int_equal(sh_system_start(sys), 0);
  atomic_store(&handled, 0);
  int rounds = TH_UNDER_TSAN ? 1000 : 500, sent = 0;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < STEAL_ACTORS; i++, sent++)
      assert_int_equal(sh_notice(a[i], &sh_msg_new(ping)->hdr), 0);
    while (sent - atomic_load(&handled) > 4 * STEAL_ACTORS) th_sleep_us(10);
  }
  th_wait_for(&handled, sent);
  sh_stats s;
  sh_system_stats(sys, &s);
  assert_true(s.steals > 0); /* the race needs a thief */
  th_end(sys);
}

/* ---- a stop is never lost ------------------------------------------------ */

static atomic_int stop_ran, noticed;

static sh_yield mark_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  atomic_store(&noticed, 1);
  return sh_return(st, NULL);
}
static void mark_stop(sh_actor *self) {
  (void)self;
  atomic_store(&stop_ran, 1);
}
static const sh_actor_class stoppable_class = {
    .name = "stoppable", .size = sizeof(sh_actor), .notice = mark_notice, .stop = mark_stop};

/* sh_stop right as the runner settles, many times: the stop hook must run
 * each time with no further message (a lost stop hangs: the watchdog fails it). */
static void test_stop_is_never_lost(void **state) {
  (void)state;
  th_reset(0);
  sh_config cfg = th_config(1);
  cfg.spin_ns = 1000000000ull; /* keep the worker awake: the race is with a running settle */
  sh_system *sys = th_system_new(&cfg);
  assert_int_equal(sh_system_start(sys), 0);
  int trials = TH_UNDER_TSAN ? 300 : 3000;
  for (int i = 0; i < trials; i++) {
    const sh_addr *a;
    assert_int_equal(sh_spawn(sys, &stoppable_class, NULL, 1, &a), 0);
    atomic_store(&noticed, 0);
    atomic_store(&stop_ran, 0);
    assert_int_equal(sh_notice(a, &sh_msg_new(ping)->hdr), 0);
    th_wait_for(&noticed, 1);
    for (volatile int d = 0; d < i % 400; d++) {
    }
    assert_int_equal(sh_stop(a), 0);
    th_wait_for(&stop_ran, 1);
  }
  th_end(sys);
}

/* ---- batch return with a reply that owns resources ----------------------- */

typedef struct res_reply { sh_msg hdr; char *buf; } res_reply;
static void res_drop(sh_msg *m) { free(((res_reply *)m)->buf); }
SH_MSG_DEFINE_DROP(res_reply, SH_REPLY, 0, res_drop);
typedef struct go { sh_msg hdr; const sh_addr *server; int n; } go;
SH_MSG_DEFINE(go, SH_NOTICE, 0);

static bool always(sh_actor *self, const sh_msg *m) {
  (void)self;
  (void)m;
  return true;
}
static sh_yield server_batch(sh_actor *self, sh_stack *st) {
  (void)self;
  res_reply *r = sh_msg_new(res_reply, .buf = malloc(16));
  return sh_return(st, &r->hdr);
}
static const sh_actor_class batch_server_class = {
    .name = "batch_server", .size = sizeof(sh_actor), .batch_ask = server_batch, .batch_ask_filter = always};

#define MAX_ASKS 3
static atomic_int errors[MAX_ASKS];
typedef struct client_locals { sh_future *f[MAX_ASKS]; } client_locals;

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  client_locals *l = sh_stack_locals(st);
  go *g = sh_stack_msg_as(st, go);
  if (sh_stack_state(st) == SH_START) {
    for (int i = 0; i < g->n; i++) l->f[i] = sh_ask(st, g->server, th_new_ask(i), SH_FOREVER);
    return sh_suspend(st, 1);
  }
  for (int i = 0; i < g->n; i++) atomic_store(&errors[i], sh_future_error(l->f[i]));
  th_done(self);
  return sh_return(st, NULL);
}
static const sh_actor_class client_class = {
    .name = "client", .size = sizeof(sh_actor), .locals_size = sizeof(client_locals), .notice = client_notice};

/* Queued before start, on one worker, so that all asks land in one batch. */
static void run_batch(int n) {
  sh_system *sys = th_env(1, 1);
  const sh_addr *server = th_spawn_on(sys, &batch_server_class, NULL, 0);
  const sh_addr *client = th_spawn_on(sys, &client_class, NULL, 0);
  assert_int_equal(sh_notice(client, &sh_msg_new(go, .server = server, .n = n)->hdr), 0);
  th_run(sys);
  th_end(sys);
}

static void test_batch_of_one_gets_the_reply(void **state) {
  (void)state;
  run_batch(1);
  assert_int_equal(atomic_load(&errors[0]), 0);
}

/* A reply that cannot be copied reaches one asker; the others learn why. */
static void test_batch_reply_with_drop_reaches_one(void **state) {
  (void)state;
  run_batch(MAX_ASKS);
  int ok = 0, einval = 0;
  for (int i = 0; i < MAX_ASKS; i++) {
    int e = atomic_load(&errors[i]);
    ok += e == 0;
    einval += e == -EINVAL;
  }
  assert_int_equal(ok, 1);
  assert_int_equal(einval, MAX_ASKS - 1);
}

/* ---- the stop hook comes after the last handler -------------------------- */

typedef struct holder { sh_actor base; bool locked; } holder;
static atomic_int held;
static bool holder_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((holder *)self)->locked;
}
static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  return th_hold(self, st, &((holder *)self)->locked, &held);
}
static const sh_actor_class holder_class = {.name = "holder", .size = sizeof(holder),
                                            .locals_size = sizeof(th_hold_locals),
                                            .ask = holder_ask, .barrier = holder_barrier};

typedef struct owner { sh_actor base; int *resource; } owner;
static atomic_int used_after_stop;

static sh_yield owner_notice(sh_actor *self, sh_stack *st) {
  owner *o = (owner *)self;
  sh_future **f = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    o->resource = malloc(sizeof(int));
    *f = sh_ask(st, sh_stack_msg_as(st, go)->server, th_new_ask(0), SH_FOREVER);
    return sh_suspend(st, 1);
  }
  /* Resumed by the stop with -ESHUTDOWN: the stop hook has not run yet. */
  if (o->resource == NULL || sh_future_error(*f) != -ESHUTDOWN) atomic_store(&used_after_stop, 1);
  th_done(self);
  return sh_return(st, NULL);
}
static void owner_stop(sh_actor *self) {
  owner *o = (owner *)self;
  free(o->resource);
  o->resource = NULL;
}
static const sh_actor_class owner_class = {.name = "owner", .size = sizeof(owner),
                                           .locals_size = sizeof(sh_future *),
                                           .notice = owner_notice, .stop = owner_stop};

static void test_stop_hook_after_last_handler(void **state) {
  (void)state;
  sh_system *sys = th_env(2, 1);
  const sh_addr *o = th_spawn_on(sys, &owner_class, NULL, 0);
  const sh_addr *h = th_spawn_on(sys, &holder_class, NULL, 1);
  atomic_store(&held, 0);
  atomic_store(&used_after_stop, 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_notice(o, &sh_msg_new(go, .server = h, .n = 0)->hdr), 0);
  th_wait_for(&held, 1); /* the owner's ask is held for good */
  assert_int_equal(sh_stop(o), 0);
  assert_int_equal(sh_system_wait(sys), 0); /* the owner's stack resumed */
  th_end(sys);
  assert_int_equal(atomic_load(&used_after_stop), 0);
}

int main(void) {
  alarm(240);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_settle_after_steal),
      cmocka_unit_test(test_stop_is_never_lost),
      cmocka_unit_test(test_batch_of_one_gets_the_reply),
      cmocka_unit_test(test_batch_reply_with_drop_reaches_one),
      cmocka_unit_test(test_stop_hook_after_last_handler),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
