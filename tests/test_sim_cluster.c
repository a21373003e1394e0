/*
 * Nodes of a cluster simulation (<stackhouse/cluster.h>), through the
 * public API, on several seeds and strategies:
 *
 *   - a node boots from its entry class and argv (the argv copied), runs on
 *     fibers of its own scheduled with the simulation's, and its graceful
 *     stop runs its stop hooks;
 *   - a crash is a power cut: no timer, handler or stop hook of the node
 *     runs after it; a restart boots it again after its delay with what it
 *     persisted; a wiped restart with nothing;
 *   - a node's clock drifts as asked (its timers with it) and jumps only
 *     when asked, backwards too;
 *   - an actor of one node cannot message another system's address
 *     (-EXDEV), as addresses are per process;
 *   - bad use is a clear error (-ENOENT, -EEXIST, -EALREADY, -EBUSY,
 *     -ERANGE, -EINVAL, -EPERM);
 *   - the same seed gives the same trace hash, nodes, crashes and all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <stackhouse/cluster.h>
#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>
#include <stackhouse/stackhouse.h>

#define SIM_SEEDS 3u
#include "sim_runs.h"

#define MS 1000000ull
#define NODES 3

/* What the nodes saw, by node number (argv[1]). */
static struct {
  int boots[NODES + 1], stops[NODES + 1], argc[NODES + 1];
  uint64_t ticks[NODES + 1];
  uint64_t last_tick_true[NODES + 1];  /* true virtual time of the last tick */
  int64_t first_local[NODES + 1], last_local[NODES + 1];
  uint64_t first_true[NODES + 1];
  uint64_t recalled[NODES + 1];
  /* Between consecutive ticks: the least and most, on the node's clock
   * (ns) and on the true one. */
  uint64_t prev_local_ns[NODES + 1], prev_true[NODES + 1];
  uint64_t min_local[NODES + 1], max_local[NODES + 1], min_true[NODES + 1], max_true[NODES + 1];
  int exdev;   /* what a send to the main system's address gave */
  int put_err; /* and a put's future */
} g;

static const sh_addr *main_addr; /* an actor of the simulation's own system */

static uint64_t true_now(void) {
  sh_sim_report r;
  sh_sim_report_get(&r);
  return r.vtime_ns;
}

typedef struct ticker {
  sh_actor base;
  int node;
  uint64_t count;
} ticker;

typedef struct ping {
  sh_msg hdr;
} ping;
static SH_MSG_DEFINE(ping, SH_NOTICE, 0);

static sh_yield ticker_notice(sh_actor *self, sh_stack *st) {
  ticker *t = (ticker *)self;
  const sh_msg *m = sh_stack_msg(st);
  if (!sh_msg_is(m, &sh_args_type)) return sh_return(st, NULL);
  const sh_args *a = (const sh_args *)m;
  t->node = atoi(a->argv[1]);
  g.argc[t->node] = a->argc;
  g.boots[t->node]++;
  uint64_t c = 0;
  int64_t n = sh_node_recall(&c, sizeof(c));
  t->count = n == (int64_t)sizeof(c) ? c : 0;
  g.recalled[t->node] = t->count;
  g.first_local[t->node] = sh_clock_ms();
  g.first_true[t->node] = true_now();
  /* Another system's address: refused, the message freed. */
  if (t->node == 1) {
    g.exdev = sh_notice(main_addr, sh_msg_alloc(&ping_type));
    sh_future *f = sh_put(st, main_addr, sh_msg_alloc(&ping_type), SH_NOWAIT);
    g.put_err = f != NULL && sh_future_failed(f) ? sh_future_error(f) : 0;
  }
  (void)sh_timer_start(self, 10, 10, NULL, NULL);
  return sh_return(st, NULL);
}

static void ticker_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  ticker *t = (ticker *)self;
  t->count++;
  (void)sh_node_persist(&t->count, sizeof(t->count));
  int n = t->node;
  uint64_t now = true_now(), local = (uint64_t)sh_scn_clock_ns();
  if (g.ticks[n]++ > 0) {
    uint64_t dl = local - g.prev_local_ns[n], dt = now - g.prev_true[n];
    if (g.min_local[n] == 0 || dl < g.min_local[n]) g.min_local[n] = dl;
    if (dl > g.max_local[n]) g.max_local[n] = dl;
    if (g.min_true[n] == 0 || dt < g.min_true[n]) g.min_true[n] = dt;
    if (dt > g.max_true[n]) g.max_true[n] = dt;
  }
  g.prev_local_ns[n] = local;
  g.prev_true[n] = now;
  g.last_tick_true[n] = now;
  g.last_local[n] = sh_clock_ms();
}

static void ticker_stop(sh_actor *self) { g.stops[((ticker *)self)->node]++; }

static const sh_actor_class ticker_class = {.name = "ticker",
                                            .size = sizeof(ticker),
                                            .notice = ticker_notice,
                                            .timeout = ticker_timeout,
                                            .stop = ticker_stop};

static sh_yield sink_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}
static const sh_actor_class sink_class = {.name = "sink", .size = sizeof(sh_actor),
                                          .notice = sink_notice};

static char a0[] = "ticker", a1[] = "1", a2[] = "2", a3[] = "3";
static char *argv_of[NODES + 1][3] = {{0}, {a0, a1, NULL}, {a0, a2, NULL}, {a0, a3, NULL}};
static const char *const names[NODES + 1] = {"main", "n1", "n2", "n3"};

static sh_system *root_up(unsigned run) {
  memset(&g, 0, sizeof(g));
  sim_configure(sim_run_seed(run), sim_run_strategy(run), 0);
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(NULL, &sys), 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_spawn(sys, &sink_class, NULL, 1, &main_addr), 0);
  for (int n = 1; n <= NODES; n++) {
    sh_node_spec sp = {.name = names[n], .ip = SH_IPV4(10, 0, 0, n), .workers = (uint32_t)n % 2 + 1,
                       .entry = &ticker_class, .argc = 2, .argv = argv_of[n],
                       .max_drift_ppm = 100000};
    assert_int_equal(sh_node_add(&sp), 0);
  }
  return sys;
}

static void root_down(sh_system *sys) {
  sh_system_exit(sys, 0);
  assert_int_equal(sh_system_wait(sys), 0);
  sh_system_shutdown(sys);
  sh_system_free(sys);
}

static void test_boot_stop(void **state) {
  (void)state;
  for (unsigned run = 0; run < SIM_RUNS; run++) {
    sh_system *sys = root_up(run);
    assert_int_equal(sh_sim_idle(100 * MS), 0);
    for (int n = 1; n <= NODES; n++) {
      assert_int_equal(g.boots[n], 1);
      assert_int_equal(g.argc[n], 2);
      assert_true(g.ticks[n] >= 8 && g.ticks[n] <= 10);
      assert_int_equal(sh_node_up(names[n]), 1);
    }
    assert_int_equal(g.exdev, -EXDEV);
    assert_int_equal(g.put_err, -EXDEV);
    assert_int_equal(sh_node_stop("n2"), 0);
    assert_int_equal(g.stops[2], 1);
    assert_int_equal(sh_node_up("n2"), 0);
    root_down(sys); /* n1 and n3 are still up: powered off with the run */
    assert_int_equal(g.stops[1], 0);
  }
}

static void test_crash_restart(void **state) {
  (void)state;
  for (unsigned run = 0; run < SIM_RUNS; run++) {
    sh_system *sys = root_up(run);
    assert_int_equal(sh_sim_idle(55 * MS), 0);
    uint64_t before = g.ticks[1];
    assert_true(before >= 4);
    int rc = sh_node_crash("n1");
    if (rc == -ENOTSUP) { /* not linked to free a node's memory */
      root_down(sys);
      skip();
    }
    assert_int_equal(rc, 0);
    uint64_t crashed_at = true_now();
    assert_int_equal(sh_node_up("n1"), 0);
    assert_int_equal(sh_node_crash("n1"), -EALREADY);
    assert_int_equal(sh_node_restart("n1", 100, 0), 0);
    assert_int_equal(sh_node_restart("n1", 100, 0), -EBUSY); /* a boot is due */
    assert_int_equal(sh_sim_idle(50 * MS), 0);
    /* Nothing of it ran after the power cut: no tick, no stop hook. */
    assert_int_equal(g.ticks[1], before);
    assert_true(g.last_tick_true[1] <= crashed_at);
    assert_int_equal(g.stops[1], 0);
    assert_int_equal(sh_sim_idle(100 * MS), 0);
    assert_int_equal(g.boots[1], 2);
    assert_int_equal(g.recalled[1], before); /* what it persisted */
    assert_true(g.ticks[1] > before);
    assert_int_equal(sh_node_restart("n1", 0, 0), -EBUSY);
    assert_int_equal(sh_node_crash("n1"), 0);
    assert_int_equal(sh_node_restart("n1", 0, SH_NODE_WIPED), 0);
    assert_int_equal(sh_sim_idle(5 * MS), 0);
    assert_int_equal(g.boots[1], 3);
    assert_int_equal(g.recalled[1], 0);
    sh_node_stats st;
    assert_int_equal(sh_node_stats_get("n1", &st), 0);
    assert_int_equal(st.boots, 3);
    assert_int_equal(st.crashes, 2);
    root_down(sys);
  }
}

static void test_clocks(void **state) {
  (void)state;
  for (unsigned run = 0; run < SIM_RUNS; run++) {
    sh_system *sys = root_up(run);
    assert_int_equal(sh_node_drift("n2", 100000), 0); /* 10% fast */
    assert_int_equal(sh_node_drift("n3", -100000), 0); /* 10% slow */
    assert_int_equal(sh_node_drift("n3", -100001), -ERANGE);
    assert_int_equal(sh_sim_idle(1000 * MS), 0);
    /* Timers run on the node's clock: a fast clock ticks more often. */
    /* Timers run on the node's clock: a period is 10 ms of it (and less
     * than a millisecond more, the wheel's rounding of a re-arm made late
     * by the handler's own run), whatever its drift; on the true clock a
     * fast node's is shorter, a slow one's longer. */
    for (int n = 1; n <= NODES; n++) {
      assert_true(g.ticks[n] >= 80);
      assert_true(g.min_local[n] >= 10 * MS && g.max_local[n] < 11 * MS + MS / 10);
    }
    assert_true(g.min_true[1] >= 10 * MS && g.max_true[1] < 11 * MS + MS / 10);
    assert_true(g.max_true[2] < 10 * MS + MS / 10);            /* 10..11 / 1.1 */
    assert_true(g.min_true[3] >= 11 * MS && g.min_true[3] > g.max_true[2]); /* 10..11 / 0.9 */
    int64_t l2 = g.last_local[2] - g.first_local[2];
    uint64_t t2 = (g.last_tick_true[2] - g.first_true[2]) / MS;
    assert_true(l2 >= (int64_t)(t2 + t2 / 10) - 2 && l2 <= (int64_t)(t2 + t2 / 10) + 2);
    /* A jump backwards is the only way back. */
    int64_t was = g.last_local[1];
    uint64_t ticks = g.ticks[1];
    assert_int_equal(sh_node_jump("n1", -500), 0);
    /* Its timers wait for its clock to come back to their time: 600 ms
     * later it reads about 100 ms past where it was, and ticks again. */
    assert_int_equal(sh_sim_idle(600 * MS), 0);
    assert_true(g.ticks[1] > ticks);
    assert_true(g.last_local[1] > was && g.last_local[1] <= was + 110);
    root_down(sys);
  }
}

static void test_errors(void **state) {
  (void)state;
  sh_system *sys = root_up(0);
  sh_node_spec sp = {.name = "n1", .ip = SH_IPV4(10, 0, 0, 9), .entry = &ticker_class};
  assert_int_equal(sh_node_add(&sp), -EEXIST); /* the name */
  sp.name = "n9";
  sp.ip = SH_IPV4(10, 0, 0, 1);
  assert_int_equal(sh_node_add(&sp), -EEXIST); /* the address */
  sp.ip = SH_IPV4(127, 0, 0, 1);
  assert_int_equal(sh_node_add(&sp), -EINVAL);
  sp.ip = SH_IPV4(10, 0, 0, 9);
  sp.name = "Bad Name";
  assert_int_equal(sh_node_add(&sp), -EINVAL);
  sp.name = "n9";
  sp.max_drift_ppm = SH_NODE_DRIFT_LIMIT_PPM + 1;
  assert_int_equal(sh_node_add(&sp), -EINVAL);
  assert_int_equal(sh_node_crash("nobody"), -ENOENT);
  assert_int_equal(sh_node_restart("n1", 0, 0), -EBUSY);
  assert_int_equal(sh_node_restart("n1", 0, 7u), -EINVAL);
  assert_int_equal(sh_node_cut("n1", "n1"), -EINVAL);
  assert_int_equal(sh_node_cut("n1", "nobody"), -ENOENT);
  assert_int_equal(sh_node_cut("n1", "*"), 0);
  assert_int_equal(sh_node_drift("n2", 100001), -ERANGE);
  sh_node_act a = {.kind = SH_ACT_CRASH, .node = "nobody"};
  assert_int_equal(sh_node_act_at(10, &a), -ENOENT);
  assert_int_equal(sh_node_stop("n1"), 0);
  assert_int_equal(sh_node_stop("n1"), -EALREADY);
  root_down(sys);
}

/* A stop and a crash of the same node at once (the nemesis acts while the
 * outside thread waits in its stop), and a heal of every cut as an act. */
static void test_stop_meets_crash(void **state) {
  (void)state;
  for (unsigned run = 0; run < SIM_RUNS; run++) {
    sh_system *sys = root_up(run);
    assert_int_equal(sh_sim_idle(20 * MS), 0);
    sh_node_act crash = {.kind = SH_ACT_CRASH, .node = "n1"};
    assert_int_equal(sh_node_act_at(20, &crash), 0); /* due now: the nemesis runs it */
    int rc = sh_node_stop("n1");
    assert_true(rc == 0 || rc == -EALREADY);
    assert_int_equal(sh_node_up("n1"), 0);
    assert_int_equal(sh_node_cut("n2", "*"), 0);
    assert_int_equal(sh_node_is_cut("n2", "n3"), 1);
    assert_int_equal(sh_node_is_cut("n3", "n2"), 0);
    sh_node_act heal = {.kind = SH_ACT_HEAL_ALL};
    assert_int_equal(sh_node_act_now(&heal), 0);
    assert_int_equal(sh_node_is_cut("n2", "n3"), 0);
    root_down(sys);
  }
}

/* Stops that meet crashes, restarts and a calm (found by review: a stop
 * joined the restarted life's main and waited for ever; a look at the
 * node while a stop's join was pending tripped an assertion; a calm left a
 * node a stop under way took down). */
static void test_stop_races(void **state) {
  (void)state;
  for (unsigned run = 0; run < SIM_RUNS; run++) {
    sh_system *sys = root_up(run);
    assert_int_equal(sh_sim_idle(20 * MS), 0);
    sh_node_act crash = {.kind = SH_ACT_CRASH, .node = "n1"};
    sh_node_act again = {.kind = SH_ACT_RESTART, .node = "n1", .value = 0};
    assert_int_equal(sh_node_act_at(20, &crash), 0);
    assert_int_equal(sh_node_act_at(20, &again), 0);
    int rc = sh_node_stop("n1");
    assert_true(rc == 0 || rc == -EALREADY);
    sh_node_act stop = {.kind = SH_ACT_STOP, .node = "n2"};
    assert_int_equal(sh_node_act_at(25, &stop), 0);
    /* Bounded: the stop ends within the run's bounds. */
    while (sh_node_up("n2") == 1) assert_int_equal(sh_sim_idle(1000), 0);
    stop.node = "n3";
    assert_int_equal(sh_node_act_at(30, &stop), 0);
    assert_int_equal(sh_sim_idle(5 * MS + (run % 3) * 10000), 0);
    assert_int_equal(sh_node_calm(), 0);
    assert_int_equal(sh_sim_idle(100 * MS), 0);
    assert_int_equal(sh_node_up("n2"), 1); /* the calm booted every node */
    assert_int_equal(sh_node_up("n3"), 1);
    root_down(sys);
  }
}

/* The run's hash, with nodes, drifts, cuts and a scripted crash. */
static uint64_t scripted_run(uint64_t seed) {
  memset(&g, 0, sizeof(g));
  sim_configure(seed, SH_SIM_RANDOM, 0);
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(NULL, &sys), 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_spawn(sys, &sink_class, NULL, 1, &main_addr), 0);
  for (int n = 1; n <= NODES; n++) {
    sh_node_spec sp = {.name = names[n], .ip = SH_IPV4(10, 0, 0, n), .entry = &ticker_class,
                       .argc = 2, .argv = argv_of[n]};
    assert_int_equal(sh_node_add(&sp), 0);
  }
  sh_node_act acts[] = {{.kind = SH_ACT_DRIFT, .node = "n2", .value = 500},
                        {.kind = SH_ACT_CRASH, .node = "n3"},
                        {.kind = SH_ACT_RESTART, .node = "n3", .value = 30},
                        {.kind = SH_ACT_CUT, .node = "n1", .peer = "n2"}};
  for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++)
    assert_int_equal(sh_node_act_at(20 + 10 * (int64_t)i, &acts[i]), 0);
  assert_int_equal(sh_sim_idle(200 * MS), 0);
  root_down(sys);
  sh_sim_report r;
  sh_sim_report_get(&r);
  return r.hash;
}

static void test_same_seed_same_hash(void **state) {
  (void)state;
  uint64_t a = scripted_run(5), b = scripted_run(5), c = scripted_run(6);
  assert_true(a == b);
  assert_true(a != c);
}

static void on_fail(const char *kind, const char *detail) { sim_run_failed(kind, detail, 0); }

int main(void) {
  sh_sim_on_failure(on_fail);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_boot_stop),     cmocka_unit_test(test_crash_restart),
      cmocka_unit_test(test_clocks),        cmocka_unit_test(test_errors),
      cmocka_unit_test(test_stop_meets_crash), cmocka_unit_test(test_stop_races),
      cmocka_unit_test(test_same_seed_same_hash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
