/*
 * Socket options through the public API (sh_channel_opts.sockopts,
 * sh_channel_setopt, sh_channel_getopt), written once for both backends:
 * tests/test_e2e_sockopt.c (epoll: what the kernel says) and
 * tests/test_sim_sockopt.c (the simulator's model, several seeds and
 * strategies).
 *
 *   - tcp: options given to a server and at a connect reach their sockets
 *     over the runtime's defaults (TCP_NODELAY on, unless the user says
 *     0); a live channel's option changes; an unknown option, a bad value,
 *     no channel or no place for the value is -EINVAL; a connect with a
 *     bad option fails with -EINVAL; a closed channel's calls say -EPIPE.
 *   - udp: SO_KEEPALIVE and TCP_NODELAY are -ENOPROTOOPT, at the open and
 *     on the channel; the buffers are taken; two sockets share a port
 *     when both set SO_REUSEADDR, or both SO_REUSEPORT, and not otherwise.
 *   - serve: a second server on a port when both set SO_REUSEPORT; not
 *     without it, and SO_REUSEADDR lets no second one listen; a bad option
 *     fails sh_tcp_serve with -EINVAL.
 *
 * The including file defines, before it includes this one:
 *   SOCKOPT_RUNS                               runs of every case;
 *   static void sockopt_configure(unsigned run)  before each run's system;
 *   BUF_SEEN(v)    what getopt says of a buffer set to v (Linux doubles it).
 * and lists the tests with SOCKOPT_CASES. Actors check with CHECK (a
 * failure fails the test after the run, support/harness.h).
 */
#ifndef TESTS_SOCKOPT_CASES_H
#define TESTS_SOCKOPT_CASES_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include <stackhouse/net.h>
#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define SO_LOOPBACK 0x7f000001u
#define SO_SNDBUF_SET 16384
#define SO_RCVBUF_SET 20000

/* The option an actor reads, or -1000 - the error. */
static int opt_of(const sh_channel *ch, sh_sockopt opt) {
  int v = -1;
  int rc = sh_channel_getopt(ch, opt, &v);
  return rc == 0 ? v : -1000 + rc;
}

typedef struct so_go { sh_msg hdr; } so_go;
static SH_MSG_DEFINE(so_go, SH_NOTICE, 0);

static void so_start(sh_system *sys, const sh_actor_class *c) {
  const sh_addr *a = th_spawn_on(sys, c, NULL, 0);
  assert_int_equal(sh_notice(a, &sh_msg_new(so_go)->hdr), 0);
}

/* ---- tcp: a server's connections and a client's ------------------------------ */

static sh_netaddr so_at; /* the server's address, set before the client starts */

static sh_yield so_drop(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

/* The server's connection: the user's options over the defaults. */
static void so_server_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)error;
  if (ev != SH_CHANNEL_OPEN) return;
  CHECK(opt_of(ch, SH_SO_KEEPALIVE) == 1);
  CHECK(opt_of(ch, SH_TCP_NODELAY) == 0); /* the user's 0 over the default 1 */
  CHECK(opt_of(ch, SH_SO_RCVBUF) == BUF_SEEN(SO_RCVBUF_SET));
  th_done(self);
}

static const sh_actor_class so_server_class = {
    .name = "so_server", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR,
    .channel = so_drop, .channel_event = so_server_event};

/* A live channel's options: read, changed, refused. */
static void so_client_checks(sh_channel *ch) {
  CHECK(opt_of(ch, SH_SO_SNDBUF) == BUF_SEEN(SO_SNDBUF_SET));
  CHECK(opt_of(ch, SH_SO_KEEPALIVE) == 1);
  CHECK(opt_of(ch, SH_TCP_NODELAY) == 1); /* the runtime's default */
  CHECK(sh_channel_setopt(ch, SH_TCP_NODELAY, 0) == 0 && opt_of(ch, SH_TCP_NODELAY) == 0);
  CHECK(sh_channel_setopt(ch, SH_SO_KEEPALIVE, 0) == 0 && opt_of(ch, SH_SO_KEEPALIVE) == 0);
  CHECK(sh_channel_setopt(ch, SH_SO_RCVBUF, 8192) == 0);
  CHECK(opt_of(ch, SH_SO_RCVBUF) == BUF_SEEN(8192));
  CHECK(sh_channel_setopt(ch, (sh_sockopt)99, 1) == -EINVAL);
  CHECK(sh_channel_setopt(ch, (sh_sockopt)0, 1) == -EINVAL);
  CHECK(sh_channel_setopt(ch, SH_TCP_NODELAY, 2) == -EINVAL);
  CHECK(sh_channel_setopt(ch, SH_SO_SNDBUF, 0) == -EINVAL);
  CHECK(sh_channel_setopt(ch, SH_SO_SNDBUF, -4096) == -EINVAL);
  CHECK(sh_channel_getopt(ch, SH_TCP_NODELAY, NULL) == -EINVAL);
  CHECK(sh_channel_getopt(ch, (sh_sockopt)7, &(int){0}) == -EINVAL);
  CHECK(sh_channel_setopt(NULL, SH_TCP_NODELAY, 1) == -EINVAL);
}

typedef struct so_locals { sh_future *f; } so_locals;
enum { SO_BAD_CONNECT = 1, SO_CONNECTED };

static sh_yield so_client_go(sh_actor *self, sh_stack *st) {
  (void)self;
  so_locals *l = sh_stack_locals(st);
  sh_channel_opts o = {.connect_timeout_ms = 10000};
  switch (sh_stack_state(st)) {
  case SH_START:
    o.sockopts[3] = (sh_sockopt_value){(sh_sockopt)42, 1};
    l->f = sh_tcp_connect(st, &so_at, &o);
    return sh_suspend(st, SO_BAD_CONNECT);
  case SO_BAD_CONNECT:
    CHECK(sh_future_error(l->f) == -EINVAL);
    o.sockopts[0] = (sh_sockopt_value){SH_SO_SNDBUF, SO_SNDBUF_SET};
    o.sockopts[2] = (sh_sockopt_value){SH_SO_KEEPALIVE, 1}; /* [1] unused */
    l->f = sh_tcp_connect(st, &so_at, &o);
    return sh_suspend(st, SO_CONNECTED);
  default:
    CHECK(!sh_future_failed(l->f));
    if (sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
    sh_channel *ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    so_client_checks(ch);
    sh_channel_close(ch);
    return sh_return(st, NULL);
  }
}

static void so_client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  if (ev != SH_CHANNEL_CLOSED) return;
  CHECK(error == 0);
  CHECK(sh_channel_setopt(ch, SH_TCP_NODELAY, 1) == -EPIPE);
  CHECK(opt_of(ch, SH_TCP_NODELAY) == -1000 - EPIPE);
  th_done(self);
}

static const sh_actor_class so_client_class = {
    .name = "so_client", .size = sizeof(sh_actor), .locals_size = sizeof(so_locals),
    .kind = SH_IO_ACTOR, .notice = so_client_go, .channel = so_drop,
    .channel_event = so_client_event};

static void case_tcp(void) {
  sh_system *sys = th_env(2, 2); /* the server's OPEN, the client's CLOSED */
  sh_channel_opts o = {.sockopts = {{SH_SO_KEEPALIVE, 1},
                                    {SH_SO_RCVBUF, SO_RCVBUF_SET},
                                    {SH_TCP_NODELAY, 0}}};
  sh_tcp_server *srv;
  sh_netaddr at = {SO_LOOPBACK, 0};
  assert_int_equal(sh_tcp_serve(sys, &at, &so_server_class, NULL, 1, &o, &srv), 0);
  assert_int_equal(sh_tcp_server_addr(srv, &so_at), 0);
  so_start(sys, &so_client_class);
  th_run(sys);
  th_end(sys);
}

/* ---- udp ------------------------------------------------------------------------- */

/* sh_udp_open at `at` with one option; the error, or 0 (*ch set). */
static int so_udp(sh_actor *self, const sh_netaddr *at, sh_sockopt opt, int value,
                  sh_channel **ch) {
  sh_channel_opts o = {.sockopts = {{opt, value}}};
  return sh_udp_open(self, at, &o, ch);
}

/* Two more sockets on the port of one opened with `opt`: one with it too
 * (shares the port), one with `other` (refused). */
static void so_udp_share(sh_actor *self, sh_sockopt opt, sh_sockopt other) {
  sh_netaddr at = {SO_LOOPBACK, 0};
  sh_channel *a, *b, *c;
  CHECK(so_udp(self, &at, opt, 1, &a) == 0);
  CHECK(sh_channel_local(a, &at) == 0 && at.port != 0);
  CHECK(so_udp(self, &at, opt, 1, &b) == 0);
  CHECK(so_udp(self, &at, other, 1, &c) == -EADDRINUSE);
  CHECK(so_udp(self, &at, (sh_sockopt)0, 0, &c) == -EADDRINUSE);
  sh_channel_close(a);
  sh_channel_close(b);
}

static sh_yield so_udp_go(sh_actor *self, sh_stack *st) {
  sh_netaddr any = {SO_LOOPBACK, 0};
  sh_channel *ch;
  CHECK(so_udp(self, &any, SH_TCP_NODELAY, 1, &ch) == -ENOPROTOOPT);
  CHECK(so_udp(self, &any, SH_SO_KEEPALIVE, 0, &ch) == -ENOPROTOOPT);
  CHECK(so_udp(self, &any, (sh_sockopt)77, 1, &ch) == -EINVAL);
  CHECK(so_udp(self, &any, SH_SO_RCVBUF, -1, &ch) == -EINVAL);
  CHECK(so_udp(self, &any, SH_SO_RCVBUF, SO_RCVBUF_SET, &ch) == 0);
  CHECK(opt_of(ch, SH_SO_RCVBUF) == BUF_SEEN(SO_RCVBUF_SET));
  CHECK(sh_channel_setopt(ch, SH_SO_SNDBUF, SO_SNDBUF_SET) == 0);
  CHECK(opt_of(ch, SH_SO_SNDBUF) == BUF_SEEN(SO_SNDBUF_SET));
  CHECK(sh_channel_setopt(ch, SH_SO_KEEPALIVE, 1) == -ENOPROTOOPT);
  CHECK(opt_of(ch, SH_TCP_NODELAY) == -1000 - ENOPROTOOPT);
  CHECK(opt_of(ch, SH_SO_REUSEADDR) == 0); /* no default on UDP */
  sh_channel_close(ch);
  so_udp_share(self, SH_SO_REUSEADDR, SH_SO_REUSEPORT);
  so_udp_share(self, SH_SO_REUSEPORT, SH_SO_REUSEADDR);
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class so_udp_class = {
    .name = "so_udp", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR,
    .notice = so_udp_go, .channel = so_drop};

static void case_udp(void) {
  sh_system *sys = th_env(1, 1);
  so_start(sys, &so_udp_class);
  th_run(sys);
  th_end(sys);
}

/* ---- serve ----------------------------------------------------------------------- */

static int so_serve(sh_system *sys, const sh_netaddr *at, sh_sockopt opt, int value,
                    sh_netaddr *bound) {
  sh_channel_opts o = {.sockopts = {{opt, value}}};
  sh_tcp_server *srv;
  int rc = sh_tcp_serve(sys, at, &so_server_class, NULL, 1, &o, &srv);
  if (rc == 0 && bound != NULL) rc = sh_tcp_server_addr(srv, bound);
  return rc;
}

static void case_serve(void) {
  sh_system *sys = th_env(1, 0);
  assert_int_equal(sh_system_start(sys), 0);
  sh_netaddr at = {SO_LOOPBACK, 0};
  assert_int_equal(so_serve(sys, &at, SH_SO_REUSEPORT, 1, &at), 0);
  assert_int_not_equal(at.port, 0);
  assert_int_equal(so_serve(sys, &at, SH_SO_REUSEPORT, 1, NULL), 0);
  assert_int_equal(so_serve(sys, &at, (sh_sockopt)0, 0, NULL), -EADDRINUSE);
  assert_int_equal(so_serve(sys, &at, SH_SO_REUSEADDR, 1, NULL), -EADDRINUSE);
  sh_netaddr other = {SO_LOOPBACK, 0};
  assert_int_equal(so_serve(sys, &other, SH_SO_REUSEADDR, 1, &other), 0);
  assert_int_equal(so_serve(sys, &other, SH_SO_REUSEADDR, 1, NULL), -EADDRINUSE);
  assert_int_equal(so_serve(sys, &other, SH_SO_REUSEPORT, 1, NULL), -EADDRINUSE);
  assert_int_equal(so_serve(sys, &at, (sh_sockopt)9, 1, NULL), -EINVAL);
  assert_int_equal(so_serve(sys, &at, SH_SO_SNDBUF, 0, NULL), -EINVAL);
  assert_int_equal(so_serve(sys, &at, SH_SO_KEEPALIVE, 5, NULL), -EINVAL);
  th_end(sys);
}

#define SOCKOPT_TEST(name)                              \
  static void test_##name(void **state) {               \
    (void)state;                                        \
    for (unsigned run = 0; run < SOCKOPT_RUNS; run++) { \
      sockopt_configure(run);                           \
      case_##name();                                    \
    }                                                   \
  }

SOCKOPT_TEST(tcp)
SOCKOPT_TEST(udp)
SOCKOPT_TEST(serve)

#define SOCKOPT_CASES \
  cmocka_unit_test(test_tcp), cmocka_unit_test(test_udp), cmocka_unit_test(test_serve)

#endif
