/*
 * End-to-end tests of sh_run on the production backend (epoll, pthreads),
 * through the public API: the entry actor gets argc/argv in sh_args, its
 * exit code is sh_run's result, and the system is shut down before sh_run
 * returns (the entry's stop hook ran once); a bad entry class or
 * configuration is -EINVAL before anything runs; sh_system_wait_ms with the
 * longest timeout waits for the exit.
 *
 * The entry's handler runs on a worker thread, where cmocka's asserts
 * cannot be used: it records what it saw in the global `g` and the test
 * thread asserts afterwards.
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

#include <stackhouse/probe.h>
#include <stackhouse/stackhouse.h>

#include "support/harness.h"

/* A hang becomes a failed run, not a stuck CI job. */
#define WATCHDOG_S 120

#define MAX_ACTORS 4

/* ---- what the handler saw ------------------------------------------------ */

static struct {
  atomic_int next_id;
  atomic_int stops[MAX_ACTORS];
  atomic_int args_argc, args_same_argv, args_seen;
} g;

static void reset_globals(void) {
  /* No system exists between tests: nothing races with this. */
  memset(&g, 0, sizeof(g));
  th_reset(0); /* a test that waits for an exit sets its goal */
}

/* ---- the entry actor: an id, a counted stop hook ------------------------- */

typedef struct tracked {
  sh_actor base;
  int id;
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

/* ---- sh_run -------------------------------------------------------------- */

static char arg0[] = "prog", arg1[] = "--flag", arg2[] = "value";
static char *run_argv[] = {arg0, arg1, arg2, NULL};

static sh_yield entry_notice(sh_actor *self, sh_stack *st) {
  const sh_msg *m = sh_stack_msg(st);
  CHECK(sh_msg_is(m, &sh_args_type));
  const sh_args *a = (const sh_args *)m;
  atomic_fetch_add(&g.args_seen, 1);
  atomic_store(&g.args_argc, a->argc);
  atomic_store(&g.args_same_argv, a->argv == run_argv && strcmp(a->argv[1], "--flag") == 0);
  sh_system_exit(sh_actor_system(self), 40 + a->argc);
  return sh_return(st, NULL);
}

static const sh_actor_class entry_class = {.name = "entry", TRACKED, .notice = entry_notice};

static void test_sh_run_passes_args_and_exit_code(void **state) {
  (void)state;
  reset_globals();
  sh_config cfg = th_config(2);
  assert_int_equal(sh_run(&cfg, &entry_class, 3, run_argv), 43);
  th_assert_checks();
  assert_int_equal(atomic_load(&g.args_seen), 1);
  assert_int_equal(atomic_load(&g.args_argc), 3);
  assert_int_equal(atomic_load(&g.args_same_argv), 1);
  assert_int_equal(atomic_load(&g.stops[0]), 1); /* sh_run shut the system down */
}

static void test_sh_run_bad_entry_is_einval(void **state) {
  (void)state;
  reset_globals();
  const sh_actor_class tiny = {.name = "tiny", .size = 1, .notice = entry_notice};
  sh_config cfg = th_config(1);
  assert_int_equal(sh_run(&cfg, &tiny, 0, NULL), -EINVAL);
  cfg.max_per_run = 0;
  assert_int_equal(sh_run(&cfg, &entry_class, 0, NULL), -EINVAL);
  assert_int_equal(atomic_load(&g.args_seen), 0);
}

/* ---- sh_system_wait_ms ---------------------------------------------------- */

typedef struct nap_locals { sh_future *f; } nap_locals;

/* Exits with 7 after a nap: the test thread waits by then. */
static sh_yield napper_notice(sh_actor *self, sh_stack *st) {
  nap_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_sleep(st, 20);
    CHECK(l->f != NULL);
    return sh_suspend(st, 1);
  }
  CHECK(sh_future_error(l->f) == 0);
  sh_system_exit(sh_actor_system(self), 7);
  return sh_return(st, NULL);
}

static const sh_actor_class napper_class = {.name = "napper", TRACKED,
                                            .locals_size = sizeof(nap_locals),
                                            .notice = napper_notice};

/* The longest timeout waits for the exit: capped as every timeout is,
 * never wrapped to a deadline already past (which timed out at once). */
static void test_wait_ms_longest_timeout_waits(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = th_system(1);
  const sh_addr *a = th_spawn_on(sys, &napper_class, NULL, 0);
  assert_int_equal(sh_notice(a, &sh_msg_new(sh_args, .argc = 0)->hdr), 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_system_wait_ms(sys, INT64_MAX), 7);
  th_end(sys);
  assert_int_equal(atomic_load(&g.stops[0]), 1);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sh_run_passes_args_and_exit_code),
      cmocka_unit_test(test_sh_run_bad_entry_is_einval),
      cmocka_unit_test(test_wait_ms_longest_timeout_waits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
