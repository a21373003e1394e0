/*
 * Spawning actors: a class checked, its houses made (with the gates of its
 * bounded mailboxes) and initialised, the address published in the
 * system's registry, and each house sent to its owner's mounting queue.
 */
#include "spawn.h"

#include <fiu-local.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "check.h"
#include "gate.h"
#include "house.h"
#include "msg.h"
#include "system.h"
#include "worker.h"

/* Frees a house and what it still holds, when no worker can reach it: a
 * spawn that failed, or the system's end (its stacks discarded first). */

void sh_spawn_house_free(sh_house *h) {
  /* Bounded by what was pushed: nothing is pushed any more. */
  for (int b = 0; b < SH_BOXES; b++) {
    sh_msg *m;
    while ((m = sh_mailbox_take(&h->mb[b])) != NULL) sh_msg_free(m);
  }
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
    sh_spawn_house_free(h);
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
    sh_spawn_house_free(h);
  }
  free(a);
}

/* Registers the houses (creation order = ordering for shutdown) and sends
 * them to their owners' mounting queues. -ESHUTDOWN when shutdown began:
 * under the lock, so every published house is seen by shutdown's walk. */
static int addr_publish(sh_system *sys, sh_addr *a) {
  sh_spin_lock(&sys->reg_lock);
  if (sh_system_is_shut(sys)) {
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
  for (uint32_t i = 0; i < a->n; i++)
    sh_worker_enqueue_mount(sys, a->houses[i]->owner, &a->houses[i]->qlink);
  return 0;
}

/* `pin` >= 0 places the single instance on that worker. */
static int spawn(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t instances,
                 int64_t pin, const sh_addr **out) {
  if (sys == NULL || out == NULL || instances == 0 || check_class(c) != 0) return -EINVAL;
  /* acquire: pairs with sh_system_exit's CAS; a spawn racing with the exit
   * is decided again under the registry lock (addr_publish). */
  if (sh_system_is_shut(sys) || atomic_load_explicit(&sys->exiting, memory_order_acquire)) return -ESHUTDOWN;
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

