/*
 * A delimited protocol over TCP, framed with sh_buf_find, every byte-buffer
 * call checked against a flat reference (bufref.h). Each connection
 * carries a header (its number) and then records of drawn sizes (empty,
 * a byte, around a page, up to 9,000 bytes), each ended by a newline that
 * no record holds. The client writes the stream in drawn sizes with
 * pauses, so the read buffer the runtime fills from the socket is cut at
 * drawn places (short reads, segments of drawn sizes) and its pages start
 * wherever the last consume left them.
 *
 * The server's decoder, at each call: checks the read buffer as a whole
 * against the stream's bytes (br_check: sh_buf_len, every span, sh_buf_peek
 * and sh_buf_find at 0, 1, inside, either side of a page boundary, the
 * last byte, the end and past it); then frames it as a real decoder
 * would: sh_buf_find from where its last search stopped, the answer
 * compared with the reference's; each record taken by sh_buf_move into a
 * message (pages relinked) or by sh_buf_peek and sh_buf_consume, the
 * newline consumed. Each record a channel stack gets is checked whole
 * (its number, its bytes, br_check again over the moved pages), and now
 * and then churned (br_churn: append, move in drawn pieces, consume,
 * clear). Without faults every record arrives once and in order, and both
 * sides close cleanly.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#include "bufref.h"
#include "netref.h"

#define MAX_CONNS 3
#define MAX_RECS 48
#define REC_MAX 9000u
#define BODY_MAX (40u << 10) /* a connection's records stop growing past this */
#define BODY_CAP (BODY_MAX + REC_MAX + 1)
#define HEADER 4u
#define MAGIC 0x46520000u
#define DELIM 0x0Au

typedef struct conn {
  uint32_t index, nrec, chunk_max, pause64;
  uint32_t ends[MAX_RECS]; /* offset of each record's newline in the body */
  size_t body_len;
  uint8_t body[BODY_CAP]; /* the stream after its header: the reference */
  uint32_t got;           /* records the server's stacks checked */
  bool bad;
  nr_events cev;          /* the client's channel */
} conn;

/* A server channel: its events, and its connection once the header came. */
typedef struct slot {
  sh_scn *s;
  nr_events ev;
  conn *c;
} slot;

typedef struct world {
  sh_tcp_server *server;
  sh_netaddr at;
  uint32_t nconns;
  conn conns[MAX_CONNS];
  slot slots[MAX_CONNS];
  atomic_uint nslots, left;
} world;

/* ---- the stream -------------------------------------------------------------- */

static uint32_t rec_len(sh_scn *s) {
  switch (sh_scn_below(s, 8)) {
  case 0: return 0;
  case 1: return 1 + (uint32_t)sh_scn_below(s, 8);
  case 2: case 3: return 9 + (uint32_t)sh_scn_below(s, 200);
  case 4: return SH_PAGE_DATA - 2 + (uint32_t)sh_scn_below(s, 5);
  case 5: return 200 + (uint32_t)sh_scn_below(s, 3000);
  default: return 3000 + (uint32_t)sh_scn_below(s, REC_MAX - 3000 + 1);
  }
}

/* Records of drawn sizes, each byte a function of its offset (never the
 * newline), each ended by a newline. */
static void plan(sh_scn *s, conn *c) {
  uint32_t want = 1 + (uint32_t)sh_scn_below(s, MAX_RECS);
  size_t at = 0;
  for (uint32_t r = 0; r < want && at <= BODY_MAX; r++) { /* bounded by MAX_RECS */
    uint32_t n = rec_len(s);
    for (uint32_t k = 0; k < n; k++, at++) {
      uint8_t b = nr_pattern(7u + c->index, at);
      c->body[at] = b == DELIM ? (uint8_t)(b ^ 0x80u) : b;
    }
    c->body[at] = DELIM;
    c->ends[c->nrec++] = (uint32_t)at++;
  }
  c->body_len = at;
  static const uint32_t chunks[] = {7, 300, 5000, 20000};
  c->chunk_max = chunks[sh_scn_below(s, 4)];
  c->pause64 = (uint32_t)sh_scn_below(s, 8);
}

static size_t rec_start(const conn *c, uint32_t r) { return r == 0 ? 0 : c->ends[r - 1] + 1u; }

/* ---- the server's decoder ------------------------------------------------------- */

typedef struct fstate {
  slot *sl;
  size_t at;      /* the body offset of the read buffer's first byte */
  size_t scanned; /* bytes at its head known to hold no newline */
  uint32_t rec;   /* the next record */
} fstate;

/* The header names the connection: false while it is not whole. */
static bool header(sh_scn *s, sh_pctx *c, fstate *fs, sh_buf *in) {
  world *wd = sh_scn_state(s);
  if (sh_buf_len(in) < HEADER) return false;
  uint8_t h[HEADER];
  uint32_t v = 0;
  SH_SCN_CHECK(s, sh_buf_peek(in, 0, h, HEADER) == HEADER, "a header's peek came short");
  for (uint32_t j = 0; j < HEADER; j++) v |= (uint32_t)h[j] << (8 * j);
  sh_buf_consume(in, HEADER);
  fs->sl = sh_channel_data(sh_pctx_channel(c));
  if (!SH_SCN_CHECK(s, (v & 0xffff0000u) == MAGIC && (v & 0xffffu) < wd->nconns && fs->sl != NULL,
                    "server channel: header %#x", v))
    return false;
  fs->sl->c = &wd->conns[v & 0xffffu];
  return true;
}

/* Record fs->rec, n bytes at the head of in, as a message (NULL: out of
 * memory): its pages moved, or its bytes peeked and consumed. */
static sh_bytes *take_record(sh_scn *s, sh_buf *in, size_t n) {
  sh_bytes *m = NULL;
  if (sh_scn_below(s, 2) == 0) {
    m = sh_bytes_new(NULL, 0);
    if (m != NULL && sh_buf_move(&m->buf, in, n) != 0) sh_msg_free(&m->hdr), m = NULL;
  } else {
    uint8_t *p = malloc(n + 1);
    size_t got = p != NULL ? sh_buf_peek(in, 0, p, n) : 0;
    SH_SCN_CHECK(s, p == NULL || got == n, "a record's peek: %zu of %zu bytes", got, n);
    m = p != NULL ? sh_bytes_new(p, n) : NULL;
    if (m != NULL) sh_buf_consume(in, n);
    free(p);
  }
  return m;
}

/* Frames what is whole; leaves a partial record for the next call. */
static int frame_decode(sh_pctx *c, sh_buf *in) {
  fstate *fs = sh_pctx_state(c);
  slot *sl = sh_channel_data(sh_pctx_channel(c));
  if (sl == NULL) return -EPROTO; /* data before OPEN: the hook sets it there */
  sh_scn *s = sl->s;
  if (fs->sl == NULL && !header(s, c, fs, in)) return 0;
  conn *k = sl->c;
  size_t len = sh_buf_len(in);
  if (k->bad || !SH_SCN_CHECK(s, fs->at + len <= k->body_len,
                              "connection %u: %zu bytes past the stream's %zu", k->index,
                              fs->at + len, k->body_len))
    return k->bad = true, 0;
  if (!br_check(s, in, k->body + fs->at, len, DELIM, "read buffer of connection", k->index))
    return k->bad = true, 0;
  /* Bounded by the records of the stream: each turn takes one, or stops. */
  while (fs->rec < k->nrec) {
    const uint8_t *ref = k->body + fs->at;
    int64_t e = sh_buf_find(in, fs->scanned, DELIM);
    int64_t want = br_find(ref, sh_buf_len(in), fs->scanned, DELIM);
    if (!SH_SCN_CHECK(s, e == want, "connection %u: record %u's newline from %zu: %lld, want %lld",
                      k->index, fs->rec, fs->scanned, (long long)e, (long long)want))
      return k->bad = true, 0;
    if (e < 0) {
      fs->scanned = sh_buf_len(in);
      break;
    }
    sh_bytes *m = take_record(s, in, (size_t)e);
    if (m == NULL) return -ENOMEM;
    sh_buf_consume(in, 1); /* the newline */
    sh_msg_set_id(&m->hdr, fs->rec++);
    fs->at += (size_t)e + 1;
    fs->scanned = 0;
    int rc = sh_pctx_fire(c, &m->hdr);
    if (rc != 0) return rc;
  }
  return 0;
}

static const sh_handler frame_handler = {
    .name = "frames", .state_size = sizeof(fstate), .decode = frame_decode};

/* ---- the server's actor --------------------------------------------------------- */

static sh_yield server_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  slot *sl = sh_channel_data(sh_stack_channel(st));
  conn *k = sl->c;
  const sh_bytes *m = sh_stack_msg_as(st, sh_bytes);
  uint32_t r = (uint32_t)sh_msg_id(&m->hdr);
  if (k->bad || !SH_SCN_CHECK(s, r == k->got && r < k->nrec,
                              "connection %u: record %u, want %u", k->index, r, k->got))
    return sh_return(st, NULL);
  size_t at = rec_start(k, r), n = k->ends[r] - at;
  k->bad = !br_check(s, &m->buf, k->body + at, n, DELIM, "record of connection", k->index) ||
           (sh_scn_below(s, 4) == 0 &&
            !br_churn(s, k->body + at, n, DELIM, "churned record of connection", k->index));
  k->got++;
  return sh_return(st, NULL);
}

static void server_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  slot *sl = sh_channel_data(ch);
  if (ev == SH_CHANNEL_OPEN) {
    uint32_t i = atomic_fetch_add(&wd->nslots, 1); /* seq_cst: a count, any order will do */
    if (!SH_SCN_CHECK(s, i < MAX_CONNS, "more server channels than connections")) return;
    sl = &wd->slots[i];
    sl->s = s;
    sh_channel_set_data(ch, sl);
  }
  if (sl == NULL) return;
  nr_note(s, &sl->ev, "server channel", (uint32_t)(sl - wd->slots), ev, error);
  if (ev == SH_CHANNEL_CLOSED) sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class server_class = {
    .name = "frames_server",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .channel = server_channel,
    .channel_event = server_event,
};

/* ---- the client: one actor per connection, writing the stream ---------------- */

typedef struct clocals {
  sh_future *f;
  sh_channel *ch;
  size_t sent; /* of the header and the body */
} clocals;

enum { C_CONNECTED = 1, C_SENT, C_SLEPT };

/* n bytes of the stream from `at` (the header first) as a message. */
static sh_bytes *stream_bytes(const conn *k, size_t at, size_t n) {
  uint8_t h[HEADER];
  uint32_t v = MAGIC | k->index;
  for (uint32_t j = 0; j < HEADER; j++) h[j] = (uint8_t)(v >> (8 * j));
  sh_bytes *b = sh_bytes_new(NULL, 0);
  size_t hn = at < HEADER ? (HEADER - at < n ? HEADER - at : n) : 0;
  size_t from = at + hn - HEADER;
  if (b != NULL && (sh_buf_append(&b->buf, h + (at < HEADER ? at : 0), hn) != 0 ||
                    sh_buf_append(&b->buf, k->body + from, n - hn) != 0)) {
    sh_msg_free(&b->hdr);
    b = NULL;
  }
  return b;
}

/* The next write (a send, which waits for the watermark), a pause, or the
 * shutdown after the last byte. */
static sh_yield client_step(sh_scn *s, sh_stack *st, clocals *l, conn *k) {
  size_t total = HEADER + k->body_len;
  if (k->cev.closed) return sh_return(st, NULL);
  if (l->sent == total) {
    sh_channel_shutdown(l->ch);
    return sh_return(st, NULL);
  }
  if (sh_scn_below(s, 64) < k->pause64) {
    l->f = sh_sleep(st, 1);
    return l->f != NULL ? sh_suspend(st, C_SLEPT) : sh_throw(st, -ENOMEM);
  }
  size_t n = 1 + sh_scn_below(s, k->chunk_max);
  /* At most about 64 writes a stream: a run stays cheap. */
  if (n < total / 64) n = total / 64 + sh_scn_below(s, 16);
  if (n > total - l->sent) n = total - l->sent;
  sh_bytes *b = stream_bytes(k, l->sent, n);
  l->f = b != NULL ? sh_channel_send(st, l->ch, &b->hdr) : NULL;
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  l->sent += n;
  return sh_suspend(st, C_SENT);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  clocals *l = sh_stack_locals(st);
  conn *k = &wd->conns[sh_scn_id(self)];
  switch (sh_stack_state(st)) {
  case SH_START:
    l->f = sh_tcp_connect(st, &wd->at, NULL);
    return l->f != NULL ? sh_suspend(st, C_CONNECTED) : sh_throw(st, -ENOMEM);
  case C_CONNECTED:
    if (sh_future_failed(l->f)) {
      SH_SCN_CHECK(s, false, "connection %u: connect failed: %d", k->index, sh_future_error(l->f));
      sh_scn_count_down(s, sh_actor_system(self), &wd->left); /* no client channel */
      sh_scn_count_down(s, sh_actor_system(self), &wd->left); /* nor a server's */
      return sh_return(st, NULL);
    }
    l->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    return client_step(s, st, l, k);
  case C_SENT:
    if (sh_future_failed(l->f)) return sh_return(st, NULL); /* closed: its hook says why */
    return client_step(s, st, l, k);
  default:
    return client_step(s, st, l, k);
  }
}

static sh_yield client_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  SH_SCN_CHECK(s, false, "client %u: the server sent bytes", sh_scn_id(self));
  return sh_return(st, NULL);
}

static void client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch;
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  conn *k = &wd->conns[sh_scn_id(self)];
  nr_note(s, &k->cev, "client of connection", k->index, ev, error);
  if (ev == SH_CHANNEL_CLOSED) sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class client_class = {
    .name = "frames_client",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(clocals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = client_notice,
    .channel = client_channel,
    .channel_event = client_event,
};

/* ---- the run ------------------------------------------------------------------ */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->nconns = 1 + (uint32_t)sh_scn_below(s, MAX_CONNS);
  atomic_store(&wd->left, 2 * wd->nconns);
  for (uint32_t i = 0; i < wd->nconns; i++) {
    wd->conns[i].index = i;
    plan(s, &wd->conns[i]);
  }
  sh_channel_opts o = {.handlers = {&frame_handler}, .nhandlers = 1};
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  const sh_scn_arg arg = {s, 0};
  int rc = sh_tcp_serve(sys, &any, &server_class, (void *)&arg, SH_SPAWN_PER_WORKER, &o,
                        &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) rc = sh_scn_spawn_each(s, sys, &client_class, wd->nconns, SH_SCN_EACH_KICK, NULL);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (sh_scn_faulty(s)) return;
  for (uint32_t i = 0; i < wd->nconns; i++) {
    const conn *k = &wd->conns[i];
    SH_SCN_CHECK(s, k->got == k->nrec, "connection %u: %u of %u records", i, k->got, k->nrec);
    SH_SCN_CHECK(s, k->cev.closed && k->cev.err == 0, "client of connection %u: closed %d error %d",
                 i, k->cev.closed, k->cev.err);
    const slot *sl = &wd->slots[i];
    SH_SCN_CHECK(s, sl->ev.closed && sl->ev.err == 0, "server channel %u: closed %d error %d", i,
                 sl->ev.closed, sl->ev.err);
  }
}

static const sh_scenario net_frames = {
    .name = "net_frames",
    .summary = "newline-framed records decoded with sh_buf_find, every sh_buf call checked",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_frames);
