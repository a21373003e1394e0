/*
 * Spawning actors: a class checked, a house taken from the store for each
 * instance (hstore.h) and made live in a new generation with the gates of
 * its bounded mailboxes, and each house sent to its owner's mounting
 * queue. Placement: one actor spawned by an actor goes on the spawner's
 * worker (it will most likely talk to it; idle workers steal); from a
 * thread that is not a worker, or with SH_PLACE_ROUND_ROBIN, workers take
 * turns. Such an actor then follows whoever readies it (house.c); one
 * placed by sh_spawn_on, and the instances of a group, are pinned.
 */
#include <fiu-local.h>

#include "base/atomic.h"
#include "base/faults.h"
#include <stdlib.h>
#include <string.h>

#include "actor/addr.h"
#include "base/check.h"
#include "base/model.h"
#include "actor/gate.h"
#include "actor/house.h"
#include "actor/hstore.h"
#include "mem/mem.h"
#include "mem/msg.h"
#include "sched/system.h"
#include "sched/worker.h"

/* The gate of box for generation gen: the house's gate memory reset, or a
 * new one; false when out of memory. */
static bool house_gate(sh_house *h, sh_box box, uint32_t cap, uint32_t gen) {
  SH_ASSERT(cap <= SH_MAX_CAPACITY && (box == SH_BOX_ASK || box == SH_BOX_NOTICE));
  sh_gate *g = NULL;
  if (cap > 0) {
    g = h->gate_mem[sh_req(box)];
    if (g != NULL)
      sh_gate_reset(g, cap, gen);
    else if ((g = h->gate_mem[sh_req(box)] = sh_gate_new(cap, gen)) == NULL)
      return false;
  }
  /* release: the gate's state before a sender that loads it (acquire). */
  sh_atomic_store(&h->gate[sh_req(box)], g, memory_order_release);
  return true;
}

/* Fills the house (from sh_hstore_take) for an actor of class c; false
 * when out of memory. Its life starts later (make_live). */
static bool house_fill(sh_house *h, const sh_actor_class *c, uint32_t owner, bool pinned) {
  SH_ASSERT(h->vacant && owner < h->sys->nworkers); /* as sh_hstore_take gives it */
  sh_system *sys = h->sys;
  uint32_t gen = sh_house_gen(h);
  /* No longer vacant, before anything of the last actor's is reset: the
   * resets are release stores, so a reader of the old figures that loads a
   * reset value (acquire) then sees this store too (addr.c). */
  sh_atomic_store(&h->life, sh_life(gen, true), memory_order_relaxed);
  if (!house_gate(h, SH_BOX_ASK, c->ask_capacity, gen) ||
      !house_gate(h, SH_BOX_NOTICE, c->notice_capacity, gen))
    return false;
  h->actor = sh_hstore_actor_new(h, c->size);
  if (h->actor == NULL) return false;
  h->cls = c;
  h->owner = owner;
  sh_atomic_store(&h->notice_box, c->ordered ? SH_BOX_ASK : SH_BOX_NOTICE,
                        memory_order_relaxed); /* published by make_live */
  h->pinned = pinned;
  h->seq = sh_system_next_seq(sys);
  h->max_per_run = c->max_per_run != 0 ? c->max_per_run : sys->cfg.max_per_run;
  h->max_batch = c->max_batch != 0 ? c->max_batch : sys->cfg.max_batch;
  /* relaxed: a hint; a new actor has no pending future, so high. */
  sh_atomic_store(&h->high, true, memory_order_relaxed);
  for (int i = 0; i < SH_REQ_BOXES; i++)
    sh_atomic_store(&h->high_water[i], 0, memory_order_release);
  h->vacant = false;
  h->actor->house = h;
  h->actor->sys = sys;
  return true;
}

static sh_house *house_new(sh_system *sys, const sh_actor_class *c, uint32_t owner,
                           bool pinned) {
  sh_fault_return_on("sh/system/house", NULL);
  sh_house *h = sh_hstore_take(sys);
  if (h == NULL) return NULL;
  if (!house_fill(h, c, owner, pinned)) {
    sh_hstore_actor_free(h);
    sh_hstore_untake(h);
    return NULL;
  }
  SH_ASSERT(h->actor != NULL && !h->vacant && h->cls == c);
  return h;
}

/* The actor's generation begins: sends to its address are admitted. After
 * the init hook, which may not be sent to yet (seq_cst: as every write of
 * `life`, part of the stop handshake's order). */
static void make_live(sh_house *h) {
  uint32_t gen = sh_house_gen(h);
  sh_atomic_store(&h->life, sh_life(gen, false), memory_order_seq_cst);
  SH_MODEL_NOTE(SH_MODEL_LIVE, &h->mb.head[0], gen, 0);
}

static int check_class(const sh_actor_class *c) {
  /* A gate counts its slots in 32 bits, with room for an older
   * generation's (sh_gate_reset): twice the greatest capacity. */
  _Static_assert(SH_MAX_CAPACITY <= UINT32_MAX / 2, "a capacity fits a gate's counters");
  if (c == NULL || c->size < sizeof(sh_actor)) return -EINVAL;
  if ((c->batch_ask != NULL) != (c->batch_ask_filter != NULL)) return -EINVAL;
  if ((c->batch_notice != NULL) != (c->batch_notice_filter != NULL)) return -EINVAL;
  if (c->ask_capacity > SH_MAX_CAPACITY || c->notice_capacity > SH_MAX_CAPACITY) return -EINVAL;
  /* An ordered class's notices share the ask mailbox and its bound. */
  if (c->ordered && c->notice_capacity != 0) return -EINVAL;
  /* Channels live on their actor's worker: only IO actors have them. */
  if (c->channel != NULL && c->kind != SH_IO_ACTOR) return -EINVAL;
  return 0;
}

static uint32_t round_robin(sh_system *sys) {
  /* relaxed: placement only needs to spread, not to order. */
  return (uint32_t)(sh_atomic_fetch_add(&sys->next_worker, 1, memory_order_relaxed) %
                    sys->nworkers);
}

/* Where a single actor goes: near its spawner, unless told otherwise. */
static uint32_t owner_of_one(sh_system *sys) {
  sh_worker *w = sh_worker_current();
  if (w != NULL && w->sys == sys && sys->cfg.placement == SH_PLACE_LOCAL) return w->index;
  return round_robin(sys);
}

/* Undoes an instance whose init hook ran (rc 0: its stop hook runs too,
 * init and stop come in pairs) or failed. */
static void instance_undo(sh_house *h, bool inited) {
  SH_ASSERT(h->actor != NULL && !h->vacant); /* a filled house: its hooks have an actor */
  if (inited && h->cls->stop != NULL) SH_USER_VOID(h->cls->stop(h->actor));
  sh_hstore_actor_free(h);
  sh_hstore_untake(h);
}

/* Makes one instance on `owner`; its token in *token. */
static int instance_new(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t owner,
                        bool pinned, const sh_addr *self, uintptr_t *token) {
  sh_house *h = house_new(sys, c, owner, pinned);
  if (h == NULL) return -ENOMEM;
  *token = sh_token(h, sh_house_gen(h));
  SH_ASSERT(sh_token_house(*token) == h && sh_token_gen(*token) == sh_house_gen(h));
  h->actor->self = self != NULL ? self : (const sh_addr *)*token;
  int rc = c->init != NULL ? SH_USER(c->init(h->actor, arg)) : 0;
  if (rc != 0) {
    instance_undo(h, false);
    return rc > 0 ? -rc : rc;
  }
  return 0;
}

/* Sends the houses to their owners' mounting queues, live. A spawn is
 * never cut in two by shutdown: on a worker, shutdown joins the workers
 * before it walks the houses; from another thread, the spawn counts as an
 * outside send (spawn), which shutdown waits for. */
static void publish(sh_system *sys, const uintptr_t *tokens, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    sh_house *h = sh_token_house(tokens[i]);
    SH_ASSERT(h->actor != NULL && !h->vacant); /* filled, and its init hook ran */
    make_live(h);
    sh_worker_enqueue_mount(sys, h->owner, &h->qlink);
  }
}

static void undo_all(const uintptr_t *tokens, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) instance_undo(sh_token_house(tokens[i]), true);
}

static int spawn_one(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t owner,
                     bool pinned, const sh_addr **out) {
  uintptr_t t;
  int rc = instance_new(sys, c, arg, owner, pinned, NULL, &t);
  if (rc != 0) return rc;
  publish(sys, &t, 1);
  *out = (const sh_addr *)t;
  SH_ASSERT(sh_addr_is_token(*out));
  return 0;
}

/* Registers a group so that sh_system_free frees it. */
static void group_register(sh_system *sys, sh_addr *a) {
  SH_ASSERT(a->n >= 1 && a->all_next == NULL); /* registered once */
  sh_spin_lock(&sys->reg_lock);
  a->all_next = sys->addrs;
  sys->addrs = a;
  sh_spin_unlock(&sys->reg_lock);
}

static int spawn_group(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t instances,
                       const sh_addr **out) {
  sh_addr_kind kind = instances == SH_SPAWN_PER_WORKER ? SH_ADDR_PER_WORKER : SH_ADDR_ROBIN;
  uint32_t n = kind == SH_ADDR_PER_WORKER ? sys->nworkers : instances;
  if (n > 1u << 20) return -EINVAL;
  sh_fault_return_on("sh/spawn/group", -ENOMEM);
  sh_addr *a = calloc(1, sizeof(*a) + n * sizeof(uintptr_t));
  if (a == NULL) return -ENOMEM;
  a->kind = kind;
  a->n = n;
  sh_atomic_init(&a->robin, 0);
  int rc = 0;
  uint32_t made = 0;
  for (; made < n && rc == 0; made++) {
    uint32_t owner = kind == SH_ADDR_PER_WORKER ? made : round_robin(sys);
    /* Instances stay where they were placed: they are there to spread. */
    rc = instance_new(sys, c, arg, owner, true, a, &a->members[made]);
  }
  if (rc != 0) made--; /* the last one undid itself */
  SH_ASSERT(made <= n && (rc != 0 || made == n));
  if (rc == 0) publish(sys, a->members, n);
  if (rc != 0) {
    undo_all(a->members, made);
    free(a);
    return rc;
  }
  group_register(sys, a);
  *out = a;
  return 0;
}

/* `pin` >= 0 places the single instance on that worker. */
static int spawn_now(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t instances,
                     int64_t pin, const sh_addr **out) {
  if (instances == 1)
    return spawn_one(sys, c, arg, pin >= 0 ? (uint32_t)pin : owner_of_one(sys), pin >= 0, out);
  return spawn_group(sys, c, arg, instances, out);
}

static int spawn(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t instances,
                 int64_t pin, const sh_addr **out) {
  if (sys == NULL || out == NULL || instances == 0 || check_class(c) != 0) return -EINVAL;
  /* acquire: pairs with sh_system_exit's CAS. */
  if (sh_system_is_shut(sys) || sh_atomic_load(&sys->exiting, memory_order_acquire))
    return -ESHUTDOWN;
  /* From a thread that is not a worker, shutdown waits for the whole spawn
   * (send.h): it begins before shutdown, or fails. */
  bool outside = sh_worker_current() == NULL;
  if (outside && !sh_system_outside_begin(sys)) return -ESHUTDOWN;
  int rc = spawn_now(sys, c, arg, instances, pin, out);
  if (outside) sh_system_outside_end(sys);
  SH_ASSERT(rc <= 0); /* an init hook's positive errno came back negative */
  return rc;
}

int sh_spawn(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t instances,
             const sh_addr **out) {
  SH_FROM_USER();
  return spawn(sys, c, arg, instances, -1, out);
}

int sh_spawn_on(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t worker,
                const sh_addr **out) {
  SH_FROM_USER();
  if (sys == NULL || worker >= sys->nworkers) return -EINVAL;
  return spawn(sys, c, arg, 1, worker, out);
}
