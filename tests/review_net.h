/*
 * What the tests of channels at their edges on the simulator
 * (test_sim_review_net.c, test_sim_review_send.c) share: a server channel
 * handler that takes what comes and answers nothing, a client stack's
 * locals (its future and its channel) and states, and running one of the
 * file's scenarios over seeds, random and pct in turn: a run must pass (no
 * invariant failed, nothing leaked, no memory error).
 */
#ifndef TESTS_REVIEW_NET_H
#define TESTS_REVIEW_NET_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

static sh_yield sd_server_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

typedef struct sd_locals {
  sh_future *f;
  sh_channel *ch;
} sd_locals;

enum { EO_CONNECTED = 1, EO_ANSWERED };

static void run_n_seeds(const char *name, const char *faults, uint64_t n) {
  for (uint64_t seed = 1; seed <= n; seed++) {
    sh_sim_options o;
    sh_sim_options_default(&o);
    o.seed = seed;
    o.strategy = seed % 2 ? SH_SIM_RANDOM : SH_SIM_PCT;
    o.faults = faults;
    sh_sim_result r;
    assert_int_equal(sh_sim_run(name, &o, &r), 0);
    if (!r.ok) fail_msg("%s seed %llu: %s %s", name, (unsigned long long)seed, r.kind, r.detail);
  }
}

static void run_seeds(const char *name, const char *faults) { run_n_seeds(name, faults, 8); }

#endif
