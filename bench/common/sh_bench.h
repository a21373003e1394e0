/*
 * What the stackhouse benches (bench/NAME.c) share beyond bench.h: --spin-us,
 * a measured phase on a fresh system built from the standard parameters,
 * the system's teardown, and worker parks per 1000 operations. Header-only (static inline):
 * compare_caf.sh links every C file of bench/common/ into the CAF benches, which have no stackhouse
 * to link against.
 */
#ifndef BENCH_SH_BENCH_H
#define BENCH_SH_BENCH_H

#include <stackhouse/stackhouse.h>

#include "bench.h"

/* --spin-us into *spin_us, which the caller defaults to UINT64_MAX: the
 * runtime's own spin. */
static inline bench_opt sh_bench_spin_opt(uint64_t *spin_us) {
  bench_opt o = {
      "spin-us", "sh_config.spin_ns in us (default: the runtime's, 50)", spin_us, NULL, NULL, 0,
      UINT64_MAX};
  return o;
}

/* A new system of p->workers workers spinning spin_us (see above). */
static inline int sh_bench_system_new(const bench_params *p, uint64_t spin_us, sh_system **out) {
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = (uint32_t)p->workers;
  if (spin_us != UINT64_MAX) cfg.spin_ns = spin_us * 1000;
  return sh_system_new(&cfg, out);
}

/* One measured phase on a fresh system: builds it into *sys, lets
 * populate(ctx) spawn the actors and send the first messages, starts it and
 * measures through probe. 0 or a negative errno; *sys (NULL if it could not
 * be built) stays for the caller's checks and sh_bench_system_free. */
static inline int sh_bench_phase(const bench_params *p, uint64_t spin_us,
                                 int (*populate)(void *ctx), void *ctx, const bench_probe *probe,
                                 sh_system **sys, bench_sample *s) {
  int rc = sh_bench_system_new(p, spin_us, sys);
  if (rc == 0) rc = populate(ctx);
  if (rc == 0) rc = sh_system_start(*sys);
  if (rc == 0) bench_measure(p, probe, s);
  return rc;
}

/* Shuts down and frees sys, if there is one. */
static inline void sh_bench_system_free(sh_system *sys) {
  if (sys == NULL) return;
  sh_system_shutdown(sys);
  sh_system_free(sys);
}

/* Worker parks per 1000 of the sample's operations, from the system's
 * stats at the start and the end of its measured phase. */
static inline double sh_bench_parks_per_k(const sh_stats stats[2], const bench_sample *s) {
  uint64_t parks = stats[1].parks - stats[0].parks;
  return s->ops > 0 ? 1000.0 * (double)parks / (double)s->ops : 0;
}

#endif
