/*
 * Faults in the simulator (options.faults): decisions are a function of
 * the seed and the spec, recorded in the schedule and replayed from it;
 * every fault point of the runtime fires in some scenario and each run
 * still passes the shared invariants (nothing leaked: pool_outstanding is
 * 0, and LeakSanitizer watches the process); bad specs are refused; a
 * program's own point is driven by the same spec.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fiu.h>

#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

typedef struct run_out {
  bool ok;
  uint64_t hash, faults;
  sh_sim_choice *schedule; /* a copy (malloc), its faults among the switches */
  size_t len;
} run_out;

/* Runs scenario `name` in this process (it must pass or be cut short). */
static run_out run(const char *name, uint64_t seed, const char *faults, const sh_sim_choice *replay,
                   size_t replay_len) {
  const sh_scenario *sc = sh_scenario_find(name);
  assert_non_null(sc);
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.faults = faults;
  o.schedule = replay;
  o.schedule_len = replay_len;
  o.vtime_limit_ns = sh_scenario_vtime_limit_ns(sc);
  sh_sim_configure(&o);
  sh_scn_result r;
  sh_scenario_run(sc, seed, 0, &r);
  if (!r.ok) print_error("%s seed %llu: %s: %s\n", name, (unsigned long long)seed, r.kind, r.detail);
  sh_sim_report rep;
  sh_sim_report_get(&rep);
  run_out out = {.ok = r.ok, .hash = rep.hash, .faults = rep.faults};
  const sh_sim_choice *s;
  out.len = sh_sim_schedule(&s);
  out.schedule = malloc((out.len + 1) * sizeof(*s));
  assert_non_null(out.schedule);
  if (out.len > 0) memcpy(out.schedule, s, out.len * sizeof(*s));
  return out;
}

static size_t count_faults(const sh_sim_choice *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += s[i].kind == SH_SIM_FAULT;
  return k;
}

#define SPEC "sh/*:0.01"

static void test_same_seed_same_faults(void **state) {
  (void)state;
  run_out a = run("fanout", 5, SPEC, NULL, 0);
  run_out b = run("fanout", 5, SPEC, NULL, 0);
  run_out c = run("fanout", 6, SPEC, NULL, 0);
  run_out none = run("fanout", 5, NULL, NULL, 0);
  run_out zero = run("fanout", 5, "sh/*:0", NULL, 0);
  assert_true(a.ok && b.ok && c.ok);
  assert_true(a.faults > 0);
  assert_true(a.hash == b.hash && a.faults == b.faults);
  assert_true(a.len == b.len && memcmp(a.schedule, b.schedule, a.len * sizeof(*a.schedule)) == 0);
  assert_true(c.hash != a.hash);
  /* Rates of 0 draw but never fire: the run is the one without faults. */
  assert_true(none.faults == 0 && zero.faults == 0 && zero.hash == none.hash);
  free(a.schedule), free(b.schedule), free(c.schedule), free(none.schedule), free(zero.schedule);
}

static void test_schedule_replays_faults(void **state) {
  (void)state;
  run_out a = run("fanout", 5, SPEC, NULL, 0);
  assert_true(a.ok && a.faults > 0 && a.len > 0);
  assert_int_equal(count_faults(a.schedule, a.len), a.faults);
  run_out b = run("fanout", 5, SPEC, a.schedule, a.len);
  assert_true(b.ok && b.hash == a.hash && b.faults == a.faults);
  /* Without its last fault, the replay fires every fault but that one. */
  size_t last = a.len;
  while (last-- > 0 && a.schedule[last].kind != SH_SIM_FAULT) {}
  memmove(&a.schedule[last], &a.schedule[last + 1], (a.len - last - 1) * sizeof(*a.schedule));
  run_out c = run("fanout", 5, SPEC, a.schedule, a.len - 1);
  assert_true(c.ok);
  assert_int_equal(c.faults, a.faults - 1);
  free(a.schedule), free(b.schedule), free(c.schedule);
}

/* A point is often hit several times within one step (a batch allocates a
 * stack and messages between two scheduling points), and not every hit
 * fires: the replay must fire the hit that fired, not the step's first
 * (which made this replay fire 8 faults instead of 28). */
static void test_replay_fires_the_same_hit_of_a_step(void **state) {
  (void)state;
  const char *spec = "sh/*:0.02";
  run_out a = run("batch", 1, spec, NULL, 0);
  assert_true(a.ok && a.faults > 0);
  run_out b = run("batch", 1, spec, a.schedule, a.len);
  assert_true(b.ok);
  assert_int_equal(b.faults, a.faults);
  assert_true(b.hash == a.hash);
  free(a.schedule), free(b.schedule);
}

/* A fiber that parks when nothing else can run may be the one picked after
 * the clock jumps (its own deadline came): no switch, but a decision the
 * replay must follow, not its default (the next runnable fiber). */
static void test_replay_follows_the_parked_fiber_picked_again(void **state) {
  (void)state;
  run_out a = run("actor_timers", 1, NULL, NULL, 0);
  assert_true(a.ok && a.len > 0);
  run_out b = run("actor_timers", 1, NULL, a.schedule, a.len);
  assert_true(b.ok && b.hash == a.hash);
  free(a.schedule), free(b.schedule);
}

/* Every visible scenario that tolerates faults, one at a time, 8 seeds
 * each (seeds of their own: a point hit first in every run draws the
 * seed's first number), at a rate of 0.25 for this point alone, until it
 * fired. */
static uint64_t fire_point(const char *point) {
  char spec[96];
  snprintf(spec, sizeof(spec), "%s:0.25", point);
  uint64_t fired = 0;
  for (size_t i = 0; i < sh_scenario_count() && fired == 0; i++) {
    const sh_scenario *sc = sh_scenario_at(i);
    if (sc->flags & (SH_SCN_HIDDEN | SH_SCN_NO_FAULTS)) continue;
    for (uint64_t k = 1; k <= 8 && fired == 0; k++) {
      uint64_t seed = i * 8 + k;
      run_out r = run(sc->name, seed, spec, NULL, 0);
      free(r.schedule);
      assert_true(r.ok);
      fired += r.faults;
    }
  }
  return fired;
}

static int nothing(sh_actor *self, void *arg) {
  (void)self;
  (void)arg;
  return 0;
}

/* What no scenario does: a group spawn (sh_spawn of several instances),
 * which fails whole. */
static bool group_fires(const char *point) {
  if (strcmp(point, "sh/spawn/group") != 0) return false;
  static const sh_actor_class c = {.name = "member", .size = sizeof(sh_actor), .init = nothing};
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.faults = "sh/spawn/group:1";
  sh_sim_configure(&o);
  sh_system *sys;
  assert_int_equal(sh_system_new(NULL, &sys), 0);
  assert_int_equal(sh_system_start(sys), 0);
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(sys, &c, NULL, 4, &a), -ENOMEM);
  assert_null(a);
  sh_system_exit(sys, 0);
  assert_int_equal(sh_system_wait(sys), 0);
  sh_system_shutdown(sys);
  sh_stats st;
  sh_system_stats(sys, &st);
  assert_int_equal(st.pool_outstanding, 0);
  sh_system_free(sys);
  sh_sim_report rep;
  sh_sim_report_get(&rep);
  return rep.faults == 1;
}

static void test_every_point_fires_and_nothing_leaks(void **state) {
  (void)state;
  const char *const *points;
  size_t n = sh_sim_fault_points(&points);
  assert_true(n >= 10);
  size_t missed = 0;
  for (size_t i = 0; i < n; i++) {
    if (fire_point(points[i]) > 0 || group_fires(points[i])) continue;
    print_error("fault point %s never fired\n", points[i]);
    missed++;
  }
  assert_int_equal(missed, 0);
}

static void test_bad_specs_refused(void **state) {
  (void)state;
  static const char *const bad[] = {"", "sh/pool/alloc", "sh/pool/alloc:", ":0.1", "sh/*/x:0.1",
                                    "a:1.5", "a:-0.1", "a:nan", "a:0.1,", "a:0.1x", ",a:1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *why = NULL;
    if (sh_sim_faults_parse(bad[i], NULL, NULL, &why) != -EINVAL) fail_msg("'%s' accepted", bad[i]);
    assert_true(why != NULL && why[0] != '\0');
  }
  assert_int_equal(sh_sim_faults_parse("sh/pool/*:0.01,sh/timer/new:0.001", NULL, NULL, NULL), 0);
  assert_int_equal(sh_sim_faults_parse("app/*:1,x:0", NULL, NULL, NULL), 0);
}

/* A program's own point, under a wildcard: it fires by the spec, is
 * recorded under the pattern's id, and never fires once the run is over. */
static void test_user_point(void **state) {
  (void)state;
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.faults = "app/*:1";
  sh_sim_configure(&o);
  assert_true(sh_sim_faults_active());
  assert_int_not_equal(fiu_fail("app/db/write"), 0);
  assert_int_equal(fiu_fail("other/db/write"), 0);
  sh_sim_report rep;
  sh_sim_report_get(&rep);
  assert_int_equal(rep.faults, 1);
  const sh_sim_choice *s;
  assert_int_equal(sh_sim_schedule(&s), 1);
  assert_true(s[0].kind == SH_SIM_FAULT && s[0].to == sh_sim_fault_id("app/*"));
  sh_sim_faults_disable();
  assert_false(sh_sim_faults_active());
  assert_int_equal(fiu_fail("app/db/write"), 0);
  sh_sim_options_default(&o);
  sh_sim_configure(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_seed_same_faults),
      cmocka_unit_test(test_schedule_replays_faults),
      cmocka_unit_test(test_replay_fires_the_same_hit_of_a_step),
      cmocka_unit_test(test_replay_follows_the_parked_fiber_picked_again),
      cmocka_unit_test(test_every_point_fires_and_nothing_leaks),
      cmocka_unit_test(test_bad_specs_refused),
      cmocka_unit_test(test_user_point),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
