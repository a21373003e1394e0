/*
 * The workloads shared by the stackhouse benches and their CAF twins
 * (interface in workloads.h).
 */
#include "workloads.h"

#include <inttypes.h>
#include <stdio.h>

const bench_workload bench_pingpong = {
    .name = "pingpong",
    .unit = "round trips",
    .actors = "pairs",
    .rounds = 1000000,
    .rounds_help = "round trips measured per run, all pairs (default 1000000)",
    .quick_rounds = 20000,
    .quick_help = "CI smoke: 20000 round trips, 1 run per case",
    .table = {"rt/s", {"parks/krt", "fairness"}, false},
};

const bench_workload bench_notice = {
    .name = "notice",
    .unit = "notices",
    .actors = "senders",
    .rounds = 4000000,
    .rounds_help = "notices measured per run (default 4000000)",
    .quick_rounds = 40000,
    .quick_help = "CI smoke: 40000 notices, 1 run per case",
    .table = {"notices/s", {"parks/kn", NULL}, true},
};

void bench_notice_opts(bench_notice_args *a, bench_opt opts[BENCH_NOTICE_NOPTS]) {
  a->burst = 64;
  a->window = 4;
  const bench_opt o[BENCH_NOTICE_NOPTS] = {
      {"burst", "notices per burst = per credit (default 64)", &a->burst, NULL, NULL, 1, 1000000},
      {"window", "credits (bursts) each sender starts with (default 4)", &a->window, NULL, NULL, 1,
       1000000},
  };
  for (int i = 0; i < BENCH_NOTICE_NOPTS; i++) opts[i] = o[i];
}

void bench_notice_detail(const bench_notice_args *a, char *buf, size_t size) {
  snprintf(buf, size, ", burst %" PRIu64 ", window %" PRIu64 " bursts", a->burst, a->window);
}

double bench_notice_msgs_per_op(const bench_notice_args *a) { return 1.0 + 1.0 / (double)a->burst; }
