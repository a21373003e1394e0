/*
 * The scenario framework: registry, one run of a scenario, and the
 * invariants every run checks (scenario.h).
 */
#include <stackhouse/cluster.h>
#include <stackhouse/scenario.h>

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackhouse/probe.h>

#include "scnidle.h"
#ifdef SH_SIM
#include <stackhouse/sim.h>
#endif

struct sh_scn {
  const sh_scenario *sc;
  uint64_t seed;
  uint32_t workers;
  void *state;
  atomic_uint_fast64_t draws;  /* sh_scn_rand calls so far */
  atomic_bool failed;          /* the first failure claims `detail` */
  atomic_bool done;
  int exit_code;               /* what sh_scn_done asks for (scn_exit_code) */
  atomic_int want;             /* the code of the end that won `done` */
  bool faulty;
  bool strict;                 /* the shared invariants: never relaxed */
  atomic_uint relaxed;         /* checks a fault excused (sh_scn_check_at) */
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

uint64_t sh_scenario_vtime_limit_ns(const sh_scenario *sc) {
  uint64_t ms = sc->vtime_limit_ms != 0 ? sc->vtime_limit_ms : SH_SCN_VTIME_LIMIT_MS_DEFAULT;
  return ms * 1000000ull;
}

uint64_t sh_scenario_max_steps(const sh_scenario *sc, uint64_t run_max) {
  return sc->max_steps != 0 && sc->max_steps < run_max ? sc->max_steps : run_max;
}

uint64_t sh_scenario_hang_real_ms(const sh_scenario *sc, uint64_t run_ms) {
  return run_ms != 0 && sc->hang_real_ms != 0 && sc->hang_real_ms < run_ms ? sc->hang_real_ms
                                                                             : run_ms;
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

bool sh_scn_faulty(const sh_scn *s) { return s->faulty; }

static bool fault_fired(void);

/* Not only -ENOMEM: a fault can stop an actor (-ESHUTDOWN to its senders)
 * or spoil a reply a setup checks. */
bool sh_scn_fault_error(const sh_scn *s, int rc) { return s->faulty && rc != 0 && fault_fired(); }

/* Whether this run has faults; a scenario that cannot tolerate them turns
 * them off first. */
static bool faults_on(const sh_scenario *sc) {
#ifdef SH_SIM
  bool weather = (sc->flags & SH_SCN_WEATHER) != 0 && sh_sim_faults_benign();
  if ((sc->flags & SH_SCN_NO_FAULTS) && !weather) sh_sim_faults_disable();
  /* The network's weather alone excuses nothing: every check holds. */
  return sh_sim_faults_active() && !sh_sim_faults_benign();
#else
  /* On threads the points are the process's (SH_FAULTS, or libfiu's own
   * fiu-run and fiu-ctrl): no scenario can turn them off, and every one
   * runs as tolerantly as it can. */
  (void)sc;
  return sh_faults_enabled();
#endif
}

/* splitmix64 of (seed, draw number): any thread may draw, no state but a counter. */
static uint64_t fresh_draw(sh_scn *s) {
  /* relaxed: only uniqueness of the draw number matters. */
  uint64_t k = atomic_fetch_add_explicit(&s->draws, 1, memory_order_relaxed);
  uint64_t z = s->seed * 0x9E3779B97F4A7C15ull + (k + 1) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Under the simulator a draw is a decision of the choice sequence (sim.h,
 * sh_sim_draw): a replay or a shrink gives the value. */
static uint64_t draw(sh_scn *s, uint64_t bound, uint64_t fresh) {
#ifdef SH_SIM
  (void)s;
  return sh_sim_draw(SH_SIM_STREAM_SCENARIO, bound, fresh);
#else
  (void)s;
  (void)bound;
  return fresh;
#endif
}

uint64_t sh_scn_rand(sh_scn *s) { return draw(s, 0, fresh_draw(s)); }

uint64_t sh_scn_below(sh_scn *s, uint64_t n) {
  assert(n > 0);
  return draw(s, n, fresh_draw(s) % n);
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

/* Whether a fault fired in this run so far (on threads, in this process):
 * then a scenario's own check may fail because of it. */
static bool fault_fired(void) { return sh_faults_fired() > 0; }

/* A mark in the simulator's trace file, if one is written (sim.h). */
static void trace_mark(const char *cat, const char *name, const char *text) {
#ifdef SH_SIM
  sh_sim_trace_mark(cat, name, text);
#else
  (void)cat, (void)name, (void)text;
#endif
}

static bool tracing(void) {
#ifdef SH_SIM
  return sh_sim_tracing();
#else
  return false;
#endif
}

/* A failed check in the trace: where and when it failed, on its fiber. */
static void trace_check(bool excused, const char *where, const char *msg) {
  if (!tracing()) return;
  char name[384]; /* room for where and msg whole */
  snprintf(name, sizeof(name), "check %s: %s: %s", excused ? "excused" : "failed", where, msg);
  trace_mark("check", name, name);
}

bool sh_scn_check_at(sh_scn *s, bool cond, const char *file, int line, const char *fmt, ...) {
  if (cond) return true;
  bool excused = s->faulty && !s->strict && fault_fired();
  /* relaxed: a count, read after the workers are joined. */
  if (excused) atomic_fetch_add_explicit(&s->relaxed, 1, memory_order_relaxed);
  if (excused && !tracing()) return false;
  char msg[200], where[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  snprintf(where, sizeof(where), "%s:%d", base != NULL ? base + 1 : file, line);
  trace_check(excused, where, msg);
  if (!excused) failf(s, "invariant", "%s: %s", where, msg);
  return false;
}

uint64_t sh_scn_clock_ns(void) {
#ifdef SH_SIM
  return sh_sim_clock_ns();
#else
  struct timespec ts;
  int rc = clock_gettime(CLOCK_MONOTONIC, &ts); /* the epoll backend's sh_plat_now_ns clock */
  assert(rc == 0);
  (void)rc;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

uint64_t sh_scn_true_ns(void) {
#ifdef SH_SIM
  sh_sim_report r;
  sh_sim_report_get(&r);
  return r.vtime_ns;
#else
  return sh_scn_clock_ns();
#endif
}

uint64_t sh_scn_true_of_ns(uint64_t local_ns) {
#ifdef SH_SIM
  return sh_sim_true_of_ns(local_ns);
#else
  return local_ns;
#endif
}

void sh_scn_note(sh_scn *s, const char *fmt, ...) {
  (void)s;
  if (!tracing()) return;
  char text[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  trace_mark("note", text, text);
}

/* The run's one end: the first (the workload's, or a setup that failed)
 * decides the code, which the wait must then read. Whether it was this. */
static bool scn_claim(sh_scn *s, int code) {
  /* relaxed: only keeps the end single; `want` is published below. */
  if (atomic_exchange_explicit(&s->done, true, memory_order_relaxed)) return false;
  /* release: the runner reads it after its wait returned (acquire). */
  atomic_store_explicit(&s->want, code, memory_order_release);
  return true;
}

static void scn_end(sh_scn *s, sh_system *sys, int code) {
  if (scn_claim(s, code)) sh_system_exit(sys, code);
}

void sh_scn_done(sh_scn *s, sh_system *sys) { scn_end(s, sys, s->exit_code); }

void sh_scn_exited(sh_scn *s, int code) { (void)scn_claim(s, code); }

/* The code a run's workload ends with: 0 for a quarter of the seeds, else
 * a small positive number, from the seed alone (no draw: the choice
 * sequence stays that of every earlier run), so that every scenario checks
 * that its waiter reads the code its end asked for. */
static int scn_exit_code(uint64_t seed) {
  uint64_t z = (seed + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 32;
  return (z & 3) == 0 ? 0 : 1 + (int)((z >> 2) % 125);
}

bool sh_scn_check_eq_at(sh_scn *s, uint64_t got, uint64_t want, const char *what,
                        const char *file, int line) {
  return sh_scn_check_at(s, got == want, file, line, "%llu %s, want %llu",
                         (unsigned long long)got, what, (unsigned long long)want);
}

void sh_scn_count_down(sh_scn *s, sh_system *sys, atomic_uint *left) {
  /* acq_rel: the last decrement comes after every earlier one and what its
   * caller did before it, so whoever ends the workload may read it all. */
  if (atomic_fetch_sub_explicit(left, 1, memory_order_acq_rel) == 1) sh_scn_done(s, sys);
}

/* ---- one run ------------------------------------------------------------------ */

/* The invariants every scenario shares; the system is shut down. */
static void check_common(sh_scn *s, sh_system *sys, const sh_stats *st) {
  s->strict = true;
  SH_SCN_CHECK(s, st->asks == st->asks_resolved, "asks %llu != asks resolved %llu",
               (unsigned long long)st->asks, (unsigned long long)st->asks_resolved);
  uint64_t handled = st->delivered + st->replies_unknown + st->dropped_stopped;
  SH_SCN_CHECK(s, st->sent == handled,
               "sent %llu != delivered %llu + replies unknown %llu + dropped %llu",
               (unsigned long long)st->sent, (unsigned long long)st->delivered,
               (unsigned long long)st->replies_unknown, (unsigned long long)st->dropped_stopped);
  SH_SCN_CHECK(s, st->pool_outstanding == 0, "%llu pooled objects not returned",
               (unsigned long long)st->pool_outstanding);
  uint32_t busy = sh_system_busy(sys);
  SH_SCN_CHECK(s, busy == 0, "%u actors left ready, scheduled or running", busy);
  s->strict = false;
}

static void result_of(const sh_scn *s, sh_scn_result *r) {
  r->ok = !atomic_load_explicit(&s->failed, memory_order_acquire);
  snprintf(r->kind, sizeof(r->kind), "%s", r->ok ? "" : s->kind);
  snprintf(r->detail, sizeof(r->detail), "%s", r->ok ? "" : s->detail);
}

/* Seconds (virtual in the simulator) a faulty run may go without a message
 * sent or delivered before its workload counts as stalled. */
#define SH_SCN_STALL_S 3

/* sh_system_wait in a faulty run: a fault can lose the message a workload
 * waits for, and then it never ends. A stalled run is cut (*rc = -ENOMEM):
 * it ends, and only the shared invariants are checked. */
static int wait_faulty(sh_scn *s, sh_system *sys, int *rc) {
  uint64_t last = UINT64_MAX;
  for (uint32_t idle = 0;;) {
    int code = sh_system_wait_ms(sys, 1000);
    if (code != -ETIMEDOUT) return code;
    sh_stats st;
    sh_system_stats(sys, &st);
    uint64_t now = st.sent + st.delivered;
    idle = now == last ? idle + 1 : 0;
    last = now;
    if (idle < SH_SCN_STALL_S) continue;
    if (*rc == 0) *rc = -ENOMEM;
    sh_scn_done(s, sys);
    return sh_system_wait(sys);
  }
}

/* Virtual time between two looks at a scenario's liveness condition. */
#define SH_SCN_LIVENESS_POLL_MS 10

/* sh_system_wait for a scenario with a heal (a cluster's): at heal_ms the
 * nemesis stops, then `liveness` must come to hold within liveness_ms. */
static int wait_healed(sh_scn *s, sh_system *sys, uint64_t start_ns) {
  const sh_scenario *sc = s->sc;
  uint64_t heal_ns = start_ns + sc->heal_ms * 1000000u, now = sh_scn_clock_ns();
  if (now < heal_ns) {
    int code = sh_system_wait_ms(sys, (int64_t)((heal_ns - now + 999999u) / 1000000u));
    if (code != -ETIMEDOUT) return code;
  }
  int rc = sh_node_calm();
  if (rc != 0) failf(s, "setup", "the heal failed: %s", strerror(-rc));
  uint64_t within = sc->liveness_ms != 0 ? sc->liveness_ms : 5000;
  const char *name = sc->liveness_name != NULL ? sc->liveness_name : "the liveness condition";
  /* Bounded by within / the poll. */
  for (uint64_t waited = 0; sc->liveness != NULL; waited += SH_SCN_LIVENESS_POLL_MS) {
    if (sc->liveness(s)) return sh_system_wait(sys);
    if (waited >= within) {
      failf(s, "liveness", "%s did not hold within %llu ms of the heal at %llu ms", name,
            (unsigned long long)within, (unsigned long long)sc->heal_ms);
      trace_mark("fail", "FAIL: liveness", name);
      sh_scn_done(s, sys);
      return sh_system_wait(sys);
    }
    int code = sh_system_wait_ms(sys, SH_SCN_LIVENESS_POLL_MS);
    if (code != -ETIMEDOUT) return code;
  }
  return sh_system_wait(sys);
}

/* The idle check (scnidle.c) of a run whose workload ended: strict, as
 * the shared invariants are (a fault excuses no busy worker). */
static void check_idle(sh_scn *s, sh_system *sys, const sh_config *cfg) {
  if (s->sc->flags & SH_SCN_NO_IDLE) return;
  char why[200];
  sh_scn_idle_verdict v = sh_scn_idle_check(sys, cfg->pool_idle_ns, cfg->spin_ns, why, sizeof(why));
  if (v == SH_SCN_IDLE_BUSY) {
    failf(s, "invariant", "%s", why);
    trace_mark("fail", "FAIL: idle", why);
  }
}

void sh_scenario_run(const sh_scenario *sc, uint64_t seed, uint32_t workers, sh_scn_result *r) {
  assert(sc != NULL && sc->setup != NULL && r != NULL);
  memset(r, 0, sizeof(*r));
  sh_scn s = {.sc = sc, .seed = seed, .faulty = faults_on(sc), .exit_code = scn_exit_code(seed)};
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
  /* After the new: in the simulator it starts the run's clock. */
  uint64_t start_ns = sh_scn_clock_ns();
  if (rc == 0) rc = sh_system_start(sys);
  if (rc == 0) rc = sc->setup(&s, sys);
  /* A fault cut the run short: what ran must still add up. */
  bool cut = sh_scn_fault_error(&s, rc);
  if (rc != 0 && !cut) {
    failf(&s, "setup", "setup failed: %s", strerror(-rc));
    trace_mark("fail", "FAIL: setup", strerror(-rc));
  }
  if (rc != 0 && sys != NULL) scn_end(&s, sys, rc);
  if (sys != NULL) {
    int code = s.faulty             ? wait_faulty(&s, sys, &rc)
               : sc->heal_ms != 0 ? wait_healed(&s, sys, start_ns)
                                  : sh_system_wait(sys);
    int want = atomic_load_explicit(&s.want, memory_order_acquire);
    /* A cluster's nodes stop with the workload (off the simulator: none). */
    int stop = sh_node_stop_all();
    if (stop != 0 && stop != -ENOTSUP) failf(&s, "setup", "stopping the nodes: %s", strerror(-stop));
    if (rc == 0) check_idle(&s, sys, &cfg);
    sh_system_shutdown(sys);
    /* Never excused: no fault changes the code an exit gave. Strict only
     * once the workers are joined: they read the flag in their checks. */
    s.strict = true;
    SH_SCN_CHECK(&s, code == want, "the system exited with code %d, its end asked for %d", code,
                 want);
    s.strict = false;
    sh_system_stats(sys, &r->stats);
    cut = sh_scn_fault_error(&s, rc);
    if (rc == 0 || cut) check_common(&s, sys, &r->stats);
    /* A cut run is verified too: its checks are excused (a fault fired),
     * but verify is also where a scenario joins the threads it started. */
    if ((rc == 0 || cut) && sc->verify != NULL) sc->verify(&s, sys, &r->stats);
    /* A listener of what nodes tell points into this run's state, which
     * goes now (a setup that failed never reached the verify that unsets it). */
    (void)sh_node_listen(NULL, NULL);
    sh_system_free(sys);
  }
  free(s.state);
  result_of(&s, r);
}
