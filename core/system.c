/*
 * The actor system: spawn and placement, addresses, sending notices, the
 * program's lifecycle and orderly shutdown.
 *
 * Shutdown runs in two steps. First the workers are told to stop and are
 * joined. Then the calling thread takes worker 0's identity and, alone,
 * stops every actor and runs the queues until nothing moves: queued asks
 * are answered with -ESHUTDOWN, queued notices dropped, every pending ask
 * fails with -ESHUTDOWN and its stack resumes to see it, stop hooks run.
 * Single-threaded, this needs no termination detection and is deterministic.
 */
#include "system.h"

#include <assert.h>
#include <fiu-local.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "gate.h"
#include "house.h"
#include "msg.h"
#include "stack.h"
#include "timer.h"

/* Passes of the final drain; each pass runs every queued house to quiet.
 * Work at shutdown is finite (stopped actors make no new asks), so this only
 * bounds a handler that keeps sending notices to itself. */
#define SH_SHUTDOWN_MAX_PASSES 10000

void sh_config_default(sh_config *cfg) {
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
}

static int check_config(const sh_config *c) {
  if (c->max_per_run == 0 || c->max_batch == 0 || c->steal_aggression == 0 || c->io_ratio == 0 ||
      c->io_ratio > 100 || c->workers > 1024)
    return -EINVAL;
  return 0;
}

static void free_system(sh_system *sys) {
  if (sys->workers != NULL) {
    for (uint32_t i = 0; i < sys->nworkers; i++) sh_worker_destroy(&sys->workers[i]);
  }
  free(sys->workers);
  if (sys->plat != NULL) sh_plat_free(sys->plat);
  if (sys->exit_event != NULL) sh_plat_event_free(sys->exit_event);
  free(sys);
}

int sh_system_new(const sh_config *cfg, sh_system **out) {
  if (out == NULL) return -EINVAL;
  sh_config c;
  if (cfg != NULL)
    c = *cfg;
  else
    sh_config_default(&c);
  int rc = check_config(&c);
  if (rc != 0) return rc;
  if (c.workers == 0) c.workers = sh_plat_cpu_count();
  sh_system *sys = calloc(1, sizeof(*sys));
  if (sys == NULL) return -ENOMEM;
  sys->cfg = c;
  sys->nworkers = c.workers;
  sh_spin_init(&sys->reg_lock);
  for (int i = 0; i < SH_C_COUNT; i++) atomic_init(&sys->counters.v[i], 0);
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
  memset(sys->workers, 0, sizeof(sh_worker) * c.workers);
  for (uint32_t i = 0; i < c.workers; i++) sh_worker_init(&sys->workers[i], sys, i);
  *out = sys;
  return 0;
}

uint32_t sh_system_workers(const sh_system *sys) { return sys->nworkers; }

static bool is_shut(const sh_system *sys) { return sh_system_is_shut(sys); }

static void stop_workers(sh_system *sys) {
  for (uint32_t i = 0; i < sys->nworkers; i++) {
    /* release: the worker's acquire load sees everything before the stop. */
    atomic_store_explicit(&sys->workers[i].stop, true, memory_order_release);
    sh_plat_wake(sys->plat, i);
  }
  sh_plat_join(sys->plat);
}

int sh_system_start(sh_system *sys) {
  if (sys == NULL || sys->started || is_shut(sys)) return -EINVAL;
  sys->started = true;
  int rc = sh_plat_start(sys->plat, sh_worker_main, sys);
  if (rc != 0) stop_workers(sys);
  return rc;
}

/* ---- spawn and addresses -------------------------------------------- */

/* Frees a house that was never published (its dispatcher is empty). */
static void house_free(sh_house *h) {
  sh_gate_free(h->gate[SH_BOX_ASK]);
  sh_gate_free(h->gate[SH_BOX_NOTICE]);
  sh_dispatcher_destroy(&h->futures);
  free(h->actor);
  free(h);
}

/* The gates of the class's bounded mailboxes; false when out of memory. */
static bool house_gates(sh_house *h, const sh_actor_class *c) {
  if (c->ask_capacity > 0 && (h->gate[SH_BOX_ASK] = sh_gate_new(c->ask_capacity)) == NULL)
    return false;
  if (c->notice_capacity > 0 &&
      (h->gate[SH_BOX_NOTICE] = sh_gate_new(c->notice_capacity)) == NULL)
    return false;
  return true;
}

static sh_house *house_new(sh_system *sys, const sh_actor_class *c, uint32_t owner) {
  fiu_return_on("sh/system/house", NULL);
  sh_house *h = aligned_alloc(64, (sizeof(sh_house) + 63) & ~(size_t)63);
  if (h == NULL) return NULL;
  memset(h, 0, sizeof(*h));
  h->actor = calloc(1, c->size);
  if (h->actor == NULL || sh_dispatcher_init(&h->futures, SH_DISPATCHER_INITIAL) != 0) {
    free(h->actor);
    free(h);
    return NULL;
  }
  if (!house_gates(h, c)) {
    house_free(h);
    return NULL;
  }
  sh_house_init(h, sys, c, SH_CREATED);
  h->owner = owner;
  h->max_per_run = c->max_per_run != 0 ? c->max_per_run : sys->cfg.max_per_run;
  h->max_batch = c->max_batch != 0 ? c->max_batch : sys->cfg.max_batch;
  h->actor->house = h;
  h->actor->sys = sys;
  return h;
}

static int check_class(const sh_actor_class *c) {
  if (c == NULL || c->size < sizeof(sh_actor)) return -EINVAL;
  if ((c->batch_ask != NULL) != (c->batch_ask_filter != NULL)) return -EINVAL;
  if ((c->batch_notice != NULL) != (c->batch_notice_filter != NULL)) return -EINVAL;
  if (c->ask_capacity > SH_MAX_CAPACITY || c->notice_capacity > SH_MAX_CAPACITY) return -EINVAL;
  return 0;
}

static uint32_t owner_for(sh_system *sys, sh_addr_kind kind, uint32_t i) {
  if (kind == SH_ADDR_PER_WORKER) return i;
  /* relaxed: placement only needs to spread, not to order. */
  return (uint32_t)(atomic_fetch_add_explicit(&sys->next_worker, 1, memory_order_relaxed) %
                    sys->nworkers);
}

/* Undoes a spawn that failed: the first `inited` actors' init succeeded, so
 * their stop hook runs (init and stop always come in pairs); `made` houses
 * are freed. */
static void addr_free(sh_addr *a, uint32_t made, uint32_t inited) {
  for (uint32_t i = 0; i < made; i++) {
    sh_house *h = a->houses[i];
    if (i < inited && h->cls->stop != NULL) h->cls->stop(h->actor);
    house_free(h);
  }
  free(a);
}

/* Registers the houses (creation order = ordering for shutdown) and sends
 * them to their owners' mounting queues. -ESHUTDOWN when shutdown began:
 * under the lock, so every published house is seen by shutdown's walk. */
static int addr_publish(sh_system *sys, sh_addr *a) {
  sh_spin_lock(&sys->reg_lock);
  if (is_shut(sys)) {
    sh_spin_unlock(&sys->reg_lock);
    return -ESHUTDOWN;
  }
  for (uint32_t i = 0; i < a->n; i++) {
    sh_house *h = a->houses[i];
    h->seq = sys->nhouses++;
    if (sys->houses_tail != NULL)
      sys->houses_tail->all_next = h;
    else
      sys->houses = h;
    sys->houses_tail = h;
  }
  a->all_next = sys->addrs;
  sys->addrs = a;
  sh_spin_unlock(&sys->reg_lock);
  for (uint32_t i = 0; i < a->n; i++) sh_worker_enqueue_mount(a->houses[i]);
  return 0;
}

/* `pin` >= 0 places the single instance on that worker. */
static int spawn(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t instances,
                 int64_t pin, const sh_addr **out) {
  if (sys == NULL || out == NULL || instances == 0 || check_class(c) != 0) return -EINVAL;
  /* acquire: pairs with sh_system_exit's CAS; a spawn racing with the exit
   * is decided again under the registry lock (addr_publish). */
  if (is_shut(sys) || atomic_load_explicit(&sys->exiting, memory_order_acquire)) return -ESHUTDOWN;
  sh_addr_kind kind = instances == 1                     ? SH_ADDR_PLAIN
                      : instances == SH_SPAWN_PER_WORKER ? SH_ADDR_PER_WORKER
                                                         : SH_ADDR_ROBIN;
  uint32_t n = kind == SH_ADDR_PER_WORKER ? sys->nworkers : instances;
  if (n > 1u << 20) return -EINVAL;
  sh_addr *a = calloc(1, sizeof(*a) + n * sizeof(sh_house *));
  if (a == NULL) return -ENOMEM;
  a->kind = kind;
  a->n = n;
  atomic_init(&a->robin, 0);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t owner = pin >= 0 ? (uint32_t)pin : owner_for(sys, kind, i);
    sh_house *h = house_new(sys, c, owner);
    if (h == NULL) {
      addr_free(a, i, i);
      return -ENOMEM;
    }
    a->houses[i] = h;
    h->actor->self = a;
    int rc = c->init != NULL ? c->init(h->actor, arg) : 0;
    if (rc != 0) {
      addr_free(a, i + 1, i);
      return rc > 0 ? -rc : rc;
    }
  }
  int rc = addr_publish(sys, a);
  if (rc != 0) {
    addr_free(a, n, n);
    return rc;
  }
  *out = a;
  return 0;
}

int sh_spawn(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t instances,
             const sh_addr **out) {
  return spawn(sys, c, arg, instances, -1, out);
}

int sh_spawn_on(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t worker,
                const sh_addr **out) {
  if (sys == NULL || worker >= sys->nworkers) return -EINVAL;
  return spawn(sys, c, arg, 1, worker, out);
}

uint32_t sh_addr_count(const sh_addr *a) { return a != NULL ? a->n : 0; }
uint32_t sh_actor_worker(const sh_actor *a) { return a->house->owner; }

sh_house *sh_addr_pick(const sh_addr *a) {
  if (a->kind == SH_ADDR_PLAIN) return a->houses[0];
  if (a->kind == SH_ADDR_PER_WORKER) {
    sh_worker *w = sh_worker_current();
    if (w != NULL && w->sys == a->houses[0]->sys) return a->houses[w->index];
  }
  sh_addr *m = (sh_addr *)a;
  /* relaxed: round-robin only needs to spread. */
  uint32_t i = (uint32_t)atomic_fetch_add_explicit(&m->robin, 1, memory_order_relaxed);
  return a->houses[i % a->n];
}

/* A notice that will not wait for room: 0 (sent), -EAGAIN, -ESHUTDOWN,
 * -EINVAL; on an error m is still the caller's. */
static int notice_now(const sh_addr *to, sh_msg *m) {
  if (to == NULL || m == NULL || m->type->kind != SH_NOTICE) return -EINVAL;
  sh_house *h = sh_addr_pick(to);
  /* acquire: a fast refusal only. A send that misses a concurrent stop puts
   * its notice anyway, and the stopped house drops it (counted) when it runs. */
  if (atomic_load_explicit(&h->stopped, memory_order_acquire)) return -ESHUTDOWN;
  sh_gate *g = h->gate[SH_BOX_NOTICE];
  int rc = g != NULL ? sh_gate_try(g) : 0;
  if (rc == -EAGAIN) sh_gate_refused(g);
  if (rc != 0) return rc;
  m->sender = NULL;
  m->id = 0;
  sh_house_put(h, SH_BOX_NOTICE, m);
  return 0;
}

int sh_notice(const sh_addr *to, sh_msg *m) {
  int rc = notice_now(to, m);
  if (rc == -ESHUTDOWN) {
    /* Offered to a stopped actor: accounted as sent and dropped. */
    sh_system *sys = to->houses[0]->sys;
    sh_count(sys, SH_C_SENT);
    sh_count(sys, SH_C_DROPPED_STOPPED);
  }
  if (rc != 0) sh_msg_free(m);
  return rc;
}

int sh_notice_try(const sh_addr *to, sh_msg *m) { return notice_now(to, m); }

static void stop_house(sh_house *h) { sh_house_stop(h); }

int sh_stop(const sh_addr *a) {
  if (a == NULL) return -EINVAL;
  for (uint32_t i = 0; i < a->n; i++) stop_house(a->houses[i]);
  return 0;
}

/* ---- lifecycle ------------------------------------------------------- */

void sh_system_exit(sh_system *sys, int code) {
  bool was = false;
  /* The first exit decides the code. acq_rel: the waiter's acquire sees it. */
  if (atomic_compare_exchange_strong_explicit(&sys->exiting, &was, true, memory_order_acq_rel,
                                              memory_order_acquire)) {
    atomic_store_explicit(&sys->exit_code, code, memory_order_release);
    sh_plat_event_set(sys->exit_event);
  }
}

int sh_system_wait(sh_system *sys) {
  if (sys == NULL || sh_worker_current() != NULL) return -EINVAL;
  sh_plat_event_wait(sys->exit_event);
  return atomic_load_explicit(&sys->exit_code, memory_order_acquire);
}

static bool drain_pass(sh_system *sys) {
  bool did = false;
  for (uint32_t i = 0; i < sys->nworkers; i++) did |= sh_worker_drain(&sys->workers[i]);
  return did;
}

int sh_system_shutdown(sh_system *sys) {
  if (sys == NULL || sh_worker_current() != NULL) return -EINVAL;
  if (is_shut(sys)) return 0;
  /* Under the registry lock: a spawn publishes before this or fails. release:
   * pairs with is_shut's acquire. */
  sh_spin_lock(&sys->reg_lock);
  atomic_store_explicit(&sys->shut, true, memory_order_release);
  sh_spin_unlock(&sys->reg_lock);
  if (sys->started) stop_workers(sys);
  /* Alone now: act as worker 0 so pools and wheels have an owner. */
  sh_plat_set_local(&sys->workers[0]);
  for (sh_house *h = sys->houses; h != NULL; h = h->all_next) stop_house(h);
  for (int pass = 0; pass < SH_SHUTDOWN_MAX_PASSES && drain_pass(sys); pass++) {
  }
  /* Stacks first: a discarded stack cancels its futures' timers, whose
   * nodes must still exist; then the wheels free what is left. */
  for (sh_house *h = sys->houses; h != NULL; h = h->all_next) {
    while (h->stacks != NULL) sh_stack_discard(h->stacks);
  }
  for (uint32_t i = 0; i < sys->nworkers; i++) sh_timer_discard_all(&sys->workers[i]);
  /* Objects on their way back to their pools arrive now: the counts of
   * outstanding objects are exact from here on. */
  for (uint32_t i = 0; i < sys->nworkers; i++) sh_pool_flush(&sys->workers[i].pool);
  /* seq_cst: the waker's store in the bridges' sleep handshake (bridge.c). */
  atomic_store_explicit(&sys->drained, true, memory_order_seq_cst);
  sh_bridge_shutdown(sys);
  sh_plat_set_local(NULL);
  return 0;
}

void sh_system_free(sh_system *sys) {
  if (sys == NULL) return;
  /* Freeing from a worker would free the ground it stands on. */
  assert(sh_worker_current() == NULL);
  if (sh_worker_current() != NULL) return;
  if (!is_shut(sys)) sh_system_shutdown(sys);
  sh_plat_set_local(&sys->workers[0]);
  sh_house *h = sys->houses;
  while (h != NULL) {
    sh_house *next = h->all_next;
    sh_house_destroy(h);
    h = next;
  }
  sh_bridge_destroy_all(sys);
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
  sh_plat_set_local(NULL);
  free_system(sys);
}

uint32_t sh_system_houses_busy(const sh_system *sys) {
  uint32_t n = 0;
  for (const sh_house *h = sys->houses; h != NULL; h = h->all_next) {
    /* relaxed: the workers are joined (the caller's contract). */
    int s = atomic_load_explicit(&h->state, memory_order_relaxed);
    if (s == SH_READY || s == SH_SCHEDULED || s == SH_RUNNING) n++;
  }
  return n;
}

int sh_mailbox_stats_get(const sh_addr *a, uint32_t i, sh_msg_kind kind, sh_mailbox_stats *out) {
  if (a == NULL || out == NULL || i >= a->n || (kind != SH_ASK && kind != SH_NOTICE))
    return -EINVAL;
  const sh_house *h = a->houses[i];
  sh_box box = kind == SH_ASK ? SH_BOX_ASK : SH_BOX_NOTICE;
  const sh_mailbox *mb = &h->mb[box];
  memset(out, 0, sizeof(*out));
  /* relaxed: figures for a report. Unbounded: the takes as last published
   * by the actor's runner (once a run). */
  out->depth = sh_mailbox_backlog((uint32_t)atomic_load_explicit(&mb->puts, memory_order_relaxed),
                                  (uint32_t)atomic_load_explicit(&mb->taken_seen,
                                                                 memory_order_relaxed));
  out->high_water = atomic_load_explicit(&h->high_water[box], memory_order_relaxed);
  if (h->gate[box] != NULL) sh_gate_stats(h->gate[box], out);
  return 0;
}

void sh_system_stats(const sh_system *sys, sh_stats *out) {
  uint64_t v[SH_C_COUNT];
  for (int k = 0; k < SH_C_COUNT; k++) v[k] = sh_counters_get(&sys->counters, k);
  uint64_t outstanding = 0, mallocs = 0;
  for (uint32_t i = 0; i < sys->nworkers; i++) {
    const sh_worker *w = &sys->workers[i];
    for (int k = 0; k < SH_C_COUNT; k++) v[k] += sh_counters_get(&w->counters, k);
    /* An object waiting in some worker's outbox is freed, just not home yet. */
    outstanding += sh_pool_outstanding(&w->pool) - sh_pool_in_outboxes(&w->pool);
    mallocs += atomic_load_explicit(&w->pool.mallocs, memory_order_relaxed);
  }
  memset(out, 0, sizeof(*out));
  out->delivered = v[SH_C_DELIVERED];
  out->replies_unknown = v[SH_C_REPLIES_UNKNOWN];
  out->dropped_stopped = v[SH_C_DROPPED_STOPPED];
  out->asks_timed_out = v[SH_C_ASKS_TIMED_OUT];
  out->steals = v[SH_C_STEALS];
  out->runs = v[SH_C_RUNS];
  out->parks = v[SH_C_PARKS];
  out->wakeups = v[SH_C_WAKEUPS];
  out->sent = v[SH_C_SENT];
  out->asks = v[SH_C_ASKS];
  out->asks_resolved = v[SH_C_ASKS_RESOLVED];
  out->pool_outstanding = outstanding;
  out->pool_mallocs = mallocs;
}

int sh_run(const sh_config *cfg, const sh_actor_class *entry, int argc, char **argv) {
  sh_system *sys;
  int rc = sh_system_new(cfg, &sys);
  if (rc != 0) return rc;
  const sh_addr *a;
  rc = sh_spawn(sys, entry, NULL, 1, &a);
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
