/* net_pipe's pipeline stages (pipestage.h). */
#include "pipestage.h"

#include <errno.h>
#include <stdio.h>

#include "netref.h"

enum { IN = 0, OUT = 1 };

/* Per channel and stage (sh_pctx_state, zeroed): MERGE's held bytes and
 * every stage's count of bytes, per direction. */
typedef struct ps_state {
  sh_buf held[2];
  uint64_t bytes[2];
} ps_state;

/* A mark: TAG's extra message, a request or an unasked response. */
typedef struct ps_mark {
  sh_msg hdr;
  uint32_t from;
} ps_mark;
typedef ps_mark ps_late;
static SH_MSG_DEFINE(ps_mark, SH_NOTICE, 0);
static SH_MSG_DEFINE(ps_late, SH_REPLY, 0);

static const char *const kind_names[PS_KINDS] = {"PASS", "XOR",  "SPLIT", "MERGE",
                                                 "TAG",  "DROP", "FAIL"};

sh_buf *ps_body(sh_msg *m) {
  if (m->type == &sh_bytes_type) return &((sh_bytes *)m)->buf;
  if (m->type == &sh_datagram_type) return &((sh_datagram *)m)->buf;
  return NULL;
}

bool ps_is_mark(const sh_msg *m) { return m->type == &ps_mark_type || m->type == &ps_late_type; }

sh_msg *ps_mark_new(const ps_plan *p) {
  sh_msg *m = sh_msg_alloc(&ps_mark_type);
  if (m != NULL) sh_msg_set_id(m, ps_from_tail(p));
  return m;
}

/* The stamp stage i expects on a message in direction dir: the walk of
 * net.h (pipeline.c's order). */
static uint64_t stamp_before(const ps_plan *p, uint32_t i, int dir) {
  if (dir == IN) {
    for (uint32_t j = i; j-- > 0;) /* bounded by i */
      if (p->st[j].in) return j + 1;
    return 0;
  }
  for (uint32_t j = i + 1; j < p->n; j++)
    if (p->st[j].out) return j + 1;
  return ps_from_tail(p);
}

uint64_t ps_tail_stamp(const ps_plan *p) { return stamp_before(p, p->n, IN); }

uint8_t ps_mask(const ps_plan *p) {
  uint8_t m = 0;
  for (uint32_t i = 0; i < p->n; i++)
    if (p->st[i].kind == PS_XOR) m ^= p->st[i].mask;
  return m;
}

int ps_fail_at(const ps_plan *p) {
  for (uint32_t i = 0; i < p->n; i++)
    if (p->st[i].kind == PS_FAIL) return (int)i;
  return -1;
}

/* Passes m on from stage i, stamped. */
static int pass(sh_pctx *c, sh_msg *m, uint32_t i, int dir) {
  sh_msg_set_id(m, i + 1);
  return dir == IN ? sh_pctx_fire(c, m) : sh_pctx_write(c, m);
}

/* Every byte of b ^= mask, through a copy (the pages are read-only to a
 * handler: sh_buf_span gives const bytes). */
static int xor_buf(sh_buf *b, uint8_t mask) {
  sh_buf nb = SH_BUF_INIT;
  uint8_t tmp[512];
  size_t len = sh_buf_len(b);
  /* Bounded by len: each turn copies up to 512 bytes, at least one. */
  for (size_t off = 0; off < len;) {
    size_t k = sh_buf_peek(b, off, tmp, sizeof tmp);
    for (size_t j = 0; j < k; j++) tmp[j] ^= mask;
    if (sh_buf_append(&nb, tmp, k) != 0) {
      sh_buf_clear(&nb);
      return -ENOMEM;
    }
    off += k;
  }
  sh_buf_clear(b);
  *b = nb;
  return 0;
}

/* SPLIT: the first `cut` bytes go on as a message of their own, then the
 * rest. */
static int split(sh_pctx *c, ps_chan *pc, sh_msg *m, uint32_t i, int dir) {
  sh_bytes *b = (sh_bytes *)m;
  size_t cut = (size_t)sh_scn_below(pc->s, sh_buf_len(&b->buf) + 1);
  sh_bytes *first = sh_bytes_new(NULL, 0);
  int rc = first == NULL ? -ENOMEM : sh_buf_move(&first->buf, &b->buf, cut);
  if (rc == 0) rc = pass(c, &first->hdr, i, dir);
  else if (first != NULL) sh_msg_free(&first->hdr);
  if (rc < 0) {
    sh_msg_free(m); /* ours still: only `first` was handed on */
    return rc;
  }
  return pass(c, m, i, dir);
}

/* MERGE: holds the bytes until `param` of them or the stream's last. */
static int merge(sh_pctx *c, ps_chan *pc, sh_msg *m, uint32_t i, int dir) {
  ps_state *st = sh_pctx_state(c);
  sh_bytes *b = (sh_bytes *)m;
  size_t len = sh_buf_len(&b->buf);
  int rc = sh_buf_move(&st->held[dir], &b->buf, len);
  if (rc != 0) {
    sh_msg_free(m);
    return rc;
  }
  st->bytes[dir] += len;
  if (sh_buf_len(&st->held[dir]) < pc->plan->st[i].param && st->bytes[dir] < pc->plan->len) {
    sh_msg_free(m); /* an empty shell: its bytes wait in held */
    return 0;
  }
  rc = sh_buf_move(&b->buf, &st->held[dir], sh_buf_len(&st->held[dir]));
  if (rc != 0) {
    sh_msg_free(m);
    return rc;
  }
  return pass(c, m, i, dir);
}

/* TAG: a mark first (every third an unasked response), then m. */
static int tag(sh_pctx *c, ps_chan *pc, sh_msg *m, uint32_t i) {
  bool late = pc->marks_fired % 3 == 2;
  ps_mark *k = (ps_mark *)sh_msg_alloc(late ? &ps_late_type : &ps_mark_type);
  if (k == NULL) {
    sh_msg_free(m);
    return -ENOMEM;
  }
  k->from = i;
  pc->marks_fired++;
  bool dropped = false;
  for (uint32_t j = i + 1; j < pc->plan->n; j++) dropped |= pc->plan->st[j].kind == PS_DROP;
  if (!late && !dropped) pc->marks_due++;
  int rc = pass(c, &k->hdr, i, IN);
  if (rc < 0) {
    sh_msg_free(m);
    return rc;
  }
  return pass(c, m, i, IN);
}

/* FAIL: the message that takes the stage past `param` bytes (datagrams)
 * fails, and everything after it would; marks pass. */
static int fail(sh_pctx *c, ps_chan *pc, sh_msg *m, uint32_t i, int dir) {
  sh_buf *body = ps_body(m);
  uint64_t units = body == NULL ? 0 : pc->plan->udp ? 1 : sh_buf_len(body);
  if (units > 0 && pc->passed[i] + units > pc->plan->st[i].param) {
    pc->failed = true;
    sh_msg_free(m);
    return pc->plan->fail_err;
  }
  pc->passed[i] += units;
  return pass(c, m, i, dir);
}

static int stage(sh_pctx *c, sh_msg *m, uint32_t i, int dir) {
  ps_chan *pc = sh_channel_data(sh_pctx_channel(c));
  if (pc == NULL) return pass(c, m, i, dir); /* unchecked: verify finds no count */
  const ps_plan *p = pc->plan;
  pc->calls++;
  uint64_t want = stamp_before(p, i, dir);
  SH_SCN_CHECK(pc->s, sh_msg_id(m) == want, "%s: stage %u (%s) %s: a message stamped %llu, "
               "want %llu (0: the head, %u: the tail, else stage + 1)", pc->who, i,
               kind_names[p->st[i].kind], dir == IN ? "in" : "out",
               (unsigned long long)sh_msg_id(m), (unsigned long long)want, p->n + 1);
  bool bytes = m->type == &sh_bytes_type;
  switch (p->st[i].kind) {
  case PS_XOR: {
    sh_buf *body = ps_body(m);
    int rc = body != NULL ? xor_buf(body, p->st[i].mask) : 0;
    if (rc != 0) sh_msg_free(m);
    return rc != 0 ? rc : pass(c, m, i, dir);
  }
  case PS_SPLIT:
    return bytes ? split(c, pc, m, i, dir) : pass(c, m, i, dir);
  case PS_MERGE:
    return bytes ? merge(c, pc, m, i, dir) : pass(c, m, i, dir);
  case PS_TAG:
    return tag(c, pc, m, i);
  case PS_DROP:
    if (!ps_is_mark(m)) return pass(c, m, i, dir);
    pc->marks_dropped++;
    sh_msg_free(m);
    return 0;
  case PS_FAIL:
    return fail(c, pc, m, i, dir);
  default:
    return pass(c, m, i, dir);
  }
}

static void closed(sh_pctx *c, int error, uint32_t i) {
  ps_state *st = sh_pctx_state(c);
  sh_buf_clear(&st->held[IN]);
  sh_buf_clear(&st->held[OUT]);
  ps_chan *pc = sh_channel_data(sh_pctx_channel(c));
  if (pc == NULL) return;
  uint32_t want = pc->plan->n - 1 - pc->closed_calls;
  SH_SCN_CHECK(pc->s, pc->closed_calls < pc->plan->n && i == want,
               "%s: stage %u closed after %u closed calls, want stage %u first", pc->who, i,
               pc->closed_calls, want);
  SH_SCN_CHECK(pc->s, pc->closed_calls == 0 || error == pc->closed_err,
               "%s: stage %u closed with %d, stage above with %d", pc->who, i, error,
               pc->closed_err);
  pc->closed_err = error;
  pc->closed_calls++;
}

/* A callback per index: a handler knows its place from which one runs. */
#define PS_AT(i)                                                                           \
  static int in_##i(sh_pctx *c, sh_msg *m) { return stage(c, m, i, IN); }                 \
  static int out_##i(sh_pctx *c, sh_msg *m) { return stage(c, m, i, OUT); }               \
  static void closed_##i(sh_pctx *c, int error) { closed(c, error, i); }
PS_AT(0) PS_AT(1) PS_AT(2) PS_AT(3) PS_AT(4) PS_AT(5) PS_AT(6) PS_AT(7)
_Static_assert(SH_PIPELINE_MAX == 8, "a callback per index");
static int (*const ins[])(sh_pctx *, sh_msg *) = {in_0, in_1, in_2, in_3,
                                                   in_4, in_5, in_6, in_7};
static int (*const outs[])(sh_pctx *, sh_msg *) = {out_0, out_1, out_2, out_3,
                                                    out_4, out_5, out_6, out_7};
static void (*const closeds[])(sh_pctx *, int) = {closed_0, closed_1, closed_2, closed_3,
                                                  closed_4, closed_5, closed_6, closed_7};

void ps_draw(sh_scn *s, ps_plan *p, uint64_t len, bool udp) {
  *p = (ps_plan){.n = 1 + (uint32_t)sh_scn_below(s, 6), .len = len, .udp = udp,
                 .fail_err = -EILSEQ};
  for (uint32_t i = 0; i < p->n; i++) {
    ps_stage *st = &p->st[i];
    st->kind = (uint8_t)sh_scn_below(s, PS_FAIL);
    uint32_t dirs = 1 + (uint32_t)sh_scn_below(s, 3); /* 1 in, 2 out, 3 both */
    if (st->kind == PS_XOR || st->kind == PS_DROP) dirs = 3;
    if (st->kind == PS_TAG) dirs = 1;
    st->in = dirs & 1, st->out = (dirs & 2) != 0;
    st->mask = (uint8_t)(1 + sh_scn_below(s, 255));
    st->param = st->kind == PS_MERGE ? 1 + (uint32_t)sh_scn_below(s, 6000) : 0;
  }
  if (len > 0 && sh_scn_below(s, 3) == 2) {
    ps_stage *st = &p->st[sh_scn_below(s, p->n)];
    st->kind = PS_FAIL;
    st->in = sh_scn_below(s, 2) == 0, st->out = !st->in;
    st->param = (uint32_t)sh_scn_below(s, len);
  }
  for (uint32_t i = 0; i < p->n; i++)
    p->h[i] = (sh_handler){.name = kind_names[p->st[i].kind], .state_size = sizeof(ps_state),
                           .inbound = p->st[i].in ? ins[i] : NULL,
                           .outbound = p->st[i].out ? outs[i] : NULL, .closed = closeds[i]};
}

void ps_opts(ps_plan *p, sh_channel_opts *o) {
  o->nhandlers = p->n;
  for (uint32_t i = 0; i < p->n; i++) o->handlers[i] = &p->h[i];
}

bool ps_check(sh_scn *s, const sh_buf *b, uint32_t key, uint8_t mask, uint64_t *at,
              const char *who) {
  const uint8_t *q;
  size_t n, off = 0;
  /* Bounded by the buffer's length: each turn passes a span. */
  while ((n = sh_buf_span(b, off, &q)) > 0) {
    for (size_t k = 0; k < n; k++) {
      uint8_t want = nr_pattern(key, *at + k) ^ mask;
      if (q[k] != want)
        return SH_SCN_CHECK(s, false, "%s: byte %llu is %u, want %u", who,
                            (unsigned long long)(*at + k), q[k], want);
    }
    *at += n;
    off += n;
  }
  return true;
}

void ps_describe(const ps_plan *p, char *buf, size_t size) {
  size_t at = 0;
  for (uint32_t i = 0; i < p->n && at < size; i++) {
    const ps_stage *st = &p->st[i];
    int k = snprintf(buf + at, size - at, "%s%s(%s%s %u)", i ? " " : "", kind_names[st->kind],
                     st->in ? "i" : "", st->out ? "o" : "", st->param);
    if (k < 0) break;
    at += (size_t)k;
  }
}
