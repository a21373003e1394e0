/*
 * Tests of the simulator's seam for threads that are not workers
 * (backend-sim/plat.c): thread fibers and the events they wait on, on a real
 * simulated system (sh_system_new / start on libstackhouse-sim.a):
 *   - thread fibers run fn with sh_plat_local() NULL and are joined, from
 *     the outside fiber and from a thread fiber; a worker (an actor's
 *     handler) may start one too;
 *   - no thread fiber without a started system (-EINVAL); at most
 *     SH_PLAT_MAX_THREADS per system, slots not reused (-EAGAIN);
 *   - an event wait with a deadline from a thread fiber (and from the
 *     outside fiber) times out at its deadline, reached by a jump of the
 *     virtual clock; a set from a worker or from another thread fiber ends
 *     it with 0; reset clears a set; a deadline already past is a poll;
 *   - the workers can be joined (shutdown) while a thread fiber still runs;
 *   - a thread fiber blocked for good while every worker sleeps is
 *     FAIL:deadlock (in a fork()ed child: a failed simulation cannot go on);
 *   - a run with thread fibers is deterministic under every strategy (same
 *     seed, same report), replays from its schedule, and its trace file has
 *     a track for each thread fiber.
 * No real-time assertion: every time here is virtual.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm, mkstemp */
#endif

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/sim.h>
#include <stackhouse/stackhouse.h>

#include "plat.h"
#include "support/child.h"

#define WATCHDOG_S 120
/* A child simulation that should have failed by now hangs instead. */
#define CHILD_WATCHDOG_S 60
#define MS_NS UINT64_C(1000000)
#define WORKERS 2

static const sh_sim_strategy strategies[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};
#define NSTRATEGIES (sizeof(strategies) / sizeof(strategies[0]))

/* ---- a simulated system ---------------------------------------------------- */

static void unexpected_failure(const char *kind, const char *detail) {
  fprintf(stderr, "simulation failed: %s: %s\n", kind, detail);
  fflush(NULL);
  _exit(1);
}

static void configure(uint64_t seed, sh_sim_strategy strategy) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  sh_sim_configure(&o);
}

/* A new, started system of WORKERS workers on the current simulation. */
static sh_system *system_up(void) {
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = WORKERS;
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(&cfg, &sys), 0);
  assert_int_equal(sh_system_start(sys), 0);
  return sys;
}

static void system_down(sh_system *sys) {
  assert_int_equal(sh_system_shutdown(sys), 0);
  sh_system_free(sys);
}

/* ---- actors ------------------------------------------------------------------ */

typedef struct poke {
  sh_msg hdr;
} poke;
static SH_MSG_DEFINE(poke, SH_NOTICE, 0);

/* What an actor does with a poke, given by its spawn argument. */
typedef struct act_cfg {
  sh_plat_event *set;       /* set this event */
  void (*start)(void *arg); /* start a thread fiber running start(start_arg) */
  void *start_arg;
  sh_plat_thread **started; /* ... whose handle goes here */
  int start_rc;             /* and its result */
  int exit_after;           /* > 0: sh_system_exit once this many pokes came */
  int pokes;
} act_cfg;

typedef struct act {
  sh_actor base;
  act_cfg *cfg;
} act;

static int act_init(sh_actor *self, void *arg) {
  ((act *)self)->cfg = arg;
  return 0;
}

static sh_yield act_notice(sh_actor *self, sh_stack *st) {
  act_cfg *c = ((act *)self)->cfg;
  c->pokes++;
  if (c->set != NULL) sh_plat_event_set(c->set);
  if (c->start != NULL && *c->started == NULL)
    c->start_rc = sh_plat_thread_start(c->start, c->start_arg, c->started);
  if (c->exit_after > 0 && c->pokes == c->exit_after) sh_system_exit(sh_actor_system(self), 0);
  return sh_return(st, NULL);
}

static const sh_actor_class act_class = {
    .name = "act", .size = sizeof(act), .init = act_init, .notice = act_notice};

static const sh_addr *spawn_act(sh_system *sys, act_cfg *c, uint32_t worker) {
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn_on(sys, &act_class, c, worker, &a), 0);
  return a;
}

/* From any fiber; a test thread's failure shows in what it records. */
static int send_poke(const sh_addr *a) {
  poke *m = sh_msg_new(poke);
  return m == NULL ? -ENOMEM : sh_notice(a, &m->hdr);
}

/* ---- thread fibers: run, join, limits -------------------------------------------- */

typedef struct rec {
  int runs;
  int local_null; /* sh_plat_local() was NULL in it: not a worker */
  int inner_rc;   /* a nested start's result (nest only) */
  int inner_runs;
} rec;

static void count_fn(void *arg) {
  rec *r = arg;
  r->local_null += sh_plat_local() == NULL;
  for (int i = 0; i < 10; i++) sh_plat_yield("test");
  r->runs++;
}

/* A thread fiber that starts and joins one of its own. */
static void nest_fn(void *arg) {
  rec *r = arg;
  static rec inner;
  inner = (rec){0};
  sh_plat_thread *t = NULL;
  r->inner_rc = sh_plat_thread_start(count_fn, &inner, &t);
  if (r->inner_rc == 0) sh_plat_thread_join(t);
  r->inner_runs = inner.runs;
  count_fn(r);
}

static void test_threads_run_and_join(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    configure(1 + k, strategies[k]);
    sh_system *sys = system_up();
    rec r[3] = {{0}}, nest = {0}, from_worker = {0};
    sh_plat_thread *t[3], *tn = NULL, *tw = NULL;
    for (int i = 0; i < 3; i++) assert_int_equal(sh_plat_thread_start(count_fn, &r[i], &t[i]), 0);
    assert_int_equal(sh_plat_thread_start(nest_fn, &nest, &tn), 0);
    /* A worker starts one: the actor's handler runs on worker 1. */
    act_cfg c = {.start = count_fn, .start_arg = &from_worker, .started = &tw, .exit_after = 1};
    const sh_addr *a = spawn_act(sys, &c, 1);
    assert_int_equal(send_poke(a), 0);
    assert_int_equal(sh_system_wait(sys), 0);
    assert_int_equal(c.start_rc, 0);
    assert_non_null(tw);
    for (int i = 2; i >= 0; i--) sh_plat_thread_join(t[i]);
    sh_plat_thread_join(tn);
    sh_plat_thread_join(tw);
    system_down(sys);
    for (int i = 0; i < 3; i++) {
      assert_int_equal(r[i].runs, 1);
      assert_int_equal(r[i].local_null, 1);
    }
    assert_int_equal(nest.runs, 1);
    assert_int_equal(nest.inner_rc, 0);
    assert_int_equal(nest.inner_runs, 1);
    assert_int_equal(from_worker.runs, 1);
    assert_int_equal(from_worker.local_null, 1);
  }
}

static void noop_fn(void *arg) { (void)arg; }

static void test_thread_needs_started_system(void **state) {
  (void)state;
  configure(1, SH_SIM_RANDOM);
  sh_plat_thread *t = (sh_plat_thread *)0x1;
  assert_int_equal(sh_plat_thread_start(noop_fn, NULL, &t), -EINVAL); /* no system */
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = WORKERS;
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(&cfg, &sys), 0);
  assert_int_equal(sh_plat_thread_start(noop_fn, NULL, &t), -EINVAL); /* not started */
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_plat_thread_start(NULL, NULL, &t), -EINVAL);
  assert_int_equal(sh_plat_thread_start(noop_fn, NULL, NULL), -EINVAL);
  assert_ptr_equal(t, (sh_plat_thread *)0x1); /* untouched on failure */
  system_down(sys);
  assert_int_equal(sh_plat_thread_start(noop_fn, NULL, &t), -EINVAL); /* freed */
}

static void test_thread_limit(void **state) {
  (void)state;
  configure(3, SH_SIM_PCT);
  sh_system *sys = system_up();
  rec r = {0};
  /* Joined one by one: slots are not reused, so the limit counts starts. */
  for (int i = 0; i < SH_PLAT_MAX_THREADS; i++) {
    sh_plat_thread *t = NULL;
    assert_int_equal(sh_plat_thread_start(count_fn, &r, &t), 0);
    sh_plat_thread_join(t);
  }
  sh_plat_thread *t = NULL;
  assert_int_equal(sh_plat_thread_start(count_fn, &r, &t), -EAGAIN);
  assert_null(t);
  system_down(sys);
  assert_int_equal(r.runs, SH_PLAT_MAX_THREADS);
  /* The next system has its own slots. */
  sys = system_up();
  assert_int_equal(sh_plat_thread_start(count_fn, &r, &t), 0);
  sh_plat_thread_join(t);
  system_down(sys);
  assert_int_equal(r.runs, SH_PLAT_MAX_THREADS + 1);
}

/* ---- events: timed waits ----------------------------------------------------------- */

typedef struct timed {
  sh_plat_event *e;
  uint64_t timeout_ns;
  uint64_t start, deadline, end; /* virtual times */
  uint64_t jumps_before, jumps_after;
  int rc;
  int waiting; /* the waiter is in (or about to enter) its wait */
} timed;

static uint64_t jumps_now(void) {
  sh_sim_report rep;
  sh_sim_report_get(&rep);
  return rep.jumps;
}

static void timed_wait(timed *w) {
  w->start = sh_plat_now_ns();
  w->deadline = w->start + w->timeout_ns;
  w->jumps_before = jumps_now();
  w->waiting = 1;
  w->rc = sh_plat_event_wait_until(w->e, w->deadline);
  w->end = sh_plat_now_ns();
  w->jumps_after = jumps_now();
}

static void timed_fn(void *arg) { timed_wait(arg); }

/* Nothing sets the event: the wait ends at its deadline, which the clock
 * reaches by a jump once every worker sleeps. */
static void check_timed_out(const timed *w) {
  assert_int_equal(w->rc, -ETIMEDOUT);
  assert_true(w->end >= w->deadline);
  assert_true(w->jumps_after > w->jumps_before);
}

static void test_wait_until_times_out(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    configure(7, strategies[k]);
    sh_system *sys = system_up();
    timed w = {.timeout_ns = 5 * MS_NS};
    assert_int_equal(sh_plat_event_new(&w.e), 0);
    sh_plat_thread *t = NULL;
    assert_int_equal(sh_plat_thread_start(timed_fn, &w, &t), 0);
    sh_plat_thread_join(t);
    check_timed_out(&w);
    /* The outside fiber waits the same way. */
    timed o = {.e = w.e, .timeout_ns = 3 * MS_NS};
    timed_wait(&o);
    check_timed_out(&o);
    sh_plat_event_free(w.e);
    system_down(sys);
  }
}

static void test_wait_until_set_by_worker(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    configure(11, strategies[k]);
    sh_system *sys = system_up();
    /* Far beyond anything else in the run: only the set can end it. */
    timed w = {.timeout_ns = 3600000 * MS_NS};
    assert_int_equal(sh_plat_event_new(&w.e), 0);
    act_cfg c = {.set = w.e};
    const sh_addr *a = spawn_act(sys, &c, 0);
    sh_plat_thread *t = NULL;
    assert_int_equal(sh_plat_thread_start(timed_fn, &w, &t), 0);
    assert_int_equal(send_poke(a), 0);
    sh_plat_thread_join(t);
    assert_int_equal(w.rc, 0);
    assert_true(w.end < w.deadline);
    assert_int_equal(c.pokes, 1);
    system_down(sys);
    sh_plat_event_free(w.e);
  }
}

/* Sets w's event once w waits: the set finds it blocked (or about to be). */
static void setter_fn(void *arg) {
  timed *w = arg;
  /* Bounded: the waiter runs whenever this one yields its CPU. */
  while (!w->waiting) sh_plat_yield_cpu();
  sh_plat_event_set(w->e);
}

static void test_wait_until_set_by_thread(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    for (uint64_t seed = 1; seed <= 5; seed++) {
      configure(seed, strategies[k]);
      sh_system *sys = system_up();
      timed w = {.timeout_ns = 3600000 * MS_NS};
      assert_int_equal(sh_plat_event_new(&w.e), 0);
      sh_plat_thread *tw = NULL, *ts = NULL;
      assert_int_equal(sh_plat_thread_start(setter_fn, &w, &ts), 0);
      assert_int_equal(sh_plat_thread_start(timed_fn, &w, &tw), 0);
      sh_plat_thread_join(ts);
      sh_plat_thread_join(tw);
      assert_int_equal(w.rc, 0);
      assert_true(w.end < w.deadline);
      sh_plat_event_free(w.e);
      system_down(sys);
    }
  }
}

static void test_event_reset_and_poll(void **state) {
  (void)state;
  configure(5, SH_SIM_RANDOM);
  sh_system *sys = system_up();
  sh_plat_event *e = NULL;
  assert_int_equal(sh_plat_event_new(&e), 0);
  sh_plat_event_set(e);
  /* Set stays set: no wait, no time passes. */
  uint64_t t0 = sh_plat_now_ns();
  assert_int_equal(sh_plat_event_wait_until(e, t0 + MS_NS), 0);
  assert_int_equal(sh_plat_event_wait_until(e, 0), 0);
  sh_plat_event_wait(e);
  assert_true(sh_plat_now_ns() == t0);
  sh_plat_event_reset(e);
  /* A deadline already past: a poll (one scheduling step), -ETIMEDOUT. */
  assert_int_equal(sh_plat_event_wait_until(e, 0), -ETIMEDOUT);
  assert_int_equal(sh_plat_event_wait_until(e, sh_plat_now_ns()), -ETIMEDOUT);
  assert_true(sh_plat_now_ns() > t0);
  /* Cleared: a wait runs to its deadline. */
  uint64_t d = sh_plat_now_ns() + 2 * MS_NS;
  assert_int_equal(sh_plat_event_wait_until(e, d), -ETIMEDOUT);
  assert_true(sh_plat_now_ns() >= d);
  sh_plat_event_set(e);
  assert_int_equal(sh_plat_event_wait_until(e, sh_plat_now_ns() + MS_NS), 0);
  sh_plat_event_free(e);
  system_down(sys);
}

/* With no worker running, a timed wait is a jump of the clock to its deadline. */
static void test_wait_until_without_system(void **state) {
  (void)state;
  configure(1, SH_SIM_RANDOM);
  sh_plat_event *e = NULL;
  assert_int_equal(sh_plat_event_new(&e), 0);
  uint64_t d = sh_plat_now_ns() + 4 * MS_NS;
  assert_int_equal(sh_plat_event_wait_until(e, d), -ETIMEDOUT);
  assert_true(sh_plat_now_ns() >= d);
  sh_plat_event_set(e);
  assert_int_equal(sh_plat_event_wait_until(e, SH_PLAT_NO_DEADLINE), 0);
  sh_plat_event_free(e);
}

/* The workers are joined (shutdown) while a thread fiber still waits; it
 * goes on alone afterwards, and is joined before the system is freed. */
static void test_shutdown_while_thread_runs(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    configure(13, strategies[k]);
    sh_system *sys = system_up();
    timed w = {.timeout_ns = 50 * MS_NS};
    assert_int_equal(sh_plat_event_new(&w.e), 0);
    sh_plat_thread *t = NULL;
    assert_int_equal(sh_plat_thread_start(timed_fn, &w, &t), 0);
    assert_int_equal(sh_system_shutdown(sys), 0);
    sh_plat_thread_join(t);
    sh_system_free(sys);
    check_timed_out(&w);
    sh_plat_event_free(w.e);
  }
}

/* ---- deadlock ------------------------------------------------------------------------ */

static void child_failure(const char *kind, const char *detail) {
  (void)detail;
  th_child_write(kind);
  _exit(0);
}

static sh_plat_event *never_set;

static void wait_forever_fn(void *arg) {
  (void)arg;
  sh_plat_event_wait(never_set);
}

/* A thread fiber waits for good; the outside joins it (how 0) or waits for
 * the system (how 1), which nothing ends: every fiber sleeps, no deadline. */
static void deadlock_body(const void *arg) {
  int how = *(const int *)arg;
  sh_sim_on_failure(child_failure);
  configure(1, SH_SIM_RANDOM);
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = WORKERS;
  sh_system *sys = NULL;
  if (sh_system_new(&cfg, &sys) != 0 || sh_system_start(sys) != 0) _exit(3);
  if (sh_plat_event_new(&never_set) != 0) _exit(3);
  sh_plat_thread *t = NULL;
  if (sh_plat_thread_start(wait_forever_fn, NULL, &t) != 0) _exit(3);
  if (how == 0)
    sh_plat_thread_join(t);
  else
    (void)sh_system_wait(sys);
  _exit(2); /* should not get here */
}

static void test_deadlock_thread_blocked(void **state) {
  (void)state;
  for (int how = 0; how < 2; how++) {
    char kind[64];
    int status = th_in_child(deadlock_body, &how, CHILD_WATCHDOG_S, kind, sizeof(kind));
    if (status != 0 || strcmp(kind, "deadlock") != 0)
      fprintf(stderr, "deadlock case %d: ended with \"%s\" (child status %d)\n", how, kind,
              status);
    assert_int_equal(status, 0);
    assert_string_equal(kind, "deadlock");
  }
}

/* ---- determinism with thread fibers ----------------------------------------------------- */

#define NSENDERS 3
#define SENDS 20

typedef struct sender {
  const sh_addr *to;
  sh_plat_event *e; /* its own, never set: waits on it are pauses */
  uint64_t pause_ns;
  int failed;
} sender;

/* Pokes the counter, pausing on a timed wait between pokes. */
static void sender_fn(void *arg) {
  sender *s = arg;
  for (int i = 0; i < SENDS; i++) {
    if (send_poke(s->to) != 0) s->failed++;
    if (sh_plat_event_wait_until(s->e, sh_plat_now_ns() + s->pause_ns) != -ETIMEDOUT) s->failed++;
  }
}

/* One run: NSENDERS thread fibers poke a counter on worker 0 until it
 * counts them all and ends the run. Optionally with a schedule to replay
 * and a trace file. Returns the report. */
static sh_sim_report workload(uint64_t seed, sh_sim_strategy strategy, const sh_sim_choice *sched,
                              size_t nsched, const char *trace_path) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  o.schedule = sched;
  o.schedule_len = nsched;
  o.trace_path = trace_path;
  sh_sim_configure(&o);
  sh_system *sys = system_up();
  act_cfg c = {.exit_after = NSENDERS * SENDS};
  const sh_addr *a = spawn_act(sys, &c, 0);
  sender s[NSENDERS];
  sh_plat_thread *t[NSENDERS];
  for (int i = 0; i < NSENDERS; i++) {
    s[i] = (sender){.to = a, .pause_ns = (uint64_t)(i + 1) * 100000u};
    assert_int_equal(sh_plat_event_new(&s[i].e), 0);
    assert_int_equal(sh_plat_thread_start(sender_fn, &s[i], &t[i]), 0);
  }
  assert_int_equal(sh_system_wait(sys), 0);
  for (int i = 0; i < NSENDERS; i++) {
    sh_plat_thread_join(t[i]);
    assert_int_equal(s[i].failed, 0);
    sh_plat_event_free(s[i].e);
  }
  system_down(sys);
  assert_int_equal(c.pokes, NSENDERS * SENDS);
  sh_sim_report rep;
  sh_sim_report_get(&rep);
  return rep;
}

static bool same_report(const sh_sim_report *a, const sh_sim_report *b) {
  return a->hash == b->hash && a->steps == b->steps && a->vtime_ns == b->vtime_ns &&
         a->switches == b->switches && a->jumps == b->jumps;
}

static void test_same_seed_same_hash(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    uint64_t distinct[5];
    int ndistinct = 0;
    for (uint64_t seed = 1; seed <= 5; seed++) {
      sh_sim_report a = workload(seed, strategies[k], NULL, 0, NULL);
      sh_sim_report b = workload(seed, strategies[k], NULL, 0, NULL);
      if (!same_report(&a, &b))
        fprintf(stderr, "seed %llu %s: hash %016llx / %016llx\n", (unsigned long long)seed,
                sh_sim_strategy_name(strategies[k]), (unsigned long long)a.hash,
                (unsigned long long)b.hash);
      assert_true(same_report(&a, &b));
      bool seen = false;
      for (int j = 0; j < ndistinct; j++) seen |= distinct[j] == a.hash;
      if (!seen) distinct[ndistinct++] = a.hash;
    }
    /* The seed steers the thread fibers too (none switches only when it
     * must, so its runs may coincide). */
    if (strategies[k] != SH_SIM_NONE) assert_true(ndistinct >= 2);
  }
}

static void test_replay_with_threads(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    sh_sim_report a = workload(3, strategies[k], NULL, 0, NULL);
    const sh_sim_choice *log;
    size_t n = sh_sim_schedule(&log);
    assert_true(n > 0);
    sh_sim_choice *copy = malloc(n * sizeof(*copy));
    assert_non_null(copy);
    memcpy(copy, log, n * sizeof(*copy));
    sh_sim_report b = workload(3, strategies[k], copy, n, NULL);
    free(copy);
    assert_true(same_report(&a, &b));
  }
}

static void test_trace_has_thread_tracks(void **state) {
  (void)state;
  char path[256];
  const char *dir = getenv("TMPDIR");
  if (dir == NULL || dir[0] == '\0') dir = "/tmp";
  assert_true(snprintf(path, sizeof(path), "%s/sh_sim_plat_XXXXXX", dir) < (int)sizeof(path));
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  workload(1, SH_SIM_RANDOM, NULL, 0, path);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 22];
  size_t len = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  unlink(path);
  text[len] = '\0';
  char want[64];
  for (int i = 0; i < NSENDERS; i++) {
    snprintf(want, sizeof(want), "\"args\":{\"name\":\"thread %d\"}", i);
    assert_non_null(strstr(text, want));
  }
  assert_non_null(strstr(text, "\"name\":\"outside\""));
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(unexpected_failure);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_run_and_join),
      cmocka_unit_test(test_thread_needs_started_system),
      cmocka_unit_test(test_thread_limit),
      cmocka_unit_test(test_wait_until_times_out),
      cmocka_unit_test(test_wait_until_set_by_worker),
      cmocka_unit_test(test_wait_until_set_by_thread),
      cmocka_unit_test(test_event_reset_and_poll),
      cmocka_unit_test(test_wait_until_without_system),
      cmocka_unit_test(test_shutdown_while_thread_runs),
      cmocka_unit_test(test_deadlock_thread_blocked),
      cmocka_unit_test(test_same_seed_same_hash),
      cmocka_unit_test(test_replay_with_threads),
      cmocka_unit_test(test_trace_has_thread_tracks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
