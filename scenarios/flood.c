/*
 * flood: a flooded actor must not starve its neighbours (bug 5 of the
 * original design: a limit of messages per run was configured but never
 * applied).
 *
 * On worker 0: a producer P, a flooded actor F and an observer V. In one
 * invocation P sends F FLOOD notices, then V its first tick. V handles one
 * message per run (its class's max_per_run) and sends itself the next tick
 * until F is done; F gets PER_RUN per run (the system's max_per_run).
 * Worker 0 runs one house at a time and nobody steals from it (it never
 * holds more ready houses than the steal floor), and F and V, both without
 * pending asks, share the FIFO high sub-queue: each run of one requeues it
 * behind the other. So F and V alternate, and V's tick k must find exactly
 * min(FLOOD, PER_RUN * (k + 1)) of F's notices handled: V is served after
 * PER_RUN of F's notices, not after all of them, and no run of F handles
 * more than PER_RUN. F checks its notices arrive in the order sent.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define FLOOD 2000
#define PER_RUN 8 /* sh_config.max_per_run */
#define TICKS ((FLOOD + PER_RUN - 1) / PER_RUN)

typedef struct fl_note {
  sh_msg hdr;
  uint32_t seq;
} fl_note;
static SH_MSG_DEFINE(fl_note, SH_NOTICE, 0);

typedef struct world {
  const sh_addr *f, *v;
  /* F's handled count, written by F and read by V. relaxed: both run on
   * worker 0, one after the other; the atomic only keeps the read defined
   * were they ever to run elsewhere. */
  atomic_uint f_seen;
  uint32_t ticks; /* V's, written by V only; read by verify after the join */
  atomic_uint left; /* F and V, each when done; 0 ends the run */
} world;

typedef struct actor {
  sh_scn_actor a;
  uint32_t next; /* F: the seq due; V: the tick due */
} actor;

static void one_less(sh_actor *self) {
  sh_scn *s = sh_scn_of(self);
  sh_scn_count_down(s, sh_actor_system(self), &((world *)sh_scn_state(s))->left);
}

static int send(const sh_addr *to, uint32_t seq) {
  fl_note *n = sh_msg_new(fl_note, .seq = seq);
  return n != NULL ? sh_notice(to, &n->hdr) : -ENOMEM;
}

/* P: the whole flood, then V's first tick, from one invocation. */
static sh_yield p_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  for (uint32_t i = 0; i < FLOOD; i++)
    if (!SH_SCN_CHECK(s, send(wd->f, i) == 0, "P: notice %u to F failed", i)) break;
  SH_SCN_CHECK(s, send(wd->v, 0) == 0, "P: notice to V failed");
  return sh_return(st, NULL);
}

static sh_yield f_notice(sh_actor *self, sh_stack *st) {
  actor *f = (actor *)self;
  world *wd = sh_scn_state(f->a.s);
  uint32_t seq = sh_stack_msg_as(st, fl_note)->seq;
  SH_SCN_CHECK(f->a.s, seq == f->next, "F: notice %u started when %u was due", seq, f->next);
  f->next = seq + 1;
  uint32_t seen = atomic_load_explicit(&wd->f_seen, memory_order_relaxed) + 1;
  atomic_store_explicit(&wd->f_seen, seen, memory_order_relaxed);
  if (seen == FLOOD) one_less(self);
  return sh_return(st, NULL);
}

static sh_yield v_notice(sh_actor *self, sh_stack *st) {
  actor *v = (actor *)self;
  world *wd = sh_scn_state(v->a.s);
  uint32_t k = sh_stack_msg_as(st, fl_note)->seq;
  uint32_t seen = atomic_load_explicit(&wd->f_seen, memory_order_relaxed);
  uint32_t want = (k + 1) * PER_RUN < FLOOD ? (k + 1) * PER_RUN : FLOOD;
  SH_SCN_CHECK(v->a.s, k == v->next, "V: tick %u started when %u was due", k, v->next);
  SH_SCN_CHECK(v->a.s, seen == want, "V: tick %u found F at %u of %d, want %u (%d per run)", k,
               seen, FLOOD, want, PER_RUN);
  v->next = k + 1;
  wd->ticks++;
  if (seen < FLOOD && k + 1 < TICKS)
    SH_SCN_CHECK(v->a.s, send(sh_self(self), k + 1) == 0, "V: next tick failed");
  else
    one_less(self);
  return sh_return(st, NULL);
}

static const sh_actor_class p_class = {
    .name = "flood_producer", .size = sizeof(actor), .init = sh_scn_actor_init, .notice = p_notice};
static const sh_actor_class f_class = {
    .name = "flood_target", .size = sizeof(actor), .init = sh_scn_actor_init, .notice = f_notice};
/* One message a run: each of V's runs is one tick between two of F's. */
static const sh_actor_class v_class = {.name = "flood_observer",
                                       .size = sizeof(actor),
                                       .init = sh_scn_actor_init,
                                       .notice = v_notice,
                                       .max_per_run = 1};

static void configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  cfg->max_per_run = PER_RUN;
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  atomic_store(&wd->left, 2);
  /* F and V first: mounted (in spawn order, on worker 0) before P can run. */
  const sh_addr *p;
  int rc = sh_scn_spawn_on(s, sys, &f_class, 0, 0, &wd->f);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &v_class, 0, 0, &wd->v);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &p_class, 0, 0, &p);
  return rc == 0 ? sh_scn_kick(p) : rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK(s, atomic_load(&wd->f_seen) == FLOOD, "F handled %u, want %d",
               atomic_load(&wd->f_seen), FLOOD);
  SH_SCN_CHECK(s, wd->ticks == TICKS, "V ticked %u times, want %d", wd->ticks, TICKS);
  SH_SCN_CHECK_EQ(s, st->delivered, 1 + FLOOD + (uint64_t)TICKS, "delivered");
  /* F alone needs FLOOD / PER_RUN runs, V one per tick. */
  SH_SCN_CHECK(s, st->runs >= (uint64_t)TICKS * 2, "%llu runs, want at least %d",
               (unsigned long long)st->runs, TICKS * 2);
}

static const sh_scenario flood = {
    .name = "flood",
    .summary = "known bug 5, max_per_run applied: a flooded actor's neighbour is served in turn",
    .workers = 2,
    .state_size = sizeof(world),
    .configure = configure,
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(flood);
