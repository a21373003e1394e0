/*
 * Tests for the socket seam on the production backend (backend-epoll/net.c
 * and the wait that reports readiness, sh_plat_wait), through
 * core/netplat.h only, on loopback. The test thread drives worker 0 itself
 * (waits as it), so no worker thread runs.
 *
 * Timing: nothing asserts how long something took; a wait for readiness
 * waits in short slices until it comes, and a SIGALRM watchdog turns a
 * readiness that never comes (a hang) into a failed run.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm under -std=c11 */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netplat.h"
#include "seam_sockets.h"

#define WATCHDOG_S 60
#define LOOPBACK 0x7f000001u
/* Slices of a wait for readiness; the watchdog bounds the whole run. */
#define SLICE_NS 10000000u

/* ---- what the readiness function saw ------------------------------------ */

#define MAX_SEEN 256

static struct {
  void *token;
  uint32_t events;
} seen[MAX_SEEN];
static uint32_t nseen;

static void record(void *token, uint32_t events) {
  assert_true(nseen < MAX_SEEN);
  seen[nseen].token = token;
  seen[nseen].events = events;
  nseen++;
}

/* The events reported for token since the last forget. */
static uint32_t seen_for(const void *token) {
  uint32_t ev = 0;
  for (uint32_t i = 0; i < nseen; i++)
    if (seen[i].token == token) ev |= seen[i].events;
  return ev;
}

static void forget(void) { nseen = 0; }

/* Tokens: only their addresses matter. */
static char tok_l, tok_c, tok_s, tok_u, tok_v;

static sh_plat *plat_new(void) {
  sh_plat *p = NULL;
  assert_int_equal(sh_plat_new(1, &p), 0);
  sh_net_set_ready(p, record);
  forget();
  return p;
}

/* One wait of at most a slice. */
static uint32_t slice(sh_plat *p) {
  return sh_plat_wait(p, 0, sh_plat_now_ns() + SLICE_NS, MAX_SEEN - nseen);
}

/* Waits (in slices) until token got every bit of `bits`. */
static void wait_for(sh_plat *p, const void *token, uint32_t bits) {
  while ((seen_for(token) & bits) != bits) slice(p);
}

/* Reports everything pending, so what follows sees only new edges. */
static void settle(sh_plat *p) {
  slice(p);
  sh_plat_wait(p, 0, SH_PLAT_POLL, MAX_SEEN - nseen);
  forget();
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  assert_non_null(d);
  int n = 0;
  while (readdir(d) != NULL) n++;
  closedir(d);
  return n;
}

static sh_netaddr loopback(uint16_t port) { return (sh_netaddr){.ip = LOOPBACK, .port = port}; }

static sh_sock listener(sh_netaddr *at) {
  sh_sock l;
  *at = loopback(0);
  assert_int_equal(tcp_listen(at, &l), 0);
  assert_int_equal(sh_net_local(l, at), 0);
  return l;
}

/* A connected pair: *c connected to *s, both watched by worker 0 (c as
 * tok_c, s as tok_s), the connect's end seen. The listener is closed. */
static void pair(sh_plat *p, sh_sock *c, sh_sock *s) {
  sh_netaddr at;
  sh_sock l = listener(&at);
  assert_int_equal(sh_net_watch(p, 0, l, &tok_l), 0);
  assert_int_equal(tcp_to(&at, c), 0);
  assert_int_equal(sh_net_watch(p, 0, *c, &tok_c), 0);
  wait_for(p, &tok_l, SH_IO_IN);
  sh_netaddr peer, local;
  assert_int_equal(sh_net_accept(l, s, &peer), 0);
  assert_int_equal(sh_net_watch(p, 0, *s, &tok_s), 0);
  wait_for(p, &tok_c, SH_IO_OUT);
  assert_int_equal(sh_net_error(*c), 0);
  assert_int_equal(sh_net_local(*c, &local), 0);
  assert_int_equal(peer.ip, LOOPBACK);
  assert_int_equal(peer.port, local.port);
  sh_net_close(l);
  settle(p);
}

/* A platform of one worker and a connected pair watched by it. */
typedef struct fixture {
  sh_plat *p;
  sh_sock c, s;
} fixture;

static int pair_setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->p = plat_new();
  pair(f->p, &f->c, &f->s);
  *state = f;
  return 0;
}

static int pair_teardown(void **state) {
  fixture *f = *state;
  sh_net_close(f->c);
  sh_net_close(f->s);
  sh_plat_free(f->p);
  free(f);
  return 0;
}

static int64_t write_str(sh_sock s, const char *str) {
  struct iovec iov = {.iov_base = (void *)str, .iov_len = strlen(str)};
  return sh_net_writev(s, &iov, 1);
}

/* ---- TCP ------------------------------------------------------------------ */

static void test_listen_gives_a_port(void **state) {
  (void)state;
  sh_netaddr at;
  sh_sock l = listener(&at);
  assert_int_equal(at.ip, LOOPBACK);
  assert_true(at.port != 0);
  assert_int_equal(sh_net_accept(l, &(sh_sock){0}, NULL), -EAGAIN);
  sh_net_close(l);
}

/* pair_setup does it all: IN on the listener, the connect's end as OUT on
 * the connector with no error, the peer's address from the accept. */
static void test_connect_accept_readiness(void **state) { (void)state; }

static void test_bytes_both_ways(void **state) {
  fixture *f = *state;
  sh_plat *p = f->p;
  sh_sock c = f->c, s = f->s;
  char buf[64];
  assert_int_equal(sh_net_read(s, buf, sizeof buf), -EAGAIN);
  /* Two pieces in one call: the gather list is kept in order. */
  struct iovec iov[2] = {{.iov_base = "hel", .iov_len = 3}, {.iov_base = "lo", .iov_len = 2}};
  assert_int_equal(sh_net_writev(c, iov, 2), 5);
  wait_for(p, &tok_s, SH_IO_IN);
  assert_int_equal(sh_net_read(s, buf, sizeof buf), 5);
  assert_memory_equal(buf, "hello", 5);
  assert_int_equal(write_str(s, "back"), 4);
  wait_for(p, &tok_c, SH_IO_IN);
  assert_int_equal(sh_net_read(c, buf, sizeof buf), 4);
  assert_memory_equal(buf, "back", 4);
}

/* Reads s dry; bytes read. */
static size_t drain(sh_sock s) {
  static char buf[65536];
  size_t total = 0;
  int64_t r;
  while ((r = sh_net_read(s, buf, sizeof buf)) > 0) total += (size_t)r;
  assert_int_equal(r, -EAGAIN);
  return total;
}

static void test_full_write_then_writable_again(void **state) {
  fixture *f = *state;
  sh_plat *p = f->p;
  sh_sock c = f->c, s = f->s;
  static char chunk[65536];
  struct iovec iov = {.iov_base = chunk, .iov_len = sizeof chunk};
  size_t written = 0;
  int64_t r;
  while ((r = sh_net_writev(c, &iov, 1)) > 0) written += (size_t)r;
  assert_int_equal(r, -EAGAIN);
  settle(p);
  /* The reader empties the connection until the writer hears it has room. */
  size_t got = 0;
  while (!(seen_for(&tok_c) & SH_IO_OUT)) {
    got += drain(s);
    slice(p);
  }
  while (got < written) {
    got += drain(s);
    slice(p);
  }
  assert_int_equal(got, written);
}

static void test_read_end_after_shutdown(void **state) {
  fixture *f = *state;
  sh_plat *p = f->p;
  sh_sock c = f->c, s = f->s;
  assert_int_equal(write_str(c, "last"), 4);
  assert_int_equal(sh_net_shutdown(c), 0);
  wait_for(p, &tok_s, SH_IO_IN | SH_IO_HUP);
  char buf[16];
  assert_int_equal(sh_net_read(s, buf, sizeof buf), 4); /* the bytes before the end */
  assert_int_equal(sh_net_read(s, buf, sizeof buf), 0);
}

static void test_connect_refused(void **state) {
  (void)state;
  sh_plat *p = plat_new();
  sh_netaddr at;
  sh_net_close(listener(&at)); /* a port nobody listens on */
  sh_sock c;
  int rc = tcp_to(&at, &c);
  if (rc == 0) { /* in progress: the end is reported, the error says how */
    assert_int_equal(sh_net_watch(p, 0, c, &tok_c), 0);
    wait_for(p, &tok_c, SH_IO_OUT);
    assert_true(seen_for(&tok_c) & (SH_IO_ERR | SH_IO_HUP));
    assert_int_equal(sh_net_error(c), -ECONNREFUSED);
    assert_int_equal(sh_net_error(c), 0); /* cleared by the call */
    sh_net_close(c);
  } else {
    assert_int_equal(rc, -ECONNREFUSED);
  }
  sh_plat_free(p);
}

/* ---- UDP ------------------------------------------------------------------ */

static void test_udp_round_trip(void **state) {
  (void)state;
  sh_plat *p = plat_new();
  sh_sock u, v;
  sh_netaddr ua = loopback(0), va = loopback(0), from;
  assert_int_equal(udp_at(&ua, &u), 0);
  assert_int_equal(udp_at(&va, &v), 0);
  assert_int_equal(sh_net_local(u, &ua), 0);
  assert_int_equal(sh_net_local(v, &va), 0);
  assert_int_equal(sh_net_watch(p, 0, u, &tok_u), 0);
  assert_int_equal(sh_net_watch(p, 0, v, &tok_v), 0);
  char buf[16];
  assert_int_equal(sh_net_recvfrom(v, buf, sizeof buf, &from), -EAGAIN);
  settle(p);
  assert_int_equal(sh_net_sendto(u, "ping", 4, &va), 4);
  wait_for(p, &tok_v, SH_IO_IN);
  assert_int_equal(sh_net_recvfrom(v, buf, sizeof buf, &from), 4);
  assert_memory_equal(buf, "ping", 4);
  assert_int_equal(from.ip, LOOPBACK);
  assert_int_equal(from.port, ua.port);
  assert_int_equal(sh_net_recvfrom(v, buf, sizeof buf, &from), -EAGAIN);
  /* A datagram longer than the buffer comes truncated, and whole: once. */
  assert_int_equal(sh_net_sendto(u, "0123456789", 10, &va), 10);
  wait_for(p, &tok_v, SH_IO_IN);
  assert_int_equal(sh_net_recvfrom(v, buf, 3, NULL), 3);
  assert_memory_equal(buf, "012", 3);
  assert_int_equal(sh_net_recvfrom(v, buf, sizeof buf, NULL), -EAGAIN);
  static char big[70000];
  assert_int_equal(sh_net_sendto(u, big, sizeof big, &va), -EMSGSIZE);
  sh_net_close(u);
  sh_net_close(v);
  sh_plat_free(p);
}

/* ---- the wait, close -------------------------------------------------------- */

static void test_wait_reports_readiness(void **state) {
  fixture *f = *state;
  sh_plat *p = f->p;
  sh_sock c = f->c;
  assert_int_equal(write_str(c, "x"), 1);
  /* Loopback bytes are queued when the write returns: this wait cannot
   * sleep, and it reports what it found before it returns. */
  assert_true(sh_plat_wait(p, 0, SH_PLAT_NO_DEADLINE, MAX_SEEN) >= 1);
  assert_true(seen_for(&tok_s) & SH_IO_IN);
}

static void test_no_report_after_close(void **state) {
  fixture *f = *state;
  sh_plat *p = f->p;
  sh_sock c = f->c, s = f->s;
  sh_netaddr ua = loopback(0), va;
  sh_sock u;
  assert_int_equal(udp_at(&ua, &u), 0);
  assert_int_equal(sh_net_watch(p, 0, u, &tok_u), 0);
  assert_int_equal(sh_net_local(u, &va), 0);
  settle(p);
  assert_int_equal(write_str(c, "x"), 1);
  assert_int_equal(sh_net_sendto(u, "y", 1, &va), 1);
  /* Both pending in the epoll set, not yet fetched: s goes first. */
  sh_net_close(s);
  f->s = -1;
  wait_for(p, &tok_u, SH_IO_IN); /* the other socket's report comes */
  slice(p);
  assert_int_equal(seen_for(&tok_s), 0);
  sh_net_close(u);
}

static void test_wait_reports_at_most_max(void **state) {
  fixture *f = *state;
  sh_plat *p = f->p;
  sh_sock c = f->c, s = f->s;
  assert_int_equal(write_str(c, "x"), 1);
  assert_int_equal(write_str(s, "y"), 1);
  assert_int_equal(sh_plat_wait(p, 0, SH_PLAT_NO_DEADLINE, 1), 1); /* two are ready */
  assert_int_equal(nseen, 1);
  wait_for(p, &tok_s, SH_IO_IN); /* the other was not lost */
  wait_for(p, &tok_c, SH_IO_IN);
}

/* A poll meets the wakeup eventfd too: it must leave the wake for the next
 * wait that would sleep (a wake before it is not lost). The watchdog
 * catches a hang. */
static void test_poll_keeps_a_wake(void **state) {
  (void)state;
  sh_plat *p = plat_new();
  sh_plat_wake(p, 0);
  assert_int_equal(sh_plat_wait(p, 0, SH_PLAT_POLL, MAX_SEEN), 0);
  assert_int_equal(sh_plat_wait(p, 0, SH_PLAT_NO_DEADLINE, MAX_SEEN), 0);
  sh_plat_free(p);
}

/* ---- a started worker --------------------------------------------------- */

/* Worker 0 on its own thread: waits until told to stop, then
 * closes the socket it watches (on its own thread, as sh_net_close wants). */
typedef struct started {
  sh_plat *p;
  sh_sock s;
  atomic_bool stop;
  atomic_uint ins; /* IN reports for tok_s */
} started;

static started *the_started; /* the readiness function's way to it */

static void count_in(void *token, uint32_t events) {
  if (token == &tok_s && (events & SH_IO_IN)) atomic_fetch_add(&the_started->ins, 1);
}

static void started_loop(void *ctx, uint32_t w) {
  started *st = ctx;
  while (!atomic_load(&st->stop)) sh_plat_wait(st->p, w, SH_PLAT_NO_DEADLINE, 64);
  sh_net_close(st->s);
}

static void wait_ins(started *st, unsigned n) {
  while (atomic_load(&st->ins) < n) {
    struct timespec ts = {.tv_nsec = 1000000};
    nanosleep(&ts, NULL);
  }
}

/* Another thread watches a socket for a running worker, which then reports
 * its readiness: the watch's bookkeeping is shared across threads. */
static void test_watch_for_a_running_worker(void **state) {
  (void)state;
  static started st;
  st = (started){.s = -1};
  assert_int_equal(sh_plat_new(1, &st.p), 0);
  the_started = &st;
  sh_net_set_ready(st.p, count_in);
  assert_int_equal(sh_plat_start(st.p, started_loop, &st), 0);
  sh_netaddr at;
  sh_sock l = listener(&at), c;
  assert_int_equal(tcp_to(&at, &c), 0);
  while (sh_net_accept(l, &st.s, NULL) == -EAGAIN) sh_plat_yield_cpu();
  assert_int_equal(sh_net_watch(st.p, 0, st.s, &tok_s), 0);
  assert_int_equal(write_str(c, "a"), 1);
  wait_ins(&st, 1);
  char buf[4];
  assert_int_equal(sh_net_read(st.s, buf, sizeof buf), 1);
  assert_int_equal(write_str(c, "b"), 1); /* a new edge */
  wait_ins(&st, 2);
  atomic_store(&st.stop, true);
  sh_plat_wake(st.p, 0);
  sh_plat_join(st.p);
  sh_plat_free(st.p);
  sh_net_close(c);
  sh_net_close(l);
}

/* ---- fault points ----------------------------------------------------------- */

static void test_fault_accept(void **state) {
  (void)state;
  sh_plat *p = plat_new();
  sh_netaddr at;
  sh_sock l = listener(&at), c, s;
  assert_int_equal(sh_net_watch(p, 0, l, &tok_l), 0);
  assert_int_equal(tcp_to(&at, &c), 0);
  wait_for(p, &tok_l, SH_IO_IN);
  int fds = count_fds();
  fiu_enable("sh/net/accept", 1, NULL, 0);
  assert_int_equal(sh_net_accept(l, &s, NULL), -EMFILE);
  fiu_disable("sh/net/accept");
  assert_int_equal(count_fds(), fds);
  assert_int_equal(sh_net_accept(l, &s, NULL), 0); /* it stayed queued */
  sh_net_close(s);
  sh_net_close(c);
  sh_net_close(l);
  sh_plat_free(p);
}

static void test_fault_connect(void **state) {
  (void)state;
  sh_netaddr at;
  sh_sock l = listener(&at), c;
  assert_int_equal(sh_net_socket(SH_NET_TCP, &c), 0);
  int fds = count_fds();
  fiu_enable("sh/net/connect", 1, NULL, 0);
  assert_int_equal(sh_net_connect(c, &at), -ECONNREFUSED);
  fiu_disable("sh/net/connect");
  assert_int_equal(count_fds(), fds);
  sh_net_close(c);
  sh_net_close(l);
}

static void test_fault_read_write(void **state) {
  fixture *f = *state;
  sh_plat *p = f->p;
  sh_sock c = f->c, s = f->s;
  assert_int_equal(write_str(c, "kept"), 4);
  wait_for(p, &tok_s, SH_IO_IN);
  int fds = count_fds();
  char buf[8];
  fiu_enable("sh/net/read", 1, NULL, 0);
  assert_int_equal(sh_net_read(s, buf, sizeof buf), -ECONNRESET);
  fiu_disable("sh/net/read");
  fiu_enable("sh/net/write", 1, NULL, 0);
  assert_int_equal(write_str(c, "lost"), -EPIPE);
  fiu_disable("sh/net/write");
  assert_int_equal(count_fds(), fds);
  /* Nothing was consumed or sent by the failed calls. */
  assert_int_equal(sh_net_read(s, buf, sizeof buf), 4);
  assert_memory_equal(buf, "kept", 4);
  assert_int_equal(sh_net_read(s, buf, sizeof buf), -EAGAIN);
}

int main(void) {
  alarm(WATCHDOG_S); /* default SIGALRM action kills the run: a hang fails */
  fiu_init(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_listen_gives_a_port),
      cmocka_unit_test_setup_teardown(test_connect_accept_readiness, pair_setup, pair_teardown),
      cmocka_unit_test_setup_teardown(test_bytes_both_ways, pair_setup, pair_teardown),
      cmocka_unit_test_setup_teardown(test_full_write_then_writable_again, pair_setup, pair_teardown),
      cmocka_unit_test_setup_teardown(test_read_end_after_shutdown, pair_setup, pair_teardown),
      cmocka_unit_test(test_connect_refused),
      cmocka_unit_test(test_udp_round_trip),
      cmocka_unit_test_setup_teardown(test_wait_reports_readiness, pair_setup, pair_teardown),
      cmocka_unit_test_setup_teardown(test_no_report_after_close, pair_setup, pair_teardown),
      cmocka_unit_test_setup_teardown(test_wait_reports_at_most_max, pair_setup, pair_teardown),
      cmocka_unit_test(test_poll_keeps_a_wake),
      cmocka_unit_test(test_watch_for_a_running_worker),
      cmocka_unit_test(test_fault_accept),
      cmocka_unit_test(test_fault_connect),
      cmocka_unit_test_setup_teardown(test_fault_read_write, pair_setup, pair_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
