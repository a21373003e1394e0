/*
 * TCP echo over channels, end to end: a server (an acceptor and a
 * connection actor per worker) echoes every byte; a client actor opens
 * connections, sends a drawn number of bytes on each in drawn chunk sizes,
 * closes its sending side and checks what comes back.
 *
 * Invariants, per connection: the bytes that came back are a prefix of
 * what was sent, in order; and either all of them came back and the
 * channel closed cleanly, or the channel ended with an error the client
 * heard (a reset, in a run with network faults). Without faults every
 * connection completes. The server never holds more than its write limit
 * for a connection (back-pressure), and after shutdown it has no channel
 * left open.
 *
 *   net_echo         a few connections, up to 64 KiB each, small watermarks
 *   net_crowd        48 connections opened at once, small payloads
 *   net_slow_reader  the client reads slowly: the server's writes wait for
 *                    its buffer to drain, and it stops reading meanwhile
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#define MAX_CONNS 64
#define CHUNK_MAX 6000u
#define SERVER_HIGH 4096u
#define SERVER_LIMIT (256u << 10)

typedef struct conn {
  uint32_t index;
  uint64_t bytes; /* to send */
  uint64_t sent, received;
  bool bad, closed;
  int error;
} conn;

typedef struct world {
  sh_tcp_server *server;
  sh_netaddr at;
  const sh_addr *client;
  uint32_t nconns;
  bool slow;
  conn conns[MAX_CONNS];
  atomic_uint left;
} world;

static uint8_t pattern(const conn *c, uint64_t off) { return (uint8_t)(off * 7u + c->index * 13u); }

/* ---- the server --------------------------------------------------------- */

typedef struct echo_locals {
  sh_future *f;
} echo_locals;

static sh_yield echo_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
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
    SH_SCN_CHECK(s, sh_channel_pending_bytes(ch) <= SERVER_LIMIT,
                 "a connection buffers %zu bytes, past its limit", sh_channel_pending_bytes(ch));
    return sh_suspend(st, 1);
  }
  if (sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
  return sh_return(st, NULL);
}

static const sh_actor_class echo_class = {
    .name = "echo_server",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(echo_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .channel = echo_channel,
};

/* ---- the client ------------------------------------------------------------ */

typedef struct job_locals {
  sh_future *f;
  sh_channel *ch;
  conn *c;
} job_locals;

enum { J_CONNECTED = 1, J_SENT, R_SLEPT };

static void conn_end(sh_actor *self, conn *c, int error) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  if (!SH_SCN_CHECK(s, !c->closed, "connection %u ended twice", c->index)) return;
  c->closed = true;
  c->error = error;
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static sh_yield send_next(sh_stack *st, sh_scn *s, job_locals *l) {
  conn *c = l->c;
  if (c->closed) return sh_return(st, NULL);
  if (c->sent == c->bytes) {
    sh_channel_shutdown(l->ch);
    return sh_return(st, NULL);
  }
  uint8_t buf[CHUNK_MAX];
  uint64_t n = 1 + sh_scn_rand(s) % CHUNK_MAX;
  if (n > c->bytes - c->sent) n = c->bytes - c->sent;
  for (uint64_t i = 0; i < n; i++) buf[i] = pattern(c, c->sent + i);
  sh_bytes *b = sh_bytes_new(buf, n);
  l->f = b != NULL ? sh_channel_send(st, l->ch, &b->hdr) : NULL;
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  c->sent += n;
  return sh_suspend(st, J_SENT);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  job_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    l->c = &wd->conns[sh_scn_go_n(st)];
    /* A slow reader also reads little at a time. */
    l->f = sh_tcp_connect(st, &wd->at, &(sh_channel_opts){.read_pages = wd->slow ? 1 : 0});
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, J_CONNECTED);
  case J_CONNECTED:
    if (sh_future_failed(l->f)) {
      int e = sh_future_error(l->f);
      SH_SCN_CHECK(s, sh_scn_faulty(s), "connect %u failed: %d", l->c->index, e);
      conn_end(self, l->c, e);
      return sh_return(st, NULL);
    }
    l->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    sh_channel_set_data(l->ch, l->c);
    return send_next(st, s, l);
  case J_SENT:
    /* A failed send: the channel closed, and its close tells the rest. */
    if (sh_future_failed(l->f)) return sh_return(st, NULL);
    return send_next(st, s, l);
  }
  return sh_throw(st, -EPROTO);
}

static void check_bytes(conn *c, const sh_buf *b) {
  const uint8_t *p;
  size_t off = 0, n;
  while ((n = sh_buf_span(b, off, &p)) > 0) {
    for (size_t i = 0; i < n; i++)
      if (p[i] != pattern(c, c->received + off + i)) c->bad = true;
    off += n;
  }
  c->received += off;
}

typedef struct reader_locals {
  sh_future *f;
} reader_locals;

static sh_yield client_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  reader_locals *l = sh_stack_locals(st);
  /* A slow reader takes a while over each read. */
  if (wd->slow && sh_stack_state(st) == SH_START) {
    l->f = sh_sleep(st, 1);
    if (l->f != NULL) return sh_suspend(st, R_SLEPT);
  }
  conn *c = sh_channel_data(sh_stack_channel(st));
  if (c != NULL) check_bytes(c, &sh_stack_msg_as(st, sh_bytes)->buf);
  return sh_return(st, NULL);
}

static void client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  conn *c = sh_channel_data(ch);
  if (ev == SH_CHANNEL_CLOSED && c != NULL) conn_end(self, c, error);
}

static const sh_actor_class client_class = {
    .name = "echo_client",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(job_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = client_notice,
    .channel = client_channel,
    .channel_event = client_event,
};

/* ---- the runs -------------------------------------------------------------------- */

static int start(sh_scn *s, sh_system *sys, uint32_t nconns, uint64_t max_bytes, bool slow) {
  world *wd = sh_scn_state(s);
  wd->nconns = nconns;
  wd->slow = slow;
  atomic_store(&wd->left, nconns);
  for (uint32_t i = 0; i < nconns; i++)
    wd->conns[i] = (conn){.index = i, .bytes = 1 + sh_scn_rand(s) % max_bytes};
  sh_channel_opts o = {.write_high = SERVER_HIGH, .write_limit = SERVER_LIMIT};
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  int rc = sh_tcp_serve(sys, &any, &echo_class, &(sh_scn_arg){s, 0}, SH_SPAWN_PER_WORKER, &o,
                        &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &client_class, 0, 1, &wd->client);
  for (uint32_t i = 0; rc == 0 && i < nconns; i++) rc = sh_scn_kick_n(wd->client, i);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  for (uint32_t i = 0; i < wd->nconns; i++) {
    conn *c = &wd->conns[i];
    SH_SCN_CHECK(s, !c->bad, "connection %u: a byte came back wrong or out of order", i);
    SH_SCN_CHECK(s, c->received <= c->sent, "connection %u: %llu bytes back, %llu sent", i,
                 (unsigned long long)c->received, (unsigned long long)c->sent);
    if (c->error == 0 && c->closed)
      SH_SCN_CHECK(s, c->received == c->bytes && c->sent == c->bytes,
                   "connection %u closed cleanly with %llu of %llu bytes back", i,
                   (unsigned long long)c->received, (unsigned long long)c->bytes);
    if (!sh_scn_faulty(s))
      SH_SCN_CHECK(s, c->closed && c->error == 0, "connection %u: closed %d error %d", i,
                   c->closed, c->error);
  }
  if (wd->server == NULL) return;
  sh_tcp_stats ts;
  sh_tcp_server_stats(wd->server, &ts);
  SH_SCN_CHECK_EQ(s, ts.open, 0, "server channels open after shutdown");
  if (!sh_scn_faulty(s)) SH_SCN_CHECK_EQ(s, ts.accepted, wd->nconns, "connections accepted");
}

static int setup_echo(sh_scn *s, sh_system *sys) { return start(s, sys, 6, 64u << 10, false); }
static int setup_crowd(sh_scn *s, sh_system *sys) { return start(s, sys, 48, 512, false); }
static int setup_slow(sh_scn *s, sh_system *sys) { return start(s, sys, 2, 200u << 10, true); }

static const sh_scenario net_echo = {
    .name = "net_echo",
    .summary = "TCP echo: drawn sizes and chunks, partial IO, resets; every byte back in order",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup_echo,
    .verify = verify,
};
SH_SCENARIO(net_echo);

static const sh_scenario net_crowd = {
    .name = "net_crowd",
    .summary = "48 clients connect at once to a TCP echo server",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup_crowd,
    .verify = verify,
};
SH_SCENARIO(net_crowd);

static const sh_scenario net_slow_reader = {
    .name = "net_slow_reader",
    .summary = "a client that reads slowly: back-pressure bounds the server's buffers",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup_slow,
    .verify = verify,
};
SH_SCENARIO(net_slow_reader);
