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

/* Producers and consumers through a bounded buffer, Savina's ProdCons
 * (bench/bounded_buffer.c). */
extern const bench_workload bench_bounded_buffer;

/* bounded_buffer's own parameters: the shape of its "savina" case. */
typedef struct bench_bb_args {
  uint64_t producers; /* default 40 */
  uint64_t consumers; /* default 40 */
  uint64_t buffer;    /* items the buffer holds (default 50) */
  uint64_t prod_cost; /* work per item produced, in bench_bb_work's units (default 1) */
  uint64_t cons_cost; /* work per item consumed (default 1) */
} bench_bb_args;

#define BENCH_BB_NOPTS 5

/* Sets a's defaults and fills opts with --producers, --consumers, --buffer,
 * --prod-cost and --cons-cost into a, for bench_setup's own options. */
void bench_bb_opts(bench_bb_args *a, bench_opt opts[BENCH_BB_NOPTS]);
/* ", buffer B, costs P/C": the header line's detail. */
void bench_bb_detail(const bench_bb_args *a, char *buf, size_t size);

/* The CPU work of making or consuming one item (Savina's processItem, whose
 * unit is 100 logarithms of random numbers): cost x 100 steps of a
 * xorshift generator seeded from seed, each folded into acc through a
 * division; one step at cost 0. No libm: every bench links this file. */
double bench_bb_work(double acc, uint64_t seed, uint64_t cost);

/* ---- one run's bookkeeping, shared by both twins ---------------------- */

/* The counters of one run (one system): per producer, items made; per
 * consumer, items consumed with their count, sum, sum of squares and the
 * time of the last one. Each counter has one writer (its actor); the main
 * thread polls them. A run is a series of passes of `items` items each. */
typedef struct bench_bb bench_bb;

/* NULL when out of memory. */
bench_bb *bench_bb_new(uint32_t producers, uint32_t consumers, uint64_t items);
void bench_bb_free(bench_bb *b);

/* Producer j's share of pass `pass`: *n items valued *first, *first + 1, ...
 * The values of passes 0..k-1 are 1..k x items, each once. */
void bench_bb_share(const bench_bb *b, uint64_t pass, uint32_t producer, uint64_t *first,
                    uint64_t *n);
/* Producer j made an item (before sending it). */
void bench_bb_produced(bench_bb *b, uint32_t producer);
/* Consumer i consumed the item valued `value`. */
void bench_bb_consumed(bench_bb *b, uint32_t consumer, uint64_t value);

/* How a runtime starts a pass. */
typedef struct bench_bb_driver {
  void *ctx;
  /* Readies one start message per producer with its share of pass `pass`,
   * without sending: their allocations stay out of the measured window.
   * 0 or a negative errno. */
  int (*prepare)(void *ctx, uint64_t pass);
  /* Sends them; 0 or a negative errno. */
  int (*start)(void *ctx);
  /* Optional: objects the runtime's pools have out, sampled every poll. */
  uint64_t (*pool)(void *ctx);
} bench_bb_driver;

/* Runs pass `pass` (passes run in order from 0) and waits until its every
 * item was consumed. *s: the time from start to the last consumption, the
 * items, the process's mallocs and frees from start until the main thread
 * saw the end, and (peak_outstanding) the peak of items alive, i.e. made and
 * not yet consumed, over the polls; *pool_peak: the peak of d->pool (0
 * without). A pass still running after max_ms is measured there (the rate
 * of what was consumed) and then waited for, unmeasured. 0, -ETIMEDOUT (the
 * pass did not end within 30 s more), or what prepare or start returned. */
int bench_bb_pass(bench_bb *b, const bench_bb_driver *d, uint64_t pass, uint64_t max_ms,
                  bench_sample *s, uint64_t *pool_peak);

/* Whether passes 0..passes-1 consumed every item exactly once: the count,
 * the sum and the sum of squares of the values consumed against those of
 * 1..passes x items. 0, or -EPROTO after saying what differs on stderr
 * (prefixed with `who`). */
int bench_bb_check(const bench_bb *b, uint64_t passes, const char *who);

/* ---- peak memory ------------------------------------------------------ */

/* Resets the process's peak resident set (VmHWM) to its current size;
 * false where the kernel does not allow it (the peak is then the process's
 * since it started). */
bool bench_rss_reset(void);
/* The peak resident set in MiB: VmHWM, else getrusage's ru_maxrss. */
double bench_rss_peak_mib(void);

#ifdef __cplusplus
}
#endif
#endif
