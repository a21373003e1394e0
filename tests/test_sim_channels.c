/*
 * Channels' inflight rules on the deterministic simulator, through the
 * public API: the client and server of chan_rpc.h over the simulator's
 * fake network, as this file's hidden scenarios, each run under several
 * seeds and every strategy, and each run twice: the same seed must give
 * the same trace hash (a channel that depended on anything but the
 * simulator's choices would part the two runs).
 *
 *   chan_close_once  a client closes its connection with futures inflight
 *                    and pending: each fails once with -ECONNABORTED, one
 *                    CLOSED event, the server's stacks end into the closed
 *                    connection
 *   chan_hol         the server's limit (3 stacks), barriers alone,
 *                    head-of-line results matched FIFO by the client
 *   chan_by_id       the same, results as they finish, matched by id
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

#include "chan_rpc.h"

#define SEEDS 6u
#define CLIENTS 2u
#define REQS 24u
#define INFLIGHT 3u

/* ---- the chan_rpc.h hooks: a client's context is its run --------------------- */

typedef struct world {
  sh_tcp_server *server;
  atomic_uint left;
} world;

static sh_scn *scn_of_client(sh_actor *self) { return ((rpc_client *)self)->plan.ctx; }

static void rpc_check(sh_actor *self, bool ok, const char *what, long a, long b) {
  SH_SCN_CHECK(scn_of_client(self), ok, "%s: %ld %ld", what, a, b);
}

static void rpc_finished(sh_actor *self) {
  sh_scn *s = scn_of_client(self);
  world *wd = sh_scn_state(s);
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

/* ---- the scenarios -------------------------------------------------------------- */

static int start(sh_scn *s, sh_system *sys, rpc_mode mode) {
  world *wd = sh_scn_state(s);
  atomic_store(&wd->left, CLIENTS);
  sh_channel_opts o = rpc_server_opts(INFLIGHT, mode == RPC_HOL);
  rpc_plan plan = {.mode = mode, .reqs = REQS, .max_inflight = INFLIGHT, .ctx = s};
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  int rc = sh_tcp_serve(sys, &any, &rpc_server_class, NULL, SH_SPAWN_PER_WORKER, &o, &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &plan.at);
  for (uint32_t i = 0; rc == 0 && i < CLIENTS; i++) {
    const sh_addr *c;
    plan.seed = sh_scn_rand(s) | 1;
    rc = sh_spawn(sys, &rpc_client_class, &plan, 1, &c);
    rpc_go *g = rc == 0 ? sh_msg_new(rpc_go) : NULL;
    if (rc == 0) rc = g == NULL ? -ENOMEM : sh_notice(c, &g->hdr);
  }
  return rc;
}

/* What holds after every run of the three. */
static void verify_common(sh_scn *s) {
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&rpc_cli_closed), CLIENTS, "client channels closed");
  SH_SCN_CHECK_EQ(s, atomic_load(&rpc_cli_close_error), 0, "the client's close error");
  SH_SCN_CHECK_EQ(s, atomic_load(&rpc_srv_closed), CLIENTS, "server channels closed");
  SH_SCN_CHECK_EQ(s, atomic_load(&rpc_ended), atomic_load(&rpc_started), "server stacks ended");
  if (wd->server == NULL) return;
  sh_tcp_stats ts;
  sh_tcp_server_stats(wd->server, &ts);
  SH_SCN_CHECK_EQ(s, ts.open, 0, "server channels open after shutdown");
}

static void verify_close(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  verify_common(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&rpc_aborted), CLIENTS * RPC_CLOSE_REQS, "futures aborted");
  /* Two inflight per client reach the server; the pending three never. */
  SH_SCN_CHECK(s, atomic_load(&rpc_started) <= 2 * CLIENTS, "%u server stacks ran",
               atomic_load(&rpc_started));
}

static void verify_answers(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  verify_common(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&rpc_answered), CLIENTS * REQS, "requests answered");
}

static int setup_close(sh_scn *s, sh_system *sys) { return start(s, sys, RPC_CLOSE); }
static int setup_hol(sh_scn *s, sh_system *sys) { return start(s, sys, RPC_HOL); }
static int setup_by_id(sh_scn *s, sh_system *sys) { return start(s, sys, RPC_BY_ID); }

static const sh_scenario chan_close_once = {
    .name = "chan_close_once",
    .summary = "a close under futures inflight and pending fails each once (test)",
    .flags = SH_SCN_HIDDEN | SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .setup = setup_close,
    .verify = verify_close,
};
SH_SCENARIO(chan_close_once);

static const sh_scenario chan_hol = {
    .name = "chan_hol",
    .summary = "inflight limit, barriers, head-of-line results matched FIFO (test)",
    .flags = SH_SCN_HIDDEN | SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .setup = setup_hol,
    .verify = verify_answers,
};
SH_SCENARIO(chan_hol);

static const sh_scenario chan_by_id = {
    .name = "chan_by_id",
    .summary = "inflight limit, barriers, results as they finish matched by id (test)",
    .flags = SH_SCN_HIDDEN | SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .setup = setup_by_id,
    .verify = verify_answers,
};
SH_SCENARIO(chan_by_id);

/* ---- the sweeps ------------------------------------------------------------------- */

/* Every seed under every strategy passes, and twice the same way. */
static void sweep(const char *name) {
  static const sh_sim_strategy strategies[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};
  for (size_t k = 0; k < sizeof(strategies) / sizeof(strategies[0]); k++) {
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
      sh_sim_options o;
      sh_sim_options_default(&o);
      o.seed = seed;
      o.strategy = strategies[k];
      sh_sim_result a, b;
      assert_int_equal(sh_sim_run(name, &o, &a), 0);
      if (!a.ok)
        fail_msg("%s seed %llu strategy %s: FAIL:%s: %s", name, (unsigned long long)seed,
                 sh_sim_strategy_name(strategies[k]), a.kind, a.detail);
      assert_int_equal(sh_sim_run(name, &o, &b), 0);
      assert_true(b.ok);
      if (a.hash != b.hash || a.steps != b.steps || a.vtime_ns != b.vtime_ns)
        fail_msg("%s seed %llu strategy %s: two runs differ (hash %llx, %llx)", name,
                 (unsigned long long)seed, sh_sim_strategy_name(strategies[k]),
                 (unsigned long long)a.hash, (unsigned long long)b.hash);
    }
  }
}

/* Catches a future left waiting or failed twice by a close, a second
 * CLOSED, a server stack that never ends into a closed connection. */
static void test_close_fails_everything_once(void **state) {
  (void)state;
  sweep("chan_close_once");
}

/* Catches a fourth stack at once, a barrier sharing its time, a
 * head-of-line result written out of turn (it answers another request). */
static void test_barrier_limit_head_of_line(void **state) {
  (void)state;
  sweep("chan_hol");
}

/* Catches a response matched to the wrong future by id. */
static void test_barrier_limit_by_id(void **state) {
  (void)state;
  sweep("chan_by_id");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_close_fails_everything_once),
      cmocka_unit_test(test_barrier_limit_head_of_line),
      cmocka_unit_test(test_barrier_limit_by_id),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
