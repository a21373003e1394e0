/*
 * The schedules over messages and the delay-bounded ones (docs/simulator.md,
 * "Strategies"), through the public simulator API:
 *
 *   - delay: a run takes at most pct_depth - 1 preemptions (decisions of
 *     kind SH_SIM_PREEMPT), none at depth 1, and different seeds still
 *     give different runs once a delay is allowed;
 *   - msgpct and delay: the same seed gives the same run, and a run's
 *     recorded schedule replays it exactly (their bookkeeping runs under
 *     replay, so the clock moves as it did);
 *   - replay_then_free: a prefix replayed, then a free run, recorded whole,
 *     replays exactly;
 *   - msgpct: a bug that needs one message delivered inside a window of
 *     another actor's deliveries (between its 10th and 11th of 20) is found
 *     within WINDOW_SEEDS seeds at depth 2: its change points fall on
 *     deliveries, so one lands in that window about once in pct_steps
 *     seeds, where step-based pct must hit it among thousands of steps;
 *     without a change point (depth 1) it is never found.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

#define SEEDS 20
#define DEPTH_MAX 4
#define WINDOW_B 20      /* B's notices to C */
#define WINDOW_AT 10     /* the bug: A's notice lands after exactly this many */
#define WINDOW_SEEDS 400 /* msgpct's budget for it */
#define WINDOW_A_MARK 1000u

/* ---- the window scenario ----------------------------------------------------- */

typedef struct window_state {
  const sh_addr *c, *b;
  uint32_t nb;    /* B's notices C took so far */
  bool a_seen;
} window_state;

/* A (worker 0): one notice to C. */
static sh_yield a_notice(sh_actor *self, sh_stack *st) {
  window_state *w = sh_scn_state(sh_scn_of(self));
  int rc = sh_scn_kick_n(w->c, WINDOW_A_MARK);
  SH_SCN_CHECK(sh_scn_of(self), rc == 0, "A's notice not sent: %d", rc);
  return sh_return(st, NULL);
}

/* B (worker 1): notice i+1 to C, then kicks itself for the next. */
static sh_yield b_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  window_state *w = sh_scn_state(s);
  uint32_t i = sh_scn_go_n(st);
  int rc = sh_scn_kick_n(w->c, i + 1);
  if (rc == 0 && i + 1 < WINDOW_B) rc = sh_scn_kick_n(w->b, i + 1);
  SH_SCN_CHECK(s, rc == 0, "B's notice %u not sent: %d", i, rc);
  return sh_return(st, NULL);
}

/* C (worker 1): counts B's notices; A's must not come right after the
 * WINDOW_AT-th (the deliberate bug). */
static sh_yield c_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  window_state *w = sh_scn_state(s);
  if (sh_scn_go_n(st) == WINDOW_A_MARK) {
    w->a_seen = true;
    SH_SCN_CHECK(s, w->nb != WINDOW_AT, "A's notice between B's %u and %u", WINDOW_AT,
                 WINDOW_AT + 1);
  } else {
    w->nb++;
  }
  if (w->a_seen && w->nb == WINDOW_B) sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

#define WINDOW_CLASS(n)                                                                     \
  static const sh_actor_class n##_class = {.name = #n, .size = sizeof(sh_scn_actor),       \
                                           .init = sh_scn_actor_init, .notice = n##_notice}
WINDOW_CLASS(a);
WINDOW_CLASS(b);
WINDOW_CLASS(c);

static int window_setup(sh_scn *s, sh_system *sys) {
  window_state *w = sh_scn_state(s);
  const sh_addr *a;
  int rc = sh_scn_spawn_on(s, sys, &c_class, 2, 1, &w->c);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &b_class, 1, 1, &w->b);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &a_class, 0, 0, &a);
  if (rc == 0) rc = sh_scn_kick(w->b);
  return rc != 0 ? rc : sh_scn_kick(a);
}

static const sh_scenario msg_window = {
    .name = "msg_window",
    .summary = "a notice that must not land between two of another actor's (deliberate)",
    .workers = 2,
    .state_size = sizeof(window_state),
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "invariant",
    .setup = window_setup,
};
SH_SCENARIO(msg_window);

/* ---- running ------------------------------------------------------------------ */

static void unexpected_failure(const char *kind, const char *detail) {
  fail_msg("simulation failed: %s: %s", kind, detail);
}

static void options(const sh_scenario *sc, uint64_t seed, sh_sim_strategy st, uint32_t depth,
                    uint64_t steps, sh_sim_options *o) {
  sh_sim_options_default(o);
  o->seed = seed;
  o->strategy = st;
  o->pct_depth = depth;
  o->pct_steps = steps;
  o->vtime_limit_ns = sh_scenario_vtime_limit_ns(sc);
  o->max_steps = sh_scenario_max_steps(sc, o->max_steps);
}

static void run(const sh_scenario *sc, const sh_sim_options *o, sh_scn_result *r,
                sh_sim_report *rep) {
  sh_sim_configure(o);
  sh_scenario_run(sc, o->seed, 0, r);
  sh_sim_report_get(rep);
}

static const sh_scenario *find(const char *name) {
  const sh_scenario *sc = sh_scenario_find(name);
  assert_non_null(sc);
  return sc;
}

static const char *const multi[] = {"ask_reply", "fanout", "barrier", "stealing"};
#define NMULTI (sizeof multi / sizeof multi[0])

/* ---- delay: the bound holds ----------------------------------------------------- */

static uint32_t preemptions(void) {
  const sh_sim_choice *c;
  size_t n = sh_sim_schedule(&c);
  assert_true(sh_sim_schedule_complete());
  uint32_t k = 0;
  for (size_t i = 0; i < n; i++) k += c[i].kind == SH_SIM_PREEMPT;
  return k;
}

static void test_delay_bound(void **state) {
  (void)state;
  sh_sim_on_failure(unexpected_failure);
  for (size_t m = 0; m < NMULTI; m++) {
    const sh_scenario *sc = find(multi[m]);
    for (uint32_t d = 1; d <= DEPTH_MAX; d++) {
      uint32_t most = 0;
      for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        sh_sim_options o;
        options(sc, seed, SH_SIM_DELAY, d, 2000, &o);
        sh_scn_result r;
        sh_sim_report rep;
        run(sc, &o, &r, &rep);
        assert_true(r.ok);
        uint32_t k = preemptions();
        assert_true(k <= d - 1);
        if (k > most) most = k;
      }
      /* The delays fall among the first 2000 yield points, which every one
       * of these runs passes: some seed takes them all. */
      assert_int_equal(most, d - 1);
    }
  }
}

/* The last run's decisions into buf (room for cap); their count. */
static size_t copy_schedule(sh_sim_choice *buf, size_t cap) {
  const sh_sim_choice *c;
  size_t n = sh_sim_schedule(&c);
  assert_true(sh_sim_schedule_complete() && n <= cap);
  memcpy(buf, c, n * sizeof *c);
  return n;
}

/* ---- seeds differ, a seed repeats, a schedule replays -------------------------- */

static void test_seeds_differ(void **state) {
  (void)state;
  sh_sim_on_failure(unexpected_failure);
  const sh_sim_strategy both[] = {SH_SIM_MSGPCT, SH_SIM_DELAY};
  for (size_t m = 0; m < NMULTI; m++) {
    const sh_scenario *sc = find(multi[m]);
    for (size_t k = 0; k < 2; k++) {
      uint64_t h[SEEDS];
      int distinct = 0;
      for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        sh_sim_options o;
        options(sc, seed, both[k], 3, both[k] == SH_SIM_MSGPCT ? 200 : 2000, &o);
        sh_scn_result r;
        sh_sim_report rep;
        run(sc, &o, &r, &rep);
        assert_true(r.ok);
        bool seen = false;
        for (int j = 0; j < distinct && !seen; j++) seen = h[j] == rep.hash;
        if (!seen) h[distinct++] = rep.hash;
      }
      if (distinct < 3)
        fprintf(stderr, "%s under %s: %d distinct runs\n", sc->name,
                sh_sim_strategy_name(both[k]), distinct);
      assert_true(distinct >= 3);
    }
  }
}

static bool same(const sh_sim_report *a, const sh_sim_report *b) {
  return a->hash == b->hash && a->steps == b->steps && a->vtime_ns == b->vtime_ns &&
         a->switches == b->switches;
}

static void test_repeat_and_replay(void **state) {
  (void)state;
  sh_sim_on_failure(unexpected_failure);
  static sh_sim_choice saved[1 << 16];
  const sh_sim_strategy both[] = {SH_SIM_MSGPCT, SH_SIM_DELAY};
  for (size_t m = 0; m < NMULTI; m++) {
    const sh_scenario *sc = find(multi[m]);
    for (size_t k = 0; k < 2; k++) {
      for (uint64_t seed = 1; seed <= 5; seed++) {
        sh_sim_options o;
        options(sc, seed, both[k], 4, both[k] == SH_SIM_MSGPCT ? 100 : 1000, &o);
        sh_scn_result r;
        sh_sim_report first, again, replayed;
        run(sc, &o, &r, &first);
        size_t n = copy_schedule(saved, sizeof saved / sizeof saved[0]);
        run(sc, &o, &r, &again);
        assert_true(same(&first, &again));
        o.schedule = saved;
        o.schedule_len = n;
        o.replay = 1;
        run(sc, &o, &r, &replayed);
        assert_true(r.ok);
        assert_true(same(&first, &replayed));
      }
    }
  }
}

/* ---- a prefix replayed, then a free run ------------------------------------------ */

/* replay_then_free (explore's mutants): the first half of a run's decisions
 * replay, then the strategy decides; the run records every decision, and
 * that record replays it exactly as a plain replay. */
static void test_replay_then_free(void **state) {
  (void)state;
  sh_sim_on_failure(unexpected_failure);
  static sh_sim_choice first[1 << 16], rec[1 << 16];
  for (size_t m = 0; m < NMULTI; m++) {
    const sh_scenario *sc = find(multi[m]);
    for (uint64_t seed = 1; seed <= 5; seed++) {
      sh_sim_options o;
      options(sc, seed, SH_SIM_RANDOM, 3, 10000, &o);
      sh_scn_result r;
      sh_sim_report a, c, d;
      run(sc, &o, &r, &a);
      size_t n = copy_schedule(first, sizeof first / sizeof first[0]);
      o.schedule = first;
      o.schedule_len = n;
      o.replay = 1;
      o.replay_then_free = 1;
      o.schedule_len = n / 2;
      run(sc, &o, &r, &c);
      assert_true(r.ok);
      n = copy_schedule(rec, sizeof rec / sizeof rec[0]);
      o.schedule = rec;
      o.schedule_len = n;
      o.replay_then_free = 0;
      run(sc, &o, &r, &d);
      assert_true(same(&c, &d));
    }
  }
}

/* ---- msgpct finds a bug in a window of deliveries ------------------------------- */

/* The first seed in 1..budget whose run of msg_window fails, or 0. */
static uint64_t first_failing(sh_sim_strategy st, uint32_t depth, uint64_t steps,
                              uint64_t budget) {
  const sh_scenario *sc = find("msg_window");
  for (uint64_t seed = 1; seed <= budget; seed++) {
    sh_sim_options o;
    options(sc, seed, st, depth, steps, &o);
    sh_scn_result r;
    sh_sim_report rep;
    run(sc, &o, &r, &rep);
    if (!r.ok) {
      assert_string_equal(r.kind, "invariant");
      return seed;
    }
  }
  return 0;
}

static void test_msgpct_finds_window(void **state) {
  (void)state;
  sh_sim_on_failure(unexpected_failure);
  uint64_t s = first_failing(SH_SIM_MSGPCT, 2, 2 * (WINDOW_B + 1), WINDOW_SEEDS);
  fprintf(stderr, "msg_window: msgpct (depth 2, %u deliveries) first fails at seed %llu\n",
          2 * (WINDOW_B + 1), (unsigned long long)s);
  assert_true(s != 0);
  /* Without a change point (depth 1) no delivery is moved into the window:
   * the bug needs one. */
  assert_int_equal(first_failing(SH_SIM_MSGPCT, 1, 2 * (WINDOW_B + 1), 100), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_delay_bound),
      cmocka_unit_test(test_seeds_differ),
      cmocka_unit_test(test_repeat_and_replay),
      cmocka_unit_test(test_replay_then_free),
      cmocka_unit_test(test_msgpct_finds_window),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
