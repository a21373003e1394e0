/*
 * Socket options on the deterministic simulator, through the public API:
 * the cases of tests/sockopt_cases.h under every strategy (random, pct,
 * none) with several seeds (getopt reads a buffer as set: the simulator
 * keeps the value given), and what the fake network makes of the
 * buffers: a server with SO_RCVBUF 1000, or a client with SO_SNDBUF 1000,
 * never reads more than 1000 bytes at once of what the client writes in
 * one piece, which without them it does.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdatomic.h>
#include <unistd.h>

#define WATCHDOG_S 240
#define SIM_SEEDS 4u

#include "sim_runs.h"

#define SOCKOPT_RUNS SIM_RUNS
#define BUF_SEEN(v) (v)

static unsigned sockopt_run;

static void sockopt_configure(unsigned run) {
  sockopt_run = run;
  sim_configure(sim_run_seed(run), sim_run_strategy(run), 0);
}

#include "sockopt_cases.h"

/* ---- the buffers' effect ------------------------------------------------------- */

#define PIECE 20000u
#define SMALL 1000

static atomic_uint got, most; /* bytes the server read; the most at once */

static sh_yield count_channel(sh_actor *self, sh_stack *st) {
  size_t n = sh_buf_len(&sh_stack_msg_as(st, sh_bytes)->buf);
  if (n > atomic_load(&most)) atomic_store(&most, (unsigned)n);
  if (atomic_fetch_add(&got, (unsigned)n) + n == PIECE) th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class count_class = {
    .name = "count", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR, .channel = count_channel};

static int writer_sndbuf; /* the client's SO_SNDBUF, 0: none */

static sh_yield writer_go(sh_actor *self, sh_stack *st) {
  (void)self;
  so_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    sh_channel_opts o = {.sockopts = {{writer_sndbuf != 0 ? SH_SO_SNDBUF : 0, writer_sndbuf}}};
    l->f = sh_tcp_connect(st, &so_at, &o);
    return sh_suspend(st, SO_CONNECTED);
  }
  CHECK(!sh_future_failed(l->f));
  if (sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
  static uint8_t piece[PIECE];
  sh_bytes *b = sh_bytes_new(piece, PIECE);
  CHECK(b != NULL && sh_channel_write(sh_future_reply(l->f, sh_channel_msg)->ch, &b->hdr) == 0);
  return sh_return(st, NULL);
}

static const sh_actor_class writer_class = {
    .name = "writer", .size = sizeof(sh_actor), .locals_size = sizeof(so_locals),
    .kind = SH_IO_ACTOR, .notice = writer_go, .channel = so_drop};

/* One run: the most the server read at once. */
static unsigned piece_run(unsigned run, int server_rcvbuf, int client_sndbuf) {
  sockopt_configure(run);
  atomic_store(&got, 0);
  atomic_store(&most, 0);
  writer_sndbuf = client_sndbuf;
  sh_system *sys = th_env(2, 1);
  sh_channel_opts o = {.sockopts = {{server_rcvbuf != 0 ? SH_SO_RCVBUF : 0, server_rcvbuf}}};
  sh_tcp_server *srv;
  sh_netaddr at = {SO_LOOPBACK, 0};
  assert_int_equal(sh_tcp_serve(sys, &at, &count_class, NULL, 1, &o, &srv), 0);
  assert_int_equal(sh_tcp_server_addr(srv, &so_at), 0);
  so_start(sys, &writer_class);
  th_run(sys);
  th_end(sys);
  assert_int_equal(atomic_load(&got), PIECE);
  return atomic_load(&most);
}

/* Catches buffers that bound nothing (or bound the wrong end). */
static void test_buffers_bound_the_window(void **state) {
  (void)state;
  unsigned plain = 0;
  for (unsigned run = 0; run < SOCKOPT_RUNS; run++) {
    assert_true(piece_run(run, SMALL, 0) <= SMALL);
    assert_true(piece_run(run, 0, SMALL) <= SMALL);
    unsigned m = piece_run(run, 0, 0);
    if (m > plain) plain = m;
  }
  assert_true(plain > SMALL); /* without them, the window lets more through */
}

static void sim_failed(const char *kind, const char *detail) {
  sim_run_failed(kind, detail, sockopt_run);
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(sim_failed);
  const struct CMUnitTest tests[] = {SOCKOPT_CASES,
                                     cmocka_unit_test(test_buffers_bound_the_window)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
