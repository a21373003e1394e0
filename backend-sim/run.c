/*
 * One simulation's run (run.h): configuration, report, failures, the clock
 * and the steps.
 *
 * Steps. Every scheduling point the core passes (SH_YIELD, sh_plat_relax,
 * sh_plat_yield_cpu, a park) is a step: the clock advances step_ns (a lone
 * poller's idle_step_ns), bounds are checked (max_steps: livelock;
 * vtime_limit_ns), sleepers whose deadline passed become runnable, and the
 * strategy (strategy.c), or under replay the schedule (replay.c), decides
 * whether to switch. A fiber that parks or blocks always gives way; one that
 * yields its CPU (a spin wait) gives way to another runnable fiber under
 * every strategy. A fiber that ran SH_SIM_QUANTUM_STEPS without giving way
 * is preempted. Every switch is recorded (replay.c).
 *
 * Time. When no fiber can run, the clock jumps to the earliest deadline of
 * a park or of a timed event wait, or to the fake network's next arrival
 * (net.c), whichever comes first; if there is none, nothing can ever run
 * again: FAIL:deadlock. Arrivals due are delivered before sleepers wake.
 *
 * Trace hash. 64 bits, mixed (sh_simrun_mix) with every switch (from, to,
 * the yield point's name), every time jump (new time), every thread fiber's
 * creation (its index), every core trace point (fiber, kind, house number,
 * name, flow id), every send, arrival and draw of the fake network (net.c)
 * and the final step count and clock. Names are hashed by
 * content, never by address.
 */
#include "run.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "memmodel.h"
#include "misuse.h"
#include "model.h"
#include "net.h"
#include "node.h"
#include "nodemem.h"
#include "replay.h"
#include "strategy.h"
#include "watchdog.h"

/* Steps a fiber may run without giving way before it is preempted: a real
 * machine runs woken peers on other CPUs, or preempts; without this a worker
 * that always has work would starve them under `none` and `pct`. */
#define SH_SIM_QUANTUM_STEPS 10000

sh_simrun sh_simrun_state;
sh_simrun_name sh_simrun_names[SH_SIMRUN_NAME_CACHE];

static sh_simrun *const S = &sh_simrun_state;

/* ---- configuration and report ----------------------------------------------- */

void sh_sim_options_default(sh_sim_options *o) {
  memset(o, 0, sizeof(*o));
  o->seed = 1;
  o->strategy = SH_SIM_RANDOM;
  o->switch_permille = 100;
  o->pct_depth = 3;
  o->pct_steps = 10000;
  o->step_ns = 100;
  o->idle_step_ns = 2000;
  o->max_steps = 100000000;
  o->hang_real_ms = 10000;
}

void sh_sim_on_failure(sh_sim_fail_fn fn) { S->on_fail = fn; }

void sh_sim_configure(const sh_sim_options *o) {
  assert(S->tab == NULL);
  sh_sim_fail_fn keep = S->on_fail;
  memset(S, 0, sizeof(*S));
  S->on_fail = keep;
  S->opt = *o;
  /* A name freed by the last simulation may have left its address to a new one. */
  memset(sh_simrun_names, 0, sizeof(sh_simrun_names));
  sh_plat_sim_local = NULL; /* S->outside_local, cleared above */
  if (S->opt.step_ns == 0) S->opt.step_ns = 1;
  S->vtime_limit = o->vtime_limit_ns != 0 ? o->vtime_limit_ns : UINT64_MAX;
  /* The schedule's stream is seeded first, the core's next. */
  uint64_t x = o->seed;
  sh_simstrategy_reset(o, &x);
  sh_simrng_seed(&S->core_rng, &x);
  /* The fault stream last: the others draw as they did without faults. */
  sh_simfault_configure(o, &x);
  /* Weak memory's stream after it, for the same reason. */
  sh_simmem_configure(o, &x);
  /* The network's stream after those: a run without sockets stays as it was. */
  sh_simnet_configure(o, &x);
  sh_simreplay_reset(o->schedule, o->schedule_len, o->keep_context != 0);
  sh_simnode_reset();
  /* The reference model checks this simulation from its start. */
  sh_simmodel_reset();
  S->hash = 0x5348534D00000000ull ^ o->seed;
  S->configured = true;
}

void sh_simrun_ensure_configured(void) {
  if (S->configured) return;
  sh_sim_options o;
  sh_sim_options_default(&o);
  sh_sim_configure(&o);
}

void sh_sim_report_get(sh_sim_report *r) {
  r->hash = S->hash;
  r->steps = S->steps;
  r->vtime_ns = S->now;
  r->switches = S->switches;
  r->jumps = S->jumps;
  r->faults = sh_simfault_fired();
  r->stale_reads = sh_simmem_stale_reads();
}

/* ---- failures -------------------------------------------------------------- */

static void default_fail(const char *kind, const char *detail) {
  fprintf(stderr, "simulation failed: %s: %s\n", kind, detail);
  fflush(NULL);
  _exit(1);
}

/* A trace that could not be written is worth a warning, not a failed run. */
void sh_simrun_trace_close(void) {
  if (S->trace == NULL) return;
  int rc = sh_simtrace_close(S->trace, S->now);
  S->trace = NULL;
  if (rc != 0) fprintf(stderr, "shsim: writing the trace failed: %s\n", strerror(-rc));
}

/* The failure drawn where it happened (the fiber that failed, at its
 * virtual time) with its detail, then the file finished. */
static void trace_fail(const char *why, const char *detail) {
  if (S->trace == NULL) return;
  char name[64];
  snprintf(name, sizeof(name), "FAIL: %s", why);
  sh_simtrace_mark(S->trace, S->now, sh_simrun_cur(), "fail", name, detail);
  sh_simrun_trace_close();
}

void sh_sim_trace_abandon(const char *why) { trace_fail(why, NULL); }

bool sh_sim_tracing(void) { return S->trace != NULL; }

void sh_sim_trace_mark(const char *cat, const char *name, const char *text) {
  if (S->trace == NULL) return;
  sh_simmisuse_check_thread("sh_sim_trace_mark");
  sh_simtrace_mark(S->trace, S->now, sh_simrun_cur(), cat, name, text);
}

void sh_simrun_fail(const char *kind, const char *detail) {
  /* A handler that passes a scheduling point fails the same bound again. */
  if (S->failing) default_fail(kind, detail);
  S->failing = true;
  sh_simwatchdog_disarm();
  trace_fail(kind, detail);
  (S->on_fail != NULL ? S->on_fail : default_fail)(kind, detail);
  default_fail(kind, detail); /* a handler that returned */
  abort();
}

/* ---- fiber states ------------------------------------------------------------ */

/* Parked, or blocked: a deadline (if not SH_PLAT_NO_DEADLINE) wakes it. A
 * fiber blocked without one has SH_PLAT_NO_DEADLINE there. */
static bool sleeping(const sh_simrun_fiber *f) {
  return f->state == SH_SIMRUN_PARKED || f->state == SH_SIMRUN_BLOCKED;
}

/* The network's next arrival counts as a deadline: the clock stops there. */
void sh_simrun_recompute_deadline(sh_simtab *p) {
  uint64_t d = sh_simnet_next();
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (sleeping(&p->f[i]) && p->f[i].deadline < d) d = p->f[i].deadline;
  p->next_deadline = d;
}

void sh_simrun_make_runnable(sh_simrun_fiber *f) {
  /* Started, woken, unblocked: through the platform, it synchronized with
   * the fiber that did it (a thread start, a write to an eventfd). */
  sh_simmem_sync(f->index);
  sh_simrun_set_state(S->tab, f, SH_SIMRUN_RUNNABLE);
  f->deadline = SH_PLAT_NO_DEADLINE;
}

void sh_simrun_unblock(sh_simtab *p, sh_simrun_fiber *f) {
  if (f->state != SH_SIMRUN_BLOCKED) return;
  bool timed = f->deadline != SH_PLAT_NO_DEADLINE;
  sh_simrun_make_runnable(f);
  if (timed) sh_simrun_recompute_deadline(p);
}

void sh_simrun_block(sh_simtab *p, uint64_t deadline_ns) {
  sh_simrun_fiber *f = &p->f[p->cur];
  sh_simrun_set_state(p, f, SH_SIMRUN_BLOCKED);
  f->deadline = deadline_ns;
  if (deadline_ns < p->next_deadline) p->next_deadline = deadline_ns;
}

/* Arrivals due are delivered (their readiness wakes parked workers), then
 * sleeping fibers whose deadline has come become runnable. */
static void expire(sh_simtab *p) {
  if (sh_simnet_next() <= S->now) sh_simnet_deliver(S->now);
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (sleeping(&p->f[i]) && p->f[i].deadline <= S->now) sh_simrun_make_runnable(&p->f[i]);
  sh_simrun_recompute_deadline(p);
}

/* ---- the clock ----------------------------------------------------------------- */

void sh_simrun_clock_jump(uint64_t t) {
  if (t > S->now) S->now = t;
  S->jumps++;
  sh_simrun_mix(SH_SIMRUN_MIX_JUMP);
  sh_simrun_mix(S->now);
  if (S->trace != NULL) sh_simtrace_instant(S->trace, S->now, sh_simrun_cur(), "time jump");
}

/* No fiber can run: jump the clock to the earliest deadline. */
static void jump(sh_simtab *p) {
  if (p->next_deadline == SH_PLAT_NO_DEADLINE) {
    char d[200];
    uint32_t workers = 0, done = 0, threads = 0;
    for (uint32_t i = 0; i < p->nfibers; i++) {
      const sh_simrun_fiber *f = &p->f[i];
      workers += f->kind == SH_SIMRUN_WORKER && f->state != SH_SIMRUN_FREE;
      done += f->kind == SH_SIMRUN_WORKER && f->state == SH_SIMRUN_DONE;
      threads += f->kind == SH_SIMRUN_THREAD && f->state != SH_SIMRUN_FREE;
    }
    snprintf(d, sizeof(d),
             "every fiber is parked or blocked with no deadline (vtime %llu ns, %u of %u workers "
             "finished, %u thread fibers started)",
             (unsigned long long)S->now, done, workers, threads);
    sh_simrun_fail("deadlock", d);
  }
  sh_simrun_clock_jump(p->next_deadline);
  if (S->now >= p->next_deadline) expire(p);
}

/* Whether a runnable fiber other than the current one has work. */
static bool others_busy(const sh_simtab *p) {
  uint32_t words = (p->nfibers + 63) / 64;
  for (uint32_t w = 0; w < words; w++) {
    uint64_t b = p->runnable[w] & p->busy[w];
    if (w == p->cur / 64) b &= ~(1ull << (p->cur % 64));
    if (b != 0) return true;
  }
  return false;
}

/* The clock's advance for this step. A fiber polling alone, or while every
 * other runnable fiber polls too, waits for nothing but time (timers, a
 * sleeper's deadline, a delivery): its steps advance idle_step_ns, so an
 * idle poll costs tens of steps instead of hundreds (the core's poll
 * thresholds are in nanoseconds), but never past the next deadline. While
 * some fiber has work, polls take step_ns, so time does not race ahead of
 * that work. */
static uint64_t advance(sh_simtab *p) {
  if (S->opt.idle_step_ns <= S->opt.step_ns ||
      (others_busy(p) && !sh_simstrategy_polls_alone(p)))
    return S->opt.step_ns;
  uint64_t d = S->opt.idle_step_ns;
  if (p->next_deadline > S->now && p->next_deadline - S->now < d) d = p->next_deadline - S->now;
  return d > S->opt.step_ns ? d : S->opt.step_ns;
}

/* A step passed a bound: the run ends. Cold and out of line, so that the
 * step itself stays a handful of instructions. */
static __attribute__((noinline, cold, noreturn)) void step_bound_failed(void) {
  char d[96];
  if (S->steps > S->opt.max_steps) {
    snprintf(d, sizeof(d), "more than %llu steps (vtime %llu ns)",
             (unsigned long long)S->opt.max_steps, (unsigned long long)S->now);
    sh_simrun_fail("livelock", d);
  }
  snprintf(d, sizeof(d), "virtual time passed its limit of %llu ns",
           (unsigned long long)S->opt.vtime_limit_ns);
  sh_simrun_fail("vtime", d);
}

void sh_simrun_step(sh_simtab *p, bool polling) {
  S->steps++;
  uint64_t bit = 1ull << (p->cur % 64);
  if (polling)
    p->busy[p->cur / 64] &= ~bit;
  else
    p->busy[p->cur / 64] |= bit;
  S->now += polling ? advance(p) : S->opt.step_ns;
  if (__builtin_expect(S->steps > S->opt.max_steps || S->now > S->vtime_limit, 0))
    step_bound_failed();
  S->slice++;
  if (S->now >= p->next_deadline) expire(p);
}

/* ---- switching --------------------------------------------------------------- */

/* Where a switch must happen: a runnable fiber other than `skip`. */
static uint32_t pick_next(sh_simtab *p, uint32_t skip) {
  if (sh_simreplay_on()) return sh_simreplay_pick(p, S->steps, skip);
  return sh_simstrategy_pick(p, skip);
}

/* forced: the running fiber could not go on (or had to give way), as
 * opposed to a preemption the strategy chose at a scheduling point. */
static void switch_to(sh_simtab *p, uint32_t next, const char *where, bool forced) {
  uint32_t from = p->cur;
  if (next == from) return;
  S->switches++;
  S->slice = 0;
  sh_simreplay_record_at(S->steps, next, forced ? SH_SIM_FORCED : SH_SIM_PREEMPT, where);
  sh_simrun_mix(SH_SIMRUN_MIX_SWITCH);
  sh_simrun_mix(((uint64_t)from << 32) | next);
  sh_simrun_mix(sh_simrun_str_hash(where));
  p->cur = next;
  sh_plat_sim_local = p->f[next].local;
  /* What the next fiber allocates is its node's (a crash frees it). */
  if (p->f[next].node != p->f[from].node) sh_simnodemem_set_owner(p->f[next].node);
  if (p->f[from].state == SH_SIMRUN_DONE)
    sh_fiber_exit_to(&p->f[from].ctx, &p->f[next].ctx);
  sh_fiber_switch(&p->f[from].ctx, &p->f[next].ctx);
}

void sh_simrun_give_way(const char *where) {
  sh_simtab *p = S->tab;
  p->f[p->cur].where = where;
  /* Bounded: each jump moves the clock to the next deadline (a sleeper's or
   * an arrival's), which expires; with none left the run fails as a
   * deadlock (jump). A wait, not a count. */
  for (;;) {
    uint32_t next = pick_next(p, UINT32_MAX);
    if (next != UINT32_MAX) {
      /* The pick may be the fiber that gave way, woken by the jump: no
       * switch, but a decision all the same, which a replay must follow
       * (its default is the next runnable fiber, round-robin). */
      if (next == p->cur) sh_simreplay_record_at(S->steps, next, SH_SIM_FORCED, where);
      switch_to(p, next, where, true);
      return;
    }
    jump(p);
  }
}

/* The choice at a scheduling point (UINT32_MAX: stay). */
static uint32_t decide(sh_simtab *p, bool polling) {
  if (sh_simreplay_on()) return sh_simreplay_preempt(p, S->steps);
  return sh_simstrategy_preempt(p, polling);
}

void sh_simrun_point(const char *where, bool polling) {
  sh_simtab *p = sh_simrun_active();
  if (p == NULL) return;
  p->f[p->cur].where = where;
  sh_simrun_step(p, polling);
  sh_simreplay_point(S->steps, where);
  if (!polling) sh_simstrategy_point(p);
  uint32_t next = decide(p, polling);
  if (next != UINT32_MAX && next != p->cur) {
    switch_to(p, next, where, false);
    return;
  }
  if (S->slice < SH_SIM_QUANTUM_STEPS) return;
  /* The quantum is over: give way as a preempted thread would. */
  S->slice = 0;
  sh_simstrategy_demote(p);
  next = pick_next(p, p->cur);
  if (next != UINT32_MAX) switch_to(p, next, "preempt", true);
}

void sh_simrun_yield_cpu(void) {
  sh_simtab *p = sh_simrun_active();
  if (p == NULL) return;
  p->f[p->cur].where = "yield_cpu";
  sh_simrun_step(p, true);
  sh_simreplay_point(S->steps, "yield_cpu");
  sh_simstrategy_demote(p);
  uint32_t next = pick_next(p, p->cur);
  if (next != UINT32_MAX) switch_to(p, next, "yield_cpu", true);
}
