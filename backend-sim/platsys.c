/*
 * core/plat.h on the simulator, systems and threads: the fiber table
 * (run.h) and the fibers each system and thread takes in it.
 *
 * Fibers. The first system of a simulation is made by the program's main
 * thread (the scenario's "outside" thread: it runs setup, sh_system_wait,
 * shutdown): its workers take slots 0 .. workers-1 and the outside thread
 * slot `workers`, on its own stack. Every later fiber takes the lowest
 * free slot: a thread started by sh_plat_thread_start (a program's own
 * thread: not a worker, sh_plat_local NULL), a node's main (node.c) and a
 * node's workers. A slot is free again once its fiber ended and its stack
 * was freed (a joined thread, a freed system's workers, a crashed node's
 * fibers), so that the numbering, and every schedule, stays a function of
 * the run. Exactly one fiber runs at a time.
 *
 * Systems. Every fiber belongs to a node (node.h): node 0 is the
 * simulation's own, whose system is the first one. A node's system is made
 * by the node's main fiber, one per node (a second is -EBUSY, as is a
 * second system of node 0), and freed before the first system is. Thread
 * fibers belong to the node of the fiber that started them; a node keeps
 * at most SH_PLAT_MAX_THREADS of them alive at a time (then -EAGAIN).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "fault.h"
#include "memmodel.h"
#include "misuse.h"
#include "net.h"
#include "node.h"
#include "nodemem.h"
#include "run.h"
#include "strategy.h"
#include "watchdog.h"

static sh_simrun *const S = &sh_simrun_state;

struct sh_plat_thread {
  uint32_t fiber;
};

/* A free slot of t for a fiber of `node` of `kind` (its state DONE until it
 * is made runnable): 0, or -EAGAIN when the table is full. */
static int slot_take(sh_simtab *t, uint32_t node, sh_simrun_fiber_kind kind, uint32_t *out) {
  uint32_t i = 0;
  while (i < t->nfibers && t->f[i].state != SH_SIMRUN_FREE) i++;
  if (i == SH_SIM_MAX_FIBERS) return -EAGAIN;
  if (i == t->nfibers) t->nfibers++;
  sh_simrun_fiber *f = &t->f[i];
  memset(f, 0, sizeof(*f));
  f->index = i;
  sh_simrun_set_state(t, f, SH_SIMRUN_DONE);
  f->kind = kind;
  f->node = node;
  f->deadline = SH_PLAT_NO_DEADLINE;
  f->joiner = SH_SIMRUN_NO_FIBER;
  *out = i;
  return 0;
}

void sh_simplat_slot_free(sh_simtab *t, uint32_t i) {
  SH_ASSERT(i < t->nfibers && i != t->cur);
  sh_simrun_set_state(t, &t->f[i], SH_SIMRUN_FREE);
  t->f[i].plat = NULL;
  /* Trailing free slots are given back, so that scans stay short. */
  while (t->nfibers > 0 && t->f[t->nfibers - 1].state == SH_SIMRUN_FREE) t->nfibers--;
}

/* A system's platform with its workers' slots taken; NULL out of memory
 * or slots. */
static sh_plat *plat_alloc(sh_simtab *t, uint32_t node, uint32_t workers) {
  sh_plat *p = calloc(1, sizeof(*p) + workers * sizeof(uint32_t));
  if (p == NULL) return NULL;
  p->node = node;
  p->nworkers = workers;
  for (uint32_t w = 0; w < workers; w++) {
    if (slot_take(t, node, SH_SIMRUN_WORKER, &p->fiber[w]) != 0) {
      for (uint32_t j = w; j-- > 0;) sh_simplat_slot_free(t, p->fiber[j]);
      free(p);
      return NULL;
    }
    t->f[p->fiber[w]].plat = p;
    t->f[p->fiber[w]].worker = w;
  }
  return p;
}

/* The first system: the fiber table with it, the caller its outside fiber. */
static int root_new(uint32_t workers, sh_plat **out) {
  if (S->used) {
    /* A simulation is one run: the next starts afresh (clock, steps,
     * generator, hash), as if configured again with the same options. */
    sh_sim_options o = S->opt;
    sh_sim_configure(&o);
  }
  S->used = true;
  sh_simtab *t = calloc(1, sizeof(*t));
  if (t == NULL) return -ENOMEM;
  for (uint32_t i = 0; i < SH_SIM_MAX_FIBERS; i++) t->f[i].state = SH_SIMRUN_FREE;
  t->next_deadline = SH_PLAT_NO_DEADLINE;
  sh_plat *p = plat_alloc(t, 0, workers);
  uint32_t out_fiber = 0;
  if (p == NULL || slot_take(t, 0, SH_SIMRUN_OUTSIDE, &out_fiber) != 0) {
    free(p);
    free(t);
    return -ENOMEM;
  }
  p->outside = out_fiber;
  t->cur = out_fiber;
  t->root = p;
  sh_simrun_fiber *o = &t->f[out_fiber];
  sh_simrun_set_state(t, o, SH_SIMRUN_RUNNABLE);
  sh_fiber_init_self(&o->ctx);
  o->local = S->outside_local;
  if (S->opt.trace_path != NULL && S->trace == NULL) {
    int rc = sh_simtrace_open(S->opt.trace_path, workers, &S->trace);
    if (rc != 0) {
      free(p);
      free(t);
      return rc;
    }
  }
  S->tab = t;
  sh_simmisuse_bind();
  *out = p;
  return 0;
}

int sh_plat_new(uint32_t workers, sh_plat **out) {
  sh_simrun_ensure_configured();
  sh_simtab *t = S->tab;
  if (t == NULL) {
    if (workers == 0 || workers > SH_SIM_MAX_WORKERS) return -EINVAL;
    return root_new(workers, out);
  }
  /* A node's system, made by its main fiber once the first system runs:
   * one per node, as one per process. */
  uint32_t node = t->f[t->cur].node;
  if (!t->started || node == 0 || sh_simnode_plat(node) != NULL) return -EBUSY;
  if (workers == 0 || workers > SH_SIM_MAX_WORKERS) return -EINVAL;
  sh_plat *p = plat_alloc(t, node, workers);
  if (p == NULL) return -ENOMEM;
  p->outside = t->cur;
  sh_simnode_plat_set(node, p);
  *out = p;
  return 0;
}

/* The end of the simulation: the first system is freed. */
static void root_free(sh_simtab *t, sh_plat *p) {
  sh_simnode_end();
  /* Every node's memory was freed with it: the next simulation starts with
   * an empty table (and may run on another thread). */
  sh_simnodemem_reset();
  for (uint32_t i = 0; i < t->nfibers; i++)
    assert((i == p->outside || t->f[i].kind == SH_SIMRUN_WORKER ||
            t->f[i].state == SH_SIMRUN_FREE) &&
           "sh_plat_free before sh_plat_thread_join");
  /* Before the trace closes: the failure is drawn in it. */
  sh_simnet_check_closed();
  S->outside_local = t->f[p->outside].local;
  for (uint32_t w = 0; w < p->nworkers; w++) sh_fiber_destroy(&t->f[p->fiber[w]].ctx);
  sh_simrun_mix(SH_SIMRUN_MIX_END);
  sh_simrun_mix(S->steps);
  sh_simrun_mix(S->now);
  sh_simrun_trace_close();
  sh_simfault_end();
  sh_simnet_end();
  sh_simwatchdog_disarm();
  sh_simmisuse_unbind();
  S->tab = NULL;
  free(p);
  free(t);
}

void sh_plat_free(sh_plat *p) {
  if (p == NULL) return;
  sh_simtab *t = S->tab;
  assert(t != NULL && t->cur == p->outside && p->ndone == (p->started ? p->nworkers : 0));
  if (p == t->root) {
    root_free(t, p);
    return;
  }
  for (uint32_t w = 0; w < p->nworkers; w++) {
    sh_fiber_destroy(&t->f[p->fiber[w]].ctx);
    sh_simplat_slot_free(t, p->fiber[w]);
  }
  sh_simnode_plat_set(p->node, NULL);
  free(p);
}

static void fiber_main(void *arg) {
  sh_fiber_started();
  sh_simrun_fiber *f = arg;
  sh_plat *p = f->plat;
  p->entry(p->ctx, f->worker);
  sh_simtab *t = S->tab;
  sh_simrun_set_state(t, f, SH_SIMRUN_DONE);
  p->ndone++;
  /* The outside fiber may be in sh_plat_join; if it blocks for another
   * reason, it re-checks that and blocks again. */
  if (p->ndone == p->nworkers) sh_simrun_unblock(t, &t->f[p->outside]);
  sh_simrun_give_way("exit");
  abort(); /* a finished fiber is never switched to */
}

int sh_plat_start(sh_plat *p, sh_plat_entry entry, void *ctx) {
  sh_simtab *t = S->tab;
  assert(t != NULL && t->cur == p->outside && !p->started);
  p->entry = entry;
  p->ctx = ctx;
  for (uint32_t w = 0; w < p->nworkers; w++) {
    sh_simrun_fiber *f = &t->f[p->fiber[w]];
    int rc = sh_fiber_init(&f->ctx, sh_fiber_default_stack(), fiber_main, f);
    if (rc != 0) {
      for (uint32_t j = 0; j < w; j++) sh_fiber_destroy(&t->f[p->fiber[j]].ctx);
      return rc;
    }
  }
  for (uint32_t w = 0; w < p->nworkers; w++) sh_simrun_make_runnable(&t->f[p->fiber[w]]);
  p->started = true;
  if (p != t->root) {
    for (uint32_t w = 0; w < p->nworkers; w++) sh_simstrategy_place(t, &t->f[p->fiber[w]]);
    sh_simnode_started(p);
    return 0;
  }
  sh_simstrategy_start(t);
  t->started = true;
  sh_simwatchdog_arm(S->opt.hang_real_ms);
  return 0;
}

void sh_plat_join(sh_plat *p) {
  sh_simtab *t = S->tab;
  assert(t != NULL && t->cur == p->outside);
  if (!p->started) return;
  /* Bounded by the workers: each pass ends only when one more finished.
   * Not counted: a pass is a wait, which the run's step limit and
   * deadlock check bound. */
  while (p->ndone < p->nworkers) {
    sh_simrun_block(t, SH_PLAT_NO_DEADLINE);
    sh_simrun_give_way("join");
  }
  sh_simmem_sync(t->cur);
}

/* ---- threads that are not workers (thread fibers) ------------------------------ */

static void thread_main(void *arg) {
  sh_fiber_started();
  sh_simrun_fiber *f = arg;
  f->fn(f->arg);
  sh_simtab *t = S->tab;
  sh_simrun_set_state(t, f, SH_SIMRUN_DONE);
  if (f->joiner != SH_SIMRUN_NO_FIBER) sh_simrun_unblock(t, &t->f[f->joiner]);
  sh_simrun_give_way("thread_exit");
  abort(); /* a finished fiber is never switched to */
}

/* Thread fibers of `node` alive (started, not yet joined). */
static uint32_t threads_of(const sh_simtab *t, uint32_t node) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->nfibers; i++)
    n += t->f[i].kind == SH_SIMRUN_THREAD && t->f[i].node == node &&
         t->f[i].state != SH_SIMRUN_FREE;
  return n;
}

int sh_simplat_thread_new(uint32_t node, void (*fn)(void *arg), void *arg, uint32_t *out) {
  sh_simtab *t = sh_simrun_active();
  SH_ASSERT(t != NULL && fn != NULL);
  if (threads_of(t, node) >= SH_PLAT_MAX_THREADS) return -EAGAIN;
  uint32_t i;
  if (slot_take(t, node, SH_SIMRUN_THREAD, &i) != 0) return -EAGAIN;
  sh_simrun_fiber *f = &t->f[i];
  int rc = sh_fiber_init(&f->ctx, sh_fiber_default_stack(), thread_main, f);
  if (rc != 0) {
    sh_simplat_slot_free(t, i);
    return rc;
  }
  f->fn = fn;
  f->arg = arg;
  sh_simrun_make_runnable(f);
  sh_simstrategy_place(t, f);
  sh_simrun_mix(SH_SIMRUN_MIX_THREAD);
  sh_simrun_mix(f->index);
  if (S->trace != NULL) {
    char name[48];
    /* The simulation's own threads are numbered after its workers and
     * its outside thread, as tracks were before there were nodes. */
    uint32_t k = i - t->root->nworkers - 1;
    char process[48];
    if (node == 0)
      snprintf(name, sizeof(name), "thread %u", k);
    else
      snprintf(name, sizeof(name), "%s thread %u", sh_simnode_name(node), k);
    snprintf(process, sizeof(process), "node %s", sh_simnode_name(node));
    /* Out of memory costs only this track's events (the trace drops them). */
    (void)sh_simtrace_track_in(S->trace, f->index, name, node != 0 ? node + 1 : 0, process);
  }
  *out = i;
  return 0;
}

int sh_plat_thread_start(void (*fn)(void *arg), void *arg, sh_plat_thread **out) {
  sh_simmisuse_check_thread("sh_plat_thread_start");
  sh_simtab *t = sh_simrun_active();
  if (fn == NULL || out == NULL || t == NULL) return -EINVAL;
  sh_plat_thread *th = calloc(1, sizeof(*th));
  if (th == NULL) return -ENOMEM;
  int rc = sh_simplat_thread_new(t->f[t->cur].node, fn, arg, &th->fiber);
  if (rc != 0) {
    free(th);
    return rc;
  }
  *out = th;
  return 0;
}

void sh_simplat_thread_wait(uint32_t fiber) {
  sh_simtab *t = S->tab;
  assert(t != NULL && fiber < t->nfibers && t->f[fiber].kind == SH_SIMRUN_THREAD);
  sh_simrun_fiber *f = &t->f[fiber];
  assert(fiber != t->cur && f->joiner == SH_SIMRUN_NO_FIBER);
  /* Bounded: the thread's exit unblocks us; any other wake re-checks (a
   * wait, bounded by the run's step limit and deadlock check). */
  while (f->state != SH_SIMRUN_DONE) {
    f->joiner = t->cur;
    sh_simrun_block(t, SH_PLAT_NO_DEADLINE);
    sh_simrun_give_way("thread_join");
  }
  f->joiner = SH_SIMRUN_NO_FIBER;
  sh_simmem_sync(t->cur); /* a join synchronizes with the thread's end */
  /* It left by sh_fiber_exit_to and never runs again: its stack can go. */
  sh_fiber_destroy(&f->ctx);
  sh_simplat_slot_free(t, fiber);
}

void sh_plat_thread_join(sh_plat_thread *th) {
  assert(th != NULL);
  sh_simplat_thread_wait(th->fiber);
  free(th);
}
