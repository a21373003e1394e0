/*
 * core/plat.h on the simulator: clocks, randomness, scheduling points,
 * parking, events and trace points, over the fiber table (run.h; systems
 * and threads take their fibers in platsys.c), the simulated clock (run.c)
 * and the seeded strategies (strategy.c).
 *
 * Clocks. A fiber reads its node's clock (node.h): the true virtual clock
 * for node 0, and for a node with an offset or a drift that clock's local
 * reading. Deadlines the core passes (a park's, a timed event wait's) are
 * on the caller's node's clock and are turned into true time here, so that
 * a node's timers and ask timeouts run fast or slow with its clock.
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
#include "node.h"
#include "run.h"
#include "strategy.h"
#include "watchdog.h"

/* sh_plat_cpu_count in the simulator: a fixed answer keeps runs alike everywhere. */
#define SH_SIM_CPUS 4

static sh_simrun *const S = &sh_simrun_state;

/* Words of an event's waiter set: a bit per fiber. */
#define SH_SIM_EVENT_WORDS (SH_SIM_MAX_FIBERS / 64)
_Static_assert(SH_SIM_MAX_FIBERS % 64 == 0, "a bit per fiber in whole words");

struct sh_plat_event {
  bool set;
  uint64_t waiters[SH_SIM_EVENT_WORDS]; /* bit i: fiber i is in a wait on it */
};

/* Read inline by the core (plat.h), so without the thread check: a call
 * from a foreign thread reaches a checked entry point (a yield, a wake, the
 * clock) within a few instructions. */
void *sh_plat_sim_local;

void sh_plat_set_local(void *ctx) {
  sh_simmisuse_check_thread("sh_plat_set_local");
  if (S->tab != NULL)
    S->tab->f[S->tab->cur].local = ctx;
  else
    S->outside_local = ctx;
  sh_plat_sim_local = ctx;
}

/* Without the thread check, as sh_plat_sim_local: every lock calls it twice. */
uintptr_t sh_plat_self(void) { return (uintptr_t)sh_simrun_cur() + 1; }

uint32_t sh_plat_cpu_count(void) { return SH_SIM_CPUS; }

/* The node of the running fiber (0 without a fiber table). */
static uint32_t cur_node(void) {
  const sh_simtab *t = S->tab;
  return t != NULL ? t->f[t->cur].node : 0;
}

uint64_t sh_plat_now_ns(void) {
  sh_simmisuse_check_thread("sh_plat_now_ns");
  return sh_simnode_local(cur_node(), S->now);
}

/* 2026-01-01 00:00:00 UTC: the simulated wall clock's origin. */
#define SH_SIM_EPOCH_NS (1767225600ull * 1000000000ull)

uint64_t sh_plat_wall_ns(void) {
  sh_simmisuse_check_thread("sh_plat_wall_ns");
  return SH_SIM_EPOCH_NS + sh_simnode_local(cur_node(), S->now);
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

/* Whether fiber w's wait returns without sleeping: a wake came first, the
 * deadline (true time) passed, or readiness waits to be reported. */
static bool wait_over(sh_simrun_fiber *f, uint32_t w, uint64_t deadline_ns) {
  if (!f->wake_pending && deadline_ns > S->now && !sh_simnet_ready(w)) return false;
  /* A wake that came first synchronizes as one that comes later. */
  if (f->wake_pending) sh_simmem_sync(w);
  f->wake_pending = false;
  return true;
}

uint32_t sh_plat_wait(sh_plat *p, uint32_t w, uint64_t deadline_ns, uint32_t max) {
  sh_simtab *t = S->tab;
  assert(t != NULL && w < p->nworkers && p->fiber[w] == t->cur && max > 0);
  uint32_t fi = t->cur;
  uint64_t due = sh_simnode_true(p->node, deadline_ns);
  /* A poll: no step (it is part of the turn that makes it) and the wake
   * stays pending for the next wait that would sleep. */
  if (due <= S->now) return sh_simnet_report(fi, max);
  sh_simrun_fiber *f = &t->f[fi];
  sh_simrun_step(t, false);
  if (!wait_over(f, fi, due)) {
    sh_simrun_set_state(t, f, SH_SIMRUN_PARKED);
    f->deadline = due;
    if (due < t->next_deadline) t->next_deadline = due;
    sh_simrun_give_way("park");
    /* Woken (make_runnable) or expired: either way runnable again. */
    f->wake_pending = false;
  }
  return sh_simnet_report(fi, max);
}

void sh_plat_wake(sh_plat *p, uint32_t w) {
  sh_simmisuse_check_thread("sh_plat_wake");
  sh_simtab *t = S->tab;
  assert(t != NULL && w < p->nworkers);
  sh_simrun_fiber *f = &t->f[p->fiber[w]];
  if (f->state == SH_SIMRUN_PARKED) {
    sh_simrun_make_runnable(f);
    sh_simrun_recompute_deadline(t);
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
  sh_simtab *p = S->tab;
  if (p == NULL) return;
  /* Every waiter, in the order of their fibers (as a broadcast wakes them
   * all); bounded by the table. */
  for (uint32_t i = 0; i < p->nfibers; i++)
    if ((e->waiters[i / 64] >> (i % 64) & 1u) != 0) sh_simrun_unblock(p, &p->f[i]);
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
  sh_simtab *p = sh_simrun_active();
  if (p == NULL) return wait_alone(deadline_ns);
  assert(!sh_simrun_is_worker(p, p->cur)); /* workers never block on events */
  deadline_ns = sh_simnode_true(p->f[p->cur].node, deadline_ns);
  if (deadline_ns <= S->now) {
    /* A poll: a scheduling point, so that a loop of polls lets the setter run. */
    sh_simrun_point("event_poll", true);
    return e->set ? 0 : -ETIMEDOUT;
  }
  uint64_t *word = &e->waiters[p->cur / 64], bit = 1ull << (p->cur % 64);
  assert((*word & bit) == 0); /* not waiting already */
  *word |= bit;
  /* Bounded: each pass ends with a set (unblock), the deadline (expire) or
   * the last worker's exit, which wakes the outside fiber once (a wait, not
   * a count: the run's step limit and deadlock check bound it). */
  while (!e->set && S->now < deadline_ns) {
    sh_simrun_block(p, deadline_ns);
    sh_simrun_give_way("event_wait");
  }
  *word &= ~bit;
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
  sh_simtab *p = sh_simrun_active();
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
