/*
 * core/plat.h on the simulator: fibers, the simulated clock (run.c) and
 * the seeded strategies (strategy.c).
 *
 * Fibers. Worker w is fiber w; the thread that created the system (the
 * scenario's "outside" thread: it runs setup, sh_system_wait, shutdown) is
 * fiber `workers`, on its own stack. Each sh_plat_thread_start adds a thread
 * fiber, `workers` + 1, + 2, ... in the order of the calls (a program's own
 * thread: not a worker, sh_plat_local NULL), scheduled like the others. Its
 * slot is never reused: a system starts at most SH_PLAT_MAX_THREADS of them
 * in all (then -EAGAIN), which keeps the numbering, and so every schedule,
 * a function of the run alone. Exactly one fiber runs at a time.
 *
 * Events. A fiber that is not a worker (the outside fiber, a thread fiber)
 * blocks on an event until a set (from any fiber) makes it runnable, or its
 * deadline expires like a park's. A timed wait whose deadline has already
 * passed is a polling step instead, so that a loop of such polls advances
 * the clock and lets the others run.
 *
 * Threads. The entry points the core calls from any thread check first that
 * they run on the simulation's OS thread (misuse.h): FAIL:thread otherwise.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/stackhouse.h>

#include "base/check.h"
#include "coverage.h"
#include "fault.h"
#include "memmodel.h"
#include "misuse.h"
#include "net.h"
#include "run.h"
#include "strategy.h"
#include "watchdog.h"

/* sh_plat_cpu_count in the simulator: a fixed answer keeps runs alike everywhere. */
#define SH_SIM_CPUS 4

static sh_simrun *const S = &sh_simrun_state;

/* Fibers that may wait on an event: every fiber but the workers (the
 * outside fiber and the thread fibers), a bit each. */
#define SH_SIM_EVENT_WAITERS (1u + SH_PLAT_MAX_THREADS)
_Static_assert(SH_SIM_EVENT_WAITERS <= 64, "a bit per waiter in a word");

struct sh_plat_event {
  bool set;
  uint64_t waiters; /* bit i: fiber nworkers + i is in a wait on it */
};

struct sh_plat_thread {
  uint32_t fiber;
};

/* ---- the platform ---------------------------------------------------------- */

int sh_plat_new(uint32_t workers, sh_plat **out) {
  sh_simrun_ensure_configured();
  if (S->plat != NULL) return -EBUSY; /* one simulated system at a time */
  if (S->used) {
    /* A simulation is one system: the next starts afresh (clock, steps,
     * generator, hash), as if configured again with the same options. */
    sh_sim_options o = S->opt;
    sh_sim_configure(&o);
  }
  S->used = true;
  if (workers == 0 || workers > SH_SIM_MAX_WORKERS) return -EINVAL;
  size_t fibers = workers + 1 + SH_PLAT_MAX_THREADS;
  sh_plat *p = calloc(1, sizeof(*p) + fibers * sizeof(sh_simrun_fiber));
  if (p == NULL) return -ENOMEM;
  p->nworkers = workers;
  p->nfibers = workers + 1;
  p->cur = workers;
  p->next_deadline = SH_PLAT_NO_DEADLINE;
  for (uint32_t i = 0; i < p->nfibers; i++) {
    p->f[i].index = i;
    p->f[i].state = i == workers ? SH_SIMRUN_RUNNABLE : SH_SIMRUN_DONE;
    p->f[i].deadline = SH_PLAT_NO_DEADLINE;
  }
  sh_fiber_init_self(&p->f[workers].ctx);
  p->f[workers].local = S->outside_local;
  if (S->opt.trace_path != NULL && S->trace == NULL) {
    int rc = sh_simtrace_open(S->opt.trace_path, workers, &S->trace);
    if (rc != 0) {
      free(p);
      return rc;
    }
  }
  S->plat = p;
  sh_simmisuse_bind();
  *out = p;
  return 0;
}

void sh_plat_free(sh_plat *p) {
  if (p == NULL) return;
  assert(p == S->plat && p->cur == p->nworkers && p->ndone == (p->started ? p->nworkers : 0));
  for (uint32_t i = p->nworkers + 1; i < p->nfibers; i++)
    assert(p->f[i].joined && "sh_plat_free before sh_plat_thread_join");
  /* Before the trace closes: the failure is drawn in it. */
  sh_simnet_check_closed();
  S->outside_local = p->f[p->nworkers].local;
  for (uint32_t i = 0; i < p->nworkers; i++) sh_fiber_destroy(&p->f[i].ctx);
  sh_simrun_mix(SH_SIMRUN_MIX_END);
  sh_simrun_mix(S->steps);
  sh_simrun_mix(S->now);
  sh_simrun_trace_close();
  sh_simfault_end();
  sh_simnet_end();
  sh_simwatchdog_disarm();
  sh_simmisuse_unbind();
  S->plat = NULL;
  free(p);
}

static void fiber_main(void *arg) {
  sh_fiber_started();
  sh_simrun_fiber *f = arg;
  sh_plat *p = S->plat;
  p->entry(p->ctx, f->index);
  f->state = SH_SIMRUN_DONE;
  p->ndone++;
  /* The outside fiber may be in sh_plat_join; if it blocks for another
   * reason, it re-checks that and blocks again. */
  if (p->ndone == p->nworkers) sh_simrun_unblock(p, &p->f[p->nworkers]);
  sh_simrun_give_way("exit");
  abort(); /* a finished fiber is never switched to */
}

int sh_plat_start(sh_plat *p, sh_plat_entry entry, void *ctx) {
  assert(p == S->plat && !p->started);
  p->entry = entry;
  p->ctx = ctx;
  for (uint32_t i = 0; i < p->nworkers; i++) {
    int rc = sh_fiber_init(&p->f[i].ctx, sh_fiber_default_stack(), fiber_main, &p->f[i]);
    if (rc != 0) {
      for (uint32_t j = 0; j < i; j++) sh_fiber_destroy(&p->f[j].ctx);
      return rc;
    }
  }
  for (uint32_t i = 0; i < p->nworkers; i++) sh_simrun_make_runnable(&p->f[i]);
  sh_simstrategy_start(p);
  p->started = true;
  sh_simwatchdog_arm(S->opt.hang_real_ms);
  return 0;
}

void sh_plat_join(sh_plat *p) {
  assert(p == S->plat && p->cur == p->nworkers);
  if (!p->started) return;
  /* Bounded by the workers: each pass ends only when one more finished.
   * Not counted: a pass is a wait, which the run's step limit and
   * deadlock check bound. */
  while (p->ndone < p->nworkers) {
    sh_simrun_block(p, SH_PLAT_NO_DEADLINE);
    sh_simrun_give_way("join");
  }
  sh_simmem_sync(p->cur);
}

/* Read inline by the core (plat.h), so without the thread check: a call
 * from a foreign thread reaches a checked entry point (a yield, a wake, the
 * clock) within a few instructions. */
void *sh_plat_sim_local;

void sh_plat_set_local(void *ctx) {
  sh_simmisuse_check_thread("sh_plat_set_local");
  if (S->plat != NULL)
    S->plat->f[S->plat->cur].local = ctx;
  else
    S->outside_local = ctx;
  sh_plat_sim_local = ctx;
}

/* Without the thread check, as sh_plat_sim_local: every lock calls it twice. */
uintptr_t sh_plat_self(void) { return (uintptr_t)sh_simrun_cur() + 1; }

uint32_t sh_plat_cpu_count(void) { return SH_SIM_CPUS; }

uint64_t sh_plat_now_ns(void) {
  sh_simmisuse_check_thread("sh_plat_now_ns");
  return S->now;
}

/* 2026-01-01 00:00:00 UTC: the simulated wall clock's origin. */
#define SH_SIM_EPOCH_NS (1767225600ull * 1000000000ull)

uint64_t sh_plat_wall_ns(void) {
  sh_simmisuse_check_thread("sh_plat_wall_ns");
  return SH_SIM_EPOCH_NS + S->now;
}

uint64_t sh_plat_random(void) {
  sh_simmisuse_check_thread("sh_plat_random");
  sh_simrun_ensure_configured();
  return sh_simrng_next(&S->core_rng);
}

/* ---- scheduling points, parking ------------------------------------------- */

void sh_plat_yield(const char *where) {
  sh_simmisuse_check_thread("sh_plat_yield");
  sh_simrun_point(where, false);
}

void sh_plat_relax(void) {
  sh_simmisuse_check_thread("relax");
  sh_simrun_point("relax", true);
}

void sh_plat_yield_cpu(void) {
  sh_simmisuse_check_thread("yield_cpu");
  sh_simrun_yield_cpu();
}

/* Whether worker w's wait returns without sleeping: a wake came first, the
 * deadline passed, or readiness waits to be reported. */
static bool wait_over(sh_simrun_fiber *f, uint32_t w, uint64_t deadline_ns) {
  if (!f->wake_pending && deadline_ns > S->now && !sh_simnet_ready(w)) return false;
  /* A wake that came first synchronizes as one that comes later. */
  if (f->wake_pending) sh_simmem_sync(w);
  f->wake_pending = false;
  return true;
}

uint32_t sh_plat_wait(sh_plat *p, uint32_t w, uint64_t deadline_ns, uint32_t max) {
  assert(p == S->plat && w == p->cur && w < p->nworkers && max > 0);
  /* A poll: no step (it is part of the turn that makes it) and the wake
   * stays pending for the next wait that would sleep. */
  if (deadline_ns <= S->now) return sh_simnet_report(w, max);
  sh_simrun_fiber *f = &p->f[w];
  sh_simrun_step(p, false);
  if (!wait_over(f, w, deadline_ns)) {
    f->state = SH_SIMRUN_PARKED;
    f->deadline = deadline_ns;
    if (deadline_ns < p->next_deadline) p->next_deadline = deadline_ns;
    sh_simrun_give_way("park");
    /* Woken (make_runnable) or expired: either way runnable again. */
    f->wake_pending = false;
  }
  return sh_simnet_report(w, max);
}

void sh_plat_wake(sh_plat *p, uint32_t w) {
  sh_simmisuse_check_thread("sh_plat_wake");
  assert(p == S->plat && w < p->nworkers);
  sh_simrun_fiber *f = &p->f[w];
  if (f->state == SH_SIMRUN_PARKED) {
    sh_simrun_make_runnable(f);
    sh_simrun_recompute_deadline(p);
  } else if (f->state != SH_SIMRUN_DONE) {
    f->wake_pending = true;
  }
}

/* ---- events (fibers that are not workers wait on them) ------------------------ */

int sh_plat_event_new(sh_plat_event **out) {
  sh_plat_event *e = calloc(1, sizeof(*e));
  if (e == NULL) return -ENOMEM;
  *out = e;
  return 0;
}

void sh_plat_event_free(sh_plat_event *e) { free(e); }

void sh_plat_event_set(sh_plat_event *e) {
  sh_simmisuse_check_thread("sh_plat_event_set");
  e->set = true;
  sh_plat *p = S->plat;
  if (p == NULL) return;
  /* Every waiter, in the order of their fibers (as a broadcast wakes them
   * all); bounded by the bits of the word. */
  for (uint32_t i = 0; i < SH_SIM_EVENT_WAITERS; i++)
    if ((e->waiters >> i & 1u) != 0 && p->nworkers + i < p->nfibers)
      sh_simrun_unblock(p, &p->f[p->nworkers + i]);
}

void sh_plat_event_reset(sh_plat_event *e) { e->set = false; }

/* No fiber can set the event: with a deadline the clock jumps to it, as it
 * would with every fiber asleep; without one the wait could never end. */
static int wait_alone(uint64_t deadline_ns) {
  if (deadline_ns == SH_PLAT_NO_DEADLINE)
    sh_simrun_fail("deadlock", "waiting for an event with no worker running");
  sh_simrun_clock_jump(deadline_ns);
  return -ETIMEDOUT;
}

static int event_wait(sh_plat_event *e, uint64_t deadline_ns) {
  if (e->set) return 0;
  sh_plat *p = sh_simrun_active();
  if (p == NULL) return wait_alone(deadline_ns);
  assert(p->cur >= p->nworkers); /* workers never block on events */
  if (deadline_ns <= S->now) {
    /* A poll: a scheduling point, so that a loop of polls lets the setter run. */
    sh_simrun_point("event_poll", true);
    return e->set ? 0 : -ETIMEDOUT;
  }
  uint32_t bit = p->cur - p->nworkers;
  assert(bit < SH_SIM_EVENT_WAITERS && (e->waiters >> bit & 1u) == 0); /* not waiting already */
  e->waiters |= 1ull << bit;
  /* Bounded: each pass ends with a set (unblock), the deadline (expire) or
   * the last worker's exit, which wakes the outside fiber once (a wait, not
   * a count: the run's step limit and deadlock check bound it). */
  while (!e->set && S->now < deadline_ns) {
    sh_simrun_block(p, deadline_ns);
    sh_simrun_give_way("event_wait");
  }
  e->waiters &= ~(1ull << bit);
  return e->set ? 0 : -ETIMEDOUT;
}

int sh_plat_event_wait_until(sh_plat_event *e, uint64_t deadline_ns) {
  sh_simmisuse_check_thread("sh_plat_event_wait");
  int rc = event_wait(e, deadline_ns);
  /* A set event synchronizes its waiter with the setter, as an eventfd does. */
  if (rc == 0 && sh_simrun_active() != NULL) sh_simmem_sync(sh_simrun_cur());
  return rc;
}

void sh_plat_event_wait(sh_plat_event *e) {
  (void)sh_plat_event_wait_until(e, SH_PLAT_NO_DEADLINE);
}

/* ---- threads that are not workers (thread fibers) ------------------------------ */

static void thread_main(void *arg) {
  sh_fiber_started();
  sh_simrun_fiber *f = arg;
  f->fn(f->arg);
  sh_plat *p = S->plat;
  f->state = SH_SIMRUN_DONE;
  if (f->joiner != SH_SIMRUN_NO_FIBER) sh_simrun_unblock(p, &p->f[f->joiner]);
  sh_simrun_give_way("thread_exit");
  abort(); /* a finished fiber is never switched to */
}

int sh_plat_thread_start(void (*fn)(void *arg), void *arg, sh_plat_thread **out) {
  sh_simmisuse_check_thread("sh_plat_thread_start");
  sh_plat *p = sh_simrun_active();
  if (fn == NULL || out == NULL || p == NULL) return -EINVAL;
  /* Slots are not reused (see the top of the file). */
  if (p->nfibers - p->nworkers - 1 >= SH_PLAT_MAX_THREADS) return -EAGAIN;
  sh_plat_thread *t = calloc(1, sizeof(*t));
  if (t == NULL) return -ENOMEM;
  /* The table has room for SH_PLAT_MAX_THREADS past the workers and the
   * outside fiber (sh_plat_new), and every per-fiber scan ends at nfibers. */
  SH_ASSERT(p->nfibers < p->nworkers + 1 + SH_PLAT_MAX_THREADS &&
            p->nfibers < SH_SIM_MAX_FIBERS);
  sh_simrun_fiber *f = &p->f[p->nfibers];
  memset(f, 0, sizeof(*f));
  int rc = sh_fiber_init(&f->ctx, sh_fiber_default_stack(), thread_main, f);
  if (rc != 0) {
    free(t);
    return rc;
  }
  f->index = p->nfibers;
  f->fn = fn;
  f->arg = arg;
  f->joiner = SH_SIMRUN_NO_FIBER;
  sh_simrun_make_runnable(f);
  p->nfibers++;
  sh_simstrategy_place(p, f);
  sh_simrun_mix(SH_SIMRUN_MIX_THREAD);
  sh_simrun_mix(f->index);
  if (S->trace != NULL) {
    char name[32];
    snprintf(name, sizeof(name), "thread %u", f->index - p->nworkers - 1);
    /* Out of memory costs only this track's events (the trace drops them). */
    (void)sh_simtrace_track(S->trace, f->index, name);
  }
  t->fiber = f->index;
  *out = t;
  return 0;
}

void sh_plat_thread_join(sh_plat_thread *t) {
  sh_plat *p = S->plat;
  assert(t != NULL && p != NULL && t->fiber > p->nworkers && t->fiber < p->nfibers);
  sh_simrun_fiber *f = &p->f[t->fiber];
  assert(t->fiber != p->cur && !f->joined && f->joiner == SH_SIMRUN_NO_FIBER);
  /* Bounded: the thread's exit unblocks us; any other wake re-checks (a
   * wait, bounded by the run's step limit and deadlock check). */
  while (f->state != SH_SIMRUN_DONE) {
    f->joiner = p->cur;
    sh_simrun_block(p, SH_PLAT_NO_DEADLINE);
    sh_simrun_give_way("thread_join");
  }
  f->joiner = SH_SIMRUN_NO_FIBER;
  sh_simmem_sync(p->cur); /* a join synchronizes with the thread's end */
  /* It left by sh_fiber_exit_to and never runs again: its stack can go. */
  sh_fiber_destroy(&f->ctx);
  f->joined = true;
  free(t);
}

/* ---- trace points -------------------------------------------------------------- */

/* Bytes of a message's own words in a trace, at most (NUL included). */
#define SH_SIM_DESCRIBE_MAX 256

/* msg's type's own words (sh_msg_type.describe) in buf, or NULL. Asked only
 * while a trace file is written: the hook is the program's code, which an
 * untraced run must not pay for. */
static const char *describe(const struct sh_msg *msg, char *buf, size_t n) {
  if (msg == NULL || msg->type->describe == NULL) return NULL;
  buf[0] = '\0';
  int rc = msg->type->describe(msg, buf, n);
  buf[n - 1] = '\0'; /* a hook that filled buf to the end */
  return rc >= 0 ? buf : NULL;
}

/* The text is not mixed into the hash: the hash names the run, and the
 * words are the program's, written only when a trace is. */
void sh_plat_trace(sh_trace_kind kind, uint64_t house, const char *name, uint64_t flow,
                   const struct sh_msg *msg) {
  sh_simmisuse_check_thread("sh_plat_trace");
  uint32_t cur = sh_simrun_cur();
  sh_simrun_mix(SH_SIMRUN_MIX_TRACE);
  sh_simrun_mix(((uint64_t)cur << 8) | (uint64_t)kind);
  sh_simrun_mix(house);
  sh_simrun_mix(sh_simrun_str_hash(name));
  sh_simrun_mix(flow);
  sh_simcoverage_trace(cur, (uint32_t)kind, sh_simrun_str_hash(name));
  sh_plat *p = sh_simrun_active();
  if (p != NULL && sh_simstrategy_state.kind == SH_SIM_MSGPCT && cur < p->nfibers) {
    if (kind == SH_TRACE_RUN || kind == SH_TRACE_RUN_END)
      sh_simmsgpct_run(p, house, kind == SH_TRACE_RUN);
    else if (kind == SH_TRACE_DELIVER)
      sh_simmsgpct_deliver(p, house);
  }
  if (S->trace == NULL) return;
  char buf[SH_SIM_DESCRIBE_MAX];
  sh_simtrace_event_text(S->trace, S->now, cur, kind, house, name, flow,
                         describe(msg, buf, sizeof(buf)));
}
