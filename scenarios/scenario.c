/*
 * The scenario framework: registry, one run of a scenario, and the
 * invariants every run checks (scenario.h).
 */
#include "scenario.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "system.h"

struct sh_scn {
  const sh_scenario *sc;
  uint64_t seed;
  uint32_t workers;
  void *state;
  atomic_uint_fast64_t draws;  /* sh_scn_rand calls so far */
  atomic_bool failed;          /* the first failure claims `detail` */
  atomic_bool done;
  char kind[32];
  char detail[256];
};

/* ---- registry --------------------------------------------------------------- */

/* The linker gathers every SH_SCENARIO pointer into this section and defines
 * its bounds. Weak: a program linked with no scenario has an empty list. */
extern const sh_scenario *const __start_sh_scenarios[] __attribute__((weak));
extern const sh_scenario *const __stop_sh_scenarios[] __attribute__((weak));

/* Registered scenarios are few (tens): the list is sorted on each call. */
#define SH_SCN_MAX 256

static const sh_scenario *sorted[SH_SCN_MAX];
static size_t nsorted;

static int by_name(const void *a, const void *b) {
  return strcmp((*(const sh_scenario *const *)a)->name, (*(const sh_scenario *const *)b)->name);
}

/* Link order must not decide the order of `shsim list` or of a sweep. */
static void registry_load(void) {
  if (nsorted > 0 || __start_sh_scenarios == NULL) return;
  size_t n = (size_t)(__stop_sh_scenarios - __start_sh_scenarios);
  assert(n <= SH_SCN_MAX);
  if (n > SH_SCN_MAX) n = SH_SCN_MAX;
  memcpy(sorted, __start_sh_scenarios, n * sizeof(sorted[0]));
  qsort(sorted, n, sizeof(sorted[0]), by_name);
  for (size_t i = 1; i < n; i++) assert(strcmp(sorted[i - 1]->name, sorted[i]->name) != 0);
  nsorted = n;
}

size_t sh_scenario_count(void) {
  registry_load();
  return nsorted;
}

const sh_scenario *sh_scenario_at(size_t i) {
  registry_load();
  return i < nsorted ? sorted[i] : NULL;
}

const sh_scenario *sh_scenario_find(const char *name) {
  registry_load();
  for (size_t i = 0; i < nsorted; i++)
    if (strcmp(sorted[i]->name, name) == 0) return sorted[i];
  return NULL;
}

/* ---- for scenario code -------------------------------------------------------- */

void *sh_scn_state(sh_scn *s) { return s->state; }
uint32_t sh_scn_workers(const sh_scn *s) { return s->workers; }
uint64_t sh_scn_seed(const sh_scn *s) { return s->seed; }

bool sh_scn_simulated(const sh_scn *s) {
  (void)s;
#ifdef SH_SIM
  return true;
#else
  return false;
#endif
}

/* splitmix64 of (seed, draw number): any thread may draw, no state but a counter. */
uint64_t sh_scn_rand(sh_scn *s) {
  /* relaxed: only uniqueness of the draw number matters. */
  uint64_t k = atomic_fetch_add_explicit(&s->draws, 1, memory_order_relaxed);
  uint64_t z = s->seed * 0x9E3779B97F4A7C15ull + (k + 1) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void fail(sh_scn *s, const char *kind, const char *fmt, va_list ap) {
  bool was = false;
  /* acq_rel: one winner writes kind and detail; the runner reads them after
   * the workers are joined (which orders everything). */
  if (!atomic_compare_exchange_strong_explicit(&s->failed, &was, true, memory_order_acq_rel,
                                               memory_order_acquire))
    return;
  snprintf(s->kind, sizeof(s->kind), "%s", kind);
  vsnprintf(s->detail, sizeof(s->detail), fmt, ap);
}

static void failf(sh_scn *s, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void failf(sh_scn *s, const char *kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail(s, kind, fmt, ap);
  va_end(ap);
}

bool sh_scn_check_at(sh_scn *s, bool cond, const char *file, int line, const char *fmt, ...) {
  if (cond) return true;
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  failf(s, "invariant", "%s:%d: %s", base != NULL ? base + 1 : file, line, msg);
  return false;
}

void sh_scn_done(sh_scn *s, sh_system *sys) {
  /* relaxed: sh_system_exit orders what matters; this only keeps it single. */
  if (!atomic_exchange_explicit(&s->done, true, memory_order_relaxed)) sh_system_exit(sys, 0);
}

/* ---- one run ------------------------------------------------------------------ */

/* The invariants every scenario shares; the system is shut down. */
static void check_common(sh_scn *s, sh_system *sys, const sh_stats *st) {
  SH_SCN_CHECK(s, st->asks == st->asks_resolved, "asks %llu != asks resolved %llu",
               (unsigned long long)st->asks, (unsigned long long)st->asks_resolved);
  uint64_t handled = st->delivered + st->replies_unknown + st->dropped_stopped;
  SH_SCN_CHECK(s, st->sent == handled,
               "sent %llu != delivered %llu + replies unknown %llu + dropped %llu",
               (unsigned long long)st->sent, (unsigned long long)st->delivered,
               (unsigned long long)st->replies_unknown, (unsigned long long)st->dropped_stopped);
  SH_SCN_CHECK(s, st->pool_outstanding == 0, "%llu pooled objects not returned",
               (unsigned long long)st->pool_outstanding);
  uint32_t busy = sh_system_houses_busy(sys);
  SH_SCN_CHECK(s, busy == 0, "%u houses left ready, scheduled or running", busy);
}

static void result_of(const sh_scn *s, sh_scn_result *r) {
  r->ok = !atomic_load_explicit(&s->failed, memory_order_acquire);
  snprintf(r->kind, sizeof(r->kind), "%s", r->ok ? "" : s->kind);
  snprintf(r->detail, sizeof(r->detail), "%s", r->ok ? "" : s->detail);
}

void sh_scenario_run(const sh_scenario *sc, uint64_t seed, uint32_t workers, sh_scn_result *r) {
  assert(sc != NULL && sc->setup != NULL && r != NULL);
  memset(r, 0, sizeof(*r));
  sh_scn s = {.sc = sc, .seed = seed};
  s.workers = workers != 0 ? workers : sc->workers != 0 ? sc->workers : 2;
  s.state = calloc(1, sc->state_size != 0 ? sc->state_size : 1);
  if (s.state == NULL) {
    failf(&s, "setup", "out of memory for the scenario's state");
    result_of(&s, r);
    return;
  }
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = s.workers;
  if (sc->configure != NULL) sc->configure(&s, &cfg);
  sh_system *sys = NULL;
  int rc = sh_system_new(&cfg, &sys);
  if (rc == 0) rc = sh_system_start(sys);
  if (rc == 0) rc = sc->setup(&s, sys);
  if (rc != 0) {
    failf(&s, "setup", "setup failed: %s", strerror(-rc));
    if (sys != NULL) sh_system_exit(sys, rc);
  }
  if (sys != NULL) {
    int code = sh_system_wait(sys);
    SH_SCN_CHECK(&s, code == 0 || rc != 0, "the system exited with code %d", code);
    sh_system_shutdown(sys);
    sh_system_stats(sys, &r->stats);
    if (rc == 0) {
      check_common(&s, sys, &r->stats);
      if (sc->verify != NULL) sc->verify(&s, sys, &r->stats);
    }
    sh_system_free(sys);
  }
  free(s.state);
  result_of(&s, r);
}
