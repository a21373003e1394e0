/*
 * How long a channel pointer lives, on the deterministic simulator,
 * through the public API: the client of chan_life.h, whose channel closes
 * inside one of its own calls while a handler holds it in a local only,
 * then calls on it in the same invocation. As this file's hidden
 * scenarios, each run under several seeds and every strategy:
 *
 *   chan_life_close  the actor closes the channel itself
 *   chan_life_reset  its write is reset (sh/net/reset at every write), and
 *                    the flush inside sh_channel_write closes the channel
 *
 * Both once freed the channel inside the call that closed it: the calls
 * after it read freed memory, and the send's future, holding and letting
 * go of the freed channel, freed it a second time (core/base/list.h:
 * "check failed: sh_list_linked(node)"; net_stream seed 46 with
 * sh/net/ faults at 0.05).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

#include "chan_life.h"

#define SEEDS 6u
#define CLIENTS 3u

typedef struct world {
  sh_tcp_server *server;
  atomic_uint left;
} world;

/* ---- the chan_life.h hooks: a client's context is its run ------------------------ */

static sh_scn *scn_of_client(sh_actor *self) { return ((life_client *)self)->plan.ctx; }

static void life_check(sh_actor *self, bool ok, const char *what, long a) {
  SH_SCN_CHECK(scn_of_client(self), ok, "%s: %ld", what, a);
}

static void life_finished(sh_actor *self) {
  sh_scn *s = scn_of_client(self);
  world *wd = sh_scn_state(s);
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

/* ---- the scenarios ---------------------------------------------------------------- */

static int start(sh_scn *s, sh_system *sys, life_mode mode) {
  world *wd = sh_scn_state(s);
  atomic_store(&wd->left, CLIENTS);
  life_plan plan = {.mode = mode, .ctx = s};
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  int rc =
      sh_tcp_serve(sys, &any, &life_server_class, NULL, SH_SPAWN_PER_WORKER, NULL, &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &plan.at);
  for (uint32_t i = 0; rc == 0 && i < CLIENTS; i++) {
    const sh_addr *c;
    rc = sh_spawn(sys, &life_client_class, &plan, 1, &c);
    life_go *g = rc == 0 ? sh_msg_new(life_go) : NULL;
    if (rc == 0) rc = g == NULL ? -ENOMEM : sh_notice(c, &g->hdr);
  }
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->left), 0, "clients not finished");
  if (wd->server == NULL) return;
  sh_tcp_stats ts;
  sh_tcp_server_stats(wd->server, &ts);
  SH_SCN_CHECK_EQ(s, ts.open, 0, "server channels open after shutdown");
}

static int setup_close(sh_scn *s, sh_system *sys) { return start(s, sys, LIFE_CLOSE); }
static int setup_reset(sh_scn *s, sh_system *sys) { return start(s, sys, LIFE_WRITE_FAILS); }

static const sh_scenario chan_life_close = {
    .name = "chan_life_close",
    .summary = "calls on a channel its actor closed, in the same invocation (test)",
    .flags = SH_SCN_HIDDEN | SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .setup = setup_close,
    .verify = verify,
};
SH_SCENARIO(chan_life_close);

static const sh_scenario chan_life_reset = {
    .name = "chan_life_reset",
    .summary = "calls on a channel a reset write closed, in the same invocation (test)",
    .flags = SH_SCN_HIDDEN | SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup_reset,
    .verify = verify,
};
SH_SCENARIO(chan_life_reset);

/* ---- the sweeps ------------------------------------------------------------------- */

/* Every seed under every strategy passes. */
static void sweep(const char *name, const char *faults) {
  static const sh_sim_strategy strategies[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};
  for (size_t k = 0; k < sizeof(strategies) / sizeof(strategies[0]); k++) {
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
      sh_sim_options o;
      sh_sim_options_default(&o);
      o.seed = seed;
      o.strategy = strategies[k];
      o.faults = faults;
      sh_sim_result r;
      assert_int_equal(sh_sim_run(name, &o, &r), 0);
      if (!r.ok)
        fail_msg("%s seed %llu strategy %s: FAIL:%s: %s", name, (unsigned long long)seed,
                 sh_sim_strategy_name(strategies[k]), r.kind, r.detail);
    }
  }
}

/* Catches a channel freed inside sh_channel_close, under the handler that
 * called it and calls on it next. */
static void test_calls_after_own_close(void **state) {
  (void)state;
  sweep("chan_life_close", NULL);
}

/* Catches a channel freed inside sh_channel_write, whose flush found the
 * connection reset, under the handler that called it. */
static void test_calls_after_write_reset(void **state) {
  (void)state;
  sweep("chan_life_reset", "sh/net/reset:1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_after_own_close),
      cmocka_unit_test(test_calls_after_write_reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
