/*
 * Pipeline stages for net_pipe: a drawn stack of handlers (net.h,
 * "Pipelines") whose every callback checks that it runs in its turn, and
 * whose effect on the bytes is known, so that what reaches either end is
 * checked against the stream's reference (netref.h).
 *
 * What each stage kind does, per net.h's contract of what a handler may do:
 *   PASS   passes every message on unchanged;
 *   XOR    transforms: every byte of an sh_bytes or sh_datagram ^= its mask,
 *          both ways (so the masks cancel end to end: the tail sees the
 *          stream ^ every XOR stage's mask, the far end sees the stream);
 *   SPLIT  cuts an sh_bytes in two at a drawn point (either piece may be
 *          empty) and passes both on, in order;
 *   MERGE  holds sh_bytes back and passes them on as one message once it
 *          holds `param` bytes or the stream's last byte;
 *   TAG    (inbound) fires a mark before each message: a request (kind
 *          SH_NOTICE) or an unasked response (SH_REPLY), which the tail
 *          must drop (net.h: a response with no future waiting);
 *   DROP   swallows marks (frees them, passes nothing on);
 *   FAIL   (one direction) returns plan->fail_err for the message that
 *          takes it past `param` bytes (TCP) or datagrams (UDP): the
 *          channel must close with that error, and nothing of that message
 *          or after it passes the stage.
 * SPLIT and MERGE leave datagrams whole: a datagram is a frame.
 *
 * The order check: a stage stamps every message it passes on with its
 * index + 1 (sh_msg_set_id; 0: from the head, n + 1: from the tail), and
 * the next stage to see it checks the stamp is the one the walk of net.h
 * gives (inbound: the nearest stage below with an inbound; outbound: the
 * nearest above with an outbound). The closed callbacks run once each,
 * tail first.
 */
#ifndef SCN_PIPESTAGE_H
#define SCN_PIPESTAGE_H

#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

enum { PS_PASS, PS_XOR, PS_SPLIT, PS_MERGE, PS_TAG, PS_DROP, PS_FAIL, PS_KINDS };

typedef struct ps_stage {
  uint8_t kind, mask;
  bool in, out;   /* has an inbound / an outbound callback */
  uint32_t param; /* MERGE: bytes held at most; FAIL: bytes or datagrams let through */
} ps_stage;

/* A channel's stack of stages, drawn once per run. */
typedef struct ps_plan {
  uint32_t n;
  ps_stage st[SH_PIPELINE_MAX];
  sh_handler h[SH_PIPELINE_MAX];
  uint64_t len; /* the stream's bytes each way (MERGE's last flush) */
  bool udp;
  int fail_err;
} ps_plan;

/* What one channel's stages did; the channel's data points at a struct
 * that begins with it. */
typedef struct ps_chan {
  sh_scn *s;
  const ps_plan *plan;
  const char *who;
  uint64_t passed[SH_PIPELINE_MAX]; /* bytes or datagrams through FAIL */
  uint32_t marks_fired, marks_due, marks_dropped;
  uint32_t calls;        /* stage callbacks run */
  uint32_t closed_calls;
  int closed_err;
  bool failed; /* the FAIL stage returned its error */
} ps_chan;

/* Draws a stack of 1..6 stages (a FAIL among them in some runs) for a
 * stream of `len` bytes (TCP) or `len` datagrams (UDP). */
void ps_draw(sh_scn *s, ps_plan *p, uint64_t len, bool udp);
/* The pipeline of the plan into o. */
void ps_opts(ps_plan *p, sh_channel_opts *o);
/* XOR of every XOR stage's mask: what the tail's bytes are xored with. */
uint8_t ps_mask(const ps_plan *p);
/* The stamp a message reaching the tail carries. */
uint64_t ps_tail_stamp(const ps_plan *p);
/* The stamp of a message entering at the tail (what the tail writes). */
static inline uint64_t ps_from_tail(const ps_plan *p) { return p->n + 1; }
/* Index of the FAIL stage, or -1. */
int ps_fail_at(const ps_plan *p);
/* The bytes of m (sh_bytes or sh_datagram), or NULL for a mark. */
sh_buf *ps_body(sh_msg *m);
/* Whether m is a mark (a request) or an unasked response. */
bool ps_is_mark(const sh_msg *m);
/* A mark written from the tail, for an outbound DROP to swallow. */
sh_msg *ps_mark_new(const ps_plan *p);
/* Checks the bytes of b from stream offset *at of key, each ^ mask; moves
 * *at past them; false at the first wrong one. */
bool ps_check(sh_scn *s, const sh_buf *b, uint32_t key, uint8_t mask, uint64_t *at,
              const char *who);
/* One line describing the plan, for a failure's message. */
void ps_describe(const ps_plan *p, char *buf, size_t size);

#endif
