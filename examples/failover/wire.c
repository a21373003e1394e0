/*
 * failover's wire: one fixed-size frame of 40 bytes, little-endian, and
 * the two codecs that turn a channel's bytes into fo_frame messages and
 * back (fo_int.h says why two).
 *
 *   0 magic 'F'  1 kind  2 from  3 status  4 holder  5..7 zero
 *   8 epoch (u64)  16 seq (u64)  24 value (u64)  32 hint ip (u32)
 *   36 hint port (u16)  38..39 zero
 *
 * A frame that is not one (bad magic, kind or padding) closes its channel
 * with -EPROTO: a peer that speaks something else is cut off, not guessed
 * at.
 */
#include <errno.h>
#include <string.h>

#include "fo_int.h"

#define FO_MAGIC 0x46u

static int describe(const sh_msg *m, char *buf, size_t n) {
  const fo_frame *f = (const fo_frame *)m;
  return snprintf(buf, n, "kind=%u from=%u status=%u holder=%u epoch=%llu seq=%llu value=%llu",
                  f->kind, f->from, f->status, f->holder, (unsigned long long)f->epoch,
                  (unsigned long long)f->seq, (unsigned long long)f->value);
}

const sh_msg_type fo_note_type = {"fo_note", sizeof(fo_note), SH_NOTICE, 0, NULL, describe};
const sh_msg_type fo_reply_type = {"fo_reply", sizeof(fo_reply), SH_REPLY, 0, NULL, describe};

static bool is_answer(uint8_t kind) {
  return kind == FO_LEASE_ACK || kind == FO_CLIENT_RESP || kind == FO_PONG;
}

fo_frame *fo_frame_new(const fo_frame *f) {
  FO_ASSERT(f->kind >= FO_LEASE_REQ && f->kind <= FO_PONG);
  fo_frame *m = (fo_frame *)sh_msg_alloc(is_answer(f->kind) ? &fo_reply_type : &fo_note_type);
  if (m == NULL) return NULL;
  return (fo_frame *)sh_msg_fill(&m->hdr, f, sizeof(*f));
}

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void frame_out(const fo_frame *f, uint8_t *p) {
  memset(p, 0, FO_FRAME_BYTES);
  p[0] = FO_MAGIC;
  p[1] = f->kind;
  p[2] = f->from;
  p[3] = f->status;
  p[4] = f->holder;
  put64(p + 8, f->epoch);
  put64(p + 16, f->seq);
  put64(p + 24, f->value);
  for (int i = 0; i < 4; i++) p[32 + i] = (uint8_t)(f->hint.ip >> (8 * i));
  p[36] = (uint8_t)f->hint.port;
  p[37] = (uint8_t)(f->hint.port >> 8);
}

/* Reads a frame; false when the bytes are not one. */
static bool frame_in(const uint8_t *p, fo_frame *f) {
  if (p[0] != FO_MAGIC || p[1] < FO_LEASE_REQ || p[1] > FO_PONG) return false;
  if (p[5] | p[6] | p[7] | p[38] | p[39]) return false;
  f->kind = p[1];
  f->from = p[2];
  f->status = p[3];
  f->holder = p[4];
  f->epoch = get64(p + 8);
  f->seq = get64(p + 16);
  f->value = get64(p + 24);
  f->hint.ip = (uint32_t)p[32] | (uint32_t)p[33] << 8 | (uint32_t)p[34] << 16 |
               (uint32_t)p[35] << 24;
  f->hint.port = (uint16_t)(p[36] | p[37] << 8);
  return true;
}

/* Decodes every whole frame of `in`; `answers_reply`: answers become
 * replies (the client), else requests (a node). */
static int decode(sh_pctx *c, sh_buf *in, bool answers_reply) {
  /* Bounded by the bytes: each turn consumes one frame. */
  while (sh_buf_len(in) >= FO_FRAME_BYTES) {
    uint8_t p[FO_FRAME_BYTES];
    size_t got = sh_buf_peek(in, 0, p, sizeof(p));
    FO_ASSERT(got == sizeof(p));
    fo_frame f = {.kind = 0};
    if (!frame_in(p, &f)) return -EPROTO;
    const sh_msg_type *t = answers_reply && is_answer(f.kind) ? &fo_reply_type : &fo_note_type;
    fo_frame *m = (fo_frame *)sh_msg_alloc(t);
    if (m == NULL) return -ENOMEM;
    sh_msg_fill(&m->hdr, &f, sizeof(f));
    sh_buf_consume(in, sizeof(p));
    int rc = sh_pctx_fire(c, &m->hdr);
    if (rc < 0) return rc;
  }
  return 0;
}

static int decode_async(sh_pctx *c, sh_buf *in) { return decode(c, in, false); }
static int decode_rpc(sh_pctx *c, sh_buf *in) { return decode(c, in, true); }

static int encode(sh_pctx *c, sh_msg *m) {
  FO_ASSERT(sh_msg_is(m, &fo_note_type) || sh_msg_is(m, &fo_reply_type));
  uint8_t p[FO_FRAME_BYTES];
  frame_out((const fo_frame *)m, p);
  sh_msg_free(m);
  return sh_buf_append(sh_pctx_out(c), p, sizeof(p));
}

const sh_handler fo_codec_async = {.name = "fo_codec_async", .decode = decode_async,
                                   .outbound = encode};
const sh_handler fo_codec_rpc = {.name = "fo_codec_rpc", .decode = decode_rpc,
                                 .outbound = encode};
