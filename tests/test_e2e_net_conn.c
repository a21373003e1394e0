/*
 * End-to-end tests of connections on the production backend (epoll, real
 * loopback sockets), through the public API only, as a user writes them
 * (the server, raw sockets and helpers: net_fixture.h):
 *   - requests that arrive while the actor's stack sleeps and while it is
 *     idle;
 *   - a close with channel futures inflight and pending (chan_rpc.h);
 *   - the server's inflight limit, barriers and head-of-line ordering
 *     checked by the client from what it receives (chan_rpc.h);
 *   - a refused connect; a connect from an actor that is not an IO actor;
 *     a connect heard after the peer greeted and closed;
 *   - a UDP round trip; sh_stop of an actor that owns a channel.
 * TCP echo, back-pressure, the acceptor, the steady state and fallback
 * replies are test_e2e_net.c's.
 *
 * Each case says what it would catch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* alarm, MSG_NOSIGNAL */
#endif

#include "net_fixture.h"

static void wait_atomic(atomic_uint *v, unsigned want) {
  for (int i = 0; i < 10000 && atomic_load(v) != want; i++) th_sleep_ms(1);
  assert_int_equal(atomic_load(v), want);
}

/* ---- requests while busy and while idle ---------------------------------------------- */

static void raw_rpc_send(int fd, uint64_t id, uint64_t v, uint8_t nap) {
  uint8_t f[RPC_FRAME];
  rpc_frame(f, false, &(rpc){.v = v, .nap = nap}, id);
  raw_send_all(fd, f, sizeof(f));
}

static void raw_rpc_expect(int fd, uint64_t id, uint64_t v) {
  uint8_t f[RPC_FRAME];
  assert_true(raw_recv_n(fd, f, sizeof(f)));
  rpc r;
  bool resp;
  uint64_t got;
  assert_true(rpc_unframe(f, &resp, &r, &got));
  assert_true(resp);
  assert_int_equal(got, id);
  assert_int_equal(r.v, v * 2);
  assert_int_equal(r.running, 1);
}

/* One stack at a time, each sleeping: six requests sent at once arrive
 * while the first sleeps; later ones arrive one by one to an idle actor.
 * Catches requests that arrive during a stack and are never read (a
 * readiness edge lost while busy), and an idle actor not woken. */
static void test_requests_while_busy_and_idle(void **state) {
  (void)state;
  sh_system *sys = net_env(2, 0);
  sh_netaddr at;
  sh_channel_opts o = rpc_server_opts(1, true);
  serve(sys, &rpc_server_class, &o, &at);
  int fd = raw_connect(&at, 0);
  for (uint64_t i = 0; i < 6; i++) raw_rpc_send(fd, i, 100 + i, 20);
  for (uint64_t i = 0; i < 6; i++) raw_rpc_expect(fd, i, 100 + i);
  for (uint64_t i = 6; i < 9; i++) {
    th_sleep_ms(30);
    raw_rpc_send(fd, i, 100 + i, 0);
    raw_rpc_expect(fd, i, 100 + i);
  }
  close(fd);
  wait_atomic(&rpc_srv_closed, 1);
  assert_int_equal(atomic_load(&rpc_started), 9);
  th_end_exact(sys);
}

/* ---- close with futures inflight and pending --------------------------------------- */

static void run_rpc_clients(uint32_t workers, const sh_channel_opts *o, rpc_plan plan,
                            uint32_t clients) {
  sh_system *sys = net_env(workers, (int)clients);
  sh_tcp_server *srv = serve(sys, &rpc_server_class, o, &plan.at);
  for (uint32_t i = 0; i < clients; i++) {
    plan.seed = 0x9e3779b97f4a7c15ull * (i + 1);
    go(th_spawn_on(sys, &rpc_client_class, &plan, (i + 1) % workers));
  }
  assert_int_equal(sh_system_wait(sys), 0);
  wait_server_idle(srv);
  wait_atomic(&rpc_srv_closed, clients);
  wait_atomic(&rpc_ended, atomic_load(&rpc_started));
  th_end_exact(sys);
  assert_int_equal(atomic_load(&rpc_cli_closed), clients);
  assert_int_equal(atomic_load(&rpc_cli_close_error), 0);
}

/* Five asks, two inflight and three pending, then sh_channel_close: each
 * fails once with -ECONNABORTED (at once: the same invocation reads
 * them), the client hears CLOSED once, the server's two stacks end into
 * the closed connection, and every ask is resolved once (asks ==
 * asks_resolved). Catches a future left hanging or failed twice, a
 * pending future the close forgets, a second CLOSED, a server stack whose
 * result is written into a dead channel. */
static void test_close_fails_everything_once(void **state) {
  (void)state;
  sh_channel_opts o = rpc_server_opts(3, false);
  run_rpc_clients(2, &o, (rpc_plan){.mode = RPC_CLOSE}, 1);
  assert_int_equal(atomic_load(&rpc_aborted), RPC_CLOSE_REQS);
  assert_true(atomic_load(&rpc_started) <= 2);
}

/* ---- inflight limit, barriers, head-of-line ----------------------------------------- */

/* The server runs at most 3 stacks per connection, a barrier alone, with
 * drawn naps so they finish out of order; with head-of-line its results
 * leave in request order and the client matches them FIFO. Catches a
 * fourth stack, a barrier sharing its time, a result written out of turn
 * (it would answer another request). */
static void test_barrier_limit_head_of_line(void **state) {
  (void)state;
  sh_channel_opts o = rpc_server_opts(3, true);
  run_rpc_clients(3, &o, (rpc_plan){.mode = RPC_HOL, .reqs = 30, .max_inflight = 3}, 2);
  assert_int_equal(atomic_load(&rpc_answered), 60);
}

/* Without head-of-line results leave as they finish; matched by id, each
 * still answers its own request. */
static void test_barrier_limit_by_id(void **state) {
  (void)state;
  sh_channel_opts o = rpc_server_opts(3, false);
  run_rpc_clients(3, &o, (rpc_plan){.mode = RPC_BY_ID, .reqs = 30, .max_inflight = 3}, 2);
  assert_int_equal(atomic_load(&rpc_answered), 60);
}

/* ---- connect: refused, and from the wrong kind of actor ------------------------------------- */

typedef struct probe_cfg { sh_netaddr to; } probe_cfg;
typedef struct probe { sh_actor base; probe_cfg cfg; } probe;
TH_CFG_INIT(probe_init, probe, probe_cfg);
typedef struct probe_locals { sh_future *f; } probe_locals;

static atomic_int g_connect_error;
static atomic_int g_connect_null;

static sh_yield probe_notice(sh_actor *self, sh_stack *st) {
  probe_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_tcp_connect(st, &((probe *)self)->cfg.to, NULL);
    if (l->f == NULL) {
      atomic_fetch_add(&g_connect_null, 1);
      th_done(self);
      return sh_return(st, NULL);
    }
    return sh_suspend(st, 1);
  }
  atomic_store(&g_connect_error, sh_future_error(l->f));
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class probe_io_class = {
    .name = "probe_io", .size = sizeof(probe), .locals_size = sizeof(probe_locals),
    .kind = SH_IO_ACTOR, .init = probe_init, .notice = probe_notice};
static const sh_actor_class probe_state_class = {
    .name = "probe_state", .size = sizeof(probe), .locals_size = sizeof(probe_locals),
    .kind = SH_STATE_ACTOR, .init = probe_init, .notice = probe_notice};

/* A port bound but not listening refuses: the future fails with
 * -ECONNREFUSED; a state actor may not connect at all (NULL). Catches a
 * refused connect reported as success or never, and a channel made on an
 * actor that can move between workers. */
static void test_connect_refused_and_not_io(void **state) {
  (void)state;
  atomic_store(&g_connect_error, 0);
  atomic_store(&g_connect_null, 0);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = to_sockaddr(&LOOPBACK_ANY);
  socklen_t len = sizeof(sa);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  probe_cfg cfg = {.to = {.ip = LOOPBACK_ANY.ip, .port = ntohs(sa.sin_port)}};
  sh_system *sys = net_env(2, 2);
  go(th_spawn_on(sys, &probe_io_class, &cfg, 1));
  go(th_spawn_on(sys, &probe_state_class, &cfg, 0));
  assert_int_equal(sh_system_wait(sys), 0);
  close(fd);
  th_end_exact(sys);
  assert_int_equal(atomic_load(&g_connect_error), -ECONNREFUSED);
  assert_int_equal(atomic_load(&g_connect_null), 1);
}

/* ---- a connect heard after the peer's greeting and end of stream ------------------------- */

static atomic_int g_greet_eof;

/* Connects, then keeps its worker busy: by the time the worker polls, the
 * peer's greeting and end of stream came, and the one report the connect
 * takes says so. */
static sh_yield greeted_notice(sh_actor *self, sh_stack *st) {
  probe_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_tcp_connect(st, &((probe *)self)->cfg.to, NULL);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    th_sleep_ms(300);
    return sh_suspend(st, 1);
  }
  CHECK(!sh_future_failed(l->f));
  if (sh_future_failed(l->f)) th_done(self);
  return sh_return(st, NULL);
}

static sh_yield greeted_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static void greeted_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch, (void)error;
  if (ev == SH_CHANNEL_EOF) atomic_store(&g_greet_eof, 1);
  if (ev == SH_CHANNEL_CLOSED) th_done(self);
}

static const sh_actor_class greeted_class = {
    .name = "greeted", .size = sizeof(probe), .locals_size = sizeof(probe_locals),
    .kind = SH_IO_ACTOR, .init = probe_init, .notice = greeted_notice,
    .channel = greeted_channel, .channel_event = greeted_event};

/* The peer accepts, greets and closes before the connecting worker looks:
 * the connect's one report carries the end of stream too. The client
 * hears EOF and its channel closes. Catches the end of stream of that
 * report forgotten (a short read of the greeting then waits for a report
 * that never comes). */
static void test_connect_then_greeting_and_eof(void **state) {
  (void)state;
  atomic_store(&g_greet_eof, 0);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = to_sockaddr(&LOOPBACK_ANY);
  socklen_t len = sizeof(sa);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fd, 4), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  probe_cfg cfg = {.to = {.ip = LOOPBACK_ANY.ip, .port = ntohs(sa.sin_port)}};
  sh_system *sys = net_env(2, 1);
  go(th_spawn_on(sys, &greeted_class, &cfg, 1));
  int c = accept(fd, NULL, NULL);
  assert_true(c >= 0);
  raw_send_all(c, "hello", 5);
  close(c);
  close(fd);
  assert_int_equal(sh_system_wait_ms(sys, 5000), 0);
  th_end_exact(sys);
  assert_int_equal(atomic_load(&g_greet_eof), 1);
}

/* ---- UDP ----------------------------------------------------------------------------------- */

typedef struct udp_go { sh_msg hdr; sh_netaddr to; bool ping; } udp_go;
SH_MSG_DEFINE(udp_go, SH_NOTICE, 0);

static sh_netaddr g_udp_ponger; /* written before g_udp_open, read after */
static atomic_int g_udp_open;
static atomic_int g_udp_pongs;

static const char PING[] = "ping", PONG[] = "pong";

/* A ponger opens and publishes its address; a pinger opens and sends. */
static sh_yield udp_notice(sh_actor *self, sh_stack *st) {
  udp_go *g = sh_stack_msg_as(st, udp_go);
  sh_netaddr at = LOOPBACK_ANY;
  sh_channel *ch = NULL;
  int rc = sh_udp_open(self, &at, NULL, &ch);
  CHECK(rc == 0);
  if (rc != 0) return sh_return(st, NULL);
  if (!g->ping) {
    CHECK(sh_channel_local(ch, &g_udp_ponger) == 0 && g_udp_ponger.port != 0);
    atomic_store(&g_udp_open, 1);
    return sh_return(st, NULL);
  }
  sh_datagram *d = sh_datagram_new(&g->to, PING, sizeof(PING));
  CHECK(d != NULL && sh_channel_write(ch, &d->hdr) == 0);
  return sh_return(st, NULL);
}

static bool datagram_is(const sh_datagram *d, const char *what, size_t n) {
  char buf[16] = {0};
  return sh_buf_len(&d->buf) == n && sh_buf_peek(&d->buf, 0, buf, n) == n && memcmp(buf, what, n) == 0;
}

/* The ponger answers a ping to its sender; the pinger ends the run. */
static sh_yield udp_channel(sh_actor *self, sh_stack *st) {
  sh_datagram *d = sh_stack_msg_as(st, sh_datagram);
  CHECK(sh_msg_is(&d->hdr, &sh_datagram_type));
  if (datagram_is(d, PING, sizeof(PING)))
    return sh_return(st, &sh_datagram_new(&d->peer, PONG, sizeof(PONG))->hdr);
  CHECK(datagram_is(d, PONG, sizeof(PONG)));
  CHECK(d->peer.ip == g_udp_ponger.ip && d->peer.port == g_udp_ponger.port);
  atomic_fetch_add(&g_udp_pongs, 1);
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class udp_class = {
    .name = "udp", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR, .notice = udp_notice,
    .channel = udp_channel};

/* Two IO actors on two workers: a datagram there and its answer back,
 * with the sender's address. Catches a datagram lost or mangled between
 * the pipeline and the socket, or a wrong peer address. */
static void test_udp_round_trip(void **state) {
  (void)state;
  atomic_store(&g_udp_open, 0);
  atomic_store(&g_udp_pongs, 0);
  sh_system *sys = net_env(2, 1);
  const sh_addr *ponger = th_spawn_on(sys, &udp_class, NULL, 1);
  const sh_addr *pinger = th_spawn_on(sys, &udp_class, NULL, 0);
  assert_int_equal(sh_notice(ponger, &sh_msg_new(udp_go, .ping = false)->hdr), 0);
  th_wait_for(&g_udp_open, 1);
  assert_int_equal(sh_notice(pinger, &sh_msg_new(udp_go, .to = g_udp_ponger, .ping = true)->hdr), 0);
  assert_int_equal(sh_system_wait(sys), 0);
  th_end_exact(sys);
  assert_int_equal(atomic_load(&g_udp_pongs), 1);
}

/* ---- sh_stop of an actor with a channel ------------------------------------------------------ */

static atomic_int g_stop_connected, g_stop_closed_error, g_stop_order;
enum { ORDER_CLOSED = 1, ORDER_STOPPED = 2 };

typedef struct holder_locals { sh_future *f; } holder_locals;

static sh_yield holder_notice(sh_actor *self, sh_stack *st) {
  holder_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_tcp_connect(st, &((probe *)self)->cfg.to, NULL);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  CHECK(!sh_future_failed(l->f));
  atomic_store(&g_stop_connected, 1);
  return sh_return(st, NULL);
}

static void holder_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)self, (void)ch;
  if (ev != SH_CHANNEL_CLOSED) return;
  CHECK(atomic_load(&g_stop_order) == 0);
  atomic_store(&g_stop_closed_error, error);
  atomic_store(&g_stop_order, ORDER_CLOSED);
}

static void holder_stop(sh_actor *self) {
  (void)self;
  CHECK(atomic_load(&g_stop_order) == ORDER_CLOSED);
  atomic_store(&g_stop_order, ORDER_STOPPED);
}

static const sh_actor_class holder_class = {
    .name = "holder", .size = sizeof(probe), .locals_size = sizeof(holder_locals),
    .kind = SH_IO_ACTOR, .init = probe_init, .notice = holder_notice,
    .channel_event = holder_event, .stop = holder_stop};

/* An actor that holds a connection is stopped: its channel closes with
 * -ESHUTDOWN before its stop hook, the server sees the connection end,
 * and the address refuses sends. Catches a channel that outlives its
 * actor (a leak, a late event into a freed actor) or closes silently. */
static void test_stop_closes_channels(void **state) {
  (void)state;
  atomic_store(&g_stop_connected, 0);
  atomic_store(&g_stop_closed_error, 0);
  atomic_store(&g_stop_order, 0);
  sh_system *sys = net_env(2, 0);
  echo_reset(0);
  probe_cfg cfg;
  sh_tcp_server *srv = serve(sys, &echo_class, NULL, &cfg.to);
  const sh_addr *h = th_spawn_on(sys, &holder_class, &cfg, 1);
  go(h);
  th_wait_for(&g_stop_connected, 1);
  assert_int_equal(sh_stop(h), 0);
  th_wait_for(&g_stop_order, ORDER_STOPPED);
  assert_int_equal(atomic_load(&g_stop_closed_error), -ESHUTDOWN);
  wait_server_idle(srv);
  assert_int_equal(sh_notice(h, &sh_msg_new(go_msg)->hdr), -ESHUTDOWN);
  th_end_exact(sys);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_requests_while_busy_and_idle),
      cmocka_unit_test(test_close_fails_everything_once),
      cmocka_unit_test(test_barrier_limit_head_of_line),
      cmocka_unit_test(test_barrier_limit_by_id),
      cmocka_unit_test(test_connect_refused_and_not_io),
      cmocka_unit_test(test_connect_then_greeting_and_eof),
      cmocka_unit_test(test_udp_round_trip),
      cmocka_unit_test(test_stop_closes_channels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
