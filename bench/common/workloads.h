/*
 * The workloads that a stackhouse bench (bench/NAME.c) and its CAF twin
 * (bench/caf/NAME.cpp) both run. Both twins name their workload here, so
 * they share the N option, --rounds, --quick and the workload's own options,
 * and print the same table columns: what lets compare_caf.sh set their rows
 * side by side.
 */
#ifndef BENCH_WORKLOADS_H
#define BENCH_WORKLOADS_H

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ask/reply round trips between pairs of actors (bench/pingpong.c). */
extern const bench_workload bench_pingpong;
/* Notices into one receiver from N senders, on credits (bench/notice.c). */
extern const bench_workload bench_notice;

/* notice's own parameters. */
typedef struct bench_notice_args {
  uint64_t burst;  /* notices per burst = per credit */
  uint64_t window; /* credits (bursts) each sender starts with */
} bench_notice_args;

#define BENCH_NOTICE_NOPTS 2

/* Sets a's defaults and fills opts with --burst and --window into a, for
 * bench_setup's own options. */
void bench_notice_opts(bench_notice_args *a, bench_opt opts[BENCH_NOTICE_NOPTS]);
/* ", burst B, window W bursts": the header line's detail. */
void bench_notice_detail(const bench_notice_args *a, char *buf, size_t size);
/* Messages per counted notice: the notice plus its share of a credit (credits
 * count in mallocs/msg's denominator but not in the notice rate). */
double bench_notice_msgs_per_op(const bench_notice_args *a);

#ifdef __cplusplus
}
#endif
#endif
