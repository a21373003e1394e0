/*
 * exit_code: every way a run can end gives its waiter the code of the exit
 * that ended it (system.h: sh_system_exit "asks the system to end; wakes
 * sh_system_wait", which returns "its code"; probe.h: sh_system_wait_ms,
 * the same or -ETIMEDOUT; lifecycle.c: the first exit decides).
 *
 * Drawn per run: who exits (a handler; an outside thread; a handler twice
 * with two codes; two racers, handlers on two workers or a handler and a
 * thread, with two codes), after how long (0 to 2 ms, so that the exit
 * comes before the wait or while the waiter sleeps), and how the setup
 * waits (sh_system_wait, or polls of sh_system_wait_ms of 0 to 2 ms),
 * with, in half the runs, a second thread blocked in sh_system_wait.
 * Checked: the code read is the one exit's code (the first's, for one
 * exiter); of two racers, one of theirs, and the first's when one's exit
 * had returned before the other began; every later wait reads it again,
 * and so does the framework's (sh_scn_exited). A code published after the
 * wake-up it pays for would be read as 0 (never drawn).
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

enum { X_HANDLER, X_THREAD, X_TWICE, X_RACE_ACTORS, X_RACE_THREAD, X_MODES };
#define X_POLLS 20000u /* a poller's bound: well past the racers' 2 ms */

typedef struct x_world {
  sh_system *sys;
  uint32_t mode;
  int code[2];        /* racer k's code (X_TWICE: the first, then the second) */
  uint32_t delay_ms[2];
  atomic_bool returned[2]; /* racer k's exit returned */
  atomic_bool saw[2];      /* racer k saw the other's exit returned before its own */
  const sh_addr *racer[2];
  sh_thread *thread;
  sh_thread *waiter; /* a second waiter, blocked in sh_system_wait beside the setup's */
  int waited;        /* what it read */
} x_world;

typedef struct racer_locals {
  sh_future *f;
} racer_locals;

/* Racer k's exit (both, X_TWICE), marked for the order check. */
static void x_exit(x_world *wd, uint32_t k) {
  /* seq_cst, both flags: of two racers at least one sees the other's
   * return if that came first. */
  atomic_store(&wd->saw[k], atomic_load(&wd->returned[1 - k]));
  sh_system_exit(wd->sys, wd->code[k]);
  if (wd->mode == X_TWICE) sh_system_exit(wd->sys, wd->code[1]);
  atomic_store(&wd->returned[k], true);
}

static sh_yield racer_notice(sh_actor *self, sh_stack *st) {
  x_world *wd = sh_scn_state(sh_scn_of(self));
  racer_locals *l = sh_stack_locals(st);
  uint32_t k = sh_scn_id(self);
  if (sh_stack_state(st) == SH_START && wd->delay_ms[k] > 0) {
    l->f = sh_sleep(st, wd->delay_ms[k]);
    if (l->f != NULL) return sh_suspend(st, 1);
  }
  x_exit(wd, k);
  return sh_return(st, NULL);
}

static const sh_actor_class racer_class = {
    .name = "exit_racer", .size = sizeof(sh_scn_actor), .locals_size = sizeof(racer_locals),
    .init = sh_scn_actor_init, .notice = racer_notice};

/* The outside racer: always racer 1. Sleeps by polls of its own, as a
 * thread that is not a worker cannot sleep on a stack. */
static void thread_main(void *arg) {
  x_world *wd = arg;
  if (wd->delay_ms[1] > 0) {
    int64_t until = sh_clock_ms() + wd->delay_ms[1];
    for (uint32_t i = 0; i < X_POLLS && sh_clock_ms() < until; i++) sh_yield_cpu();
  }
  x_exit(wd, 1);
}

/* A second thread waiting for the same exit: every waiter reads its code. */
static void waiter_main(void *arg) {
  x_world *wd = arg;
  wd->waited = sh_system_wait(wd->sys);
}

/* The setup's wait, drawn: blocking, or polls with a timeout. */
static int x_wait(sh_scn *s, x_world *wd) {
  uint32_t how = (uint32_t)sh_scn_below(s, 4);
  if (how == 0) return sh_system_wait(wd->sys);
  int64_t ms = how - 1;
  for (uint32_t i = 0; i < X_POLLS; i++) {
    int code = sh_system_wait_ms(wd->sys, ms);
    if (code != -ETIMEDOUT) return code;
    if (ms == 0) sh_yield_cpu();
  }
  SH_SCN_CHECK(s, false, "no exit after %u polls of %lld ms", X_POLLS, (long long)ms);
  return sh_system_wait(wd->sys);
}

/* The code read against the exits made. */
static void x_check(sh_scn *s, x_world *wd, int code) {
  bool race = wd->mode == X_RACE_ACTORS || wd->mode == X_RACE_THREAD;
  if (!race) {
    SH_SCN_CHECK(s, code == wd->code[0], "mode %u: the wait read %d, the exit gave %d", wd->mode,
                 code, wd->code[0]);
    return;
  }
  SH_SCN_CHECK(s, code == wd->code[0] || code == wd->code[1],
               "racing exits %d and %d: the wait read %d", wd->code[0], wd->code[1], code);
  for (uint32_t k = 0; k < 2; k++)
    SH_SCN_CHECK(s, !atomic_load(&wd->saw[k]) || code == wd->code[1 - k],
                 "exit %d returned before exit %d began, yet the wait read %d", wd->code[1 - k],
                 wd->code[k], code);
}

static int start_racers(sh_scn *s, sh_system *sys, x_world *wd) {
  uint32_t actors = wd->mode == X_RACE_ACTORS ? 2 : wd->mode == X_THREAD ? 0 : 1;
  int rc = 0;
  for (uint32_t k = 0; k < actors && rc == 0; k++)
    rc = sh_scn_spawn_on(s, sys, &racer_class, k, k % sh_system_workers(sys), &wd->racer[k]);
  for (uint32_t k = 0; k < actors && rc == 0; k++) rc = sh_scn_kick(wd->racer[k]);
  if (rc == 0 && (wd->mode == X_THREAD || wd->mode == X_RACE_THREAD)) {
    /* The thread is racer 0 alone (X_THREAD) or racer 1. */
    if (wd->mode == X_THREAD) wd->delay_ms[1] = wd->delay_ms[0], wd->code[1] = wd->code[0];
    rc = sh_thread_start(thread_main, wd, &wd->thread);
  }
  return rc;
}

static int setup(sh_scn *s, sh_system *sys) {
  x_world *wd = sh_scn_state(s);
  wd->sys = sys;
  wd->mode = (uint32_t)sh_scn_below(s, X_MODES);
  wd->code[0] = 1 + (int)sh_scn_below(s, 200);
  wd->code[1] = wd->code[0] + 1 + (int)sh_scn_below(s, 50); /* never the first's */
  for (uint32_t k = 0; k < 2; k++) wd->delay_ms[k] = (uint32_t)sh_scn_below(s, 3);
  int rc = sh_scn_below(s, 2) == 0 ? sh_thread_start(waiter_main, wd, &wd->waiter) : 0;
  if (rc == 0) rc = start_racers(s, sys, wd);
  if (rc != 0) return rc;
  int code = x_wait(s, wd);
  x_check(s, wd, code);
  /* Read again, by each way: the same code. */
  SH_SCN_CHECK_EQ(s, sh_system_wait(sys), code, "a second sh_system_wait");
  SH_SCN_CHECK_EQ(s, sh_system_wait_ms(sys, 0), code, "sh_system_wait_ms(0) after the exit");
  sh_scn_exited(s, code);
  return 0;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  x_world *wd = sh_scn_state(s);
  if (wd->thread != NULL) sh_thread_join(wd->thread);
  if (wd->waiter == NULL) return;
  sh_thread_join(wd->waiter);
  int want = sh_system_wait(sys);
  SH_SCN_CHECK(s, wd->waited == want, "a second waiter read %d, the first %d", wd->waited, want);
}

static const sh_scenario exit_code = {
    .name = "exit_code",
    .summary = "exits from handlers and threads, twice and racing, against the code waited for",
    .flags = SH_SCN_NO_FAULTS,
    .state_size = sizeof(x_world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(exit_code);
