/*
 * End-to-end tests of `shsim explore`, run as a user runs it (shsim_run.h):
 *
 *   - on a racy scenario it stops at the first failure, and the replay file
 *     it names replays that failure exactly; the shrink command it prints
 *     (shrink --schedule) cuts it down;
 *   - it lists every sometimes-point of the binary, reached or not, each
 *     once, and reports how many were reached;
 *   - a campaign is a function of the binary and its command line: run
 *     twice, the same runs, corpus and points reached;
 *   - without --seeds it is a usage error;
 *   - SIGINT stops it with its report and no temporary file left; a
 *     failure's replay file is kept when TMPDIR is on another filesystem.
 *
 * The tests run this configuration's shsim, which has no edge coverage
 * (only `make explore`'s has): the corpus grows by sometimes-points only.
 */
#include <dirent.h>

#include "shsim_run.h"

#define RACE_RUNS "300"
#define RUNTIME_POINTS 7 /* SH_SOMETIMES in core/ (the scenarios may add more) */

/* tmp_dir/explore, made afresh. */
static void out_dir(char *path, size_t cap) {
  tmp_path("explore", path, cap);
  assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
}

/* Empties and removes tmp_dir/explore. */
static void remove_out_dir(const char *path) {
  DIR *d = opendir(path);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char f[PATH_MAX];
    assert_true(snprintf(f, sizeof(f), "%s/%s", path, e->d_name) < (int)sizeof(f));
    assert_int_equal(unlink(f), 0);
  }
  closedir(d);
  assert_int_equal(rmdir(path), 0);
}

/* The text after `prefix` on the first line that starts with it, up to the
 * end of the line. */
static void after(const char *text, const char *prefix, char *out, size_t cap) {
  char line[LINE_MAX_LEN];
  bool found = line_starting(text, prefix, line, sizeof(line));
  if (!found) fprintf(stderr, "no line '%s' in:\n%s", prefix, text);
  assert_true(found);
  snprintf(out, cap, "%s", line + strlen(prefix));
}

/* ---- a failure found, replayed and shrunk ----------------------------------------- */

/* The shrink command as printed, split at spaces (no word is quoted), with
 * --out FILE added: the words after the program's, in words[]. */
static void shrink_words(char *cmd, const char *out, const char **words, size_t cap) {
  size_t n = 0;
  char *save = NULL;
  for (char *w = strtok_r(cmd, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
    assert_true(n + 3 < cap);
    size_t len = strlen(w);
    /* A word the shell would unquote (a drawn fault spec: no spaces). */
    if (len >= 2 && w[0] == '\'' && w[len - 1] == '\'') {
      w[len - 1] = '\0';
      w++;
    }
    if (n++ > 0) words[n - 2] = w; /* not the program */
  }
  assert_true(n > 3 && strcmp(words[0], "shrink") == 0);
  words[n - 1] = "--out";
  words[n] = out;
  words[n + 1] = NULL;
}

static void test_explore_finds_race(void **state) {
  (void)state;
  char dir[PATH_MAX];
  out_dir(dir, sizeof(dir));
  const outcome *o =
      SHSIM("explore", "test_race", "--seeds", "1..1", "--runs", RACE_RUNS, "--out", dir);
  expect_status(o, 1);
  assert_non_null(strstr(o->out.text, "FAIL:invariant at run "));
  char replay[LINE_MAX_LEN], shrink[LINE_MAX_LEN], file[PATH_MAX], shrunk[PATH_MAX];
  after(o->out.text, "  replay: ", replay, sizeof(replay));
  after(o->out.text, "  shrink: ", shrink, sizeof(shrink));
  const char *sp = strstr(replay, " replay "); /* "PROG replay FILE" */
  assert_non_null(sp);
  snprintf(file, sizeof(file), "%s", sp + strlen(" replay "));
  assert_true(strncmp(file, dir, strlen(dir)) == 0);

  o = SHSIM("replay", file);
  expect_status(o, 1);
  assert_non_null(strstr(o->out.text, "replay matches the recording"));

  tmp_path("shrunk.replay", shrunk, sizeof(shrunk));
  const char *words[ARGS_MAX + 4];
  shrink_words(shrink, shrunk, words, sizeof(words) / sizeof(words[0]));
  o = run_shsim(words);
  expect_status(o, 0);
  o = SHSIM("replay", shrunk);
  expect_status(o, 1);
  assert_non_null(strstr(o->out.text, "replay matches the recording"));
  assert_int_equal(unlink(shrunk), 0);
  remove_out_dir(dir);
}

/* ---- the sometimes-points ----------------------------------------------------------- */

static void test_explore_lists_points(void **state) {
  (void)state;
  /* Failures' replay files go to a directory of the test's (a mutant's
   * build fails here: never into the directory the tests run from). */
  char dir[PATH_MAX];
  out_dir(dir, sizeof(dir));
  const outcome *o = SHSIM("explore", "stealing", "--seeds", "1..2", "--runs", "12", "--out", dir);
  expect_status(o, 0);
  char counts[LINE_MAX_LEN];
  after(o->out.text, "sometimes-points: ", counts, sizeof(counts));
  unsigned reached = 0, all = 0;
  assert_int_equal(sscanf(counts, "%u of %u reached", &reached, &all), 2);
  assert_true(all >= RUNTIME_POINTS && reached <= all);
  assert_int_equal(lines_starting(o->out.text, "  reached (run "), reached);
  assert_int_equal(lines_starting(o->out.text, "  NEVER reached  "), all - reached);
  /* stealing steals: its point is reached. */
  const char *stolen = strstr(o->out.text, "loop: a house stolen");
  assert_non_null(stolen);
  while (stolen > o->out.text && stolen[-1] != '\n') stolen--;
  assert_true(strncmp(stolen, "  reached (run ", strlen("  reached (run ")) == 0);
  assert_non_null(strstr(o->out.text, "edges: none recorded"));
  remove_out_dir(dir);
}

/* ---- the same campaign twice -------------------------------------------------------- */

/* stdout without its first line (it has the time taken). */
static char *report_text(const outcome *o) {
  const char *nl = strchr(o->out.text, '\n');
  assert_non_null(nl);
  char *copy = strdup(nl + 1);
  assert_non_null(copy);
  return copy;
}

static void test_explore_deterministic(void **state) {
  (void)state;
  char dir[PATH_MAX];
  out_dir(dir, sizeof(dir));
  const outcome *o = SHSIM("explore", "ask_reply", "--seeds", "3..4", "--runs", "40", "--out", dir);
  expect_status(o, 0);
  char first_line[LINE_MAX_LEN];
  after(o->out.text, "explore: ", first_line, sizeof(first_line));
  assert_non_null(strstr(first_line, "40 runs ("));
  char *a = report_text(o);
  o = SHSIM("explore", "ask_reply", "--seeds", "3..4", "--runs", "40", "--out", dir);
  expect_status(o, 0);
  char *b = report_text(o);
  assert_string_equal(a, b);
  free(a);
  free(b);
  expect_status(SHSIM("explore", "ask_reply", "--runs", "4"), 2); /* no --seeds */
  remove_out_dir(dir);
}

/* ---- a signal, and TMPDIR on another filesystem ---------------------------------- */

/* shsim ARGS with TMPDIR=tmpdir, SIGINT after delay_ms (0: none): its exit
 * status, its stdout in out. */
static int spawn(const char *tmpdir, unsigned delay_ms, char *out, size_t cap,
                 const char *const *args) {
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setenv("TMPDIR", tmpdir, 1);
    dup2(fd[1], STDOUT_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    execv(shsim_path, (char *const *)args);
    _exit(127);
  }
  close(fd[1]);
  if (delay_ms != 0) {
    usleep(delay_ms * 1000u);
    kill(pid, SIGINT);
  }
  size_t len = 0;
  for (ssize_t r; len + 1 < cap && (r = read(fd[0], out + len, cap - 1 - len)) != 0;)
    if (r > 0) len += (size_t)r;
    else assert_int_equal(errno, EINTR);
  out[len] = '\0';
  close(fd[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0) assert_int_equal(errno, EINTR);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Entries of dir whose name begins with prefix. */
static unsigned entries(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  unsigned n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

/* SIGINT stops a campaign between batches: its report, status 130, and
 * none of its temporary files left in TMPDIR. */
static void test_explore_sigint(void **state) {
  (void)state;
  static char out[OUT_CAP];
  char dir[PATH_MAX];
  out_dir(dir, sizeof(dir));
  const char *args[] = {"shsim", "explore", "all", "--seeds", "1..1", "--runs", "1000000",
                        "--out", dir, NULL};
  int status = spawn(tmp_dir, 1500, out, sizeof(out), args);
  assert_int_equal(status, 128 + SIGINT);
  assert_non_null(strstr(out, "  stopped by SIGINT"));
  assert_non_null(strstr(out, "sometimes-points: "));
  assert_int_equal(entries(tmp_dir, "shsim-explore-"), 0);
  remove_out_dir(dir);
}

/* The failure's replay file is kept when TMPDIR is on another filesystem
 * than --out (a rename cannot move it there). */
static void test_explore_other_filesystem(void **state) {
  (void)state;
  struct stat shm, tmp;
  if (stat("/dev/shm", &shm) != 0 || stat(tmp_dir, &tmp) != 0 || shm.st_dev == tmp.st_dev ||
      access("/dev/shm", W_OK) != 0)
    skip(); /* no second filesystem to try */
  char dir[PATH_MAX];
  out_dir(dir, sizeof(dir));
  static char out[OUT_CAP];
  const char *args[] = {"shsim", "explore", "test_race", "--seeds", "1..1", "--runs",
                        RACE_RUNS, "--out", dir, NULL};
  assert_int_equal(spawn("/dev/shm", 0, out, sizeof(out), args), 1);
  assert_non_null(strstr(out, "  replay: "));
  assert_int_equal(entries(dir, "explore-test_race-"), 1);
  remove_out_dir(dir);
}

int main(int argc, char **argv) {
  (void)argc;
  alarm(WATCHDOG_S);
  if (find_shsim(argv[0]) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_explore_finds_race),
      cmocka_unit_test(test_explore_lists_points),
      cmocka_unit_test(test_explore_deterministic),
      cmocka_unit_test(test_explore_sigint),
      cmocka_unit_test(test_explore_other_filesystem),
  };
  return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
