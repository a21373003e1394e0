/*
 * spawn_undo: spawns of several instances whose k-th init fails, and
 * spawns the system no longer takes.
 *
 * stackhouse.h: an init hook's non-zero return fails sh_spawn with that
 * error, and "every actor whose init succeeded gets its stop, even when
 * the spawn fails later (another instance's init failed): then on the
 * spawning thread". So a group of K instances (or SH_SPAWN_PER_WORKER)
 * whose instance k fails returns k's error, has run the stop hook of
 * instances 0..k-1 once each before sh_spawn returned, none of k's or
 * later ones' (their inits never ran), and none of its instances is ever
 * mounted. A group without a failure gives an address of K instances
 * (sh_addr_count), one of which answers an ask to it, and each is stopped
 * once after sh_stop. Spawns come from an
 * actor's handler and, once, from setup (a thread that is not a worker).
 * Misuse is refused with -EINVAL before any init runs (sh_spawn_on past
 * the workers; sh_stop, sh_addr_count, sh_mailbox_stats_get on a NULL or
 * out-of-range address), and once the run's end asked the system to exit
 * (sh_system_exit), a spawn is -ESHUTDOWN without running its init.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define SU_ROUNDS 6u  /* rounds of the spawner; round SU_ROUNDS is setup's */
#define SU_MAX 8u     /* instances of a group, at most (workers are fewer) */
#define SU_NONE UINT32_MAX

typedef struct su_round {
  uint32_t n, fail_at; /* fail_at: the instance whose init fails, or SU_NONE */
  int error;
  atomic_uint inits, mounts;
  atomic_uint stops[SU_MAX];
  atomic_bool in_spawn; /* sh_spawn of this round is under way */
} su_round;

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  su_round r[SU_ROUNDS + 2]; /* + setup's, + the one after the exit */
  atomic_uint left;
} world;

typedef struct su_arg {
  world *wd;
  uint32_t round;
} su_arg;

typedef struct inst {
  sh_actor base;
  world *wd;
  uint32_t round, idx;
} inst;

static int inst_init(sh_actor *self, void *arg) {
  const su_arg *a = arg;
  inst *x = (inst *)self;
  su_round *r = &a->wd->r[a->round];
  x->wd = a->wd;
  x->round = a->round;
  x->idx = atomic_fetch_add(&r->inits, 1);
  SH_SCN_CHECK(a->wd->s, x->idx < r->n, "round %u: init %u of %u", a->round, x->idx, r->n);
  return x->idx == r->fail_at ? r->error : 0;
}

static void inst_mount(sh_actor *self) {
  inst *x = (inst *)self;
  atomic_fetch_add(&x->wd->r[x->round].mounts, 1);
}

static void inst_stop(sh_actor *self) {
  inst *x = (inst *)self;
  su_round *r = &x->wd->r[x->round];
  if (x->idx < SU_MAX) atomic_fetch_add(&r->stops[x->idx], 1);
  /* A failed spawn undoes its instances before it returns. */
  SH_SCN_CHECK(x->wd->s, r->fail_at == SU_NONE || atomic_load(&r->in_spawn),
               "round %u: instance %u stopped outside its failed spawn", x->round, x->idx);
}

/* Says who answered: its round, its index and its worker. */
static sh_yield inst_ask(sh_actor *self, sh_stack *st) {
  inst *x = (inst *)self;
  return sh_scn_answer(st, (uint64_t)x->round << 16 | x->idx << 8 | sh_actor_worker(self));
}

static const sh_actor_class inst_class = {
    .name = "spawn_undo_instance",
    .size = sizeof(inst),
    .ask = inst_ask,
    .init = inst_init,
    .mount = inst_mount,
    .stop = inst_stop,
};

/* Draws round k's group and its failure, spawns it, and checks the result:
 * the group's address when it was made, else NULL. */
static const sh_addr *spawn_round(world *wd, uint32_t k) {
  sh_scn *s = wd->s;
  su_round *r = &wd->r[k];
  bool per_worker = sh_scn_below(s, 4) == 0;
  uint32_t workers = sh_system_workers(wd->sys);
  SH_SCN_CHECK(s, workers <= SU_MAX, "%u workers", workers);
  r->n = per_worker ? workers : 2 + (uint32_t)sh_scn_below(s, SU_MAX - 1);
  r->fail_at = sh_scn_below(s, 4) == 0 ? SU_NONE : (uint32_t)sh_scn_below(s, r->n);
  static const int errors[3] = {-EIO, -ENOSPC, -EPERM};
  r->error = errors[sh_scn_below(s, 3)];
  su_arg arg = {wd, k};
  const sh_addr *a = NULL;
  atomic_store(&r->in_spawn, true);
  int rc = sh_spawn(wd->sys, &inst_class, &arg, per_worker ? SH_SPAWN_PER_WORKER : r->n, &a);
  atomic_store(&r->in_spawn, false);
  if (r->fail_at == SU_NONE) {
    SH_SCN_CHECK(s, rc == 0 && sh_addr_count(a) == r->n, "round %u: spawn of %u: %d, %u", k,
                 r->n, rc, rc == 0 ? sh_addr_count(a) : 0);
    return rc == 0 ? a : NULL;
  }
  SH_SCN_CHECK(s, rc == r->error, "round %u: instance %u of %u failed with %d, sh_spawn %d", k,
               r->fail_at, r->n, r->error, rc);
  SH_SCN_CHECK_EQ(s, atomic_load(&r->inits), r->fail_at + 1, "inits run before the failure");
  for (uint32_t i = 0; i < r->n; i++)
    SH_SCN_CHECK(s, atomic_load(&r->stops[i]) == (i < r->fail_at),
                 "round %u (instance %u failed): instance %u stopped %u times", k, r->fail_at,
                 i, atomic_load(&r->stops[i]));
  return NULL;
}

/* Refused before any init runs. */
static void misuse(world *wd, const sh_addr *self) {
  sh_scn *s = wd->s;
  su_round *r = &wd->r[SU_ROUNDS + 1];
  su_arg arg = {wd, SU_ROUNDS + 1};
  const sh_addr *a = NULL;
  sh_mailbox_stats ms;
  int rc[4] = {sh_spawn_on(wd->sys, &inst_class, &arg, sh_system_workers(wd->sys), &a),
               sh_stop(NULL), sh_mailbox_stats_get(self, 1, SH_ASK, &ms),
               sh_mailbox_stats_get(self, 0, SH_REPLY, &ms)};
  for (uint32_t i = 0; i < 4; i++) SH_SCN_CHECK(s, rc[i] == -EINVAL, "misuse %u: %d", i, rc[i]);
  SH_SCN_CHECK(s, sh_addr_count(NULL) == 0, "sh_addr_count(NULL)");
  SH_SCN_CHECK_EQ(s, atomic_load(&r->inits), 0, "inits run by refused spawns");
}

/* ---- the spawner ------------------------------------------------------------- */

typedef struct spawner {
  sh_scn_actor a;
  uint32_t round;
} spawner;

typedef struct sp_locals {
  const sh_addr *group;
  sh_future *f;
} sp_locals;

/* The group's answer comes from one of its instances, on a worker. */
static void check_answer(world *wd, uint32_t k, const sp_locals *l) {
  uint64_t v = 0;
  bool got = sh_scn_num_of(l->f, &v);
  uint32_t idx = (uint32_t)(v >> 8 & 0xff), worker = (uint32_t)(v & 0xff);
  SH_SCN_CHECK(wd->s, got && v >> 16 == k && idx < wd->r[k].n &&
                          worker < sh_system_workers(wd->sys),
               "round %u: an ask to the group: error %d, answer %#llx", k,
               sh_future_error(l->f), (unsigned long long)v);
  SH_SCN_CHECK(wd->s, sh_stop(l->group) == 0, "round %u: sh_stop", k);
}

/* After the last round: the system is to end, and takes no more actors. */
static void spawn_after_exit(world *wd) {
  sh_scn_done(wd->s, wd->sys);
  su_arg arg = {wd, SU_ROUNDS + 1};
  const sh_addr *a = NULL;
  int rc = sh_spawn(wd->sys, &inst_class, &arg, 1, &a);
  SH_SCN_CHECK(wd->s, rc == -ESHUTDOWN, "a spawn after sh_system_exit: %d", rc);
  SH_SCN_CHECK_EQ(wd->s, atomic_load(&wd->r[SU_ROUNDS + 1].inits), 0, "inits after the exit");
}

static sh_yield spawner_notice(sh_actor *self, sh_stack *st) {
  spawner *sp = (spawner *)self;
  world *wd = sh_scn_state(sp->a.s);
  sp_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    if (sp->round == 0) misuse(wd, sh_self(self));
    l->group = spawn_round(wd, sp->round);
    /* A group answers (a per-worker one from the asker's own worker's). */
    l->f = l->group != NULL ? sh_scn_ask_num(st, l->group, 0, SH_FOREVER) : NULL;
    if (l->f != NULL) return sh_suspend(st, 1);
  } else {
    check_answer(wd, sp->round, l);
  }
  if (++sp->round < SU_ROUNDS) return sh_scn_round_end(st, true, &wd->left);
  spawn_after_exit(wd);
  return sh_return(st, NULL);
}

static const sh_actor_class spawner_class = {
    .name = "spawn_undo_spawner",
    .size = sizeof(spawner),
    .locals_size = sizeof(sp_locals),
    .init = sh_scn_actor_init,
    .notice = spawner_notice,
};

/* ---- the run ------------------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  atomic_store(&wd->left, 1);
  const sh_addr *g = spawn_round(wd, SU_ROUNDS); /* from a thread that is not a worker */
  if (g != NULL) SH_SCN_CHECK(s, sh_stop(g) == 0, "setup's group: sh_stop");
  return sh_scn_spawn_each(s, sys, &spawner_class, 1, SH_SCN_EACH_KICK, NULL);
}

/* After shutdown: every instance whose init succeeded stopped once; a
 * failed group's never mounted. */
static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  for (uint32_t k = 0; k <= SU_ROUNDS; k++) {
    su_round *r = &wd->r[k];
    uint32_t inited = r->fail_at == SU_NONE ? r->n : r->fail_at;
    for (uint32_t i = 0; i < r->n && i < SU_MAX; i++)
      SH_SCN_CHECK(s, atomic_load(&r->stops[i]) == (i < inited),
                   "round %u: instance %u stopped %u times", k, i, atomic_load(&r->stops[i]));
    if (r->fail_at != SU_NONE)
      SH_SCN_CHECK_EQ(s, atomic_load(&r->mounts), 0, "mounts of a failed group's instances");
  }
}

static const sh_scenario spawn_undo = {
    .name = "spawn_undo",
    .summary = "spawns of several instances whose k-th init fails; spawns after the exit",
    .flags = SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(spawn_undo);
