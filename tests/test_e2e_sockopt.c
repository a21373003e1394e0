/*
 * Socket options on the production backend (epoll, real loopback sockets),
 * through the public API: the cases of tests/sockopt_cases.h, where
 * sh_channel_getopt is getsockopt(2) (Linux doubles a buffer's size), and
 * one the simulator has no place for: a port that a connection closed by
 * the server still holds (TIME_WAIT) once its system is gone, which a new
 * server binds with SO_REUSEADDR (the default) and not without it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* alarm */
#endif

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define WATCHDOG_S 120
#define SOCKOPT_RUNS 1u
#define BUF_SEEN(v) (2 * (v))

static void sockopt_configure(unsigned run) { (void)run; }

#include "sockopt_cases.h"

/* The server's end closes first, so it is the one left in TIME_WAIT. */
static void so_closer_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)error;
  if (ev == SH_CHANNEL_OPEN) sh_channel_close(ch);
  if (ev == SH_CHANNEL_CLOSED) th_done(self);
}

static const sh_actor_class so_closer_class = {
    .name = "so_closer", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR,
    .channel = so_drop, .channel_event = so_closer_event};

/* A blocking connect to `at` from the test thread, read to the end. */
static void raw_connect_until_closed(const sh_netaddr *at) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(at->port)};
  sa.sin_addr.s_addr = htonl(at->ip);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  char b[16];
  assert_int_equal(recv(fd, b, sizeof(b), 0), 0); /* the server's end of stream */
  close(fd);
}

/* Catches SO_REUSEADDR set on listeners by nobody (the runtime's default
 * lost), and a user's 0 not reaching the socket. */
static void test_time_wait(void **state) {
  (void)state;
  sh_system *sys = th_env(1, 1);
  assert_int_equal(sh_system_start(sys), 0);
  sh_netaddr at = {SO_LOOPBACK, 0};
  sh_tcp_server *srv;
  assert_int_equal(sh_tcp_serve(sys, &at, &so_closer_class, NULL, 1, NULL, &srv), 0);
  assert_int_equal(sh_tcp_server_addr(srv, &at), 0);
  raw_connect_until_closed(&at);
  assert_int_equal(sh_system_wait(sys), 0);
  th_end(sys); /* the listener goes; the server's end of the connection stays */
  sys = th_env(1, 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(so_serve(sys, &at, SH_SO_REUSEADDR, 0, NULL), -EADDRINUSE);
  assert_int_equal(so_serve(sys, &at, (sh_sockopt)0, 0, NULL), 0);
  th_end(sys);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {SOCKOPT_CASES, cmocka_unit_test(test_time_wait)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
