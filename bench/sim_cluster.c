/*
 * The simulator's cost for clusters: the failover example's nodes
 * (scenarios/failover.c) run as whole simulations, one after the other on
 * this one OS thread, seeds 1..N (--seeds N, default 20) of each of
 *
 *   failover_idle    3 nodes x 2 workers, no client, no nemesis: 10 s of
 *                    heartbeats every 50 ms (a timer-heavy idle cluster)
 *   failover7_idle   the same with 7 nodes
 *   failover_10s     3 nodes, 3 clients, crashes, cuts and drift drawn per
 *                    seed, 10 s then the heal and the liveness check
 *   failover7_10s    the same with 7 nodes
 *
 * For each: seeds per second (on this core), virtual seconds per real
 * second (the runs' virtual time over their real time, setup and teardown
 * included), the steps per virtual second, and the memory of a node (the
 * most its allocations held at once, averaged over the nodes and the
 * runs: the simulator charges every allocation of a node's fibers to it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackhouse/cluster.h>
#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const struct {
  const char *name;
  int nodes;
} cases[] = {{"failover_idle", 3}, {"failover7_idle", 7}, {"failover_10s", 3}, {"failover7_10s", 7}};

static int run_case(const char *name, int nodes, uint64_t seeds) {
  const sh_scenario *sc = sh_scenario_find(name);
  if (sc == NULL) {
    fprintf(stderr, "sim_cluster: no scenario %s\n", name);
    return 1;
  }
  double real = 0, vtime = 0, steps = 0, mem = 0;
  uint64_t failed = 0;
  for (uint64_t seed = 1; seed <= seeds; seed++) {
    sh_sim_options o;
    sh_sim_options_default(&o);
    o.seed = seed;
    sh_sim_configure(&o);
    sh_scn_result r;
    double t0 = now_s();
    sh_scenario_run(sc, seed, 0, &r);
    real += now_s() - t0;
    failed += !r.ok;
    sh_sim_report rep;
    sh_sim_report_get(&rep);
    vtime += (double)rep.vtime_ns / 1e9;
    steps += (double)rep.steps;
    for (int i = 1; i <= nodes; i++) {
      char nn[16];
      snprintf(nn, sizeof(nn), "f%d", i);
      sh_node_stats st;
      if (sh_node_stats_get(nn, &st) == 0) mem += (double)st.mem_peak;
    }
  }
  printf("%-16s %5d %6llu %6llu %10.1f %10.0f %12.0f %12.0f\n", name, nodes,
         (unsigned long long)seeds, (unsigned long long)failed, (double)seeds / real,
         vtime / real, steps / vtime, mem / (double)seeds / nodes / 1024.0);
  return failed != 0;
}

int main(int argc, char **argv) {
  uint64_t seeds = 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
      seeds = strtoull(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: sim_cluster [--seeds N]\n");
      return 2;
    }
  }
  if (seeds == 0) seeds = 1;
  printf("%-16s %5s %6s %6s %10s %10s %12s %12s\n", "scenario", "nodes", "seeds", "failed",
         "seeds/s", "virt:real", "steps/vsec", "KiB/node");
  int rc = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    rc |= run_case(cases[i].name, cases[i].nodes, seeds);
  return rc;
}
