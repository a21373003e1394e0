/*
 * End-to-end tests of asks that fail on the production backend (epoll,
 * pthreads), through the public API only (servers and clients:
 * ask_fixture.h):
 *   - failures: sh_throw, no ask handler (-ENOTSUP), stopped actors
 *     (-ESHUTDOWN, counted), bad returns from an ask stack (-EINVAL,
 *     -ENODATA, -EDEADLK), a stack that returns with an ask still out, a
 *     stopped actor's sleeps (they fail at once: its stack ends with -ELOOP);
 *   - misuse of sh_notice / sh_ask (the message is freed, its drop hook runs);
 *   - reply ownership with sh_future_take.
 *
 * Every test ends with pool_outstanding == 0: a message or stack the
 * runtime forgot to free shows.
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

#include "ask_fixture.h"

/* ---- clients of the failures ---------------------------------------------- */

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

CLIENT_CLASS(stopped_class, stopped_notice);
CLIENT_CLASS(stop_queued_class, stop_queued_notice);
CLIENT_CLASS(abandon_class, abandon_notice);
CLIENT_CLASS(misuse_class, misuse_notice);
CLIENT_CLASS(take_class, take_notice);

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

/* ---- a stopped actor's sleeps ---------------------------------------------- */

/* Sleeps, and sleeps again whenever its sleep fails. Once its actor stops,
 * each new sleep fails at once (tracked, it would refill the futures the
 * stop fails, for ever), so the stack ends with -ELOOP and the stop hook
 * runs after it. */
typedef struct resleep_locals { sh_future *f; } resleep_locals;
static atomic_int g_sleeps, g_stopped;

static sh_yield resleep_notice(sh_actor *self, sh_stack *st) {
  resleep_locals *l = sh_stack_locals(st);
  bool first = sh_stack_state(st) == SH_START;
  if (!first) CHECK(sh_future_error(l->f) == -ESHUTDOWN);
  atomic_fetch_add(&g_sleeps, 1);
  l->f = sh_sleep(st, 60000);
  CHECK(l->f != NULL);
  if (first) th_done(self); /* asleep: the test thread stops it now */
  return sh_suspend(st, 1);
}

static void resleep_stop(sh_actor *self) {
  (void)self;
  atomic_store(&g_stopped, 1);
}

static const sh_actor_class resleep_class = {.name = "resleep", .size = sizeof(sh_actor),
                                             .locals_size = sizeof(resleep_locals),
                                             .notice = resleep_notice, .stop = resleep_stop};

static void test_stopped_actor_sleep_fails_at_once(void **state) {
  (void)state;
  atomic_store(&g_sleeps, 0);
  atomic_store(&g_stopped, 0);
  sh_system *sys = env_new(1, 1);
  const sh_addr *a = th_spawn_on(sys, &resleep_class, NULL, 0);
  assert_int_equal(sh_notice(a, stray(1)), 0);
  th_run(sys);
  assert_int_equal(sh_stop(a), 0);
  th_wait_for(&g_stopped, 1);
  th_end(sys);
  /* The first sleep, failed by the stop, then one a run of failed ones
   * until the -ELOOP bound (stack.c: 1024 invocations in a row). */
  assert_int_equal(atomic_load(&g_sleeps), 1 + 1024);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
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
      cmocka_unit_test(test_stopped_actor_sleep_fails_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
