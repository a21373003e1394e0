/*
 * libfiu's own tools and the simulator: fiu-run's points would fire by
 * libfiu's draws, not the seed's, so the simulator refuses them instead of
 * ignoring them silently, as it used to. A simulation configured while
 * fiu-run's variables are set (FIU_ENABLE with a command, or FIU_CTRL_FIFO,
 * its remote control for fiu-ctrl) fails its setup saying to use --faults;
 * shsim refuses to start (exit status 2) with the same advice. A blank
 * FIU_ENABLE (what fiu-run's deprecated -e gives) alone is nothing.
 *
 * The shsim of this test's configuration (build/<cfg>/bin/shsim, found
 * from argv[0]) is run through the shell, under fiu-run itself where it is
 * installed.
 */
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

#include "support/tracejson.h"

static char shsim[4096];

static void clear_env(void) {
  unsetenv("FIU_ENABLE");
  unsetenv("FIU_CTRL_FIFO");
}

static sh_sim_result run_ask_reply(void) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  sh_sim_result r;
  assert_int_equal(sh_sim_run("ask_reply", &o, &r), 0);
  return r;
}

static void expect_refused(const char *what) {
  assert_non_null(sh_sim_fiu_tools());
  sh_sim_result r = run_ask_reply();
  assert_false(r.ok);
  assert_string_equal(r.kind, "setup");
  assert_non_null(strstr(r.detail, what));
  assert_non_null(strstr(r.detail, "--faults"));
}

static void test_simulation_refuses_fiu_tools(void **state) {
  (void)state;
  clear_env();
  setenv("FIU_CTRL_FIFO", "/nonexistent-sh-dir/fiu-ctrl", 1);
  expect_refused("FIU_CTRL_FIFO");
  clear_env();
  setenv("FIU_ENABLE", "\n\t\t\tenable_random name=sh/pool/*,probability=0.01", 1);
  expect_refused("FIU_ENABLE");
  /* Blank: nothing enabled, no remote control. */
  setenv("FIU_ENABLE", "\n\t\t\t", 1);
  assert_null(sh_sim_fiu_tools());
  assert_true(run_ask_reply().ok);
  clear_env();
}

/* Runs `prefix shsim run ask_reply` through the shell; its exit status,
 * and its stderr in err. */
static int shsim_run(const char *prefix, char *err, size_t cap) {
  char path[256], cmd[8192];
  const char *dir = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/sh_fiu_XXXXXX", dir != NULL && dir[0] ? dir : "/tmp");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  snprintf(cmd, sizeof cmd, "%s '%s' run ask_reply --seed 1 >/dev/null 2>'%s'", prefix, shsim,
           path);
  int st = system(cmd);
  size_t len = 0;
  char *text = slurp_file(path, &len);
  unlink(path);
  assert_non_null(text);
  snprintf(err, cap, "%s", text);
  free(text);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_shsim_refuses_fiu_tools(void **state) {
  (void)state;
  char err[1024];
  int rc = shsim_run("FIU_ENABLE='enable name=sh/pool/alloc'", err, sizeof err);
  fprintf(stderr, "%s", err);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(err, "--faults"));
  assert_int_equal(shsim_run("", err, sizeof err), 0);
  if (system("command -v fiu-run >/dev/null 2>&1") != 0) skip();
  /* ASan wants to come first among the libraries, and fiu-run's preloader
   * keeps a string for ever: neither is shsim's business here. */
  rc = shsim_run("ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 "
                 "fiu-run -c 'enable_random name=sh/pool/*,probability=0.01'",
                 err, sizeof err);
  fprintf(stderr, "%s", err);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(err, "--faults"));
}

int main(int argc, char **argv) {
  (void)argc;
  alarm(120); /* a hang fails instead of blocking the suite */
  /* build/<cfg>/tests/test_sim_fiu -> build/<cfg>/bin/shsim */
  const char *slash = strrchr(argv[0], '/');
  int dirlen = slash != NULL ? (int)(slash - argv[0]) : 1;
  snprintf(shsim, sizeof shsim, "%.*s/../bin/shsim", dirlen, slash != NULL ? argv[0] : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_simulation_refuses_fiu_tools),
      cmocka_unit_test(test_shsim_refuses_fiu_tools),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
