/*
 * What the end-to-end tests of channels on epoll (test_e2e_net.c,
 * test_e2e_net_conn.c) share: a started system and a TCP server on
 * loopback, waits for the server to go idle, the test thread's raw
 * blocking sockets, an echo server (bytes back with sh_channel_send, the
 * most it held unwritten recorded), a start notice (go), and the
 * chan_rpc.h hooks.
 *
 * Actors never call cmocka: they record, CHECK() counts failures, and the
 * test thread asserts after shutdown (support/harness.h).
 */
#ifndef TESTS_NET_FIXTURE_H
#define TESTS_NET_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <fiu-control.h>
#include <fiu.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <stackhouse/net.h>
#include <stackhouse/probe.h>
#include <stackhouse/stackhouse.h>

#include "support/harness.h"

/* A hang (a lost readiness edge, a future never completed) fails the
 * case instead of blocking CI. */
#define WATCHDOG_S 120

static const sh_netaddr LOOPBACK_ANY = {.ip = 0x7f000001, .port = 0};

/* ---- the chan_rpc.h hooks ------------------------------------------------ */

#include "chan_rpc.h"

static void rpc_check(sh_actor *self, bool ok, const char *what, long a, long b) {
  (void)self;
  if (ok) return;
  fprintf(stderr, "%s: %ld %ld\n", what, a, b);
  CHECK(!"an rpc check");
}

static void rpc_finished(sh_actor *self) { th_done(self); }

/* ---- systems and servers ------------------------------------------------- */

static sh_system *net_env(uint32_t workers, int goal) {
  alarm(WATCHDOG_S);
  rpc_reset();
  sh_system *sys = th_env(workers, goal);
  assert_int_equal(sh_system_start(sys), 0);
  return sys;
}

static sh_tcp_server *serve(sh_system *sys, const sh_actor_class *c, const sh_channel_opts *o,
                            sh_netaddr *at) {
  sh_tcp_server *srv = NULL;
  assert_int_equal(sh_tcp_serve(sys, &LOOPBACK_ANY, c, NULL, SH_SPAWN_PER_WORKER, o, &srv), 0);
  assert_int_equal(sh_tcp_server_addr(srv, at), 0);
  assert_int_not_equal(at->port, 0);
  return srv;
}

static sh_tcp_stats server_stats(const sh_tcp_server *srv) {
  sh_tcp_stats ts;
  assert_int_equal(sh_tcp_server_stats(srv, &ts), 0);
  return ts;
}

/* Waits (bounded) until the server has no channel open. */
static void wait_server_idle(const sh_tcp_server *srv) {
  for (int i = 0; i < 10000 && server_stats(srv).open != 0; i++) th_sleep_ms(1);
  assert_int_equal(server_stats(srv).open, 0);
}

/* ---- raw sockets of the test thread ----------------------------------------- */

static struct sockaddr_in to_sockaddr(const sh_netaddr *a) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(a->ip);
  sa.sin_port = htons(a->port);
  return sa;
}

/* A blocking socket connected to `at`; rcvbuf > 0 sets its receive buffer. */
static int raw_connect(const sh_netaddr *at, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  struct sockaddr_in sa = to_sockaddr(at);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  return fd;
}

static void raw_send_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    assert_true(k > 0);
    b += k;
    n -= (size_t)k;
  }
}

/* Reads exactly n bytes; false at an early end of stream. */
static bool raw_recv_n(int fd, void *p, size_t n) {
  uint8_t *b = p;
  while (n > 0) {
    ssize_t k = recv(fd, b, n, 0);
    if (k <= 0) return false;
    b += k;
    n -= (size_t)k;
  }
  return true;
}

/* ---- the echo server: bytes back with sh_channel_send --------------------------- */

static _Atomic size_t g_max_pending; /* the most a channel held unwritten after a send */
static atomic_uint g_echoed;         /* echo stacks completed */
static uint32_t g_limit;             /* the server's write limit, 0: unchecked (set before serving) */

static void note_pending(size_t p) {
  size_t m = atomic_load(&g_max_pending);
  while (p > m && !atomic_compare_exchange_weak(&g_max_pending, &m, p)) {
  }
}

typedef struct echo_locals { sh_future *f; } echo_locals;

static sh_yield echo_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  echo_locals *l = sh_stack_locals(st);
  sh_channel *ch = sh_stack_channel(st);
  if (sh_stack_state(st) == SH_START) {
    sh_bytes *in = sh_stack_msg_as(st, sh_bytes);
    sh_bytes *out = sh_bytes_new(NULL, 0);
    if (out == NULL) return sh_throw(st, -ENOMEM);
    if (sh_buf_move(&out->buf, &in->buf, sh_buf_len(&in->buf)) != 0) {
      sh_msg_free(&out->hdr);
      return sh_throw(st, -ENOMEM);
    }
    l->f = sh_channel_send(st, ch, &out->hdr);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    size_t pending = sh_channel_pending_bytes(ch);
    CHECK(g_limit == 0 || pending <= g_limit);
    note_pending(pending);
    return sh_suspend(st, 1);
  }
  if (sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
  atomic_fetch_add(&g_echoed, 1);
  return sh_return(st, NULL);
}

static const sh_actor_class echo_class = {
    .name = "echo", .size = sizeof(sh_actor), .locals_size = sizeof(echo_locals),
    .kind = SH_IO_ACTOR, .channel = echo_channel};

static void echo_reset(uint32_t limit) {
  atomic_store(&g_max_pending, 0);
  atomic_store(&g_echoed, 0);
  g_limit = limit;
}

/* A notice that starts an actor's work. */
typedef struct go_msg { sh_msg hdr; } go_msg;
SH_MSG_DEFINE(go_msg, SH_NOTICE, 0);

static void go(const sh_addr *to) { assert_int_equal(sh_notice(to, &sh_msg_new(go_msg)->hdr), 0); }

#endif
