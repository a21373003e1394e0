/*
 * Tests of the simulator with thread fibers (backend-sim/plat.c) on a real
 * simulated system (sim_plat_fixture.h): a run in which thread fibers poke
 * an actor, pausing on timed waits, is deterministic under every strategy
 * (same seed, same report; the seed steers the thread fibers too), replays
 * from its schedule, and its trace file has a track for each thread fiber.
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

#include "sim_plat_fixture.h"

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
      cmocka_unit_test(test_same_seed_same_hash),
      cmocka_unit_test(test_replay_with_threads),
      cmocka_unit_test(test_trace_has_thread_tracks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
