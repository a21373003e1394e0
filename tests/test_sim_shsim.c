/*
 * End-to-end tests of the shsim command: the binary of this test's own
 * configuration (build/<cfg>/bin/shsim, found from argv[0]) is run as a
 * user runs it, its stdout, stderr and exit status captured.
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
 *   - `fuzz`: a seed's drawn options replay the same run, the shards of a
 *     range run each seed once, a racy scenario's failures come grouped
 *     with a replay command each, a time budget stops it, and `merge` of
 *     its JSON summaries adds them up;
 *   - usage errors exit 2.
 *
 * No shell: fork and execv, stdout and stderr through pipes. A watchdog
 * (alarm) fails a hang, and a shsim left behind by a dying test is killed
 * (PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define WATCHDOG_S 120
#define ARGS_MAX 16        /* arguments of one shsim command */
#define OUT_CAP (1u << 16) /* bytes kept of each stream; more fails the test */
#define LINE_MAX_LEN 512

/* The shsim under test, and the directory for the files it writes. */
static char shsim_path[PATH_MAX];
static char tmp_dir[PATH_MAX];
/* The files the tests have shsim write in tmp_dir (removed at the end). */
static const char *const tmp_files[] = {"shrunk.replay", "run.replay", "trace.json", "fuzz1.json", "fuzz2.json",
                                       "fuzz3.json"};

/* ---- running shsim -------------------------------------------------------------- */

typedef struct stream {
  int fd; /* read end; -1 at EOF */
  size_t len;
  bool truncated;
  char text[OUT_CAP + 1]; /* NUL-terminated */
} stream;

typedef struct outcome {
  int status; /* the exit status, or 128 + the signal that killed it */
  stream out, err;
} outcome;

/* Reads what is there; the stream closes at EOF or on an error. */
static void stream_read(stream *s) {
  char buf[4096];
  ssize_t n = read(s->fd, buf, sizeof(buf));
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    close(s->fd);
    s->fd = -1;
    return;
  }
  size_t keep = (size_t)n;
  if (keep > OUT_CAP - s->len) {
    keep = OUT_CAP - s->len;
    s->truncated = true;
  }
  memcpy(s->text + s->len, buf, keep);
  s->len += keep;
  s->text[s->len] = '\0';
}

/* Until both streams are at EOF: the child has exited or closed them. The
 * watchdog bounds the wait. */
static void drain(outcome *o) {
  while (o->out.fd >= 0 || o->err.fd >= 0) {
    stream *ss[2] = {&o->out, &o->err};
    struct pollfd pfd[2];
    for (int i = 0; i < 2; i++) pfd[i] = (struct pollfd){.fd = ss[i]->fd, .events = POLLIN};
    if (poll(pfd, 2, -1) < 0) {
      assert_int_equal(errno, EINTR);
      continue;
    }
    for (int i = 0; i < 2; i++)
      if (pfd[i].revents != 0) stream_read(ss[i]);
  }
}

__attribute__((noreturn)) static void child_exec(char **argv, int out_w, int err_w) {
  /* If the test dies (its watchdog), shsim must not live on. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0) _exit(126);
  execv(shsim_path, argv);
  _exit(127);
}

/* The outcome of the last command. It lives until the next command (or
 * the end of the tests), so that a failed assertion, which leaves the test
 * at once, leaks nothing. */
static outcome *last_outcome;

/* Runs shsim with args (NULL-terminated); its outcome, valid until the next. */
static const outcome *run_shsim(const char *const *args) {
  /* argv[0] is what shsim prints in the commands it suggests. */
  char *argv[ARGS_MAX + 2] = {"shsim"};
  size_t n = 1;
  for (; args[n - 1] != NULL; n++) {
    assert_true(n <= ARGS_MAX);
    argv[n] = (char *)args[n - 1];
  }
  argv[n] = NULL;

  free(last_outcome);
  outcome *o = last_outcome = calloc(1, sizeof(*o));
  assert_non_null(o);
  int out[2], err[2];
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  assert_int_equal(pipe2(err, O_CLOEXEC), 0);
  fflush(NULL); /* the child must not write the test's buffered output again */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) child_exec(argv, out[1], err[1]);
  close(out[1]);
  close(err[1]);
  o->out.fd = out[0];
  o->err.fd = err[0];
  drain(o);
  int status;
  while (waitpid(pid, &status, 0) < 0) assert_int_equal(errno, EINTR);
  o->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  assert_false(o->out.truncated);
  assert_false(o->err.truncated);
  return o;
}

/* SHSIM("run", "ask_reply", ...): run_shsim with those arguments. */
#define SHSIM(...) run_shsim((const char *const[]){__VA_ARGS__, NULL})

/* The exit status must be `want`; if not, show what shsim said. */
static void expect_status(const outcome *o, int want) {
  if (o->status != want)
    fprintf(stderr, "shsim exited %d, want %d\n--- stdout:\n%s--- stderr:\n%s---\n", o->status,
            want, o->out.text, o->err.text);
  assert_int_equal(o->status, want);
}

/* ---- lines of output ------------------------------------------------------------ */

/* The last line of text (without its newline); false if there is none. */
static bool last_line(const char *text, char *line, size_t cap) {
  size_t end = strlen(text);
  if (end > 0 && text[end - 1] == '\n') end--;
  if (end == 0) return false;
  size_t start = end;
  while (start > 0 && text[start - 1] != '\n') start--;
  if (end - start >= cap) return false;
  memcpy(line, text + start, end - start);
  line[end - start] = '\0';
  return true;
}

/* The first line of text that starts with prefix, to line; false if none. */
static bool line_starting(const char *text, const char *prefix, char *line, size_t cap) {
  size_t plen = strlen(prefix);
  for (const char *p = text; *p != '\0';) {
    size_t len = strcspn(p, "\n");
    if (len >= plen && strncmp(p, prefix, plen) == 0) {
      if (len >= cap) return false;
      memcpy(line, p, len);
      line[len] = '\0';
      return true;
    }
    p += len;
    if (*p == '\n') p++;
  }
  return false;
}

static size_t lines_starting(const char *text, const char *prefix) {
  size_t n = 0, plen = strlen(prefix);
  for (const char *p = text; *p != '\0';) {
    size_t len = strcspn(p, "\n");
    if (len >= plen && strncmp(p, prefix, plen) == 0) n++;
    p += len;
    if (*p == '\n') p++;
  }
  return n;
}

/* ---- the result line of `run`, parsed strictly -------------------------------- */

/* scenario=NAME seed=N result=ok|FAIL:<kind> hash=0x<16 hex> steps=S vtime_ns=T msgs=M */
typedef struct result_line {
  char scenario[64];
  uint64_t seed;
  char result[48]; /* "ok" or "FAIL:<kind>" */
  uint64_t hash, steps, vtime_ns, msgs;
} result_line;

static bool take_lit(const char **p, const char *lit) {
  size_t n = strlen(lit);
  if (strncmp(*p, lit, n) != 0) return false;
  *p += n;
  return true;
}

/* One or more characters of set, to out (NUL-terminated). */
static bool take_word(const char **p, const char *set, char *out, size_t cap) {
  size_t n = strspn(*p, set);
  if (n == 0 || n >= cap) return false;
  memcpy(out, *p, n);
  out[n] = '\0';
  *p += n;
  return true;
}

/* A decimal number: digits only, no sign, no leading zero, no overflow. */
static bool take_dec(const char **p, uint64_t *v) {
  char digits[24];
  if (!take_word(p, "0123456789", digits, sizeof(digits))) return false;
  if (digits[0] == '0' && digits[1] != '\0') return false;
  errno = 0;
  unsigned long long u = strtoull(digits, NULL, 10);
  if (errno != 0) return false;
  *v = u;
  return true;
}

/* Exactly 16 lowercase hex digits. */
static bool take_hex16(const char **p, uint64_t *v) {
  char digits[17];
  if (strspn(*p, "0123456789abcdef") != 16) return false;
  memcpy(digits, *p, 16);
  digits[16] = '\0';
  *p += 16;
  *v = strtoull(digits, NULL, 16);
  return true;
}

static bool take_result(const char **p, char *out, size_t cap) {
  if (take_lit(p, "ok")) {
    snprintf(out, cap, "ok");
    return true;
  }
  char kind[32];
  if (!take_lit(p, "FAIL:") || !take_word(p, "abcdefghijklmnopqrstuvwxyz", kind, sizeof(kind)))
    return false;
  snprintf(out, cap, "FAIL:%s", kind);
  return true;
}

static bool parse_result_line(const char *line, result_line *r) {
  const char *p = line;
  return take_lit(&p, "scenario=") &&
         take_word(&p, "abcdefghijklmnopqrstuvwxyz0123456789_", r->scenario, sizeof(r->scenario)) &&
         take_lit(&p, " seed=") && take_dec(&p, &r->seed) && take_lit(&p, " result=") &&
         take_result(&p, r->result, sizeof(r->result)) && take_lit(&p, " hash=0x") &&
         take_hex16(&p, &r->hash) && take_lit(&p, " steps=") && take_dec(&p, &r->steps) &&
         take_lit(&p, " vtime_ns=") && take_dec(&p, &r->vtime_ns) && take_lit(&p, " msgs=") &&
         take_dec(&p, &r->msgs) && *p == '\0';
}

/* The outcome's exit status must be want_status and its stdout must end with
 * a well-formed result line: to *r, and its text to line. */
static void expect_result(const outcome *o, int want_status, result_line *r, char *line, size_t cap) {
  expect_status(o, want_status);
  bool parsed = last_line(o->out.text, line, cap) && parse_result_line(line, r);
  if (!parsed)
    fprintf(stderr, "no result line at the end of stdout\n--- stdout:\n%s--- stderr:\n%s---\n",
            o->out.text, o->err.text);
  assert_true(parsed);
}

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

/* tmp_dir/name to out; false if it does not fit. */
static bool join_tmp(const char *name, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s", tmp_dir, name);
  return n > 0 && (size_t)n < cap;
}

static void tmp_path(const char *name, char *out, size_t cap) { assert_true(join_tmp(name, out, cap)); }

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

/* ---- setup ---------------------------------------------------------------------- */

/* build/<cfg>/tests/test_sim_shsim -> build/<cfg>/bin/shsim. */
static int find_shsim(const char *argv0) {
  const char *slash = strrchr(argv0, '/');
  char guess[PATH_MAX];
  int n = slash == NULL ? snprintf(guess, sizeof(guess), "../bin/shsim")
                        : snprintf(guess, sizeof(guess), "%.*s/../bin/shsim", (int)(slash - argv0), argv0);
  if (n < 0 || (size_t)n >= sizeof(guess) || realpath(guess, shsim_path) == NULL ||
      access(shsim_path, X_OK) != 0) {
    fprintf(stderr, "test_sim_shsim: no shsim at %s (build it: make build/<cfg>/bin/shsim)\n", guess);
    return -1;
  }
  return 0;
}

static int make_tmp_dir(void **state) {
  (void)state;
  const char *base = getenv("TMPDIR");
  int n = snprintf(tmp_dir, sizeof(tmp_dir), "%s/test_sim_shsim-XXXXXX",
                   base != NULL && base[0] != '\0' ? base : "/tmp");
  if (n < 0 || (size_t)n >= sizeof(tmp_dir) || mkdtemp(tmp_dir) == NULL) {
    fprintf(stderr, "test_sim_shsim: cannot make a temporary directory: %s\n", strerror(errno));
    return -1;
  }
  return 0;
}

/* Whatever a failed test left behind, then the directory. */
static int remove_tmp_dir(void **state) {
  (void)state;
  free(last_outcome);
  last_outcome = NULL;
  char path[PATH_MAX];
  for (size_t i = 0; i < sizeof(tmp_files) / sizeof(tmp_files[0]); i++)
    if (join_tmp(tmp_files[i], path, sizeof(path))) unlink(path);
  return rmdir(tmp_dir) == 0 ? 0 : -1;
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
      cmocka_unit_test(test_fuzz_replay),
      cmocka_unit_test(test_fuzz_shards),
      cmocka_unit_test(test_fuzz_groups),
      cmocka_unit_test(test_fuzz_budget),
      cmocka_unit_test(test_fuzz_merge),
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
