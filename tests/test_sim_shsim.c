/*
 * End-to-end tests of the shsim command, run as a user runs it
 * (shsim_run.h):
 *
 *   - `run`: the result line's exact format, the same line on every run of
 *     a seed (also with a trace being written), other hashes under the
 *     other strategies;
 *   - the failure classification, one hidden test scenario per kind:
 *     deadlock, livelock, invariant, assert and crash (a sanitizer build
 *     reports the crash first: sanitizer), and the misuses: a real sleep
 *     and a real thread (blocking), a busy loop (hang);
 *   - `list` hides the test scenarios, `list --all` shows them;
 *   - `sweep`: its table row, its exit status, and for a racy scenario the
 *     replay and shrink commands of each failure;
 *   - `shrink` of a failing seed writes a replay file whose replay (`shsim
 *     replay`, and `run --schedule`) fails the same way, run after run;
 *   - `run --record` writes a replay file that `shsim replay` runs again to
 *     the same result and hash, also for a run that asserts, and a replay
 *     whose hash is not the recorded one says it diverged;
 *   - `--check-determinism` names the first decision where the two runs of
 *     a deliberately nondeterministic scenario part;
 *   - usage errors exit 2.
 * `fuzz` and `merge` are test_sim_shsim_fuzz.c's.
 */
#include "shsim_run.h"

/* `shsim run NAME --seed SEED [extra...]` (extra NULL-terminated, or NULL):
 * its result line (and its text), and its outcome. */
static const outcome *run_line(const char *name, const char *seed, const char *const *extra, int want_status,
                     result_line *r, char *line, size_t cap) {
  const char *args[ARGS_MAX + 1] = {"run", name, "--seed", seed};
  size_t n = 4;
  for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
    assert_true(n < ARGS_MAX);
    args[n++] = extra[i];
  }
  args[n] = NULL;
  const outcome *o = run_shsim(args);
  expect_result(o, want_status, r, line, cap);
  assert_string_equal(r->scenario, name);
  assert_int_equal(r->seed, strtoull(seed, NULL, 10));
  return o;
}

/* ---- run ------------------------------------------------------------------------ */

static void test_run_line(void **state) {
  (void)state;
  result_line r[2];
  char line[2][LINE_MAX_LEN];
  for (int i = 0; i < 2; i++) run_line("ask_reply", "1", NULL, 0, &r[i], line[i], LINE_MAX_LEN);
  assert_string_equal(r[0].result, "ok");
  assert_true(r[0].steps > 0);
  assert_true(r[0].vtime_ns > 0);
  assert_true(r[0].msgs > 0);
  /* A seed is a run: the same line every time. */
  assert_string_equal(line[0], line[1]);
}

/* The strategy is part of the run: each gives its own schedule. */
static void test_strategies_differ(void **state) {
  (void)state;
  static const char *const random_[] = {"--strategy", "random", NULL};
  static const char *const pct[] = {"--strategy", "pct", NULL};
  static const char *const none[] = {"--strategy", "none", NULL};
  result_line def, rnd, other;
  char line[LINE_MAX_LEN], rnd_line[LINE_MAX_LEN];
  run_line("ask_reply", "1", NULL, 0, &def, line, sizeof(line));
  run_line("ask_reply", "1", random_, 0, &rnd, rnd_line, sizeof(rnd_line));
  assert_string_equal(line, rnd_line); /* random is the default */
  const char *const *others[] = {pct, none};
  for (size_t i = 0; i < 2; i++) {
    run_line("ask_reply", "1", others[i], 0, &other, line, sizeof(line));
    assert_string_equal(other.result, "ok");
    if (other.hash == rnd.hash) fprintf(stderr, "%s: the hash of random\n", others[i][1]);
    assert_true(other.hash != rnd.hash);
  }
}

/* A trace observes the run: same result line, and the file is a trace. */
static void test_run_trace(void **state) {
  (void)state;
  char path[PATH_MAX];
  tmp_path("trace.json", path, sizeof(path));
  const char *const extra[] = {"--trace", path, NULL};
  result_line plain, traced;
  char line[LINE_MAX_LEN], traced_line[LINE_MAX_LEN];
  run_line("ask_reply", "1", NULL, 0, &plain, line, sizeof(line));
  run_line("ask_reply", "1", extra, 0, &traced, traced_line, sizeof(traced_line));
  assert_string_equal(line, traced_line);
  static const char head[] = "{\"traceEvents\":[";
  char got[sizeof(head)] = "";
  FILE *f = fopen(path, "re");
  assert_non_null(f);
  size_t n = fread(got, 1, sizeof(head) - 1, f);
  fclose(f);
  assert_int_equal(n, sizeof(head) - 1);
  assert_string_equal(got, head);
  assert_int_equal(unlink(path), 0);
}

/* ---- failure classification ----------------------------------------------------- */

typedef struct expected_failure {
  const char *scenario;
  const char *result;
  const char *or_result; /* also right, or NULL */
} expected_failure;

static void test_failure_kinds(void **state) {
  (void)state;
  const expected_failure cases[] = {
      {"test_deadlock", "FAIL:deadlock", NULL},
      {"test_livelock", "FAIL:livelock", NULL},
      {"test_invariant", "FAIL:invariant", NULL},
      {"test_assert", "FAIL:assert", NULL},
      /* A sanitizer catches the bad read before the signal would come (its
       * report is the better one). */
      {"test_crash", "FAIL:crash", UNDER_ASAN ? "FAIL:sanitizer" : NULL},
      {"test_misuse_sleep", "FAIL:blocking", NULL},
      {"test_misuse_thread", "FAIL:blocking", NULL},
      {"test_misuse_spin", "FAIL:hang", NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const expected_failure *c = &cases[i];
    result_line r;
    char line[LINE_MAX_LEN];
    const outcome *o = run_line(c->scenario, "1", NULL, 1, &r, line, sizeof(line));
    bool right = strcmp(r.result, c->result) == 0 ||
                 (c->or_result != NULL && strcmp(r.result, c->or_result) == 0);
    if (!right) fprintf(stderr, "%s: %s, want %s\n", c->scenario, r.result, c->result);
    assert_true(right);
    /* The failure's detail goes to stderr, under the same name. */
    assert_non_null(strstr(o->err.text, r.result));
  }
}

/* ---- list ----------------------------------------------------------------------- */

static void test_list(void **state) {
  (void)state;
  char line[LINE_MAX_LEN];
  const outcome *o = SHSIM("list");
  expect_status(o, 0);
  assert_true(line_starting(o->out.text, "ask_reply ", line, sizeof(line)));
  assert_false(line_starting(o->out.text, "test_", line, sizeof(line)));
  o = SHSIM("list", "--all");
  expect_status(o, 0);
  static const char *const hidden[] = {"ask_reply ", "test_deadlock ", "test_livelock ",
                                       "test_race ", "test_assert ", "test_crash ",
                                       "test_invariant ", "test_misuse_spin "};
  for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
    assert_true(line_starting(o->out.text, hidden[i], line, sizeof(line)));
}

/* ---- sweep and shrink ----------------------------------------------------------- */

/* The sweep table's row of one scenario: its seeds and failed runs. */
static void table_row(const outcome *o, const char *name, unsigned long long *seeds,
                      unsigned long long *failed) {
  char prefix[80], line[LINE_MAX_LEN], got[64];
  snprintf(prefix, sizeof(prefix), "%s ", name);
  bool found = line_starting(o->out.text, prefix, line, sizeof(line));
  if (!found) fprintf(stderr, "no table row for %s in:\n%s", name, o->out.text);
  assert_true(found);
  assert_int_equal(sscanf(line, "%63s %llu %llu", got, seeds, failed), 3);
  assert_string_equal(got, name);
}

static void test_sweep_passes(void **state) {
  (void)state;
  const outcome *o = SHSIM("sweep", "ask_reply", "--seeds", "1..4", "--jobs", "2");
  expect_status(o, 0);
  unsigned long long seeds, failed;
  table_row(o, "ask_reply", &seeds, &failed);
  assert_int_equal(seeds, 4);
  assert_int_equal(failed, 0);
  assert_null(strstr(o->out.text, "shsim run "));
}

/* A racy scenario: some seeds fail; each failure comes with the commands
 * that replay and shrink it. The first failing seed, to *seed. */
static void sweep_race(uint64_t *seed) {
  static const char replay[] = "shsim run test_race --seed ";
  const outcome *o = SHSIM("sweep", "test_race", "--seeds", "1..20");
  expect_status(o, 1);
  unsigned long long seeds, failed;
  table_row(o, "test_race", &seeds, &failed);
  assert_int_equal(seeds, 20);
  assert_true(failed >= 1);
  assert_int_equal(lines_starting(o->out.text, replay), failed);
  assert_non_null(strstr(o->out.text, "shsim shrink test_race --seed "));
  char line[LINE_MAX_LEN];
  assert_true(line_starting(o->out.text, replay, line, sizeof(line)));
  const char *p = line + strlen(replay);
  assert_true(take_dec(&p, seed));
  assert_true(*seed >= 1 && *seed <= 20);
}

/* The shrunk schedule replays the failure, the same run every time. */
static void replay_schedule(const char *seed, const char *path) {
  const char *const extra[] = {"--strategy", "random", "--schedule", path, NULL};
  result_line r[2];
  char line[2][LINE_MAX_LEN];
  for (int i = 0; i < 2; i++) {
    run_line("test_race", seed, extra, 1, &r[i], line[i], LINE_MAX_LEN);
    assert_string_equal(r[i].result, "FAIL:invariant");
  }
  assert_string_equal(line[0], line[1]);
}

/* `shsim replay path`: its run line ends with result `want`, and the
 * replay matches the recording (or not: `matches` false, exit status 3). */
static const outcome *replay_file(const char *path, const char *want, bool matches) {
  const outcome *o = SHSIM("replay", path);
  expect_status(o, !matches ? 3 : strcmp(want, "ok") == 0 ? 0 : 1);
  char line[LINE_MAX_LEN];
  result_line r;
  assert_true(line_starting(o->out.text, "scenario=", line, sizeof(line)));
  assert_true(parse_result_line(line, &r));
  assert_string_equal(r.result, want);
  const char *verdict = matches ? "replay matches the recording (hash 0x" : "replay DIVERGED: ";
  if (!line_starting(o->out.text, verdict, line, sizeof(line)))
    fprintf(stderr, "no '%s' in:\n%s", verdict, o->out.text);
  assert_true(line_starting(o->out.text, verdict, line, sizeof(line)));
  return o;
}

static void test_sweep_shrink_replay(void **state) {
  (void)state;
  uint64_t s;
  sweep_race(&s);
  char seed[24], path[PATH_MAX];
  snprintf(seed, sizeof(seed), "%llu", (unsigned long long)s);
  tmp_path("shrunk.replay", path, sizeof(path));

  const outcome *o = SHSIM("shrink", "test_race", "--seed", seed, "--out", path);
  expect_status(o, 0);
  char want[PATH_MAX + 128], line[LINE_MAX_LEN];
  int n = snprintf(want, sizeof(want), "replay: shsim replay %s", path);
  assert_true(n > 0 && (size_t)n < sizeof(want));
  assert_true(line_starting(o->out.text, "replay: ", line, sizeof(line)));
  assert_string_equal(line, want);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(st.st_size > 0);

  for (int i = 0; i < 2; i++) replay_file(path, "FAIL:invariant", true);
  replay_schedule(seed, path);
  assert_int_equal(unlink(path), 0);
}

/* A recorded run replays to its result and hash: one that passes, one that
 * asserts (recorded as the process dies). A file whose hash is not the
 * run's says that the replay diverged. */
static void test_record_replay(void **state) {
  (void)state;
  char path[PATH_MAX];
  tmp_path("run.replay", path, sizeof(path));
  const outcome *o = SHSIM("run", "ask_reply", "--seed", "3", "--strategy", "pct", "--record", path);
  expect_status(o, 0);
  replay_file(path, "ok", true);
  o = SHSIM("run", "test_assert", "--seed", "1", "--record", path);
  expect_status(o, 1);
  replay_file(path, "FAIL:assert", true);
  FILE *f = fopen(path, "a");
  assert_non_null(f);
  fputs("hash=0x0000000000000001\n", f); /* a later key wins */
  assert_int_equal(fclose(f), 0);
  replay_file(path, "FAIL:assert", false);
  assert_int_equal(unlink(path), 0);
}

/* The determinism check names where the two runs part: the scenario keeps
 * state across runs in one process. Under random the first decision that
 * differs; under none the decisions agree longer and the hashes part first
 * (either way a step and a scheduling point are named). */
static void check_names_divergence(const char *strategy) {
  result_line r;
  char line[LINE_MAX_LEN];
  const char *const extra[] = {"--strategy", strategy, "--check-determinism", NULL};
  const outcome *o = run_line("test_nondeterministic", "2", extra, 1, &r, line, sizeof(line));
  assert_string_equal(r.result, "FAIL:nondeterministic");
  const char *d = strstr(o->err.text, "FAIL:nondeterministic: ");
  bool named = d != NULL && strstr(d, " at ") != NULL &&
               (strstr(d, " differs: step ") != NULL || strstr(d, " parts between ") != NULL);
  if (!named) fprintf(stderr, "stderr:\n%s", o->err.text);
  assert_true(named);
}

static void test_check_determinism(void **state) {
  (void)state;
  check_names_divergence("random");
  check_names_divergence("none");
  /* Without the check, the scenario passes: one run is not two. */
  result_line r;
  char line[LINE_MAX_LEN];
  run_line("test_nondeterministic", "1", NULL, 0, &r, line, sizeof(line));
  assert_string_equal(r.result, "ok");
}

/* ---- usage errors --------------------------------------------------------------- */

/* Exit status 2, something on stderr, no result line. */
static void expect_usage_error(const outcome *o) {
  expect_status(o, 2);
  assert_true(o->err.len > 0);
  assert_null(strstr(o->out.text, "scenario="));
}

/* --hang-after bounds a run's real time without a step; the scenario's own
 * bound (1 s) stays where it is lower; 0 turns the watch off, and then only
 * --timeout-s ends the busy loop, which kills the run. */
static void test_hang_after(void **state) {
  (void)state;
  result_line r;
  char line[LINE_MAX_LEN];
  const char *const longer[] = {"--hang-after", "5", NULL};
  const outcome *o = run_line("test_misuse_spin", "1", longer, 1, &r, line, sizeof(line));
  assert_string_equal(r.result, "FAIL:hang");
  assert_non_null(strstr(o->err.text, "no scheduling point for 1000 ms"));
  const char *const off[] = {"--hang-after", "0", "--timeout-s", "2", NULL};
  o = run_line("test_misuse_spin", "1", off, 1, &r, line, sizeof(line));
  assert_string_equal(r.result, "FAIL:hang");
  assert_null(strstr(o->err.text, "no scheduling point"));
  assert_non_null(strstr(o->err.text, "killed"));
  expect_usage_error(SHSIM("run", "test_misuse_spin", "--seed", "1", "--hang-after", "x"));
}

static void test_usage(void **state) {
  (void)state;
  expect_usage_error(SHSIM("run", "ask_reply"));           /* no --seed */
  expect_usage_error(SHSIM("bogus"));                      /* no such command */
  expect_usage_error(SHSIM("run", "nosuch", "--seed", "1")); /* no such scenario */
  expect_usage_error(run_shsim((const char *const[]){NULL})); /* no command */
  const outcome *o = SHSIM("--help");
  expect_status(o, 0);
  assert_non_null(strstr(o->out.text, "usage: shsim"));
}

int main(int argc, char **argv) {
  (void)argc;
  alarm(WATCHDOG_S);
  if (find_shsim(argv[0]) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_line),
      cmocka_unit_test(test_strategies_differ),
      cmocka_unit_test(test_run_trace),
      cmocka_unit_test(test_failure_kinds),
      cmocka_unit_test(test_hang_after),
      cmocka_unit_test(test_list),
      cmocka_unit_test(test_sweep_passes),
      cmocka_unit_test(test_sweep_shrink_replay),
      cmocka_unit_test(test_record_replay),
      cmocka_unit_test(test_check_determinism),
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
