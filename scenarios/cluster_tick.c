/*
 * Clusters without a network: nodes that count, persist their count, and
 * meet a nemesis drawn from the seed (crashes with restarts, wiped or not,
 * and clock drift), then a heal. They exercise the simulator's nodes as
 * such: boots, power cuts at any point of a node's run, restarts, drifting
 * timers, the heal and the liveness check.
 *
 *   cluster_tick    four nodes of 1-2 workers tick every 10 ms of their own
 *                   clock and persist the count; a node that boots with what
 *                   it persisted goes on from there (never below what it
 *                   persisted last); after the heal at 3 s every node must
 *                   tick 20 times within 2 s (liveness); a tick comes 9-12
 *                   ms of the node's own clock after the last one (timers
 *                   run on the node's clock, drift or no drift; a handler
 *                   may run a little late); a stop hook runs only for a
 *                   graceful stop, never for a crash
 *   cluster_leak    (hidden) a node whose program leaks a block: its
 *                   graceful stop fails the run with FAIL:leak
 *   cluster_stuck   (hidden) a liveness condition that never holds: the run
 *                   fails with FAIL:liveness naming it
 *
 * The nodes' actors record what they see in the scenario's state through
 * a pointer the setup leaves for them: instrumentation, as a checker's
 * history is, not state the nodes share.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/cluster.h>
#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

#define NODES 4
#define HEAL_MS 3000
#define TICKS_AFTER_HEAL 20

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  uint64_t persisted[NODES + 1]; /* the last count each node persisted */
  uint64_t ticks[NODES + 1];     /* ticks seen, over its boots */
  uint64_t at_heal[NODES + 1];   /* ticks[] when the heal came */
  bool healed;
  uint64_t prev_ns[NODES + 1];   /* the node's clock at its last tick in this boot (0: none) */
  uint32_t hooks[NODES + 1];     /* stop hooks that ran */
} world;

/* The run under way: one at a time in a process. */
static world *the_world;

typedef struct counter {
  sh_actor base;
  int node;
  uint64_t count;
} counter;

static sh_yield counter_notice(sh_actor *self, sh_stack *st) {
  counter *c = (counter *)self;
  const sh_msg *m = sh_stack_msg(st);
  if (!sh_msg_is(m, &sh_args_type)) return sh_return(st, NULL);
  const sh_args *a = (const sh_args *)m;
  c->node = a->argc > 1 ? atoi(a->argv[1]) : 0;
  world *w = the_world;
  if (c->node < 1 || c->node > NODES) return sh_throw(st, -EINVAL);
  int64_t n = sh_node_recall(&c->count, sizeof(c->count));
  if (n != (int64_t)sizeof(c->count)) c->count = 0;
  /* A boot goes on from what it persisted last, or from 0 when wiped. */
  SH_SCN_CHECK(w->s, c->count == w->persisted[c->node] || c->count == 0,
               "node %d booted with count %llu, it persisted %llu", c->node,
               (unsigned long long)c->count, (unsigned long long)w->persisted[c->node]);
  if (c->count == 0) w->persisted[c->node] = 0;
  w->prev_ns[c->node] = 0;
  int rc = sh_timer_start(self, 10, 10, NULL, NULL);
  return rc == 0 ? sh_return(st, NULL) : sh_throw(st, rc);
}

static void counter_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  counter *c = (counter *)self;
  c->count++;
  if (sh_node_persist(&c->count, sizeof(c->count)) == 0) the_world->persisted[c->node] = c->count;
  world *w = the_world;
  w->ticks[c->node]++;
  uint64_t now = sh_scn_clock_ns(), prev = w->prev_ns[c->node];
  w->prev_ns[c->node] = now;
  SH_SCN_CHECK(w->s, prev == 0 || (now - prev >= 9000000u && now - prev < 12000000u),
               "node %d ticked %llu ns after its last tick on its own clock, want 9-12 ms",
               c->node, (unsigned long long)(now - prev));
}

static void counter_stop(sh_actor *self) { the_world->hooks[((counter *)self)->node]++; }

static const sh_actor_class counter_class = {.name = "counter",
                                             .size = sizeof(counter),
                                             .notice = counter_notice,
                                             .timeout = counter_timeout,
                                             .stop = counter_stop};

static char *const argv_of[NODES + 1][2] = {
    {NULL, NULL}, {"counter", "1"}, {"counter", "2"}, {"counter", "3"}, {"counter", "4"}};
static const char *const names[NODES] = {"c1", "c2", "c3", "c4"};

static int add_nodes(sh_scn *s, const sh_actor_class *entry) {
  for (int i = 1; i <= NODES; i++) {
    sh_node_spec sp = {.name = names[i - 1], .ip = SH_IPV4(10, 0, 1, i),
                       .workers = 1 + sh_scn_below(s, 2), .entry = entry, .argc = 2,
                       .argv = argv_of[i], .max_drift_ppm = 50000};
    int rc = sh_node_add(&sp);
    if (rc != 0) return rc;
  }
  return 0;
}

static int tick_setup(sh_scn *s, sh_system *sys) {
  world *w = sh_scn_state(s);
  w->s = s;
  w->sys = sys;
  the_world = w;
  int rc = add_nodes(s, &counter_class);
  sh_scn_nemesis nb = {.nodes = names, .n = NODES, .max_down = 2, .wiped = true,
                       .max_drift_ppm = 50000, .start_ms = 0, .end_ms = HEAL_MS - 200};
  if (rc == 0) rc = sh_scn_nemesis_draw(s, &nb);
  /* The workload is time itself: it ends once the heal's check holds. */
  return rc < 0 ? rc : 0;
}

static bool ticked_again(sh_scn *s) {
  world *w = sh_scn_state(s);
  if (!w->healed) {
    w->healed = true;
    memcpy(w->at_heal, w->ticks, sizeof(w->ticks));
  }
  for (int i = 1; i <= NODES; i++)
    if (w->ticks[i] < w->at_heal[i] + TICKS_AFTER_HEAL) return false;
  return true;
}

/* The liveness check holds: the run ends. */
static bool tick_live(sh_scn *s) {
  bool ok = ticked_again(s);
  if (ok) sh_scn_done(s, ((world *)sh_scn_state(s))->sys);
  return ok;
}

static void tick_end(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *w = sh_scn_state(s);
  SH_SCN_CHECK(s, w->healed, "the heal never came");
  /* Stop hooks ran for the graceful stops only (the end's, here). */
  for (int i = 1; i <= NODES; i++) {
    sh_node_stats ns;
    if (sh_node_stats_get(names[i - 1], &ns) != 0) continue;
    SH_SCN_CHECK(s, w->hooks[i] == ns.stops, "node %d ran its stop hook %u times in %u stops",
                 i, w->hooks[i], ns.stops);
  }
  the_world = NULL;
}

static const sh_scenario cluster_tick = {
    .name = "cluster_tick",
    .summary = "four counting nodes, crashes, wiped restarts and drift drawn per seed, a heal",
    .flags = SH_SCN_SIM_ONLY | SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .vtime_limit_ms = 20000,
    .setup = tick_setup,
    .verify = tick_end,
    .heal_ms = HEAL_MS,
    .liveness_ms = 2000,
    .liveness_name = "every node ticks 20 times after the heal",
    .liveness = tick_live,
};
SH_SCENARIO(cluster_tick);

/* ---- cluster_leak ------------------------------------------------------------ */

/* What the node leaked (volatile: a block nobody reads is no block to the
 * compiler, which may drop the malloc). */
static void *volatile leaked;

static sh_yield leaker_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  if (sh_msg_is(sh_stack_msg(st), &sh_args_type)) leaked = malloc(100);
  return sh_return(st, NULL);
}

static const sh_actor_class leaker_class = {.name = "leaker", .size = sizeof(sh_actor),
                                            .notice = leaker_notice};

static int leak_setup(sh_scn *s, sh_system *sys) {
  world *w = sh_scn_state(s);
  w->s = s;
  the_world = w;
  sh_node_spec sp = {.name = "leaker", .ip = SH_IPV4(10, 0, 2, 1), .entry = &leaker_class,
                     .argc = 1, .argv = argv_of[1]};
  int rc = sh_node_add(&sp);
  if (rc != 0) return rc;
  /* Time for its entry to run (and leak), then the stop: FAIL:leak. */
  (void)sh_system_wait_ms(sys, 10);
  rc = sh_node_stop("leaker");
  sh_scn_done(s, sys);
  return rc;
}

static const sh_scenario cluster_leak = {
    .name = "cluster_leak",
    .summary = "a node's program that leaks a block: its stop fails the run",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY | SH_SCN_NO_FAULTS,
    .expect = "leak",
    .state_size = sizeof(world),
    .setup = leak_setup,
};
SH_SCENARIO(cluster_leak);

/* ---- cluster_stuck ----------------------------------------------------------- */

static int stuck_setup(sh_scn *s, sh_system *sys) {
  world *w = sh_scn_state(s);
  w->s = s;
  w->sys = sys;
  the_world = w;
  return add_nodes(s, &counter_class);
}

static bool never(sh_scn *s) {
  (void)s;
  return false;
}

static const sh_scenario cluster_stuck = {
    .name = "cluster_stuck",
    .summary = "a liveness condition that never holds after the heal",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY | SH_SCN_NO_FAULTS,
    .expect = "liveness",
    .state_size = sizeof(world),
    .setup = stuck_setup,
    .verify = tick_end,
    .heal_ms = 100,
    .liveness_ms = 200,
    .liveness_name = "nothing",
    .liveness = never,
};
SH_SCENARIO(cluster_stuck);
