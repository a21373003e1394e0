/*
 * End-to-end tests of shsim's `fuzz` and `merge`, run as a user runs them
 * (shsim_run.h): a seed's drawn options replay the same run, the shards of
 * a range run each seed once, a racy scenario's failures come grouped with
 * a replay command each, a bug only a fault reaches is found, a time
 * budget stops it, and `merge` of its JSON
 * summaries adds them up.
 */
#include "shsim_run.h"

/* ---- fuzz and merge ------------------------------------------------------------- */

/* The whole text of a file (malloc'd). */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "re");
  assert_non_null(f);
  char *text = calloc(1, OUT_CAP + 1);
  assert_non_null(text);
  size_t n = fread(text, 1, OUT_CAP, f);
  assert_true(n < OUT_CAP);
  fclose(f);
  return text;
}

/* The seeds of the failures of a JSON summary, counted per seed in hits[seed]. */
static size_t json_seeds(const char *path, unsigned *hits, size_t nhits) {
  char *text = read_text(path);
  static const char key[] = "\"seed\": ";
  /* The list of failures comes last (a group names its lowest seed too). */
  const char *list = strstr(text, "\"failures\": [");
  assert_non_null(list);
  size_t n = 0;
  for (const char *p = strstr(list, key); p != NULL; p = strstr(p, key)) {
    p += strlen(key);
    uint64_t seed;
    bool ok = take_dec(&p, &seed) && seed < nhits;
    if (ok) hits[seed]++;
    n++;
    if (!ok) free(text);
    assert_true(ok);
  }
  free(text);
  return n;
}

/* `fuzz NAME --seeds SEEDS --shard SHARD --json tmp/json_name` on 2 jobs;
 * its exit status, 0 or 1 (some seeds failed). */
static const outcome *fuzz_json(const char *name, const char *seeds, const char *shard,
                                const char *json_name) {
  char path[PATH_MAX];
  tmp_path(json_name, path, sizeof(path));
  const outcome *o =
      SHSIM("fuzz", name, "--seeds", seeds, "--jobs", "2", "--shard", shard, "--json", path);
  expect_status(o, o->status == 1 ? 1 : 0);
  return o;
}

/* "NAME: R runs, F failed, ..." of a fuzz or merge. */
static void fuzz_totals(const outcome *o, const char *name, unsigned long long *runs,
                        unsigned long long *failed) {
  char prefix[80], line[LINE_MAX_LEN];
  snprintf(prefix, sizeof(prefix), "%s: ", name);
  bool found = line_starting(o->out.text, prefix, line, sizeof(line));
  if (!found) fprintf(stderr, "no totals for %s in:\n%s", name, o->out.text);
  assert_true(found);
  assert_int_equal(sscanf(line + strlen(prefix), "%llu runs, %llu failed", runs, failed), 2);
}

/* Each seed draws its options: the command a failure prints replays it, the
 * same run every time; and every seed of a fuzz retraces itself. */
static void test_fuzz_replay(void **state) {
  (void)state;
  const outcome *o = SHSIM("fuzz", "test_race", "--seeds", "1..100", "--jobs", "2");
  expect_status(o, 1);
  char line[LINE_MAX_LEN];
  assert_true(line_starting(o->out.text, "    shsim run test_race --seed ", line, sizeof(line)));
  assert_non_null(strstr(line, " --workers "));
  /* Its words, after "shsim", are the arguments of the replay. */
  const char *args[ARGS_MAX + 1];
  size_t n = 0;
  char *save = NULL;
  strtok_r(line, " ", &save);
  for (char *w = strtok_r(NULL, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
    assert_true(n < ARGS_MAX);
    /* A seed that drew network weather prints its fault spec quoted, as
     * a shell wants it (it has no blank): unquote it as the shell would. */
    size_t len = strlen(w);
    if (len >= 2 && w[0] == '\'' && w[len - 1] == '\'') {
      w[len - 1] = '\0';
      w++;
    }
    args[n++] = w;
  }
  args[n] = NULL;
  result_line r[2];
  char res[2][LINE_MAX_LEN];
  for (int i = 0; i < 2; i++) {
    expect_result(run_shsim(args), 1, &r[i], res[i], LINE_MAX_LEN);
    assert_string_equal(r[i].result, "FAIL:invariant");
  }
  assert_string_equal(res[0], res[1]);
  o = SHSIM("fuzz", "ask_reply", "--seeds", "1..12", "--jobs", "2", "--check-determinism");
  expect_status(o, 0);
}

/* The N shards of a range run each of its seeds once: a scenario that fails
 * on every seed lists each seed of its shard. */
static void test_fuzz_shards(void **state) {
  (void)state;
  static const char *const shards[] = {"1/3", "2/3", "3/3"};
  static const char *const files[] = {"fuzz1.json", "fuzz2.json", "fuzz3.json"};
  unsigned hits[32] = {0};
  for (unsigned i = 0; i < 3; i++) {
    unsigned mine[32] = {0};
    const outcome *o = fuzz_json("test_invariant", "5..21", shards[i], files[i]);
    unsigned long long runs, failed;
    fuzz_totals(o, "test_invariant", &runs, &failed);
    assert_int_equal(runs, failed);
    char path[PATH_MAX];
    tmp_path(files[i], path, sizeof(path));
    assert_int_equal(json_seeds(path, mine, 32), runs);
    for (unsigned s = 0; s < 32; s++) {
      if (mine[s] != 0) assert_int_equal((s - 5) % 3, i);
      hits[s] += mine[s];
    }
    assert_int_equal(unlink(path), 0);
  }
  for (unsigned s = 0; s < 32; s++) assert_int_equal(hits[s], s >= 5 && s <= 21 ? 1 : 0);
}

/* The counts of the failure groups of a fuzz or merge, added up; each group
 * comes with a replay command. */
static unsigned long long group_counts(const outcome *o, const char *name) {
  char mark[80], replay[96];
  snprintf(mark, sizeof(mark), " x %s FAIL:", name);
  snprintf(replay, sizeof(replay), "    shsim run %s --seed ", name);
  unsigned long long sum = 0;
  size_t groups = 0;
  for (const char *p = strstr(o->out.text, mark); p != NULL; p = strstr(p + 1, mark)) {
    const char *start = p;
    while (start > o->out.text && start[-1] != '\n') start--;
    sum += strtoull(start, NULL, 10);
    groups++;
  }
  assert_int_equal(lines_starting(o->out.text, replay), groups);
  return sum;
}

/* A racy hidden scenario: fuzz finds it and groups its failures. */
static void test_fuzz_groups(void **state) {
  (void)state;
  const outcome *o = SHSIM("fuzz", "test_race", "--seeds", "1..100", "--jobs", "2");
  expect_status(o, 1);
  unsigned long long runs, failed;
  fuzz_totals(o, "test_race", &runs, &failed);
  assert_int_equal(runs, 100);
  assert_true(failed >= 1);
  assert_int_equal(group_counts(o, "test_race"), failed);
}

/* A bug on an error path only a fault takes (test_fault_path): no run
 * without faults finds it, a fuzz campaign does, its seeds drawing the
 * runtime's fault points, and the command it prints names them. */
static void test_fuzz_faults(void **state) {
  (void)state;
  const outcome *o = SHSIM("sweep", "test_fault_path", "--seeds", "1..200", "--jobs", "2");
  expect_status(o, 0);
  o = SHSIM("fuzz", "test_fault_path", "--seeds", "1..200", "--jobs", "2");
  expect_status(o, 1);
  unsigned long long runs, failed;
  fuzz_totals(o, "test_fault_path", &runs, &failed);
  assert_int_equal(runs, 200);
  assert_true(failed >= 1 && failed < 100);
  assert_non_null(strstr(o->out.text, "FAIL:invariant"));
  assert_non_null(strstr(o->out.text, "--faults 'sh/*:"));
}

/* No seed starts past the budget: far fewer runs than the range. */
static void test_fuzz_budget(void **state) {
  (void)state;
  const outcome *o = SHSIM("fuzz", "ask_reply", "--seeds", "1..1000000", "--jobs", "2",
                           "--time-budget", "1");
  expect_status(o, 0);
  unsigned long long runs, failed;
  fuzz_totals(o, "ask_reply", &runs, &failed);
  assert_true(runs >= 1 && runs < 1000000);
  assert_non_null(strstr(o->out.text, "time budget spent: "));
}

/* Two shards' summaries merged: the whole range's runs and failures. */
static void test_fuzz_merge(void **state) {
  (void)state;
  unsigned long long runs, failed, merged_runs, merged_failed;
  fuzz_totals(SHSIM("fuzz", "test_race", "--seeds", "1..60", "--jobs", "2"), "test_race", &runs,
              &failed);
  fuzz_json("test_race", "1..60", "1/2", "fuzz1.json");
  fuzz_json("test_race", "1..60", "2/2", "fuzz2.json");
  char p1[PATH_MAX], p2[PATH_MAX];
  tmp_path("fuzz1.json", p1, sizeof(p1));
  tmp_path("fuzz2.json", p2, sizeof(p2));
  const outcome *o = SHSIM("merge", p1, p2);
  expect_status(o, failed != 0 ? 1 : 0);
  assert_non_null(strstr(o->out.text, "merged 2 summaries"));
  fuzz_totals(o, "test_race", &merged_runs, &merged_failed);
  assert_int_equal(merged_runs, runs);
  assert_int_equal(merged_failed, failed);
  assert_int_equal(group_counts(o, "test_race"), failed);
  expect_status(SHSIM("merge", p1, "nosuch.json"), 2);
  assert_int_equal(unlink(p1), 0);
  assert_int_equal(unlink(p2), 0);
}

int main(int argc, char **argv) {
  (void)argc;
  alarm(WATCHDOG_S);
  if (find_shsim(argv[0]) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fuzz_replay),
      cmocka_unit_test(test_fuzz_shards),
      cmocka_unit_test(test_fuzz_groups),
      cmocka_unit_test(test_fuzz_faults),
      cmocka_unit_test(test_fuzz_budget),
      cmocka_unit_test(test_fuzz_merge),
  };
  return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
