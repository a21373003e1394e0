/*
 * The child side (child.h): runs units and reports them, also when they die.
 */
#include "child.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "covdump.h"
#include "pool.h"
#include "determinism.h"
#include "replayfile.h"
#include "swarm.h"

/* Present only in sanitizer builds (weak: NULL otherwise). */
extern void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

/* What the failure handlers need; they take no context argument. */
static struct {
  uint64_t unit;           /* the unit running */
  uint64_t start_ns;       /* when its run started */
  const char *record_path; /* write each run's replay file here */
} child;

/* Sends what the simulator knows about the unit that is failing. */
static void send_death(const char *kind, const char *detail) {
  replayfile_record(child.record_path);
  sh_sim_trace_abandon(kind);
  unit_rec r;
  unit_rec_init(&r, child.unit, UNIT_REC_LAST);
  unit_rec_fail(&r, kind, detail);
  r.real_ns = pool_now_ns() - child.start_ns;
  sh_sim_report_get(&r.rep);
  pool_send(&r);
}

__attribute__((noreturn)) static void on_sim_failure(const char *kind, const char *detail) {
  send_death(kind, detail);
  covdump_write(); /* _exit skips the coverage counters' exit hook */
  _exit(1);
}

/* The sanitizer prints its report to stderr, then calls this, then exits:
 * the parent takes the detail from the stderr tail. */
static void on_sanitizer_death(void) { send_death("sanitizer", ""); }

/* A crash, an assert or the watchdog: send the figures so far; the parent
 * classifies the death from the wait status. Best effort, it runs in a
 * signal handler. */
static void on_fatal_signal(int sig) {
  replayfile_record(child.record_path);
  /* Not async-signal-safe (stdio), but the process is dying anyway and a
   * trace that ends cleanly is worth the risk. */
  sh_sim_trace_abandon(sig == POOL_TIMEOUT_SIGNAL ? "hang" : sig == SIGABRT ? "assert" : "crash");
  unit_rec r;
  unit_rec_init(&r, child.unit, UNIT_REC_PARTIAL);
  r.real_ns = pool_now_ns() - child.start_ns; /* clock_gettime is async-signal-safe */
  sh_sim_report_get(&r.rep);
  pool_send(&r);
  signal(sig, SIG_DFL);
  raise(sig); /* delivered when the handler returns: the child dies by sig */
}

static void install_handlers(void) {
  sh_sim_on_failure(on_sim_failure);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_fatal_signal;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  /* assert() aborts; sanitizers do not handle SIGABRT by default. */
  sigaction(SIGABRT, &sa, NULL);
  sigaction(POOL_TIMEOUT_SIGNAL, &sa, NULL);
  if (__sanitizer_set_death_callback != NULL) {
    /* The sanitizers own the other fatal signals (their report is better). */
    __sanitizer_set_death_callback(on_sanitizer_death);
    return;
  }
  /* An alternate stack, so that a fiber's stack overflow still reports. */
  size_t sz = 64 * 1024;
  stack_t ss = {.ss_sp = malloc(sz), .ss_size = sz};
  if (ss.ss_sp != NULL) sigaltstack(&ss, NULL);
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) sigaction(fatal[i], &sa, NULL);
}

/* The options of unit u's run, as the simulator gets them. */
static void run_options(const args *a, const sh_scenario *sc, uint64_t seed, sh_sim_options *o,
                        uint32_t *workers) {
  *o = a->sim;
  *workers = a->workers;
  /* A replay file carries each decision's context. */
  o->keep_context = a->record_path != NULL;
  /* The hang watch decides nothing in the run: it applies to replays too. */
  o->hang_real_ms = sh_scenario_hang_real_ms(sc, args_hang_real_ms(a));
  /* A replay file holds the options as they were configured. */
  if (a->exact) return;
  o->seed = seed;
  o->vtime_limit_ns = sh_scenario_vtime_limit_ns(sc);
  o->max_steps = sh_scenario_max_steps(sc, o->max_steps);
  if (a->cmd == ARGS_CMD_FUZZ) swarm_draw(sc, seed, o, workers);
}

static void run_once(const args *a, const unit_plan *p, uint64_t u, unit_rec *out) {
  const sh_scenario *sc = unit_scn(p, u);
  uint64_t seed = unit_seed(p, u);
  if (a->batch != NULL) a->batch->pick(a->batch->ctx, u, &sc, &seed);
  sh_sim_options o;
  uint32_t workers;
  run_options(a, sc, seed, &o, &workers);
  if (a->batch != NULL) a->batch->options(a->batch->ctx, u, &o, &child.record_path);
  if (child.record_path != NULL)
    replayfile_prepare(&(replay_run){.scenario = sc->name, .workers = workers, .o = o,
                                     .faults = o.faults});
  unit_rec_init(out, u, UNIT_REC_RESULT);
  sh_scn_result r;
  child.start_ns = pool_now_ns();
  sh_sim_configure(&o);
  sh_scenario_run(sc, seed, workers, &r);
  /* A campaign keeps failed runs' files only: writing every run's costs as much as the run. */
  if (!r.ok || !a->record_failed_only) replayfile_record(child.record_path);
  out->real_ns = pool_now_ns() - child.start_ns;
  sh_sim_report_get(&out->rep);
  out->ok = r.ok;
  out->msgs = r.stats.delivered;
  if (!r.ok) unit_rec_fail(out, r.kind, r.detail);
}

/* --check-determinism: the same seed again must retrace the same run. */
static void check_again(const args *a, const unit_plan *p, uint64_t u, unit_rec *first) {
  det_log log;
  if (det_keep(&log) != 0) {
    unit_rec_fail(first, "exit", "out of memory for the determinism check");
    return;
  }
  unit_rec again;
  run_once(a, p, u, &again);
  char d[256];
  if (!det_same(&log, d, sizeof(d))) unit_rec_fail(first, "nondeterministic", d);
  else if (again.ok != first->ok) unit_rec_fail(first, "nondeterministic", "the same run, then a failure");
  det_free(&log);
}

static void run_unit(const args *a, const unit_plan *p, uint64_t u, unit_rec *out) {
  child.unit = u;
  /* Where two runs part, to the scheduling point. */
  sh_sim_record_points(a->check_determinism);
  run_once(a, p, u, out);
  if (a->check_determinism && out->ok) check_again(a, p, u, out);
}

/* LeakSanitizer (sanitizer builds): every allocation of a run must be freed
 * by its end. The report goes to stderr, where the parent finds the detail.
 * A check costs several ms (longer than most runs), so a sweep's child
 * checks once for all its runs and the parent rechecks a leaking range run
 * by run (runner.c). */
static bool leaked(void) {
  return __lsan_do_recoverable_leak_check != NULL && __lsan_do_recoverable_leak_check() != 0;
}

static void check_range(uint64_t lo, uint64_t hi) {
  if (lo >= hi || !leaked()) return;
  unit_rec r;
  unit_rec_init(&r, lo, UNIT_REC_LEAKED);
  r.unit_end = hi;
  pool_send(&r);
}

static void run_units(const args *a, const unit_plan *p, uint64_t lo, uint64_t hi,
                      bool leak_each) {
  for (uint64_t u = lo; u < hi; u++) {
    unit_rec r;
    run_unit(a, p, u, &r);
    if (leak_each && r.ok && leaked()) unit_rec_fail(&r, "leak", "");
    r.type = r.ok ? UNIT_REC_RESULT : UNIT_REC_LAST;
    /* The failed run's own leaks are in this check too; its recheck fails
     * the same way again, which explains them. */
    if (!leak_each && !r.ok) check_range(lo, u + 1);
    pool_send(&r);
    if (!r.ok) return;
  }
  if (!leak_each) check_range(lo, hi);
}

void child_run(const args *a, const unit_plan *p, uint64_t lo, uint64_t hi, bool leak_each) {
  child.record_path = a->record_path;
  install_handlers();
  run_units(a, p, lo, hi, leak_each);
}
