/*
 * Unit tests of shsim's campaign parts (tools/shsim/): the failure groups
 * (masked messages, the lowest seed whatever the order), the JSON summary
 * written and read back tolerantly (unknown keys of any value, format 1),
 * JUnit XML that stays XML whatever a failure's detail holds, the options
 * a fuzz seed draws per scenario (declared workers kept, network weather
 * only for network scenarios), --jobs from the affinity mask, and --shard
 * taken from a batch system's variables. tools/check_campaign.sh runs the
 * commands end to end.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>

#include "../tools/shsim/args.h"
#include "../tools/shsim/campaign.h"
#include "../tools/shsim/swarm.h"

static char tmp_dir[PATH_MAX];

static void tmp_path(const char *name, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s", tmp_dir, name);
  assert_true(n > 0 && (size_t)n < cap);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "we");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* The file's text (malloc'd). */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "re");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strdup(buf);
}

static campaign_failure failure(const char *scn, uint64_t seed, const char *kind, const char *detail) {
  campaign_failure f;
  memset(&f, 0, sizeof(f));
  snprintf(f.scenario, sizeof(f.scenario), "%s", scn);
  f.seed = seed;
  snprintf(f.kind, sizeof(f.kind), "%s", kind);
  snprintf(f.detail, sizeof(f.detail), "%s", detail);
  snprintf(f.command, sizeof(f.command), "shsim run %s --seed %llu", scn, (unsigned long long)seed);
  return f;
}

/* ---- groups ----------------------------------------------------------------------- */

static void test_key_masks_numbers(void **state) {
  (void)state;
  char where[96], msg[256];
  campaign_key("test_race.c:58: round 3: made 12 times at 0x7ffd1234\nmore", where, sizeof(where), msg,
               sizeof(msg));
  assert_string_equal(where, "test_race.c:58");
  assert_string_equal(msg, "round N: made N times at 0xN");
  campaign_key("deadlock: 3 fibers parked", where, sizeof(where), msg, sizeof(msg));
  assert_string_equal(where, "");
  assert_string_equal(msg, "deadlock: N fibers parked");
}

/* Failures that differ in their numbers are one group; another place or
 * kind is another. The group names its lowest seed, found in any order. */
static void test_groups_lowest_seed(void **state) {
  (void)state;
  campaign c;
  campaign_init(&c, "fuzz", "test_race");
  const uint64_t seeds[] = {30, 7, 15, 9};
  char d[64];
  for (size_t i = 0; i < 4; i++) {
    snprintf(d, sizeof(d), "test_race.c:58: round %llu: made 2 times", (unsigned long long)seeds[i] % 5);
    campaign_failure f = failure("test_race", seeds[i], "invariant", d);
    campaign_add(&c, &f);
  }
  campaign_failure other = failure("test_race", 3, "invariant", "test_race.c:70: round 1: lost");
  campaign_add(&c, &other);
  campaign_failure kind = failure("test_race", 2, "deadlock", "test_race.c:58: round 1: made 2 times");
  campaign_add(&c, &kind);
  campaign_sort(&c);
  assert_int_equal(c.ngroups, 3);
  assert_int_equal(c.groups[0].count, 4);
  assert_int_equal(c.groups[0].lowest.seed, 7);
  assert_string_equal(c.groups[0].lowest.command, "shsim run test_race --seed 7");
  assert_string_equal(c.groups[0].lowest.detail, "test_race.c:58: round 2: made 2 times");
  assert_string_equal(c.groups[0].message, "round N: made N times");
  assert_int_equal(c.nfails, 6);
  campaign_free(&c);
}

/* ---- JSON ------------------------------------------------------------------------- */

static void test_json_round_trip(void **state) {
  (void)state;
  campaign c;
  campaign_init(&c, "sweep", "all");
  c.meta.seeds_lo = 1;
  c.meta.seeds_hi = 18446744073709551615ull; /* every digit of a 64-bit seed */
  c.meta.shard_i = 3;
  c.meta.shard_n = 4;
  c.meta.planned = 10;
  snprintf(c.meta.options, sizeof(c.meta.options), "--faults sh/net/*:0.1\n--steps-max 9\n");
  snprintf(c.meta.stopped, sizeof(c.meta.stopped), "SIGTERM");
  campaign_count_run(&c, "a", 0.5);
  campaign_count_run(&c, "b", 0.25);
  campaign_failure f = failure("b", 18446744073709551615ull, "crash", "SIGSEGV \"quoted\"\tand\\");
  campaign_add(&c, &f);
  char path[PATH_MAX];
  tmp_path("c.json", path, sizeof(path));
  assert_int_equal(campaign_write_json(&c, path), 0);
  campaign r;
  assert_int_equal(campaign_read_json(&r, path), 0);
  assert_int_equal(r.meta.format, CAMPAIGN_FORMAT);
  assert_string_equal(r.meta.command, "sweep");
  assert_true(r.meta.seeds_hi == 18446744073709551615ull);
  assert_int_equal(r.meta.shard_i, 3);
  assert_int_equal(r.meta.shard_n, 4);
  assert_string_equal(r.meta.options, c.meta.options);
  assert_string_equal(r.meta.stopped, "SIGTERM");
  assert_int_equal(r.runs, 2);
  assert_int_equal(r.nscns, 2);
  assert_int_equal(r.scns[1].fails, 1);
  assert_int_equal(r.ngroups, 1);
  assert_true(r.groups[0].lowest.seed == 18446744073709551615ull);
  assert_string_equal(r.groups[0].lowest.detail, f.detail);
  assert_int_equal(r.nkept, 1);
  campaign_free(&r);
  campaign_free(&c);
  unlink(path);
}

/* A newer shsim's keys (objects, arrays, literals) are skipped; an older
 * summary (format 1: no format, no groups) is read, its groups made from
 * its failures, its unlisted failures counted. */
static void test_json_tolerant(void **state) {
  (void)state;
  char path[PATH_MAX];
  tmp_path("t.json", path, sizeof(path));
  write_text(path, "{\"format\": 9, \"new\": {\"a\": [1, {\"b\": null}], \"c\": true}, \"seeds_run\": 5,\n"
                   " \"failed\": 1, \"seconds\": 1.5, \"command\": \"fuzz\", \"scenario\": \"x\",\n"
                   " \"groups\": [{\"scenario\": \"x\", \"kind\": \"k\", \"count\": 1, \"seed\": 4,\n"
                   "   \"more\": [[], {}], \"where\": \"\", \"message\": \"m\"}], \"tail\": false}\n");
  campaign r;
  assert_int_equal(campaign_read_json(&r, path), 0);
  assert_int_equal(r.runs, 5);
  assert_int_equal(r.ngroups, 1);
  assert_int_equal(r.groups[0].lowest.seed, 4);
  campaign_free(&r);
  write_text(path, "{\"scenario\": \"test_race\", \"seeds_run\": 200, \"failed\": 3, \"seconds\": 0.7,\n"
                   " \"failures\": [{\"scenario\": \"test_race\", \"seed\": 19, \"kind\": \"invariant\",\n"
                   "   \"detail\": \"t.c:5: round 4\", \"command\": \"c19\"},\n"
                   "  {\"scenario\": \"test_race\", \"seed\": 11, \"kind\": \"invariant\",\n"
                   "   \"detail\": \"t.c:5: round 6\", \"command\": \"c11\"}]}\n");
  assert_int_equal(campaign_read_json(&r, path), 0);
  assert_int_equal(r.meta.format, 1);
  assert_string_equal(r.meta.command, "fuzz");
  assert_int_equal(r.runs, 200);
  assert_int_equal(r.nfails, 3);
  assert_int_equal(r.ngroups, 1);
  assert_int_equal(r.groups[0].count, 2);
  assert_int_equal(r.groups[0].lowest.seed, 11);
  assert_int_equal(r.ungrouped, 1);
  campaign_free(&r);
  write_text(path, "{\"seeds_run\": 5, \"x\": [1, 2}");
  assert_int_equal(campaign_read_json(&r, path), -EINVAL);
  campaign_free(&r);
  unlink(path);
}

/* ---- JUnit ------------------------------------------------------------------------ */

static void test_junit_is_xml(void **state) {
  (void)state;
  campaign c;
  campaign_init(&c, "fuzz", "all");
  campaign_count_run(&c, "ok_one", 0.1);
  campaign_count_run(&c, "bad_one", 0.1);
  campaign_failure f = failure("bad_one", 5, "crash", "a <b> & \"c\" 'd' \x01 \xff\xfe ok \xc3\xa9");
  snprintf(f.command, sizeof(f.command), "shsim run bad_one --seed 5 --faults 'sh/*:0.1' && <x>");
  campaign_add(&c, &f);
  char path[PATH_MAX], cmd[PATH_MAX + 64];
  tmp_path("j.xml", path, sizeof(path));
  assert_int_equal(campaign_write_junit(&c, path, "shards missing: 2/4 <of> fuzz"), 0);
  char *text = read_text(path);
  assert_non_null(strstr(text, "a &lt;b&gt; &amp; &quot;c&quot; &apos;d&apos; ? ?? ok \xc3\xa9"));
  assert_non_null(strstr(text, "--faults &apos;sh/*:0.1&apos; &amp;&amp; &lt;x&gt;"));
  assert_non_null(strstr(text, "<testcase classname=\"fuzz\" name=\"ok_one\""));
  assert_non_null(strstr(text, "tests=\"3\" failures=\"2\""));
  assert_null(strstr(text, "\x01"));
  free(text);
  /* Checked by an XML parser where there is one (tools/deps.sh installs it). */
  snprintf(cmd, sizeof(cmd), "command -v xmllint >/dev/null || exit 0; xmllint --noout '%s'", path);
  assert_int_equal(system(cmd), 0);
  campaign_free(&c);
  unlink(path);
}

/* ---- what a fuzz seed draws ------------------------------------------------------- */

/* For every scenario: its declared workers are kept; network weather only
 * where it uses the network (and there for some seeds); the runtime's
 * fault points for some seeds of each; a draw is a function of (scenario,
 * seed). */
static void test_swarm_per_scenario(void **state) {
  (void)state;
  size_t nets = 0;
  for (size_t i = 0; i < sh_scenario_count(); i++) {
    const sh_scenario *sc = sh_scenario_at(i);
    size_t weather = 0, runtime = 0;
    for (uint64_t seed = 1; seed <= 64; seed++) {
      sh_sim_options o, again;
      uint32_t w, w2;
      sh_sim_options_default(&o);
      sh_sim_options_default(&again);
      swarm_draw(sc, seed, &o, &w);
      swarm_draw(sc, seed, &again, &w2);
      assert_int_equal(w, w2);
      assert_int_equal(o.strategy, again.strategy);
      if (sc->workers != 0) assert_int_equal(w, sc->workers);
      else assert_true(w >= 2 && w <= 4);
      if (o.faults != NULL && strstr(o.faults, "sh/net/delay:") != NULL) weather++;
      if (o.faults != NULL && strstr(o.faults, "sh/*:") != NULL) runtime++;
    }
    if (!(sc->flags & SH_SCN_NET)) assert_int_equal(weather, 0);
    else assert_true(weather > 0);
    /* The runtime's fault points: some seeds of every scenario, not most. */
    assert_true(runtime > 0 && runtime < 32);
    nets += (sc->flags & SH_SCN_NET) != 0;
  }
  assert_true(nets > 0);
}

/* ---- options ---------------------------------------------------------------------- */

/* --jobs by default: the CPUs of the affinity mask, not those online. */
static void test_jobs_affinity(void **state) {
  (void)state;
  cpu_set_t all, one;
  assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
  assert_int_equal(args_cpus(), (uint64_t)CPU_COUNT(&all));
  int cpu = 0;
  while (!CPU_ISSET(cpu, &all)) cpu++;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
  uint64_t n = args_cpus();
  args a;
  args_default(&a);
  assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
  assert_int_equal(n, 1);
  assert_int_equal(a.jobs, 1);
}

static int parse(args *a, const char *shard) {
  char *argv[] = {"shsim", "fuzz", "ask_reply", "--seeds", "1..100", "--shard", (char *)shard, NULL};
  return args_parse(7, argv, a);
}

static void test_shard_from_env(void **state) {
  (void)state;
  args a;
  setenv("JOB_COMPLETION_INDEX", "2", 1);
  assert_int_equal(parse(&a, "k8s/4"), 0);
  assert_int_equal(a.shard_i, 3);
  assert_int_equal(a.shard_n, 4);
  assert_int_equal(parse(&a, "k8s/3"), 0);
  setenv("JOB_COMPLETION_INDEX", "3", 1);
  assert_int_equal(parse(&a, "k8s/3"), -EINVAL); /* index 3 of 3 shards */
  unsetenv("JOB_COMPLETION_INDEX");
  assert_int_equal(parse(&a, "k8s/4"), -EINVAL);
  setenv("SLURM_ARRAY_TASK_ID", "5", 1);
  setenv("SLURM_ARRAY_TASK_MIN", "1", 1);
  setenv("SLURM_ARRAY_TASK_COUNT", "8", 1);
  assert_int_equal(parse(&a, "slurm"), 0);
  assert_int_equal(a.shard_i, 5);
  assert_int_equal(a.shard_n, 8);
  setenv("SLURM_ARRAY_TASK_ID", "0", 1);
  unsetenv("SLURM_ARRAY_TASK_MIN");
  assert_int_equal(parse(&a, "slurm/2"), 0);
  assert_int_equal(a.shard_i, 1);
  assert_int_equal(a.shard_n, 2);
  unsetenv("SLURM_ARRAY_TASK_ID");
  assert_int_equal(parse(&a, "slurm"), -EINVAL);
  assert_int_equal(parse(&a, "2/4"), 0);
  assert_int_equal(a.shard_i, 2);
}

/* Options as getopt_long takes them (--name=value, a unique prefix), and
 * merge's files wherever its options are. */
static void test_option_forms(void **state) {
  (void)state;
  args a;
  char *run[] = {"shsim", "run", "ask_reply", "--seed=7", "--strat", "pct", NULL};
  assert_int_equal(args_parse(6, run, &a), 0);
  assert_int_equal(a.seeds.lo, 7);
  assert_int_equal(a.sim.strategy, SH_SIM_PCT);
  char *merge[] = {"shsim", "merge", "a.json", "--json", "m.json", "b.json", "--junit=m.xml", NULL};
  assert_int_equal(args_parse(7, merge, &a), 0);
  assert_int_equal(a.nfiles, 2);
  assert_string_equal(a.files[0], "a.json");
  assert_string_equal(a.files[1], "b.json");
  assert_string_equal(a.json_path, "m.json");
  assert_string_equal(a.junit_path, "m.xml");
  char *extra[] = {"shsim", "run", "ask_reply", "--seed", "1", "stray", NULL};
  assert_int_equal(args_parse(6, extra, &a), -EINVAL);
}

/* ---- setup ------------------------------------------------------------------------ */

static int make_tmp_dir(void **state) {
  (void)state;
  const char *base = getenv("TMPDIR");
  int n = snprintf(tmp_dir, sizeof(tmp_dir), "%s/test_sim_campaign-XXXXXX",
                   base != NULL && base[0] != '\0' ? base : "/tmp");
  return n > 0 && (size_t)n < sizeof(tmp_dir) && mkdtemp(tmp_dir) != NULL ? 0 : -1;
}

static int remove_tmp_dir(void **state) {
  (void)state;
  return rmdir(tmp_dir) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key_masks_numbers),
      cmocka_unit_test(test_groups_lowest_seed),
      cmocka_unit_test(test_json_round_trip),
      cmocka_unit_test(test_json_tolerant),
      cmocka_unit_test(test_junit_is_xml),
      cmocka_unit_test(test_swarm_per_scenario),
      cmocka_unit_test(test_jobs_affinity),
      cmocka_unit_test(test_shard_from_env),
      cmocka_unit_test(test_option_forms),
  };
  return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
