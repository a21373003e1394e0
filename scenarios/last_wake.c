/*
 * last_wake: the last message races a worker going to sleep, and then
 * everyone only waits.
 *
 * Three producers, each on a lane of its own, ask a target on worker 0 one
 * ask at a time and wait for the answer before the next: two outside
 * threads (through bridges) and an actor on the last worker. The targets
 * answer at once, so between two rounds worker 0 runs out of work and
 * parks (the system polls for no time before parking), and each round the
 * producers' asks make up to three of its houses ready, from three threads
 * at about the same moment. Nothing else happens: no timer, no other
 * message. Every push onto a parked worker's queue must wake it (or find it
 * awake): a wakeup lost there leaves the targets unrun and every producer
 * waiting for an answer that never comes, and the simulator reports the
 * deadlock. The scenario checks that every lane got all its answers, right.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#define ROUNDS 24 /* asks per lane */
#define THREADS 2 /* outside threads; the actor lane comes after them */
#define LANES (THREADS + 1)

/* A thread lane's argument. */
typedef struct thread_lane {
  struct world *w;
  uint32_t lane;
} thread_lane;

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *target[LANES];
  sh_thread *t[THREADS];
  thread_lane lanes[THREADS];
  uint32_t answers[LANES]; /* each lane's own, read after its end */
  atomic_uint left;        /* lanes still asking */
} world;

/* ---- the targets, on worker 0 ------------------------------------------------ */

static sh_yield target_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_scn_answer(st, sh_stack_msg_as(st, sh_scn_num_ask)->v + 1);
}

static const sh_actor_class target_class = {
    .name = "last_wake_target",
    .size = sizeof(sh_actor),
    .ask = target_ask,
};

/* ---- the producers ------------------------------------------------------------- */

static void lane_answered(world *w, uint32_t lane, bool ok, uint64_t v) {
  if (SH_SCN_CHECK(w->s, ok && v == w->answers[lane] + 1, "lane %u: answer %u wrong", lane,
                   w->answers[lane]))
    w->answers[lane]++;
}

/* One ask through the bridge, then its answer. */
static int thread_round(world *w, sh_bridge *b, uint32_t lane) {
  sh_scn_num_ask *m = sh_msg_new(sh_scn_num_ask, .v = w->answers[lane]);
  int rc = m != NULL ? sh_bridge_ask(b, w->target[lane], &m->hdr, SH_FOREVER, NULL) : -ENOMEM;
  sh_bridge_reply r;
  if (rc == 0) rc = sh_bridge_recv(b, SH_FOREVER, &r);
  if (rc != 0) return rc;
  const sh_scn_num *n = (const sh_scn_num *)(const void *)r.msg;
  lane_answered(w, lane, r.error == 0 && n != NULL, n != NULL ? n->v : 0);
  sh_msg_free(r.msg);
  return r.error;
}

static void thread_main(void *arg) {
  thread_lane *tl = arg;
  world *w = tl->w;
  sh_bridge *b = NULL;
  int rc = sh_bridge_new(w->sys, &b);
  /* Bounded: ROUNDS asks, or the first that fails. */
  for (uint32_t i = 0; rc == 0 && i < ROUNDS; i++) rc = thread_round(w, b, tl->lane);
  SH_SCN_CHECK(w->s, rc == 0 || sh_scn_fault_error(w->s, rc), "lane %u: error %d", tl->lane, rc);
  sh_bridge_free(b);
  sh_scn_count_down(w->s, w->sys, &w->left);
}

typedef struct producer_locals {
  sh_future *f;
} producer_locals;

/* The actor lane: one ask per entry, the answer checked at the next. */
static sh_yield producer_notice(sh_actor *self, sh_stack *st) {
  world *w = sh_scn_state(sh_scn_of(self));
  producer_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) != SH_START) {
    uint64_t v = 0;
    bool ok = sh_scn_num_of(l->f, &v);
    lane_answered(w, THREADS, ok, v);
    if (!ok) return sh_scn_round_end(st, false, &w->left);
  }
  if (w->answers[THREADS] == ROUNDS) return sh_scn_round_end(st, false, &w->left);
  l->f = sh_scn_ask_num(st, w->target[THREADS], w->answers[THREADS], SH_FOREVER);
  if (!SH_SCN_CHECK(w->s, l->f != NULL, "the actor lane's ask failed"))
    return sh_scn_round_end(st, false, &w->left);
  return sh_suspend(st, 1);
}

static const sh_actor_class producer_class = {
    .name = "last_wake_producer",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(producer_locals),
    .init = sh_scn_actor_init,
    .notice = producer_notice,
};

/* ---- the run ------------------------------------------------------------------ */

static void configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  cfg->spin_ns = 0; /* an idle worker parks at once: every round races a park */
}

static int setup(sh_scn *s, sh_system *sys) {
  world *w = sh_scn_state(s);
  w->s = s;
  w->sys = sys;
  atomic_store(&w->left, LANES);
  int rc = 0;
  for (uint32_t i = 0; rc == 0 && i < LANES; i++)
    rc = sh_spawn_on(sys, &target_class, NULL, 0, &w->target[i]);
  const sh_addr *producer;
  if (rc == 0)
    rc = sh_scn_spawn_on(s, sys, &producer_class, 0, sh_scn_workers(s) - 1, &producer);
  for (uint32_t i = 0; rc == 0 && i < THREADS; i++) {
    w->lanes[i] = (thread_lane){w, i};
    rc = sh_thread_start(thread_main, &w->lanes[i], &w->t[i]);
  }
  if (rc == 0) rc = sh_scn_kick(producer);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *w = sh_scn_state(s);
  for (uint32_t i = 0; i < THREADS; i++)
    if (w->t[i] != NULL) sh_thread_join(w->t[i]);
  if (atomic_load(&w->left) != 0) return; /* a run cut short (faults) */
  for (uint32_t i = 0; i < LANES; i++)
    SH_SCN_CHECK(s, w->answers[i] == ROUNDS || sh_scn_faulty(s), "lane %u: %u answers of %d", i,
                 w->answers[i], ROUNDS);
}

static const sh_scenario last_wake = {
    .name = "last_wake",
    .summary = "asks from three threads race their target's worker going to sleep",
    .workers = 2,
    .state_size = sizeof(world),
    .configure = configure,
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(last_wake);
