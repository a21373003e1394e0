/*
 * libfiu's own tools on the epoll backend, without SH_FAULTS: a program run
 * under `fiu-run -c 'enable_random ...'` has its runtime points enabled by
 * libfiu's preloader, and one run under fiu-run's remote control can have
 * them enabled later by `fiu-ctrl`. The runtime must notice both
 * (sh_faults_enabled), and the scenario framework must then run
 * fault-tolerant: `shrun ask_reply` under 1 % pool faults used to hang,
 * waiting for ever for a client whose next round a fault had refused,
 * because only SH_FAULTS told the framework that faults were on.
 *
 * The test runs itself again under fiu-run (this program, a child mode
 * chosen by the environment) and judges the child's output and status.
 * Skipped where fiu-run or fiu-ctrl is not installed (package fiu-utils).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv, mkdtemp, kill */
#endif

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>
#include <stackhouse/stackhouse.h>

#define CHILD_ENV "SH_TEST_FIU_CHILD"
/* Far above a run cut short after its 3 s stall: a hang is what fails. */
#define CHILD_LIMIT_S 90
#define SPAWNS 16

static char self_path[4096];
static char fifo_dir[64];

/* ---- the child modes (under fiu-run) --------------------------------------- */

/* ask_reply under pool faults: it must end, pass, and know it was faulty. */
static int child_scenario(void) {
  bool on = sh_faults_enabled();
  sh_scn_result r;
  sh_scenario_run(sh_scenario_find("ask_reply"), 1, 0, &r);
  printf("enabled=%d ok=%d fired=%llu %s%s\n", on, r.ok, (unsigned long long)sh_faults_fired(),
         r.kind, r.detail);
  return on && r.ok ? 0 : 1;
}

static const sh_actor_class idle_class = {.name = "idle", .size = sizeof(sh_actor)};

/* Waits for the parent's fiu-ctrl, then spawns: every spawn must fail. */
static int child_ctrl(void) {
  printf("ready enabled=%d fired=%llu\n", sh_faults_enabled(),
         (unsigned long long)sh_faults_fired());
  fflush(stdout);
  char line[16];
  if (fgets(line, sizeof line, stdin) == NULL) return 3;
  sh_system *sys;
  if (sh_system_new(NULL, &sys) != 0) return 4;
  uint32_t nomem = 0;
  for (uint32_t i = 0; i < SPAWNS; i++) {
    const sh_addr *a;
    nomem += sh_spawn(sys, &idle_class, NULL, 1, &a) == -ENOMEM;
  }
  sh_system_free(sys);
  printf("nomem=%u fired=%llu\n", nomem, (unsigned long long)sh_faults_fired());
  return nomem == SPAWNS ? 0 : 1;
}

/* ---- the parent -------------------------------------------------------------- */

static bool have(const char *tool) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
  return system(cmd) == 0;
}

typedef struct child {
  pid_t pid;
  FILE *out; /* its stdout */
  FILE *in;  /* its stdin */
} child;

/* Starts this program under `fiu-run -f FIFO [-c cmd] SELF mode`. */
static void start(child *c, const char *mode, const char *cmd) {
  int to[2], from[2];
  assert_int_equal(pipe(to), 0);
  assert_int_equal(pipe(from), 0);
  c->pid = fork();
  assert_true(c->pid >= 0);
  if (c->pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/fiu-ctrl", fifo_dir);
    setenv(CHILD_ENV, mode, 1);
    unsetenv("SH_FAULTS"); /* libfiu's tools alone */
    /* ASan wants to be first among the libraries; fiu-run preloads its own. */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan != NULL ? asan : "",
             asan != NULL && asan[0] != '\0' ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    /* fiu-run's preloader keeps a string of its own for ever. */
    char supp[128];
    snprintf(supp, sizeof supp, "suppressions=%s/lsan.supp", fifo_dir);
    setenv("LSAN_OPTIONS", supp, 1);
    if (cmd != NULL)
      execlp("fiu-run", "fiu-run", "-f", prefix, "-c", cmd, self_path, (char *)NULL);
    else
      execlp("fiu-run", "fiu-run", "-f", prefix, self_path, (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  c->out = fdopen(from[0], "r");
  c->in = fdopen(to[1], "w");
  assert_non_null(c->out);
  assert_non_null(c->in);
}

/* The child's exit status, or -1 after killing it at the limit (a hang). */
static int finish(child *c) {
  fclose(c->in);
  for (int i = 0; i < CHILD_LIMIT_S * 10; i++) {
    int st;
    pid_t w = waitpid(c->pid, &st, WNOHANG);
    if (w == c->pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    nanosleep(&(struct timespec){0, 100000000}, NULL);
  }
  kill(c->pid, SIGKILL);
  waitpid(c->pid, NULL, 0);
  return -1;
}

static void test_fiu_run_scenario_tolerant(void **state) {
  (void)state;
  if (!have("fiu-run")) skip();
  child c;
  start(&c, "scenario", "enable_random name=sh/pool/*,probability=0.01");
  int rc = finish(&c);
  char line[512] = "";
  if (fgets(line, sizeof line, c.out) == NULL) line[0] = '\0';
  fclose(c.out);
  fprintf(stderr, "ask_reply under fiu-run, 1 %% pool faults: %s", line);
  if (rc == -1) fail_msg("ask_reply hung under fiu-run (killed after %d s)", CHILD_LIMIT_S);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(line, "enabled=1 ok=1"));
}

static void test_fiu_ctrl_enables_points(void **state) {
  (void)state;
  if (!have("fiu-run") || !have("fiu-ctrl")) skip();
  child c;
  start(&c, "ctrl", NULL);
  char line[256] = "";
  assert_non_null(fgets(line, sizeof line, c.out));
  /* Nothing enabled yet, but fiu-ctrl may enable points at any time; and
   * the points libfiu's tools fire are not all counted (a program's own,
   * fiu-run's POSIX wrappers): one counts from the start, so that a
   * scenario excuses what they may cause. */
  assert_string_equal(line, "ready enabled=1 fired=1\n");
  char cmd[512];
  snprintf(cmd, sizeof cmd, "fiu-ctrl -f '%s/fiu-ctrl' -c 'enable name=sh/system/house' %ld",
           fifo_dir, (long)c.pid);
  int ctl = system(cmd);
  fputs("go\n", c.in);
  fflush(c.in);
  int rc = finish(&c);
  if (fgets(line, sizeof line, c.out) == NULL) line[0] = '\0';
  fclose(c.out);
  fprintf(stderr, "spawns after fiu-ctrl enabled sh/system/house: %s", line);
  assert_int_equal(ctl, 0);
  assert_int_equal(rc, 0);
}

int main(void) {
  const char *mode = getenv(CHILD_ENV);
  if (mode != NULL) return strcmp(mode, "ctrl") == 0 ? child_ctrl() : child_scenario();
  ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
  if (n <= 0) return 1;
  self_path[n] = '\0';
  const char *tmp = getenv("TMPDIR");
  snprintf(fifo_dir, sizeof fifo_dir, "%s/sh_fiu_XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
  if (strlen(fifo_dir) >= sizeof fifo_dir - 1 || mkdtemp(fifo_dir) == NULL) return 1;
  char supp[128];
  snprintf(supp, sizeof supp, "%s/lsan.supp", fifo_dir);
  FILE *f = fopen(supp, "w");
  if (f == NULL || fputs("leak:fiu_run_preload.so\n", f) < 0 || fclose(f) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fiu_run_scenario_tolerant),
      cmocka_unit_test(test_fiu_ctrl_enables_points),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf '%s'", fifo_dir);
  if (system(rm) != 0) rc = rc != 0 ? rc : 1;
  return rc;
}
