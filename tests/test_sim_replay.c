/*
 * Exact replays and the choice sequence, through the public API and the
 * shsim of this test's own configuration (build/<cfg>/bin/shsim, found from
 * argv[0]) run as a user runs it:
 *
 *   - sh_sim_draw: a free run's draws are recorded; under replay each
 *     stream's draws come from the schedule in order, 0 past its last,
 *     clamped to the bound; an empty schedule with `replay` set is a replay
 *     (no preemption), not a free run;
 *   - sh_sim_shrink on a synthetic failure: spans deleted, values lowered
 *     toward 0 (a wide one, a 64-bit draw taken modulo n, to a small one),
 *     trailing zeros dropped;
 *   - shsim: a replay file with no decision replays as one; a replay that
 *     goes another way exits 3 and names where; a file of another binary
 *     or format, or a --schedule recorded with other options, is refused;
 *     a workload bug's 90-odd operations shrink to the four that matter,
 *     and the shrunk file replays exactly; a run whose network drew its
 *     latencies and segments replays exactly.
 *
 * The shsim commands run through the shell (popen), their output captured
 * whole; the files live in a temporary directory.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/sim.h>

#define OUT_CAP (256 * 1024)

static char shsim[PATH_MAX];
static char dir[PATH_MAX];
static char out[OUT_CAP + 1];

/* Runs a shell command (printf-style), stdout and stderr to `out`; its
 * exit status. */
__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(cmd, sizeof(cmd) - 8, fmt, ap);
  va_end(ap);
  assert_true(n > 0 && (size_t)n < sizeof(cmd) - 8);
  strcat(cmd, " 2>&1");
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, OUT_CAP, p);
  out[len] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void expect(int status, int want) {
  if (status != want) fprintf(stderr, "exit %d, want %d; output:\n%s", status, want, out);
  assert_int_equal(status, want);
}

static void expect_text(const char *what) {
  if (strstr(out, what) == NULL) fprintf(stderr, "no '%s' in:\n%s", what, out);
  assert_non_null(strstr(out, what));
}

/* The value of `key=` in the last output, as a string (to buf). */
static void field(const char *key, char *buf, size_t cap) {
  const char *p = strstr(out, key);
  assert_non_null(p);
  p += strlen(key);
  size_t n = strcspn(p, " \n");
  assert_true(n < cap);
  memcpy(buf, p, n);
  buf[n] = '\0';
}

/* ---- the API ----------------------------------------------------------------------- */

static void test_draws_replay(void **state) {
  (void)state;
  sh_sim_options o;
  sh_sim_options_default(&o);
  sh_sim_configure(&o);
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_USER, 10, 7), 7); /* a free run: fresh */
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_SCENARIO, 0, 99), 99);
  const sh_sim_choice *c;
  assert_int_equal(sh_sim_schedule(&c), 2);
  assert_int_equal(c[0].kind, SH_SIM_DRAW);
  assert_int_equal(c[0].to, SH_SIM_STREAM_USER);
  assert_int_equal(c[0].value, 7);
  assert_int_equal(c[1].value, 99);

  /* Replay: the stream's values in order, clamped to the bound, then 0;
   * another stream is untouched. */
  sh_sim_choice sched[] = {
      {.value = 5, .to = SH_SIM_STREAM_USER, .kind = SH_SIM_DRAW},
      {.step = 3, .to = 1, .kind = SH_SIM_PREEMPT}, /* anchored by its step, not a draw */
      {.value = 8, .to = SH_SIM_STREAM_NET, .kind = SH_SIM_DRAW},
      {.value = 70, .to = SH_SIM_STREAM_USER, .kind = SH_SIM_DRAW},
  };
  o.schedule = sched;
  o.schedule_len = 4;
  sh_sim_configure(&o);
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_USER, 10, 1), 5);
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_USER, 10, 1), 9);
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_USER, 10, 1), 0);
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_NET, 0, 1), 8);
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_SCENARIO, 0, 1), 0);

  /* An empty schedule with `replay` set replays: every draw is 0. */
  o.schedule = NULL;
  o.schedule_len = 0;
  o.replay = 1;
  sh_sim_configure(&o);
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_SCENARIO, 100, 42), 0);
  o.replay = 0;
  sh_sim_configure(&o);
  assert_int_equal(sh_sim_draw(SH_SIM_STREAM_SCENARIO, 100, 42), 42);
}

/* A synthetic failure: stream 0 holds a value >= 10 later followed by one
 * >= 20, and the schedule's fault decision 0x77 is there. */
static bool synthetic_fails(void *ctx, const sh_sim_choice *s, size_t n) {
  (void)ctx;
  bool ten = false, twenty = false, fault = false;
  for (size_t i = 0; i < n; i++) {
    if (s[i].kind == SH_SIM_FAULT && s[i].to == 0x77) fault = true;
    if (s[i].kind != SH_SIM_DRAW || s[i].to != 0) continue;
    if (ten && s[i].value >= 20) twenty = true;
    if (s[i].value >= 10) ten = true;
  }
  return ten && twenty && fault;
}

static void test_shrink_values(void **state) {
  (void)state;
  enum { N = 120 };
  sh_sim_choice s[N];
  uint64_t x = 12345;
  for (size_t i = 0; i < N; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    s[i] = (sh_sim_choice){.value = (x >> 33) % 50, .kind = SH_SIM_DRAW,
                           .to = (uint32_t)(i % 3 == 0)};
    if (i % 10 == 5) s[i] = (sh_sim_choice){.step = i, .kind = SH_SIM_PREEMPT, .to = 1};
  }
  s[60] = (sh_sim_choice){.step = 60, .kind = SH_SIM_FAULT, .to = 0x77};
  assert_true(synthetic_fails(NULL, s, N));
  uint32_t trials = 0;
  size_t m = sh_sim_shrink(s, N, synthetic_fails, NULL, 5000, &trials);
  assert_true(synthetic_fails(NULL, s, m));
  /* The fault, and two draws lowered to their least: 10 and 20. */
  assert_int_equal(m, 3);
  size_t draws = 0;
  for (size_t i = 0; i < m; i++) {
    if (s[i].kind != SH_SIM_DRAW) continue;
    assert_int_equal(s[i].value, draws == 0 ? 10 : 20);
    draws++;
  }
  assert_int_equal(draws, 2);
}

/* A whole 64-bit draw taken modulo 3: fails when it is 2 mod 3. */
static bool modulo_fails(void *ctx, const sh_sim_choice *s, size_t n) {
  (void)ctx;
  return n >= 1 && s[0].kind == SH_SIM_DRAW && s[0].value % 3 == 2;
}

/* A wide value goes to the smallest that fails (bisection alone, blind to
 * the modulo, stops at a large one). */
static void test_shrink_wide_value(void **state) {
  (void)state;
  sh_sim_choice s[] = {{.kind = SH_SIM_DRAW, .value = 0x9e3779b97f4a7c19ull}};
  assert_true(modulo_fails(NULL, s, 1));
  assert_int_equal(sh_sim_shrink(s, 1, modulo_fails, NULL, 1000, NULL), 1);
  assert_int_equal(s[0].value, 2);
}

/* ---- shsim ------------------------------------------------------------------------- */

/* A recorded failing run of test_race (some seed of 1..40), to path; its
 * seed to *seed. */
static void record_race(const char *path, unsigned *seed) {
  for (*seed = 1; *seed <= 40; (*seed)++)
    if (sh("%s run test_race --seed %u --record %s", shsim, *seed, path) == 1) return;
  fail_msg("no failing test_race seed in 1..40");
}

/* A replay file holding no decision replays a run that chooses nothing:
 * test_race then never preempts, and passes, where the free run of its
 * seed fails. */
static void test_empty_replay(void **state) {
  (void)state;
  char path[PATH_MAX + 32], empty[PATH_MAX + 32];
  snprintf(path, sizeof(path), "%s/race.replay", dir);
  snprintf(empty, sizeof(empty), "%s/empty.replay", dir);
  unsigned seed;
  record_race(path, &seed);
  expect(sh("grep -v -e '^[0-9]' -e '^result=' -e '^hash=' -e '^steps=' %s | "
            "sed 's/^decisions=.*/decisions=0/' > %s", path, empty), 0);
  expect(sh("%s replay %s", shsim, empty), 0);
  expect_text("result=ok");
  expect_text("replay: the file records no result");
  expect(sh("%s run test_race --seed %u", shsim, seed), 1);
}

/* One decision changed: the replay diverges, exits 3, and says where. */
static void test_divergence_named(void **state) {
  (void)state;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof(path), "%s/race.replay", dir);
  unsigned seed;
  record_race(path, &seed);
  expect(sh("%s replay %s", shsim, path), 1);
  expect_text("replay matches the recording");
  /* The first preemption goes to the other worker. */
  expect(sh("awk '!d && $2 == \"preempt\" { $3 = 1 - $3; d = 1 } { print }' %s > %s.x && "
            "mv %s.x %s", path, path, path, path), 0);
  expect(sh("%s replay %s", shsim, path), 3);
  expect_text("replay DIVERGED");
  expect_text("replay DIVERGED where (first run: the recording; second: this replay): ");
}

/* Another binary's file, an older format, and a schedule recorded with
 * other options than the command line's are refused, each saying why. */
static void test_refusals(void **state) {
  (void)state;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof(path), "%s/race.replay", dir);
  unsigned seed;
  record_race(path, &seed);
  expect(sh("%s run test_race --seed %u --strategy pct --schedule %s", shsim, seed, path), 2);
  expect_text("strategy differs");
  expect(sh("%s run test_race --seed %u --schedule %s", shsim, seed, path), 1);
  /* Compared as the run has them: 2 workers given are test_race's own. */
  expect(sh("%s run test_race --seed %u --workers 2 --schedule %s", shsim, seed, path), 1);
  expect(sh("%s run test_race --seed %u --steps-max 5000 --schedule %s", shsim, seed, path), 2);
  expect_text("max_steps differs");
  /* The replay's own record, kept in TMPDIR, goes also when shsim leaves
   * early (here: a trace it cannot write). */
  expect(sh("mkdir -p %s/tmp && TMPDIR=%s/tmp %s replay %s --trace %s/no/t.json", dir, dir, shsim,
            path, dir), 2);
  expect(sh("ls -A %s/tmp | wc -l", dir), 0);
  assert_int_equal(atoi(out), 0);
  /* A file cut short (its writer killed), or of a run that outgrew the
   * record, cannot replay its run. */
  expect(sh("head -n 25 %s > %s.cut && %s replay %s.cut", path, path, shsim, path), 2);
  expect_text("ends before its last decision");
  expect(sh("sed 's/^decisions=/incomplete=1\\ndecisions=/' %s > %s.inc && %s replay %s.inc", path,
            path, shsim, path), 2);
  expect_text("more decisions than the simulator records");
  expect(sh("sed -i 's/^binary=.*/binary=0x0000000000000001/' %s && %s replay %s", path, shsim, path), 2);
  expect_text("recorded by another binary");
  expect(sh("%s replay %s --any-binary", shsim, path), 1);
  expect_text("replaying anyway");
  expect(sh("sed -i 's/^format=.*/format=1/' %s && %s replay %s --any-binary", path, shsim, path),
         2);
  expect_text("format 1 holds no drawn values");
}

/* A workload bug: 90-odd drawn operations shrink to put, put, delete and
 * get of one key, and the shrunk file replays exactly. */
static void test_workload_shrinks(void **state) {
  (void)state;
  char path[PATH_MAX + 32], nops[16];
  snprintf(path, sizeof(path), "%s/workload.replay", dir);
  expect(sh("%s run test_workload --seed 1", shsim), 1);
  expect_text("FAIL:invariant");
  field("operation ", nops, sizeof(nops));
  assert_true(atoi(nops) > 10); /* the bug shows late in the drawn workload */
  expect(sh("%s shrink test_workload --seed 1 --out %s", shsim, path), 0);
  expect_text("of them values drawn");
  expect(sh("%s replay %s", shsim, path), 1);
  expect_text("replay matches the recording");
  expect_text("operation 4 of 4");
  expect_text(", get(k");
}

/* The network's draws (latency, segments) under its weather replay exactly. */
static void test_network_replays(void **state) {
  (void)state;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof(path), "%s/net.replay", dir);
  expect(sh("%s run net_echo --seed 3 --faults 'sh/net/*:0.05' --record %s", shsim, path), 0);
  expect(sh("grep -c ' draw 1 ' %s", path), 0);
  assert_true(atoi(out) > 10);
  expect(sh("%s replay %s", shsim, path), 0);
  expect_text("replay matches the recording");
}

/* ---- setup ------------------------------------------------------------------------- */

/* build/<cfg>/tests/test_sim_replay -> build/<cfg>/bin/shsim. */
static int setup(void **state) {
  (void)state;
  const char *base = getenv("TMPDIR");
  snprintf(dir, sizeof(dir), "%s/test_sim_replay-XXXXXX", base != NULL && base[0] ? base : "/tmp");
  return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return sh("rm -rf '%s'", dir) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  (void)argc;
  char guess[PATH_MAX + 16];
  const char *slash = strrchr(argv[0], '/');
  snprintf(guess, sizeof(guess), "%.*s/../bin/shsim", slash ? (int)(slash - argv[0]) : 1,
           slash ? argv[0] : ".");
  if (realpath(guess, shsim) == NULL || access(shsim, X_OK) != 0) {
    fprintf(stderr, "test_sim_replay: no shsim at %s (make build/<cfg>/bin/shsim)\n", guess);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_draws_replay),    cmocka_unit_test(test_shrink_values),
      cmocka_unit_test(test_shrink_wide_value),
      cmocka_unit_test(test_empty_replay),    cmocka_unit_test(test_divergence_named),
      cmocka_unit_test(test_refusals),        cmocka_unit_test(test_workload_shrinks),
      cmocka_unit_test(test_network_replays),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
