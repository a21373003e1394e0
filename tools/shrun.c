/*
 * shrun: runs scenarios on the production (epoll) backend, with the same
 * invariants as under the simulator. See `shrun --help`.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/scenario.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: shrun SCENARIO|all [--workers K] [--seed N] [--runs R]\n"
          "       shrun list\n"
          "       shrun --help | --version\n"
          "Runs a scenario (or every visible one) on the epoll backend, R times\n"
          "(default 1) from seed N (default 1), and checks its invariants. One line per\n"
          "run: scenario=NAME seed=N result=ok|FAIL:<kind> msgs=M [detail]. Exit status 1\n"
          "if any run failed, 2 on a bad command line.\n"
          "  --workers K  worker threads (default: the scenario's own)\n"
          "  --seed N     the first run's seed: sh_scn_rand's stream (default 1)\n"
          "  --runs R     runs of each scenario, seeds N..N+R-1 (default 1)\n"
          "  --version    shrun's version: the stackhouse library it runs on\n"
          "The scenarios are those linked into this shrun (libstackhouse-shrun.a and\n"
          "scenario objects); `shrun list` names them.\n");
}

/* --help and --version answer wherever they are, as other tools' do: true
 * when one was given (and answered). */
static bool info_option(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return true;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("shrun (stackhouse) %s\n", sh_version());
      return true;
    }
  }
  return false;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0') return -EINVAL;
  *out = v;
  return 0;
}

static bool run_one(const sh_scenario *sc, uint64_t seed, uint32_t workers) {
  sh_scn_result r;
  sh_scenario_run(sc, seed, workers, &r);
  printf("scenario=%s seed=%llu result=%s%s msgs=%llu%s%s\n", sc->name, (unsigned long long)seed,
         r.ok ? "ok" : "FAIL:", r.kind, (unsigned long long)r.stats.delivered, r.ok ? "" : " ",
         r.detail);
  fflush(stdout);
  return r.ok;
}

int main(int argc, char **argv) {
  if (info_option(argc, argv)) return 0;
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "list") == 0) {
    for (size_t i = 0; i < sh_scenario_count(); i++) {
      const sh_scenario *sc = sh_scenario_at(i);
      if (!(sc->flags & (SH_SCN_HIDDEN | SH_SCN_SIM_ONLY))) printf("%-28s %s\n", sc->name, sc->summary);
    }
    return 0;
  }
  uint64_t workers = 0, seed = 1, runs = 1;
  /* Options come in pairs: a name and its value. */
  for (int i = 2; i < argc; i += 2) {
    uint64_t *dst = strcmp(argv[i], "--workers") == 0 ? &workers
                    : strcmp(argv[i], "--seed") == 0  ? &seed
                    : strcmp(argv[i], "--runs") == 0  ? &runs
                                                      : NULL;
    if (dst == NULL || i + 1 >= argc || parse_u64(argv[i + 1], dst) != 0) {
      fprintf(stderr, "shrun: bad argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  bool all = strcmp(argv[1], "all") == 0;
  const sh_scenario *one = all ? NULL : sh_scenario_find(argv[1]);
  if (!all && (one == NULL || (one->flags & SH_SCN_SIM_ONLY))) {
    fprintf(stderr, "shrun: no scenario '%s' for this backend (shrun list)\n", argv[1]);
    return 2;
  }
  bool ok = true;
  for (uint64_t k = 0; k < runs; k++) {
    for (size_t i = 0; i < sh_scenario_count(); i++) {
      const sh_scenario *sc = sh_scenario_at(i);
      if (all ? (sc->flags & (SH_SCN_HIDDEN | SH_SCN_SIM_ONLY)) != 0 : sc != one) continue;
      ok &= run_one(sc, seed + k, (uint32_t)workers);
    }
  }
  return ok ? 0 : 1;
}
