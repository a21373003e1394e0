/*
 * How long a channel pointer lives, on the production backend (epoll,
 * real loopback sockets), through the public API: the client of
 * chan_life.h, whose channel closes inside one of its own calls while a
 * handler holds it in a local only, then calls on it in the same
 * invocation (test_sim_chanlife.c runs the same client on the simulator).
 *
 * Each case says what it would catch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* alarm under -std=c11 */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fiu-control.h>
#include <fiu.h>
#include <stdio.h>
#include <unistd.h>

#include <stackhouse/net.h>
#include <stackhouse/probe.h> /* sh_system_wait_ms */
#include <stackhouse/stackhouse.h>

#include "chan_life.h"
#include "support/harness.h"

#define CLIENTS 3u
/* A hang (a future never completed) fails the case instead of blocking CI. */
#define WATCHDOG_S 120

static void life_check(sh_actor *self, bool ok, const char *what, long a) {
  (void)self;
  if (ok) return;
  fprintf(stderr, "%s: %ld\n", what, a);
  CHECK(!"a chan_life check");
}

static void life_finished(sh_actor *self) { th_done(self); }

static uint32_t server_open(const sh_tcp_server *srv) {
  sh_tcp_stats ts;
  assert_int_equal(sh_tcp_server_stats(srv, &ts), 0);
  return ts.open;
}

/* CLIENTS clients of `mode` against a quiet server, to the end. */
static void run_clients(life_mode mode) {
  alarm(WATCHDOG_S);
  sh_system *sys = th_env(2, (int)CLIENTS);
  assert_int_equal(sh_system_start(sys), 0);
  life_plan plan = {.mode = mode};
  sh_tcp_server *srv = NULL;
  const sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  assert_int_equal(
      sh_tcp_serve(sys, &any, &life_server_class, NULL, SH_SPAWN_PER_WORKER, NULL, &srv), 0);
  assert_int_equal(sh_tcp_server_addr(srv, &plan.at), 0);
  for (uint32_t i = 0; i < CLIENTS; i++) {
    const sh_addr *c = th_spawn_on(sys, &life_client_class, &plan, i % 2);
    assert_int_equal(sh_notice(c, &sh_msg_new(life_go)->hdr), 0);
  }
  assert_int_equal(sh_system_wait_ms(sys, 10000), 0);
  /* The server's ends close once the clients' closes reach them. */
  for (int i = 0; i < 10000 && server_open(srv) != 0; i++) th_sleep_ms(1);
  assert_int_equal(server_open(srv), 0);
  th_end_exact(sys);
}

/* The actor closes the channel, then writes, shuts down, sends and asks
 * on it in the same handler: each fails with -EPIPE. Catches the channel
 * freed inside sh_channel_close (a use after free under ASan; the send's
 * future then frees it twice). */
static void test_calls_after_own_close(void **state) {
  (void)state;
  run_clients(LIFE_CLOSE);
}

/* The same after a write whose flush fails (sh/net/write: -EPIPE) and
 * closes the channel inside sh_channel_write. Catches the channel freed
 * there, under the handler that goes on writing. */
static void test_calls_after_failed_write(void **state) {
  (void)state;
  /* Every write fails, and only the clients write (the server is quiet). */
  assert_int_equal(fiu_enable("sh/net/write", 1, NULL, 0), 0);
  run_clients(LIFE_WRITE_FAILS);
  fiu_disable("sh/net/write");
}

int main(void) {
  fiu_init(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_after_own_close),
      cmocka_unit_test(test_calls_after_failed_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
