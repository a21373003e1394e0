/*
 * TCP streams checked against a reference, not hand-picked asserts. A few
 * connections each carry a drawn amount of data both ways, from nothing to
 * far past the fake network's 64 KiB window, the channel's 64 KiB high
 * watermark, a read event's 16 pages and a flush's 16 writes of 16 pages
 * (as little as a byte each: a buffer filled by moves); written in drawn
 * sizes (sh_channel_write, sh_channel_send) with drawn pauses, read by
 * stacks that pause at a drawn pace, over drawn buffers (a window of a few
 * bytes, or of megabytes) and channel limits. Each side ends its stream by
 * a shutdown, a close after its last byte, or a close at a drawn point.
 *
 * The reference (netref.h), per direction: byte k of the stream is a
 * function of the connection, the direction and k, so
 * the receiver checks every byte as it reads it (the run fails at the
 * first wrong one, naming the connection, offset, expected and got); a
 * write's outcome is predicted (-ENOBUFS exactly past write_limit); each
 * side's channel hears OPEN once, EOF at most once, CLOSED once and
 * nothing after it; a receiver that read the end of stream and closed
 * cleanly got exactly what the sender committed (what its writes took,
 * less what its own close dropped); and without faults a connection whose
 * two sides shut down ends cleanly with every byte across.
 * net_accept does the connects that fail or are closed at once.
 */
#include <stdatomic.h>
#include <string.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#include "netref.h"

#define MAX_CONNS 5
#define HEADER 4u
#define MAGIC 0x53480000u
#define BURST 8u
/* A long burst writes a few bytes at a time: more pages than one flush
 * writes (16 writes of 16), each a page of its own. */
#define LONG_BURST 1000u
#define TINY 16u

enum { CLIENT = 0, SERVER = 1 }; /* side w writes direction w */
enum { END_SHUT, END_FLUSH, END_ABORT };

typedef struct side {
  /* the plan (setup) */
  uint64_t planned, abort_at;
  uint32_t end, chunk_max, pause64, read_pause64;
  int sndbuf, rcvbuf;
  /* the writer (its channel's actor alone) */
  uint64_t accepted, committed;
  bool ended, cut;
  /* the reader of the other direction, and the channel's events */
  uint64_t received;
  bool bad;
  nr_events ev;
} side;

typedef struct conn {
  uint32_t index;
  side sd[2];
} conn;

/* A server channel: its events, and which connection once its header came. */
typedef struct slot {
  nr_events ev;
  conn *c;
  uint8_t hdr[HEADER];
  uint32_t hdr_got;
} slot;

typedef struct world {
  sh_tcp_server *server;
  sh_netaddr at;
  uint32_t nconns;
  uint32_t server_limit;
  sh_channel_opts copts[MAX_CONNS];
  conn conns[MAX_CONNS];
  slot slots[MAX_CONNS];
  atomic_uint nslots, left;
} world;

static uint32_t key_of(const conn *c, uint32_t dir) { return c->index * 2 + dir + 1; }

/* ---- what a side reads --------------------------------------------------------- */

/* Side `me` reads the other direction's bytes. */
static void take(sh_scn *s, conn *c, side *me, uint32_t dir, const sh_buf *b, size_t from) {
  const char *who = dir == CLIENT ? "c2s of connection" : "s2c of connection";
  SH_SCN_CHECK(s, !me->ev.closed, "%s %u: bytes read after the close", who, c->index);
  if (me->bad) return;
  me->bad = !nr_check(s, b, from, key_of(c, dir), &me->received, who, c->index);
  const side *peer = &c->sd[dir];
  if (!SH_SCN_CHECK(s, me->received <= peer->planned, "%s %u: %llu bytes read, %llu sent", who,
                    c->index, (unsigned long long)me->received,
                    (unsigned long long)peer->planned))
    me->bad = true;
}

/* ---- the writer, the same on both sides -------------------------------------- */

typedef struct wlocals {
  sh_future *f;
  sh_channel *ch;
  conn *c;
  uint32_t who;
  uint32_t n; /* bytes of the send under way */
} wlocals;

enum { W_CONNECTED = 1, W_SENT, W_SLEPT, R_SLEPT };

static sh_bytes *chunk(const conn *c, uint32_t dir, uint64_t at, uint32_t n) {
  return nr_bytes(key_of(c, dir), dir == CLIENT ? MAGIC | c->index : 0, at, n);
}

/* The writer's end: a shutdown, a close after the last byte, or a close now
 * (what the buffer held is dropped, never sent). */
static void end_stream(side *me, sh_channel *ch, bool abort) {
  me->ended = true;
  if (abort) {
    me->committed = me->accepted - sh_channel_pending_bytes(ch);
    sh_channel_close(ch);
  } else if (me->end == END_FLUSH) {
    sh_channel_close_after_flush(ch);
  } else {
    sh_channel_shutdown(ch);
  }
}

/* The next write's size: drawn, or one that fills the write buffer to its
 * limit exactly, or a byte past it. */
static uint32_t next_size(sh_scn *s, const side *me, sh_channel *ch, uint32_t limit) {
  uint64_t n = 1 + sh_scn_below(s, me->chunk_max), left = me->planned - me->accepted;
  size_t pending = sh_channel_pending_bytes(ch);
  if (pending < limit && sh_scn_below(s, 8) == 0) n = limit - pending + sh_scn_below(s, 2);
  if (me->end == END_ABORT && me->abort_at > me->accepted && me->abort_at - me->accepted < left)
    left = me->abort_at - me->accepted;
  return (uint32_t)(n < left ? n : left);
}

/* A write whose outcome is known before: -ENOBUFS exactly when the buffer
 * would pass its limit; -EPIPE only once the peer's end came. False: the
 * writer stops. */
static bool write_one(sh_scn *s, wlocals *l, side *me, uint32_t n, uint32_t limit, bool *full) {
  size_t pending = sh_channel_pending_bytes(l->ch);
  sh_bytes *b = chunk(l->c, l->who, me->accepted, n);
  if (b == NULL) return false;
  int rc = sh_channel_write(l->ch, &b->hdr);
  int want = pending + n > limit ? -ENOBUFS : 0;
  /* The peer's end came and this channel closes after its last byte: the
   * rest of the plan is cut (the reference is what was taken). */
  if (rc == -EPIPE && (me->ev.eof || me->ev.closed)) return me->cut = true, false;
  SH_SCN_CHECK(s, rc == want, "connection %u side %u: write of %u with %zu pending (limit %u): %d",
               l->c->index, l->who, n, pending, limit, rc);
  if (rc == 0) me->accepted += n;
  *full = rc == -ENOBUFS;
  return rc == 0 || rc == -ENOBUFS;
}

/* One step: a burst of writes, then a send that waits for the low
 * watermark, or a pause. */
static sh_yield write_step(sh_scn *s, sh_stack *st, wlocals *l, uint32_t limit) {
  side *me = &l->c->sd[l->who];
  if (me->ev.closed || me->ended) {
    me->cut = !me->ended && me->ev.eof; /* closed after the peer's end: the rest is cut */
    return sh_return(st, NULL);
  }
  bool full = false;
  /* Bounded by LONG_BURST: each turn writes once, or stops. */
  bool tiny = sh_scn_below(s, 4) == 0;
  uint32_t burst = (uint32_t)sh_scn_below(s, tiny ? LONG_BURST : BURST);
  for (uint32_t k = burst; k > 0 && !full; k--) {
    uint32_t n = next_size(s, me, l->ch, limit);
    if (tiny && n > TINY) n = 1 + n % TINY;
    if (n == 0) break;
    if (!write_one(s, l, me, n, limit, &full)) return sh_return(st, NULL);
  }
  bool abort = me->end == END_ABORT && me->accepted >= me->abort_at;
  if (abort || me->accepted == me->planned) {
    end_stream(me, l->ch, abort);
    return sh_return(st, NULL);
  }
  if (full || sh_scn_below(s, 64) < me->pause64) {
    l->f = sh_sleep(st, 1);
    return l->f != NULL ? sh_suspend(st, W_SLEPT) : sh_throw(st, -ENOMEM);
  }
  size_t pending = sh_channel_pending_bytes(l->ch);
  l->n = next_size(s, me, l->ch, limit);
  sh_bytes *b = chunk(l->c, l->who, me->accepted, l->n);
  l->f = b != NULL ? sh_channel_send(st, l->ch, &b->hdr) : NULL;
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  int rc = sh_future_done(l->f) ? sh_future_error(l->f) : 0;
  if (rc == -EPIPE && (me->ev.eof || me->ev.closed)) {
    me->cut = true;
    return sh_return(st, NULL);
  }
  if (pending + l->n > limit) {
    SH_SCN_CHECK(s, rc == -ENOBUFS,
                 "connection %u side %u: a send of %u with %zu pending (limit %u): %d",
                 l->c->index, l->who, l->n, pending, limit, rc);
    l->n = 0;
  }
  me->accepted += l->n;
  return sh_suspend(st, W_SENT);
}

/* After a wait: a failed send means the channel closed (its hook says how). */
static sh_yield write_resume(sh_scn *s, sh_stack *st, wlocals *l, uint32_t limit) {
  side *me = &l->c->sd[l->who];
  if (sh_stack_state(st) == W_SENT && sh_future_failed(l->f) &&
      sh_future_error(l->f) != -ENOBUFS) {
    me->cut = me->ev.eof; /* closed after the peer's end: the rest is cut */
    return sh_return(st, NULL);
  }
  return write_step(s, st, l, limit);
}

/* A reader's pause after what it read, at its side's pace. */
static sh_yield read_pause(sh_scn *s, sh_stack *st, const side *me) {
  wlocals *l = sh_stack_locals(st);
  if (sh_scn_below(s, 64) >= me->read_pause64) return sh_return(st, NULL);
  l->f = sh_sleep(st, 1);
  return l->f != NULL ? sh_suspend(st, R_SLEPT) : sh_return(st, NULL);
}

/* ---- the client: one actor per connection ---------------------------------- */

static conn *conn_of(sh_actor *self) {
  world *wd = sh_scn_state(sh_scn_of(self));
  return &wd->conns[sh_scn_id(self)];
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  wlocals *l = sh_stack_locals(st);
  uint32_t id = sh_scn_id(self);
  switch (sh_stack_state(st)) {
  case SH_START:
    *l = (wlocals){.c = conn_of(self), .who = CLIENT};
    l->f = sh_tcp_connect(st, &wd->at, &wd->copts[id]);
    return l->f != NULL ? sh_suspend(st, W_CONNECTED) : sh_throw(st, -ENOMEM);
  case W_CONNECTED:
    if (sh_future_failed(l->f)) {
      SH_SCN_CHECK(s, false, "connection %u: connect failed: %d", id, sh_future_error(l->f));
      sh_scn_count_down(s, sh_actor_system(self), &wd->left);
      return sh_return(st, NULL);
    }
    l->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    return write_step(s, st, l, wd->copts[id].write_limit);
  default:
    return write_resume(s, st, l, wd->copts[id].write_limit);
  }
}

static sh_yield client_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  conn *c = conn_of(self);
  if (sh_stack_state(st) != SH_START) return sh_return(st, NULL);
  take(s, c, &c->sd[CLIENT], SERVER, &sh_stack_msg_as(st, sh_bytes)->buf, 0);
  return read_pause(s, st, &c->sd[CLIENT]);
}

static void client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch;
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  conn *c = conn_of(self);
  nr_note(s, &c->sd[CLIENT].ev, "client of connection", c->index, ev, error);
  if (ev == SH_CHANNEL_CLOSED) sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class client_class = {
    .name = "stream_client",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(wlocals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = client_notice,
    .channel = client_channel,
    .channel_event = client_event,
};

/* ---- the server: a connection's first bytes name it ------------------------- */

static slot *slot_new(sh_scn *s, sh_channel *ch) {
  world *wd = sh_scn_state(s);
  uint32_t i = atomic_fetch_add(&wd->nslots, 1); /* seq_cst: a count, any order will do */
  if (!SH_SCN_CHECK(s, i < MAX_CONNS, "more server channels than connections")) return NULL;
  sh_channel_set_data(ch, &wd->slots[i]);
  return &wd->slots[i];
}

/* The events of a server channel: its slot's until the header names its
 * connection, then its side's. */
static nr_events *events_of(slot *sl) { return sl->c != NULL ? &sl->c->sd[SERVER].ev : &sl->ev; }

static void server_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  slot *sl = ev == SH_CHANNEL_OPEN ? slot_new(s, ch) : sh_channel_data(ch);
  if (sl == NULL) return;
  nr_note(s, events_of(sl), "server channel", (uint32_t)(sl - wd->slots), ev, error);
  if (ev == SH_CHANNEL_CLOSED) sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

/* Takes header bytes from b; how many. Names the connection once whole. */
static size_t header(sh_scn *s, slot *sl, const sh_buf *b) {
  world *wd = sh_scn_state(s);
  size_t n = sh_buf_peek(b, 0, sl->hdr + sl->hdr_got, HEADER - sl->hdr_got);
  sl->hdr_got += (uint32_t)n;
  if (sl->hdr_got < HEADER) return n;
  uint32_t h = 0;
  for (uint32_t j = 0; j < HEADER; j++) h |= (uint32_t)sl->hdr[j] << (8 * j);
  uint32_t i = h & 0xffffu;
  if (!SH_SCN_CHECK(s, (h & 0xffff0000u) == MAGIC && i < wd->nconns,
                    "server channel %u: header %#x", (uint32_t)(sl - wd->slots), h))
    return n;
  conn *c = &wd->conns[i];
  SH_SCN_CHECK(s, c->sd[SERVER].ev.open == 0, "connection %u: two server channels", i);
  c->sd[SERVER].ev = sl->ev;
  c->sd[SERVER].received = HEADER;
  sl->c = c;
  return n;
}

static sh_yield server_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  wlocals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == R_SLEPT) return sh_return(st, NULL);
  if (sh_stack_state(st) != SH_START) return write_resume(s, st, l, wd->server_limit);
  sh_channel *ch = sh_stack_channel(st);
  slot *sl = sh_channel_data(ch);
  const sh_buf *b = &sh_stack_msg_as(st, sh_bytes)->buf;
  if (sl == NULL) return sh_return(st, NULL);
  if (sl->c != NULL) {
    take(s, sl->c, &sl->c->sd[SERVER], CLIENT, b, 0);
    return read_pause(s, st, &sl->c->sd[SERVER]);
  }
  size_t used = header(s, sl, b);
  if (sl->c == NULL) return sh_return(st, NULL);
  /* Named: this stack writes the connection's answer while others read. */
  conn *c = sl->c;
  take(s, c, &c->sd[SERVER], CLIENT, b, used);
  if (c->sd[SERVER].sndbuf != 0) sh_channel_setopt(ch, SH_SO_SNDBUF, c->sd[SERVER].sndbuf);
  if (c->sd[SERVER].rcvbuf != 0) sh_channel_setopt(ch, SH_SO_RCVBUF, c->sd[SERVER].rcvbuf);
  *l = (wlocals){.c = c, .who = SERVER, .ch = ch};
  return write_step(s, st, l, wd->server_limit);
}

static const sh_actor_class server_class = {
    .name = "stream_server",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(wlocals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .channel = server_channel,
    .channel_event = server_event,
};

/* ---- the plan --------------------------------------------------------------- */

/* Sizes around the limits that cut a stream: a page, a read event's 16
 * pages, the window and the high watermark, and far past them. */
static uint64_t draw_size(sh_scn *s, bool big) {
  static const uint64_t edges[] = {SH_PAGE_DATA, 16u * SH_PAGE_DATA, 65536};
  switch (sh_scn_below(s, 6)) {
  case 0: return 0;
  case 1: return sh_scn_below(s, 200);
  case 2: return edges[sh_scn_below(s, 3)] - 2 + sh_scn_below(s, 5);
  case 3: return sh_scn_below(s, 300000);
  case 4: return big ? 300000 + sh_scn_below(s, 900000) : sh_scn_below(s, 70000);
  default: return sh_scn_below(s, 70000);
  }
}

static void draw_side(sh_scn *s, side *me, uint64_t planned) {
  static const uint32_t chunks[] = {16, 300, SH_PAGE_DATA + 8, 70000};
  static const uint32_t pauses[] = {0, 2, 16};
  static const int bufs[] = {0, 0, 2 << 20, 1};
  me->planned = planned;
  uint32_t e = (uint32_t)sh_scn_below(s, 8);
  me->end = e < 5 ? END_SHUT : e < 7 ? END_FLUSH : END_ABORT;
  me->abort_at = sh_scn_below(s, planned + 1);
  uint32_t k = (uint32_t)sh_scn_below(s, 4);
  me->chunk_max = chunks[planned > 200000 && k < 2 ? k + 2 : k]; /* runs stay short */
  me->pause64 = pauses[sh_scn_below(s, 3)];
  me->read_pause64 = pauses[sh_scn_below(s, 3)];
  me->sndbuf = bufs[sh_scn_below(s, 4)];
  me->rcvbuf = bufs[sh_scn_below(s, 4)];
  /* A small buffer (a segment of a few hundred bytes) only for a small
   * stream: a megabyte through it would take thousands of round trips. */
  bool small_ok = planned < 100000;
  if (me->sndbuf == 1) me->sndbuf = small_ok ? 256 + (int)sh_scn_below(s, 3000) : 0;
  if (me->rcvbuf == 1) me->rcvbuf = small_ok ? 256 + (int)sh_scn_below(s, 3000) : 0;
}

static bool no_barrier(const sh_msg *m) { return (void)m, false; }

/* Limits of a channel; its write limit takes the largest write. */
static void draw_opts(sh_scn *s, sh_channel_opts *o) {
  static const uint32_t highs[] = {512, 4096, 65536};
  static const uint32_t pendings[] = {1, 2, 8, 0};
  o->write_high = highs[sh_scn_below(s, 3)];
  o->write_low = (uint32_t)sh_scn_below(s, o->write_high + 1u);
  o->write_limit = 70000u + (uint32_t)sh_scn_below(s, sh_scn_below(s, 2) ? 70000u : 4u << 20);
  o->read_pages = sh_scn_below(s, 2) ? 1 + (uint32_t)sh_scn_below(s, 16) : 0;
  o->max_stack_inflight = 1 + (uint32_t)sh_scn_below(s, 3);
  if (o->max_stack_inflight > 1) o->stack_barrier = no_barrier;
  o->max_pending_stacks = pendings[sh_scn_below(s, 4)];
}

static void draw_conn(sh_scn *s, world *wd, uint32_t i, bool big) {
  conn *c = &wd->conns[i];
  c->index = i;
  draw_side(s, &c->sd[CLIENT], HEADER + draw_size(s, big));
  draw_side(s, &c->sd[SERVER], draw_size(s, big));
  sh_channel_opts *o = &wd->copts[i];
  draw_opts(s, o);
  uint32_t n = 0;
  const side *me = &c->sd[CLIENT];
  if (me->sndbuf != 0) o->sockopts[n++] = (sh_sockopt_value){SH_SO_SNDBUF, me->sndbuf};
  if (me->rcvbuf != 0) o->sockopts[n++] = (sh_sockopt_value){SH_SO_RCVBUF, me->rcvbuf};
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->nconns = 1 + (uint32_t)sh_scn_below(s, MAX_CONNS);
  uint32_t big = (uint32_t)sh_scn_below(s, wd->nconns); /* one connection may be large */
  for (uint32_t i = 0; i < wd->nconns; i++) draw_conn(s, wd, i, i == big);
  sh_channel_opts so = {0};
  draw_opts(s, &so);
  wd->server_limit = so.write_limit;
  atomic_store(&wd->left, 2 * wd->nconns);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  const sh_scn_arg arg = {s, 0};
  int rc = sh_tcp_serve(sys, &any, &server_class, (void *)&arg, SH_SPAWN_PER_WORKER, &so,
                        &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) rc = sh_scn_spawn_each(s, sys, &client_class, wd->nconns, SH_SCN_EACH_KICK, NULL);
  return rc;
}

/* ---- the reference, after the run ------------------------------------------- */

/* What the writer of direction dir committed: -1 when a failure's close
 * dropped an unknown part of it. */
static int64_t committed(const side *tx) {
  if (tx->ended && tx->end == END_ABORT && tx->accepted >= tx->abort_at)
    return (int64_t)tx->committed;
  return tx->ev.closed && tx->ev.err != 0 ? -1 : (int64_t)tx->accepted;
}

static void verify_dir(sh_scn *s, const conn *c, uint32_t dir) {
  const side *tx = &c->sd[dir], *rx = &c->sd[1 - dir];
  const char *name = dir == CLIENT ? "c2s" : "s2c";
  unsigned long long got = rx->received;
  SH_SCN_CHECK(s, got <= tx->accepted, "connection %u %s: %llu bytes read, %llu written",
               c->index, name, got, (unsigned long long)tx->accepted);
  /* It read the end of stream and closed cleanly, on its own. */
  bool clean = rx->ev.eof && rx->ev.closed && rx->ev.err == 0;
  clean = clean && !(rx->ended && rx->end != END_SHUT);
  int64_t want = committed(tx);
  if (clean && want >= 0)
    SH_SCN_CHECK(s, got == (uint64_t)want,
                 "connection %u %s: %llu bytes before a clean end, %lld committed", c->index,
                 name, got, (long long)want);
  if (sh_scn_faulty(s) || tx->end != END_SHUT || rx->end != END_SHUT) return;
  /* Only a client's writer can be cut: a server's runs in a channel
   * stack, which keeps its channel open. */
  bool whole = tx->accepted == tx->planned || (tx->cut && dir == CLIENT);
  SH_SCN_CHECK(s, clean && tx->ev.err == 0 && whole,
               "connection %u %s: %llu of %llu bytes written, %llu read, eof %d, errors %d %d",
               c->index, name, (unsigned long long)tx->accepted,
               (unsigned long long)tx->planned, got, rx->ev.eof, tx->ev.err, rx->ev.err);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  for (uint32_t i = 0; i < wd->nconns; i++) {
    verify_dir(s, &wd->conns[i], CLIENT);
    verify_dir(s, &wd->conns[i], SERVER);
  }
  if (wd->server == NULL) return;
  sh_tcp_stats ts;
  sh_tcp_server_stats(wd->server, &ts);
  SH_SCN_CHECK_EQ(s, ts.open, 0, "server channels open after shutdown");
  if (!sh_scn_faulty(s)) SH_SCN_CHECK_EQ(s, ts.accepted, wd->nconns, "connections accepted");
}

static const sh_scenario net_stream = {
    .name = "net_stream",
    .summary = "TCP streams both ways, drawn sizes, pauses and ends, every byte checked",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_stream);
