/*
 * The shared test plumbing of harness.h: CHECK bookkeeping, the run's goal,
 * system setup and teardown, numbered messages, holders, xorshift, sleeping.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "harness.h"

/* ---- checks -------------------------------------------------------------- */

static atomic_int g_failures;
static atomic_int g_first_failed_line;

void th_check_failed(const char *file, int line, const char *expr) {
  int zero = 0;
  atomic_compare_exchange_strong(&g_first_failed_line, &zero, line);
  atomic_fetch_add(&g_failures, 1);
  fprintf(stderr, "%s:%d: CHECK(%s) failed\n", file, line, expr);
}

void th_assert_checks(void) {
  int n = atomic_load(&g_failures);
  if (n != 0)
    fail_msg("%d handler check(s) failed, first at line %d", n, atomic_load(&g_first_failed_line));
}

/* ---- the run's goal ------------------------------------------------------ */

static atomic_int g_goal;
static atomic_int g_done;

void th_reset(int goal) {
  atomic_store(&g_failures, 0);
  atomic_store(&g_first_failed_line, 0);
  atomic_store(&g_done, 0);
  atomic_store(&g_goal, goal);
}

void th_set_goal(int goal) { atomic_store(&g_goal, goal); }

void th_done(sh_actor *self) {
  if (atomic_fetch_add(&g_done, 1) + 1 == atomic_load(&g_goal))
    sh_system_exit(sh_actor_system(self), 0);
}

int th_done_count(void) { return atomic_load(&g_done); }

/* ---- systems ------------------------------------------------------------- */

sh_config th_config(uint32_t workers) {
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = workers;
  return cfg;
}

sh_system *th_system_new(const sh_config *cfg) {
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(cfg, &sys), 0);
  assert_non_null(sys);
  return sys;
}

sh_system *th_system(uint32_t workers) {
  sh_config cfg = th_config(workers);
  return th_system_new(&cfg);
}

sh_system *th_env(uint32_t workers, int goal) {
  th_reset(goal);
  return th_system(workers);
}

const sh_addr *th_spawn_on(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t w) {
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn_on(sys, c, arg, w, &a), 0);
  assert_non_null(a);
  return a;
}

void th_run(sh_system *sys) {
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_system_wait(sys), 0);
}

/* Frees before asserting, so a failure leaks nothing. */
sh_stats th_end(sh_system *sys) {
  assert_int_equal(sh_system_shutdown(sys), 0);
  sh_stats st;
  sh_system_stats(sys, &st);
  sh_system_free(sys);
  th_assert_checks();
  assert_int_equal(st.pool_outstanding, 0);
  return st;
}

sh_stats th_end_exact(sh_system *sys) {
  sh_stats st = th_end(sys);
  assert_int_equal(st.asks, st.asks_resolved);
  assert_int_equal(st.sent, st.delivered + st.replies_unknown + st.dropped_stopped);
  return st;
}

/* ---- numbered asks and replies ------------------------------------------- */

SH_MSG_DEFINE(num_ask, SH_ASK, 0);
SH_MSG_DEFINE(num_reply, SH_REPLY, 0);

sh_msg *th_new_ask(long v) { return &sh_msg_new(num_ask, .v = v)->hdr; }

sh_msg *th_new_reply(long v) { return &sh_msg_new(num_reply, .v = v)->hdr; }

sh_yield th_reply_with(sh_stack *st, long v) { return sh_return(st, th_new_reply(v)); }

/* ---- holders ------------------------------------------------------------- */

sh_yield th_hold(sh_actor *self, sh_stack *st, bool *locked, atomic_int *held) {
  th_hold_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    CHECK(!*locked); /* nothing passes the barrier */
    *locked = true;
    l->f = sh_ask(st, sh_self(self), th_new_ask(0), SH_FOREVER);
    atomic_fetch_add(held, 1);
    return sh_suspend(st, 1);
  }
  return sh_throw(st, sh_future_failed(l->f) ? sh_future_error(l->f) : -EPROTO);
}

/* ---- randomness, time ---------------------------------------------------- */

uint64_t th_xorshift(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

void th_sleep_us(long us) {
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void th_sleep_ms(long ms) { th_sleep_us(ms * 1000); }

void th_wait_for(atomic_int *v, int want) {
  while (atomic_load(v) < want) th_sleep_us(200);
}
