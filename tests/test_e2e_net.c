/*
 * End-to-end tests of TCP channels on the production backend (epoll, real
 * loopback sockets), through the public API only, as a user writes them
 * (the server, raw sockets and helpers: net_fixture.h):
 *   - a TCP echo server (one connection actor per worker) with clients
 *     that are IO actors on other workers, and with plain blocking POSIX
 *     sockets from the test thread: half-close, a peer's reset;
 *   - back-pressure against a peer that does not read;
 *   - an accept that runs out of descriptors;
 *   - no pool allocation per message in steady state;
 *   - a fallback reply for a stack that throws or returns nothing.
 * Requests inflight and their close, connects, UDP and a stop that closes
 * channels are test_e2e_net_conn.c's.
 *
 * Each case says what it would catch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* alarm, MSG_NOSIGNAL */
#endif

#include "net_fixture.h"

/* A byte stream that no reordering of blocks reproduces. */
static uint8_t pattern(uint64_t off) { return (uint8_t)((off * 2654435761u) >> 13); }

/* ---- raw byte streams of the test thread ------------------------------------- */

/* Sends the pattern from offset `from`, n bytes. */
static void raw_send_pattern(int fd, uint64_t from, size_t n) {
  uint8_t buf[4096];
  while (n > 0) {
    size_t k = n < sizeof(buf) ? n : sizeof(buf);
    for (size_t i = 0; i < k; i++) buf[i] = pattern(from + i);
    raw_send_all(fd, buf, k);
    from += k;
    n -= k;
  }
}

/* Reads until the end of stream; how many bytes, all checked against the
 * pattern from offset 0 (-1 at the first wrong byte). */
static long raw_recv_pattern_to_eof(int fd) {
  uint8_t buf[4096];
  long got = 0;
  for (;;) {
    ssize_t k = recv(fd, buf, sizeof(buf), 0);
    if (k <= 0) return k == 0 ? got : -1;
    for (ssize_t i = 0; i < k; i++)
      if (buf[i] != pattern((uint64_t)got + (uint64_t)i)) return -1;
    got += k;
  }
}

/* Sends n bytes, ends its side, and wants every byte back, then the end. */
static void raw_echo_round(const sh_netaddr *at, size_t n) {
  int fd = raw_connect(at, 0);
  raw_send_pattern(fd, 0, n);
  assert_int_equal(shutdown(fd, SHUT_WR), 0);
  assert_int_equal(raw_recv_pattern_to_eof(fd), (long)n);
  close(fd);
}

/* ---- echo clients: IO actors that connect, send, end their side, check ---------- */

typedef struct conn_cfg {
  sh_netaddr at;
  uint64_t bytes;
  uint64_t base; /* pattern offset of this connection's stream */
} conn_cfg;

typedef struct conn_actor {
  sh_actor base;
  conn_cfg cfg;
  uint64_t sent, received, seed;
  bool bad, closed;
  sh_channel *ch;
} conn_actor;

TH_CFG_INIT(conn_init, conn_actor, conn_cfg);

typedef struct conn_locals { sh_future *f; } conn_locals;
enum { CN_CONNECTED = 1, CN_SENT };

static sh_yield conn_send_next(conn_actor *c, sh_stack *st, conn_locals *l) {
  if (c->sent == c->cfg.bytes) {
    CHECK(sh_channel_shutdown(c->ch) == 0);
    return sh_return(st, NULL);
  }
  uint8_t buf[5000];
  uint64_t n = 1 + th_xorshift(&c->seed) % sizeof(buf);
  if (n > c->cfg.bytes - c->sent) n = c->cfg.bytes - c->sent;
  for (uint64_t i = 0; i < n; i++) buf[i] = pattern(c->cfg.base + c->sent + i);
  sh_bytes *b = sh_bytes_new(buf, n);
  l->f = b != NULL ? sh_channel_send(st, c->ch, &b->hdr) : NULL;
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  c->sent += n;
  return sh_suspend(st, CN_SENT);
}

static sh_yield conn_notice(sh_actor *self, sh_stack *st) {
  conn_actor *c = (conn_actor *)self;
  conn_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    c->seed = c->cfg.base + 1;
    l->f = sh_tcp_connect(st, &c->cfg.at, NULL);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, CN_CONNECTED);
  case CN_CONNECTED:
    CHECK(!sh_future_failed(l->f));
    if (sh_future_failed(l->f)) {
      th_done(self);
      return sh_return(st, NULL);
    }
    c->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    return conn_send_next(c, st, l);
  default:
    CHECK(!sh_future_failed(l->f));
    if (sh_future_failed(l->f)) return sh_return(st, NULL); /* the close tells the rest */
    return conn_send_next(c, st, l);
  }
}

static sh_yield conn_channel(sh_actor *self, sh_stack *st) {
  conn_actor *c = (conn_actor *)self;
  const sh_buf *b = &sh_stack_msg_as(st, sh_bytes)->buf;
  const uint8_t *p;
  size_t off = 0, n;
  while ((n = sh_buf_span(b, off, &p)) > 0) {
    for (size_t i = 0; i < n; i++)
      if (p[i] != pattern(c->cfg.base + c->received + off + i)) c->bad = true;
    off += n;
  }
  c->received += off;
  return sh_return(st, NULL);
}

static void conn_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch;
  conn_actor *c = (conn_actor *)self;
  if (ev != SH_CHANNEL_CLOSED) return;
  CHECK(!c->closed);
  CHECK(error == 0);
  CHECK(!c->bad);
  CHECK(c->received == c->cfg.bytes && c->sent == c->cfg.bytes);
  c->closed = true;
  th_done(self);
}

static const sh_actor_class conn_class = {
    .name = "conn", .size = sizeof(conn_actor), .locals_size = sizeof(conn_locals),
    .kind = SH_IO_ACTOR, .init = conn_init, .notice = conn_notice, .channel = conn_channel,
    .channel_event = conn_event};

/* ---- TCP echo --------------------------------------------------------------------- */

/* Six connections from IO actors on every worker, drawn chunk sizes:
 * catches a byte lost, doubled or reordered between two actors' channels
 * (the client checks the stream), a connection that never closes cleanly
 * after both half-closes, and an open count that forgets a channel. */
static void test_echo_between_actors(void **state) {
  (void)state;
  enum { CONNS = 6, WORKERS = 3 };
  sh_system *sys = net_env(WORKERS, CONNS);
  echo_reset(0);
  sh_netaddr at;
  sh_tcp_server *srv = serve(sys, &echo_class, NULL, &at);
  for (uint32_t i = 0; i < CONNS; i++) {
    conn_cfg cfg = {.at = at, .bytes = 20000 + 30000 * i, .base = 1000003u * i};
    go(th_spawn_on(sys, &conn_class, &cfg, i % WORKERS));
  }
  assert_int_equal(sh_system_wait(sys), 0);
  wait_server_idle(srv);
  assert_int_equal(server_stats(srv).accepted, CONNS);
  th_end_exact(sys);
}

/* A plain socket: half-close gets every byte back then the end; a peer
 * that resets (linger 0) ends its channel only: the server serves the next
 * connection and its open count falls back to 0. Catches a half-close
 * taken for a full close (bytes lost), a reset that takes the server down,
 * a channel leaked by a reset. */
static void test_echo_raw_half_close_and_reset(void **state) {
  (void)state;
  sh_system *sys = net_env(2, 0);
  echo_reset(0);
  sh_netaddr at;
  sh_tcp_server *srv = serve(sys, &echo_class, NULL, &at);
  raw_echo_round(&at, 200000);
  int fd = raw_connect(&at, 0);
  raw_send_pattern(fd, 0, 50000);
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
  close(fd);
  raw_echo_round(&at, 3000);
  wait_server_idle(srv);
  assert_int_equal(server_stats(srv).accepted, 3);
  th_end_exact(sys);
}

/* ---- back-pressure ---------------------------------------------------------------------- */

#define BP_TOTAL (8u << 20)
#define BP_HIGH (32u << 10)
#define BP_LIMIT (256u << 10)

/* Sends what the socket takes now; false when it took nothing. */
static bool bp_push(int fd, uint64_t *sent) {
  uint8_t buf[16384];
  size_t n = BP_TOTAL - *sent < sizeof(buf) ? BP_TOTAL - *sent : sizeof(buf);
  for (size_t i = 0; i < n; i++) buf[i] = pattern(*sent + i);
  ssize_t k = n > 0 ? send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
  if (k > 0) *sent += (uint64_t)k;
  return k > 0;
}

/* Reads what is there, checking the pattern; false at the end of stream. */
static bool bp_pull(int fd, uint64_t *received) {
  uint8_t buf[16384];
  ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (k == 0) return false;
  for (ssize_t i = 0; i < k; i++) assert_int_equal(buf[i], pattern(*received + (uint64_t)i));
  if (k > 0) *received += (uint64_t)k;
  return true;
}

static void bp_wait(int fd, bool writing) {
  struct pollfd p = {.fd = fd, .events = (short)(POLLIN | (writing ? POLLOUT : 0))};
  (void)poll(&p, 1, 100);
}

/* A peer sends 8 MB and reads nothing until the server cannot take more;
 * the echo's writes wait (sh_channel_send) and the server stops reading,
 * so what it holds unwritten stays within its write limit; then the peer
 * reads, and every byte comes back in order. Catches a server that
 * buffers without bound, or that fails the connection (-ENOBUFS) instead
 * of pushing back. */
static void test_back_pressure(void **state) {
  (void)state;
  sh_system *sys = net_env(2, 0);
  echo_reset(BP_LIMIT);
  sh_netaddr at;
  sh_channel_opts o = {.write_high = BP_HIGH, .write_limit = BP_LIMIT};
  sh_tcp_server *srv = serve(sys, &echo_class, &o, &at);
  int fd = raw_connect(&at, 64 << 10);
  uint64_t sent = 0, received = 0;
  /* Writing only, until the socket took nothing for a while. */
  for (int idle = 0; sent < BP_TOTAL && idle < 5;) {
    if (bp_push(fd, &sent)) {
      idle = 0;
    } else {
      idle++;
      bp_wait(fd, true);
    }
  }
  assert_true(atomic_load(&g_max_pending) <= BP_LIMIT);
  /* Then reading everything, ending our side once all was sent. */
  bool shut = false;
  while (bp_pull(fd, &received)) {
    while (bp_push(fd, &sent)) {
    }
    if (sent == BP_TOTAL && !shut) shut = shutdown(fd, SHUT_WR) == 0;
    bp_wait(fd, sent < BP_TOTAL);
  }
  close(fd);
  assert_int_equal(received, BP_TOTAL);
  size_t max = atomic_load(&g_max_pending);
  assert_true(max <= BP_LIMIT);
  assert_true(max >= BP_HIGH); /* the watermark was reached: the test pushed */
  wait_server_idle(srv);
  th_end_exact(sys);
}

/* ---- accept without descriptors -------------------------------------------------------------- */

/* The first accept finds no descriptor (the fault point): the acceptor
 * counts the refusal, backs off and serves the waiting connection later.
 * Catches an acceptor that gives up (the connection hangs: watchdog), or
 * one that drops the waiting connection. */
static void test_accept_out_of_descriptors(void **state) {
  (void)state;
  sh_system *sys = net_env(2, 0);
  echo_reset(0);
  sh_netaddr at;
  sh_tcp_server *srv = serve(sys, &echo_class, NULL, &at);
  assert_int_equal(fiu_enable("sh/net/accept", 1, NULL, FIU_ONETIME), 0);
  raw_echo_round(&at, 5000);
  fiu_disable("sh/net/accept");
  assert_true(server_stats(srv).refused >= 1);
  assert_int_equal(server_stats(srv).accepted, 1);
  wait_server_idle(srv);
  th_end_exact(sys);
}

/* ---- steady state ------------------------------------------------------------------------------ */

static uint64_t pool_mallocs(const sh_system *sys) {
  sh_stats st;
  sh_system_stats(sys, &st);
  return st.pool_mallocs;
}

static void echo_messages(int fd, int n) {
  uint8_t out[64], in[64];
  for (int i = 0; i < n; i++) {
    memset(out, i, sizeof(out));
    raw_send_all(fd, out, sizeof(out));
    assert_true(raw_recv_n(fd, in, sizeof(in)));
    assert_memory_equal(in, out, sizeof(out));
  }
}

/* After a warm-up, echoing 1000 more messages on the same connection
 * takes nothing from malloc through the pools: pages, messages, stacks
 * and records come back to the worker's pools and are reused. Catches a
 * per-message allocation that is never given back, or a pool that does
 * not keep what it got back. */
static void test_steady_state_no_pool_malloc(void **state) {
  (void)state;
  sh_system *sys = net_env(2, 0);
  echo_reset(0);
  sh_netaddr at;
  serve(sys, &echo_class, NULL, &at);
  int fd = raw_connect(&at, 0);
  echo_messages(fd, 300);
  th_sleep_ms(10);
  uint64_t before = pool_mallocs(sys);
  echo_messages(fd, 1000);
  th_sleep_ms(10);
  uint64_t after = pool_mallocs(sys);
  close(fd);
  th_end_exact(sys);
  if (after != before) fprintf(stderr, "pool_mallocs grew by %llu\n", (unsigned long long)(after - before));
  assert_int_equal(after, before);
}

/* ---- fallback_reply: a stack without a result still answers ---------------------- */

/* 't': throws -EIO; 'n': returns no result; anything else: echoes itself. */
static sh_yield fallback_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  sh_bytes *in = sh_stack_msg_as(st, sh_bytes);
  uint8_t c = 0;
  sh_buf_peek(&in->buf, 0, &c, 1);
  if (c == 't') return sh_throw(st, -EIO);
  if (c == 'n') return sh_return(st, NULL);
  return sh_return(st, &sh_bytes_new(&c, 1)->hdr);
}

static const sh_actor_class fallback_class = {
    .name = "fallback", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR, .channel = fallback_channel};

/* 'E' and the error's number as one byte. */
static sh_msg *fallback_of(sh_channel *ch, int error) {
  (void)ch;
  uint8_t b[2] = {'E', (uint8_t)-error};
  return &sh_bytes_new(b, 2)->hdr;
}

static void expect_bytes(int fd, const char *want, size_t n) {
  char got[8] = {0};
  assert_true(n <= sizeof(got));
  assert_true(raw_recv_n(fd, got, n));
  assert_memory_equal(got, want, n);
}

static void test_fallback_reply_answers_throw_and_nothing(void **state) {
  (void)state;
  sh_system *sys = net_env(2, 0);
  sh_channel_opts o = {.fallback_reply = fallback_of};
  sh_netaddr at;
  sh_tcp_server *srv = serve(sys, &fallback_class, &o, &at);
  int fd = raw_connect(&at, 0);
  /* One request per round trip: each read is one request. */
  raw_send_all(fd, "a", 1);
  expect_bytes(fd, "a", 1);
  raw_send_all(fd, "t", 1);
  expect_bytes(fd, "E\x05", 2); /* -EIO, and the channel stays open: */
  raw_send_all(fd, "n", 1);
  expect_bytes(fd, "E\x00", 2);
  raw_send_all(fd, "b", 1);
  expect_bytes(fd, "b", 1);
  assert_int_equal(server_stats(srv).open, 1);
  close(fd);
  wait_server_idle(srv);
  th_end_exact(sys);
}

int main(void) {
  fiu_init(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_echo_between_actors),
      cmocka_unit_test(test_fallback_reply_answers_throw_and_nothing),
      cmocka_unit_test(test_echo_raw_half_close_and_reset),
      cmocka_unit_test(test_back_pressure),
      cmocka_unit_test(test_accept_out_of_descriptors),
      cmocka_unit_test(test_steady_state_no_pool_malloc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
