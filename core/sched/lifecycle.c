/*
 * The program's lifecycle: a system is made, started, told to exit, waited
 * for, shut down and freed; and its figures are read.
 *
 * Shutdown runs in two steps. First the workers are told to stop and are
 * joined. Then the calling thread takes worker 0's identity and, alone,
 * stops every actor and runs the queues until nothing moves: queued asks
 * are answered with -ESHUTDOWN, queued notices dropped, every pending ask
 * fails with -ESHUTDOWN and its stack resumes to see it, stop hooks run.
 * Single-threaded, this needs no termination detection and is deterministic.
 */
#include <stackhouse/probe.h>

#include <fiu-local.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "actor/addr.h"
#include "actor/bridge.h"
#include "base/check.h"
#include "base/faults.h"
#include "actor/house.h"
#include "sched/loop.h"
#include "actor/hstore.h"
#include "netplat.h"
#include "actor/stack.h"
#include "sched/system.h"
#include "time/timeout.h"
#include "time/timer.h"
#include "sched/worker.h"

/* Passes of the final drain; each pass runs up to SH_TURN_MAX_HOUSES
 * houses of each queue of each worker (loop.c counts them, sh_loop_drain).
 * Work at shutdown is finite (stopped actors make no new asks and refuse
 * every send), so this is a safety net: reaching it is reported (-EBUSY,
 * sh_stats.drain_overruns), not hidden. */
#define SH_SHUTDOWN_MAX_PASSES 10000

static int check_config(const sh_config *c);

void sh_config_default(sh_config *cfg) {
  SH_FROM_USER();
  memset(cfg, 0, sizeof(*cfg));
  cfg->max_per_run = 64;
  cfg->max_batch = 32;
  cfg->steal_floor = 32;
  cfg->steal_aggression = 128;
  cfg->io_ratio = 50;
  cfg->spin_ns = 50000;
  cfg->pool_max_cached = 4096;
  cfg->pool_keep = 16;
  cfg->pool_idle_ns = 30ull * 1000000000ull;
  SH_ASSERT(check_config(cfg) == 0); /* the defaults make a system */
}

/* The platform's readiness function (netplat.h): a watched socket's token
 * is what watches it (worker.h), which says where its readiness goes. */
static void io_ready(void *token, uint32_t events) {
  sh_io_watch *w = token;
  w->ready(w, events);
}

static int check_config(const sh_config *c) {
  /* The workers' array (sh_system_new) is one allocation of at most 1024. */
  _Static_assert(1024 <= SIZE_MAX / sizeof(sh_worker), "1024 workers' size fits a size_t");
  if (c->max_per_run == 0 || c->max_batch == 0 || c->steal_aggression == 0 || c->io_ratio == 0 ||
      c->io_ratio > 100 || c->workers > 1024)
    return -EINVAL;
  return 0;
}

static void free_system(sh_system *sys) {
  /* Never started, or shut down: its worker threads are joined. */
  SH_ASSERT(!sys->started || sh_system_is_shut(sys));
  if (sys->workers != NULL) {
    for (uint32_t i = 0; i < sys->nworkers; i++) sh_worker_destroy(&sys->workers[i]);
  }
  free(sys->workers);
  if (sys->plat != NULL) sh_plat_free(sys->plat);
  if (sys->exit_event != NULL) sh_plat_event_free(sys->exit_event);
  free(sys);
}

int sh_system_new(const sh_config *cfg, sh_system **out) {
  SH_FROM_USER();
  if (out == NULL) return -EINVAL;
  sh_config c;
  if (cfg != NULL)
    c = *cfg;
  else
    sh_config_default(&c);
  int rc = check_config(&c);
  if (rc != 0) return rc;
  if (c.workers == 0) c.workers = sh_plat_cpu_count();
  /* The platform counts one CPU at least; the workers fill whole lines
   * (aligned_alloc takes a multiple of the alignment). */
  SH_ASSERT(c.workers >= 1);
  _Static_assert(sizeof(sh_worker) % 64 == 0, "sh_worker is whole cache lines");
  sh_faults_from_env();
  sh_fault_return_on("sh/system/new", -ENOMEM);
  sh_system *sys = calloc(1, sizeof(*sys));
  if (sys == NULL) return -ENOMEM;
  sys->cfg = c;
  sys->nworkers = c.workers;
  sh_spin_init(&sys->reg_lock);
  sh_spin_init(&sys->store_lock);
  sh_atomic_init(&sys->outside_sends, 0);
  for (int i = 0; i < SH_C_COUNT; i++) sh_atomic_init(&sys->counters.v[i], 0);
  sys->workers = aligned_alloc(64, sizeof(sh_worker) * c.workers);
  rc = sys->workers == NULL ? -ENOMEM : sh_plat_new(c.workers, &sys->plat);
  if (rc == 0) rc = sh_plat_event_new(&sys->exit_event);
  if (rc != 0) {
    if (sys->workers != NULL) {
      free(sys->workers);
      sys->workers = NULL;
    }
    free_system(sys);
    return rc;
  }
  /* Readiness of sockets reaches what watches them (their channels). */
  sh_net_set_ready(sys->plat, io_ready);
  memset(sys->workers, 0, sizeof(sh_worker) * c.workers);
  for (uint32_t i = 0; i < c.workers; i++) sh_worker_init(&sys->workers[i], sys, i);
  *out = sys;
  return 0;
}

uint32_t sh_system_workers(const sh_system *sys) { return sys->nworkers; }

static void stop_workers(sh_system *sys) {
  /* Not from one of the workers it joins. */
  SH_ASSERT(sh_worker_current() == NULL || sh_worker_current()->sys != sys);
  for (uint32_t i = 0; i < sys->nworkers; i++) {
    /* release: the worker's acquire load sees everything before the stop. */
    sh_atomic_store(&sys->workers[i].stop, true, memory_order_release);
    sh_plat_wake(sys->plat, i);
  }
  sh_plat_join(sys->plat);
}

int sh_system_start(sh_system *sys) {
  SH_FROM_USER();
  if (sys == NULL || sys->started || sh_system_is_shut(sys)) return -EINVAL;
  /* Made whole by sh_system_new, which frees a half-made one. */
  SH_ASSERT(sys->plat != NULL && sys->exit_event != NULL);
  sys->started = true;
  /* Fault point: as if the first worker thread could not start. */
  int rc = sh_fault("sh/system/start") ? -EAGAIN : sh_plat_start(sys->plat, sh_loop_main, sys);
  if (rc != 0) stop_workers(sys);
  return rc;
}

/* ---- lifecycle ------------------------------------------------------- */

void sh_system_exit(sh_system *sys, int code) {
  SH_FROM_USER();
  /* From anywhere, but for a made system (its exit event came with it). */
  SH_ASSERT(sys != NULL && sys->exit_event != NULL);
  bool was = false;
  /* The first exit decides the code. acq_rel: the waiter's acquire sees it. */
  if (sh_atomic_cas(&sys->exiting, &was, true, memory_order_acq_rel,
                                              memory_order_acquire)) {
    sh_atomic_store(&sys->exit_code, code, memory_order_release);
    sh_plat_event_set(sys->exit_event);
  }
}

int sh_system_wait(sh_system *sys) {
  SH_FROM_USER();
  if (sys == NULL || sh_worker_current() != NULL) return -EINVAL;
  sh_plat_event_wait(sys->exit_event);
  /* Only the exit that won the flag sets the event, after it (plat.h: a
   * wait without a deadline returns once set): a wait that ended for
   * anything else would return a code nobody gave. */
  SH_ASSERT(sh_atomic_load(&sys->exiting, memory_order_acquire));
  return sh_atomic_load(&sys->exit_code, memory_order_acquire);
}

int sh_system_wait_ms(sh_system *sys, int64_t timeout_ms) {
  SH_FROM_USER();
  if (sys == NULL || timeout_ms < 0 || sh_worker_current() != NULL) return -EINVAL;
  /* Capped as every timeout is (timeout.h): a count of milliseconds past
   * the clock's range would wrap to a deadline already gone. */
  uint64_t deadline = sh_timeout_deadline(timeout_ms);
  /* A wake may be spurious: only the exit flag ends the wait early. */
  while (!sh_atomic_load(&sys->exiting, memory_order_acquire)) {
    int rc = sh_plat_event_wait_until(sys->exit_event, deadline);
    SH_ASSERT(rc == 0 || rc == -ETIMEDOUT); /* plat.h */
    if (rc == -ETIMEDOUT) return -ETIMEDOUT;
  }
  /* The exiting thread stores the code, then sets the event. */
  return sh_system_wait(sys);
}

static bool drain_pass(sh_system *sys) {
  /* The shutdown's thread, acting as worker 0, and it stays so after. */
  SH_ASSERT(sh_worker_current() == &sys->workers[0]);
  sh_fault_return_on("sh/system/drain", true);
  bool did = false;
  /* Each worker's queues are run as that worker: an IO actor's channels
   * belong to its worker, and so do the pools and wheels its run uses. */
  for (uint32_t i = 0; i < sys->nworkers; i++) {
    sh_worker_enter(&sys->workers[i]);
    did |= sh_loop_drain(&sys->workers[i]);
  }
  sh_worker_enter(&sys->workers[0]);
  return did;
}

static void stop_house(sh_house *h, void *arg) {
  (void)arg;
  if (!h->vacant) sh_house_stop(h, sh_house_gen(h));
}

/* Stops every house and runs the queues until nothing moves: 0, or -EBUSY
 * (counted) when work was still moving after SH_SHUTDOWN_MAX_PASSES. */
static int drain(sh_system *sys) {
  /* After `shut`: no call from another thread begins any more, and those
   * in flight are over (quiesce_outside), so what moves is finite. */
  SH_ASSERT(sh_system_is_shut(sys));
  sh_hstore_each(sys, stop_house, NULL);
  for (int pass = 0; pass < SH_SHUTDOWN_MAX_PASSES; pass++)
    if (!drain_pass(sys)) return 0;
  sh_counters_shared_add(&sys->counters, SH_C_DRAIN_OVERRUNS, 1);
  return -EBUSY;
}

/* Frees every live stack: a discarded stack cancels its futures' timers,
 * whose nodes must still exist, so this comes before the wheels'. */
static void discard_stacks(sh_house *h, void *arg) {
  (void)arg;
  sh_list *l;
  /* Bounded by the house's live stacks: each turn frees one, and starts
   * none once the drain closed the house's channels (a channel stack's end
   * may start the next request of an open one: after an overrun, up to
   * those queued, as nothing is read any more). Not counted: the house
   * keeps no count of its stacks. */
  while ((l = sh_list_first(&h->stacks)) != NULL) {
    sh_stack *st = (sh_stack *)(void *)((char *)l - offsetof(sh_stack, link));
    /* One of h's, and no handler runs: the shutdown's thread is alone. */
    SH_ASSERT(st->house == h && !st->running);
    sh_stack_discard(st);
  }
}

/* The stop hooks a drain that overran did not reach (dispatch.c runs them
 * once a stopped house's futures ended; a house still busy, or never
 * mounted, was left short of that). Every actor whose init succeeded gets
 * its stop (stackhouse.h), overrun or not: a house that is not vacant holds
 * one. After discard_stacks, so that the hook still comes after its last
 * handler. */
static void run_owed_stop(sh_house *h, void *arg) {
  (void)arg;
  if (h->vacant || h->stop_done) return;
  /* Stopped by the drain, its stacks discarded: no handler can follow. */
  SH_ASSERT(h->actor != NULL && sh_list_empty(&h->stacks));
  h->stop_done = true;
  if (h->cls->stop != NULL) SH_USER_VOID(h->cls->stop(h->actor));
}

/* Waits for the calls from other threads in flight when `shut` was stored
 * (system.h). Bounded by those: new ones back off, once `shut` is stored;
 * each ends after a few steps (a push, queueing a waiter, a spawn). Not a
 * count: other threads' progress, as a spin lock's. */
static void quiesce_outside(sh_system *sys) {
  SH_ASSERT(sh_system_is_shut(sys));
  while (sh_atomic_load(&sys->outside_sends, memory_order_acquire) != 0) sh_plat_yield_cpu();
}

int sh_system_shutdown(sh_system *sys) {
  SH_FROM_USER();
  if (sys == NULL || sh_worker_current() != NULL) return -EINVAL;
  if (sh_system_is_shut(sys)) return 0;
  /* seq_cst: the store half of the handshake with calls from threads that
   * are not workers (system.h), which quiesce_outside then waits for; it
   * also pairs with is_shut's acquire. */
  sh_atomic_store(&sys->shut, true, memory_order_seq_cst);
  if (sys->started) stop_workers(sys);
  quiesce_outside(sys);
  /* Alone now: act as worker 0 so pools and wheels have an owner. */
  sh_worker_enter(&sys->workers[0]);
  int rc = drain(sys);
  /* The rest needs worker 0's pools and wheel, as the drain did. */
  SH_ASSERT(sh_worker_current() == &sys->workers[0]);
  sh_hstore_each(sys, discard_stacks, NULL);
  if (rc != 0) sh_hstore_each(sys, run_owed_stop, NULL);
  for (uint32_t i = 0; i < sys->nworkers; i++) sh_timer_discard_all(&sys->workers[i]);
  /* Objects on their way back to their pools arrive now: the counts of
   * outstanding objects are exact from here on. */
  for (uint32_t i = 0; i < sys->nworkers; i++) sh_pool_flush(&sys->workers[i].pool);
  /* seq_cst: the waker's store in the bridges' sleep handshake (sleeper.h). */
  sh_atomic_store(&sys->drained, true, memory_order_seq_cst);
  sh_bridge_shutdown(sys);
  sh_worker_enter(NULL);
  return rc;
}

void sh_system_free(sh_system *sys) {
  SH_FROM_USER();
  if (sys == NULL) return;
  /* Freeing from a worker would free the ground it stands on. */
  SH_ASSERT(sh_worker_current() == NULL);
  if (!sh_system_is_shut(sys)) sh_system_shutdown(sys);
  sh_worker_enter(&sys->workers[0]);
  sh_hstore_free(sys);
  sh_bridge_destroy_all(sys);
  /* The layers above let go of what they kept per system (the network:
   * its servers), in the order they registered. */
  for (uint32_t i = 0; i < sys->nteardowns; i++) sys->teardowns[i].fn(sys, sys->teardowns[i].data);
  sh_addr *a = sys->addrs;
  while (a != NULL) {
    sh_addr *next = a->all_next;
    free(a);
    a = next;
  }
  for (uint32_t i = 0; i < sys->nworkers; i++) {
    sh_worker *w = &sys->workers[i];
    sh_pool_trim(&w->pool, UINT64_MAX / 4);
  }
  sh_worker_enter(NULL);
  free_system(sys);
}

/* Where each counter goes in sh_stats, in sh_counter order. */
#define STAT(c, f) [c] = offsetof(sh_stats, f)
static const size_t stats_field[SH_C_COUNT] = {
    STAT(SH_C_DELIVERED, delivered), STAT(SH_C_REPLIES_UNKNOWN, replies_unknown),
    STAT(SH_C_DROPPED_STOPPED, dropped_stopped), STAT(SH_C_ASKS_TIMED_OUT, asks_timed_out),
    STAT(SH_C_STEALS, steals), STAT(SH_C_RUNS, runs), STAT(SH_C_PARKS, parks),
    STAT(SH_C_WAKEUPS, wakeups), STAT(SH_C_SENT, sent), STAT(SH_C_ASKS, asks),
    STAT(SH_C_ASKS_RESOLVED, asks_resolved), STAT(SH_C_DRAIN_OVERRUNS, drain_overruns),
};
#undef STAT

void sh_system_stats(const sh_system *sys, sh_stats *out) {
  SH_FROM_USER();
  uint64_t v[SH_C_COUNT];
  for (int k = 0; k < SH_C_COUNT; k++) v[k] = sh_counters_get(&sys->counters, k);
  uint64_t outstanding = 0, mallocs = 0;
  for (uint32_t i = 0; i < sys->nworkers; i++) {
    const sh_worker *w = &sys->workers[i];
    for (int k = 0; k < SH_C_COUNT; k++) v[k] += sh_counters_get(&w->counters, k);
    /* An object waiting in some worker's outbox is freed, just not home yet. */
    outstanding += sh_pool_outstanding(&w->pool) - sh_pool_in_outboxes(&w->pool);
    mallocs += sh_atomic_load(&w->pool.mallocs, memory_order_relaxed);
  }
  memset(out, 0, sizeof(*out));
  for (int k = 0; k < SH_C_COUNT; k++) {
    /* Every counter has its field (a counter added without its STAT line
     * would land on `delivered`, the first). */
    SH_ASSERT(k == SH_C_DELIVERED || stats_field[k] != 0);
    *(uint64_t *)(void *)((char *)out + stats_field[k]) = v[k];
  }
  out->pool_outstanding = outstanding;
  out->pool_mallocs = mallocs;
}

int sh_run(const sh_config *cfg, const sh_actor_class *entry, int argc, char **argv) {
  SH_FROM_USER();
  sh_system *sys;
  int rc = sh_system_new(cfg, &sys);
  if (rc != 0) return rc;
  const sh_addr *a;
  rc = sh_spawn(sys, entry, NULL, 1, &a);
  SH_ASSERT(rc != 0 || a != NULL); /* a spawn that succeeds gives its address */
  if (rc == 0) {
    sh_args *args = sh_msg_new(sh_args, .argc = argc, .argv = argv);
    rc = args == NULL ? -ENOMEM : sh_notice(a, &args->hdr);
  }
  if (rc == 0) rc = sh_system_start(sys);
  if (rc == 0) rc = sh_system_wait(sys);
  sh_system_shutdown(sys);
  sh_system_free(sys);
  return rc;
}
