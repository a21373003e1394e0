/*
 * What the end-to-end tests of the shsim command (test_sim_shsim.c,
 * test_sim_shsim_fuzz.c) share: the binary of the test's own configuration
 * (build/<cfg>/bin/shsim, found from argv[0]) run as a user runs it, its
 * stdout, stderr and exit status captured; lines of its output; the result
 * line of `run`, parsed strictly; a temporary directory for the files it
 * writes (cmocka group setup and teardown).
 *
 * No shell: fork and execv, stdout and stderr through pipes. A watchdog
 * (alarm) fails a hang, and a shsim left behind by a dying test is killed
 * (PR_SET_PDEATHSIG).
 */
#ifndef TESTS_SHSIM_RUN_H
#define TESTS_SHSIM_RUN_H

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
#define ARGS_MAX 24        /* arguments of one shsim command */
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
static inline void expect_result(const outcome *o, int want_status, result_line *r, char *line, size_t cap) {
  expect_status(o, want_status);
  bool parsed = last_line(o->out.text, line, cap) && parse_result_line(line, r);
  if (!parsed)
    fprintf(stderr, "no result line at the end of stdout\n--- stdout:\n%s--- stderr:\n%s---\n",
            o->out.text, o->err.text);
  assert_true(parsed);
}

/* tmp_dir/name to out; false if it does not fit. */
static bool join_tmp(const char *name, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s", tmp_dir, name);
  return n > 0 && (size_t)n < cap;
}

static void tmp_path(const char *name, char *out, size_t cap) { assert_true(join_tmp(name, out, cap)); }

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

#endif
