/*
 * Coverage for guided exploration (sim.h, "Coverage"): the edge hook of
 * -fsanitize-coverage=trace-pc and the runtime's sometimes-points.
 *
 * Edges are AFL's: each instrumented basic block hashes its return address
 * (an offset from the binary's start, so that the same binary gives the
 * same buckets whatever its load address) into a 16-bit id, and the edge
 * from the previous block is id ^ (previous id >> 1). The previous id is
 * one variable for all fibers: an edge across a fiber switch is a pair of
 * blocks that ran one after the other, which is coverage of a kind too.
 * Nothing here is instrumented itself (the Makefile instruments the code
 * under test only), and nothing here changes a run: no draw, no step, no
 * hash.
 *
 * Sometimes-points are listed by pointer in the section sh_sometimes
 * (core/plat.h); the list is sorted by (file, line, text) once, so the
 * order of sh_sim_coverage.sometimes is the same in every build of the
 * same sources. A point compiled into several objects (a header's inline
 * function) is one point.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/sim.h>

#include "base/check.h"
#include "coverage.h"
#include "plat.h"
#include "run.h"

_Static_assert(sizeof(sh_sim_sometimes) == sizeof(sh_sometimes_point) &&
                   offsetof(sh_sim_sometimes, line) == offsetof(sh_sometimes_point, line),
               "sim.h's sometimes-point is core/plat.h's");

static sh_sim_coverage *attached;
static bool edges_seen;
static uint32_t prev_edge;
/* The last trace point of each fiber, as (kind, name) hashed. */
static uint64_t last_state[SH_SIM_MAX_FIBERS];

void sh_sim_coverage_attach(sh_sim_coverage *c) {
  attached = c;
  prev_edge = 0;
  memset(last_state, 0, sizeof(last_state));
}

bool sh_sim_coverage_edges_compiled(void) { return edges_seen; }

/* The linker's bounds of the binary and of the section (weak: a binary
 * with no point has no section). */
extern const char __executable_start[];
extern const sh_sometimes_point *const __start_sh_sometimes[] __attribute__((weak));
extern const sh_sometimes_point *const __stop_sh_sometimes[] __attribute__((weak));

/* Weak: a program that links its own trace-pc runtime (a fuzzer's) keeps
 * it, and explore then records no edges. */
void __sanitizer_cov_trace_pc(void) __attribute__((weak));
void __sanitizer_cov_trace_pc(void) {
  edges_seen = true;
  sh_sim_coverage *c = attached;
  if (c == NULL) return;
  uint64_t pc = (uint64_t)((uintptr_t)__builtin_return_address(0) - (uintptr_t)__executable_start);
  /* A multiplicative hash's high bits: neighbouring blocks land apart. */
  uint32_t id = (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> 48);
  uint32_t e = (id ^ prev_edge) & (SH_SIM_EDGES - 1);
  prev_edge = id >> 1;
  if (c->edges[e] != UINT8_MAX) c->edges[e]++;
}

/* ---- message states ------------------------------------------------------------ */

void sh_simcoverage_trace(uint32_t fiber, uint32_t kind, uint64_t name_hash) {
  sh_sim_coverage *c = attached;
  if (c == NULL || fiber >= SH_SIM_MAX_FIBERS) return;
  uint64_t cur = (name_hash ^ kind) * 0x9e3779b97f4a7c15ull;
  uint32_t i = (uint32_t)((cur ^ (last_state[fiber] >> 1)) >> 52) & (SH_SIM_STATES - 1);
  last_state[fiber] = cur;
  if (c->states[i] != UINT8_MAX) c->states[i]++;
}

/* ---- sometimes-points ---------------------------------------------------------- */

static struct {
  bool made;
  size_t nraw, n;
  const sh_sometimes_point *raw[SH_SIM_SOMETIMES_MAX]; /* as the section lists them */
  uint32_t index[SH_SIM_SOMETIMES_MAX];                 /* raw[i]'s place in sorted */
  sh_sim_sometimes sorted[SH_SIM_SOMETIMES_MAX];
} cat;

static int point_cmp(const void *x, const void *y) {
  const sh_sim_sometimes *a = x, *b = y;
  int c = strcmp(a->file, b->file);
  if (c == 0) c = (a->line > b->line) - (a->line < b->line);
  return c != 0 ? c : strcmp(a->what, b->what);
}

static void catalog(void) {
  if (cat.made) return;
  cat.made = true;
  const sh_sometimes_point *const *p = __start_sh_sometimes;
  size_t n = p != NULL ? (size_t)(__stop_sh_sometimes - __start_sh_sometimes) : 0;
  /* A bound of the coverage region's layout: more points need a bigger
   * SH_SIM_SOMETIMES_MAX, not a silent cut. */
  SH_ASSERT(n <= SH_SIM_SOMETIMES_MAX);
  cat.nraw = n;
  for (size_t i = 0; i < n; i++) {
    cat.raw[i] = p[i];
    memcpy(&cat.sorted[i], p[i], sizeof(cat.sorted[i]));
  }
  qsort(cat.sorted, n, sizeof(cat.sorted[0]), point_cmp);
  size_t m = 0; /* the same point from several objects: once */
  for (size_t i = 0; i < n; i++)
    if (m == 0 || point_cmp(&cat.sorted[m - 1], &cat.sorted[i]) != 0)
      cat.sorted[m++] = cat.sorted[i];
  cat.n = m;
  for (size_t i = 0; i < n; i++) {
    sh_sim_sometimes key;
    memcpy(&key, p[i], sizeof(key));
    const sh_sim_sometimes *at = bsearch(&key, cat.sorted, m, sizeof(key), point_cmp);
    SH_ASSERT(at != NULL);
    cat.index[i] = (uint32_t)(at - cat.sorted);
  }
}

size_t sh_sim_sometimes_points(const sh_sim_sometimes **out) {
  catalog();
  *out = cat.sorted;
  return cat.n;
}

void sh_plat_sometimes(const sh_sometimes_point *pt, bool cond) {
  sh_sim_coverage *c = attached;
  if (!cond || c == NULL) return;
  catalog();
  /* Bounded by the points listed (at most SH_SIM_SOMETIMES_MAX). */
  for (size_t i = 0; i < cat.nraw; i++) {
    if (cat.raw[i] == pt) {
      c->sometimes[cat.index[i]] = 1;
      return;
    }
  }
  SH_ASSERT(!"a sometimes-point missing from the section sh_sometimes");
}
