/*
 * Tests for core/net/pipeline.c: the order of inbound and outbound messages
 * through several handlers and past those without the callback; a
 * length-prefixed decoder fed its input split at every offset; an encoder
 * writing into the channel's write buffer; bytes without a decoder moved,
 * not copied, into sh_bytes; errors that stop a path without a leak (each
 * test runs with a pool of its own and fails when an object is left);
 * closed callbacks, tail first and once; the per-handler states; init's
 * refusals.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "net/buffer.h"
#include "net/pipeline.h"
#include "pool_fixture.h"

typedef struct note {
  sh_msg hdr;
  int n;
} note;
SH_MSG_DEFINE(note, SH_NOTICE, 0);

/* A decoded frame: its payload. */
typedef struct frame {
  sh_msg hdr;
  size_t len;
  uint8_t data[300];
} frame;
SH_MSG_DEFINE(frame, SH_NOTICE, 0);

/* What happened, in order: "A>1 B>1 tail:1 " and the like. */
static char trail[4096];
static void record(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t at = strlen(trail);
  vsnprintf(trail + at, sizeof trail - at, fmt, ap);
  va_end(ap);
}

/* The messages the sinks took, kept for the test to read. */
#define KEPT 64
static sh_msg *kept[KEPT];
static int nkept;
static int sink_error; /* what the sinks return (0: they keep the message) */

static int keep(const char *end, sh_msg *m) {
  if (sh_msg_is(m, &note_type)) record("%s:%d ", end, ((note *)m)->n);
  else record("%s:%s ", end, sh_msg_type_of(m)->name);
  if (sink_error != 0) {
    sh_msg_free(m);
    return sink_error;
  }
  assert_true(nkept < KEPT);
  kept[nkept++] = m;
  return 0;
}

static int to_tail(void *owner, sh_msg *m) {
  assert_ptr_equal(owner, trail);
  return keep("tail", m);
}

static int to_head(void *owner, sh_msg *m) {
  assert_ptr_equal(owner, trail);
  return keep("head", m);
}

static int fresh(void **state) {
  trail[0] = '\0';
  nkept = 0;
  sink_error = 0;
  return pool_fixture_setup(state);
}

static int done(void **state) {
  for (int i = 0; i < nkept; i++) sh_msg_free(kept[i]);
  nkept = 0;
  return pool_fixture_teardown(state);
}

/* ---- recording handlers ------------------------------------------------ */

/* Every recording handler's state: how many messages it saw. */
typedef struct seen {
  int in, out;
} seen;

static const char *name_of(sh_pctx *c) { return c->pl->h[c->index]->name; }

static int rec_in(sh_pctx *c, sh_msg *m) {
  ((seen *)sh_pctx_state(c))->in++;
  record("%s>%d ", name_of(c), ((note *)m)->n);
  return sh_pctx_fire(c, m);
}

static int rec_out(sh_pctx *c, sh_msg *m) {
  ((seen *)sh_pctx_state(c))->out++;
  record("%s<%d ", name_of(c), ((note *)m)->n);
  return sh_pctx_write(c, m);
}

static void rec_closed(sh_pctx *c, int error) { record("%s.closed(%d) ", name_of(c), error); }

static const sh_handler H_A = {"A", sizeof(seen), NULL, rec_in, rec_out, rec_closed};
static const sh_handler H_B = {"B", sizeof(seen), NULL, rec_in, rec_out, rec_closed};
static const sh_handler H_C = {"C", sizeof(seen), NULL, rec_in, rec_out, rec_closed};
static const sh_handler H_D = {"D", sizeof(seen), NULL, rec_in, rec_out, rec_closed};
static const sh_handler H_IN_ONLY = {"I", sizeof(seen), NULL, rec_in, NULL, NULL};
static const sh_handler H_OUT_ONLY = {"O", sizeof(seen), NULL, NULL, rec_out, NULL};
static const sh_handler H_NOTHING = {"N", 0, NULL, NULL, NULL, NULL};

static sh_buf rbuf, wbuf;
static sh_channel *const CHANNEL = (sh_channel *)&rbuf; /* only compared */

static sh_channel_opts opts_of(int n, const sh_handler *const *hs) {
  sh_channel_opts o = {0};
  for (int i = 0; i < n; i++) o.handlers[i] = hs[i];
  o.nhandlers = (uint32_t)n;
  return o;
}

#define OPTS(...)                                                                                  \
  opts_of(sizeof((const sh_handler *const[]){__VA_ARGS__}) / sizeof(const sh_handler *),          \
          (const sh_handler *const[]){__VA_ARGS__})

static void start(sh_pipeline *pl, sh_channel_opts o) {
  rbuf = (sh_buf)SH_BUF_INIT;
  wbuf = (sh_buf)SH_BUF_INIT;
  assert_int_equal(sh_pipeline_init(pl, &o, &rbuf, &wbuf, to_tail, to_head, trail, CHANNEL), 0);
}

static void stop(sh_pipeline *pl) {
  sh_pipeline_closed(pl, 0);
  sh_pipeline_fini(pl);
  sh_buf_clear(&rbuf);
  sh_buf_clear(&wbuf);
}

static sh_msg *new_note(int n) { return &sh_msg_new(note, .n = n)->hdr; }

static void test_order_through_four_handlers(void **state) {
  (void)state;
  sh_pipeline pl;
  start(&pl, OPTS(&H_A, &H_B, &H_C, &H_D));
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(1)), 0);
  assert_int_equal(sh_pipeline_write(&pl, new_note(2)), 0);
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(3)), 0);
  assert_string_equal(trail, "A>1 B>1 C>1 D>1 tail:1 D<2 C<2 B<2 A<2 head:2 A>3 B>3 C>3 D>3 tail:3 ");
  /* Each handler's own state counted its own messages. */
  for (uint32_t i = 0; i < 4; i++) {
    seen *s = sh_pctx_state(&pl.ctx[i]);
    assert_int_equal(s->in, 2);
    assert_int_equal(s->out, 1);
  }
  trail[0] = '\0';
  stop(&pl);
  assert_string_equal(trail, "D.closed(0) C.closed(0) B.closed(0) A.closed(0) ");
}

static void test_handlers_without_callbacks_are_skipped(void **state) {
  (void)state;
  sh_pipeline pl;
  start(&pl, OPTS(&H_NOTHING, &H_IN_ONLY, &H_OUT_ONLY, &H_NOTHING, &H_A, &H_NOTHING));
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(1)), 0);
  assert_int_equal(sh_pipeline_write(&pl, new_note(2)), 0);
  assert_string_equal(trail, "I>1 A>1 tail:1 A<2 O<2 head:2 ");
  assert_null(sh_pctx_state(&pl.ctx[0])); /* no state asked, none given */
  stop(&pl);
  /* No handler at all: straight through. */
  trail[0] = '\0';
  start(&pl, opts_of(0, NULL));
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(3)), 0);
  assert_int_equal(sh_pipeline_write(&pl, new_note(4)), 0);
  assert_string_equal(trail, "tail:3 head:4 ");
  stop(&pl);
}

/* Inbound: answers every note back toward the head, as a responder would. */
static int reply_in(sh_pctx *c, sh_msg *m) {
  record("R:%d ", ((note *)m)->n);
  return sh_pctx_write(c, m);
}

static const sh_handler H_REPLY = {"R", 0, NULL, reply_in, rec_out, NULL};

static void test_reply_from_the_middle(void **state) {
  (void)state;
  sh_pipeline pl;
  start(&pl, OPTS(&H_A, &H_NOTHING, &H_REPLY, &H_C));
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(1)), 0);
  /* The reply starts below R: neither R's outbound nor anything above. */
  assert_string_equal(trail, "A>1 R:1 A<1 head:1 ");
  stop(&pl);
}

/* ---- a length-prefixed codec ------------------------------------------- */

/* Frames are a 2-byte big-endian length and that many bytes. */
static int lp_decode(sh_pctx *c, sh_buf *in) {
  uint8_t h[2];
  while (sh_buf_peek(in, 0, h, 2) == 2) {
    size_t len = (size_t)h[0] << 8 | h[1];
    if (len > sizeof((frame *)0)->data) return -EPROTO;
    if (sh_buf_len(in) < 2 + len) break; /* a partial frame waits for more */
    frame *f = (frame *)sh_msg_alloc(&frame_type);
    if (f == NULL) return -ENOMEM;
    f->len = sh_buf_peek(in, 2, f->data, len);
    sh_buf_consume(in, 2 + len);
    int rc = sh_pctx_fire(c, &f->hdr);
    if (rc != 0) return rc;
  }
  return 0;
}

static int lp_encode(sh_pctx *c, sh_msg *m) {
  frame *f = (frame *)m;
  uint8_t h[2] = {(uint8_t)(f->len >> 8), (uint8_t)f->len};
  int rc = sh_buf_append(sh_pctx_out(c), h, 2);
  if (rc == 0) rc = sh_buf_append(sh_pctx_out(c), f->data, f->len);
  sh_msg_free(m);
  return rc;
}

static const sh_handler H_LP = {"LP", 0, lp_decode, NULL, lp_encode, NULL};

/* The frames of the codec tests: lengths 0, 1, ... with bytes from their index. */
#define NFRAMES 6
static const size_t FRAME_LEN[NFRAMES] = {0, 1, 5, 255, 256, 300};

static size_t encode_all(uint8_t *out) {
  size_t at = 0;
  for (int i = 0; i < NFRAMES; i++) {
    out[at++] = (uint8_t)(FRAME_LEN[i] >> 8);
    out[at++] = (uint8_t)FRAME_LEN[i];
    for (size_t k = 0; k < FRAME_LEN[i]; k++) out[at++] = (uint8_t)(i * 31 + k);
  }
  return at;
}

static void assert_frames(void) {
  assert_int_equal(nkept, NFRAMES);
  for (int i = 0; i < NFRAMES; i++) {
    frame *f = (frame *)kept[i];
    assert_ptr_equal(sh_msg_type_of(&f->hdr), &frame_type);
    assert_int_equal(f->len, FRAME_LEN[i]);
    for (size_t k = 0; k < f->len; k++) assert_int_equal(f->data[k], (uint8_t)(i * 31 + k));
    sh_msg_free(kept[i]);
  }
  nkept = 0;
}

static void test_decoder_split_at_every_offset(void **state) {
  (void)state;
  uint8_t wire[2 * NFRAMES + 1024];
  size_t n = encode_all(wire);
  sh_pipeline pl;
  start(&pl, OPTS(&H_LP, &H_NOTHING));
  for (size_t cut = 0; cut <= n; cut++) {
    assert_int_equal(sh_buf_append(&rbuf, wire, cut), 0);
    assert_int_equal(sh_pipeline_read(&pl), 0);
    assert_int_equal(sh_buf_append(&rbuf, wire + cut, n - cut), 0);
    assert_int_equal(sh_pipeline_read(&pl), 0);
    assert_int_equal(sh_buf_len(&rbuf), 0);
    assert_frames();
  }
  /* One byte at a time. */
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(sh_buf_append(&rbuf, wire + i, 1), 0);
    assert_int_equal(sh_pipeline_read(&pl), 0);
  }
  assert_frames();
  stop(&pl);
}

static void test_encoder_writes_the_out_buffer(void **state) {
  (void)state;
  uint8_t wire[2 * NFRAMES + 1024];
  size_t n = encode_all(wire);
  sh_pipeline pl;
  start(&pl, OPTS(&H_LP, &H_B));
  assert_ptr_equal(sh_pctx_out(&pl.ctx[0]), &wbuf);
  assert_ptr_equal(sh_pctx_channel(&pl.ctx[1]), CHANNEL);
  for (int i = 0; i < NFRAMES; i++) {
    frame *f = (frame *)sh_msg_alloc(&frame_type);
    assert_non_null(f);
    f->len = FRAME_LEN[i];
    for (size_t k = 0; k < f->len; k++) f->data[k] = (uint8_t)(i * 31 + k);
    assert_int_equal(sh_pipeline_write(&pl, &f->hdr), 0);
  }
  assert_int_equal(nkept, 0); /* nothing reached the head: the encoder took all */
  uint8_t got[sizeof wire];
  assert_int_equal(sh_buf_peek(&wbuf, 0, got, sizeof got), n);
  assert_memory_equal(got, wire, n);
  stop(&pl);
}

static void test_bytes_without_decoder_move(void **state) {
  (void)state;
  sh_pipeline pl;
  start(&pl, OPTS(&H_NOTHING));
  assert_int_equal(sh_pipeline_read(&pl), 0); /* nothing read, nothing sent */
  assert_int_equal(nkept, 0);
  uint8_t data[SH_PAGE_DATA + 10];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)i;
  assert_int_equal(sh_buf_append(&rbuf, data, sizeof data), 0);
  const uint8_t *first;
  sh_buf_span(&rbuf, 0, &first);
  uint64_t allocs = pool_fixture_allocs();
  assert_int_equal(sh_pipeline_read(&pl), 0);
  assert_int_equal(pool_fixture_allocs(), allocs + 1); /* the message, no page */
  assert_int_equal(sh_buf_len(&rbuf), 0);
  assert_int_equal(nkept, 1);
  sh_bytes *b = (sh_bytes *)kept[0];
  assert_ptr_equal(sh_msg_type_of(&b->hdr), &sh_bytes_type);
  const uint8_t *p;
  assert_int_equal(sh_buf_span(&b->buf, 0, &p), SH_PAGE_DATA);
  assert_ptr_equal(p, first);
  uint8_t got[sizeof data];
  assert_int_equal(sh_buf_peek(&b->buf, 0, got, sizeof got), sizeof data);
  assert_memory_equal(got, data, sizeof data);
  stop(&pl);
}

/* ---- errors ------------------------------------------------------------ */

/* Inbound: frees odd notes and fails with -EPROTO; passes even ones. */
static int picky_in(sh_pctx *c, sh_msg *m) {
  record("P>%d ", ((note *)m)->n);
  if (((note *)m)->n % 2 == 0) return sh_pctx_fire(c, m);
  sh_msg_free(m);
  return -EPROTO;
}

static int failing_decode(sh_pctx *c, sh_buf *in) {
  (void)c;
  sh_buf_consume(in, 1);
  return -EBADMSG;
}

static const sh_handler H_PICKY = {"P", 0, NULL, picky_in, NULL, NULL};
static const sh_handler H_BAD_DECODE = {"X", 0, failing_decode, NULL, NULL, NULL};

static void test_errors_stop_the_path(void **state) {
  (void)state;
  sh_pipeline pl;
  start(&pl, OPTS(&H_A, &H_PICKY, &H_C));
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(1)), -EPROTO);
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(2)), 0);
  assert_string_equal(trail, "A>1 P>1 A>2 P>2 C>2 tail:2 ");
  /* A sink's error comes back through every handler that carried it. */
  trail[0] = '\0';
  sink_error = -ENOBUFS;
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(4)), -ENOBUFS);
  assert_int_equal(sh_pipeline_write(&pl, new_note(5)), -ENOBUFS);
  assert_string_equal(trail, "A>4 P>4 C>4 tail:4 C<5 A<5 head:5 ");
  sink_error = 0;
  stop(&pl);
  /* A decoder's error is the read's. */
  start(&pl, OPTS(&H_BAD_DECODE));
  assert_int_equal(sh_buf_append(&rbuf, "xy", 2), 0);
  assert_int_equal(sh_pipeline_read(&pl), -EBADMSG);
  assert_int_equal(sh_buf_len(&rbuf), 1);
  stop(&pl);
  /* Frames before a bad one arrive; the bad one stops the read. */
  start(&pl, OPTS(&H_LP));
  assert_int_equal(sh_buf_append(&rbuf, "\0\1a\xff\xff", 5), 0);
  assert_int_equal(sh_pipeline_read(&pl), -EPROTO);
  assert_int_equal(nkept, 2); /* note 2, then the frame */
  assert_ptr_equal(sh_msg_type_of(kept[1]), &frame_type);
  stop(&pl);
}

static void test_out_of_memory(void **state) {
  (void)state;
  sh_pipeline pl;
  /* No memory for the handlers' states. */
  sh_channel_opts o = OPTS(&H_A, &H_B);
  assert_int_equal(fiu_enable("sh/pool/alloc", 1, NULL, 0), 0);
  assert_int_equal(sh_pipeline_init(&pl, &o, &rbuf, &wbuf, to_tail, to_head, trail, CHANNEL),
                   -ENOMEM);
  /* No memory for the sh_bytes of a read: the bytes stay for later. */
  fiu_disable("sh/pool/alloc");
  start(&pl, OPTS(&H_NOTHING));
  assert_int_equal(sh_buf_append(&rbuf, "abc", 3), 0);
  assert_int_equal(fiu_enable("sh/pool/alloc", 1, NULL, 0), 0);
  assert_int_equal(sh_pipeline_read(&pl), -ENOMEM);
  fiu_disable("sh/pool/alloc");
  assert_int_equal(sh_buf_len(&rbuf), 3);
  assert_int_equal(sh_pipeline_read(&pl), 0);
  assert_int_equal(nkept, 1);
  stop(&pl);
}

static void test_closed_once_tail_first_then_refuses(void **state) {
  (void)state;
  sh_pipeline pl;
  start(&pl, OPTS(&H_A, &H_IN_ONLY, &H_B));
  sh_pipeline_closed(&pl, -ECONNRESET);
  sh_pipeline_closed(&pl, 0);
  assert_string_equal(trail, "B.closed(-104) A.closed(-104) ");
  /* Past closed nothing travels; what is offered is freed. */
  assert_int_equal(sh_pipeline_inbound(&pl, new_note(1)), -EPIPE);
  assert_int_equal(sh_pipeline_write(&pl, new_note(2)), -EPIPE);
  assert_int_equal(sh_pctx_fire(&pl.ctx[0], new_note(3)), -EPIPE);
  assert_int_equal(sh_pctx_write(&pl.ctx[2], new_note(4)), -EPIPE);
  assert_int_equal(sh_buf_append(&rbuf, "abc", 3), 0);
  assert_int_equal(sh_pipeline_read(&pl), 0);
  assert_int_equal(nkept, 0);
  assert_string_equal(trail, "B.closed(-104) A.closed(-104) ");
  sh_pipeline_fini(&pl);
  sh_buf_clear(&rbuf);
}

/* ---- states and init --------------------------------------------------- */

static const sh_handler H_ODD = {"odd", 3, NULL, NULL, NULL, NULL};
static const sh_handler H_BIG = {"big", 10000, NULL, NULL, NULL, NULL};

static void test_states_zeroed_aligned_distinct(void **state) {
  (void)state;
  sh_pipeline pl;
  start(&pl, OPTS(&H_ODD, &H_NOTHING, &H_BIG, &H_ODD));
  assert_non_null(pl.states);
  uint8_t *s0 = sh_pctx_state(&pl.ctx[0]), *s2 = sh_pctx_state(&pl.ctx[2]),
          *s3 = sh_pctx_state(&pl.ctx[3]);
  assert_null(sh_pctx_state(&pl.ctx[1]));
  assert_true(s0 + 3 <= s2 && s2 + 10000 <= s3);
  assert_int_equal((uintptr_t)s2 % alignof(max_align_t), 0);
  assert_int_equal((uintptr_t)s3 % alignof(max_align_t), 0);
  for (size_t i = 0; i < 10000; i++) assert_int_equal(s2[i], 0);
  assert_int_equal(s0[0] | s0[1] | s0[2] | s3[0] | s3[1] | s3[2], 0);
  memset(s2, 0xff, 10000); /* ASan: the whole state is the handler's */
  stop(&pl);
}

static void test_init_refusals(void **state) {
  (void)state;
  sh_pipeline pl;
  sh_channel_opts o = OPTS(&H_A, &H_LP);
  assert_int_equal(sh_pipeline_init(&pl, &o, &rbuf, &wbuf, to_tail, to_head, trail, CHANNEL),
                   -EINVAL); /* only the first decodes */
  o = OPTS(&H_A, &H_B);
  o.handlers[1] = NULL;
  assert_int_equal(sh_pipeline_init(&pl, &o, &rbuf, &wbuf, to_tail, to_head, trail, CHANNEL),
                   -EINVAL);
  o = OPTS(&H_A);
  o.nhandlers = SH_PIPELINE_MAX + 1;
  assert_int_equal(sh_pipeline_init(&pl, &o, &rbuf, &wbuf, to_tail, to_head, trail, CHANNEL),
                   -EINVAL);
  o = OPTS(&H_A);
  assert_int_equal(sh_pipeline_init(&pl, &o, &rbuf, &wbuf, NULL, to_head, trail, CHANNEL),
                   -EINVAL);
  assert_int_equal(sh_pipeline_init(&pl, &o, &rbuf, &wbuf, to_tail, NULL, trail, CHANNEL),
                   -EINVAL);
  assert_int_equal(sh_pipeline_init(&pl, NULL, &rbuf, &wbuf, to_tail, to_head, trail, CHANNEL),
                   -EINVAL);
  /* SH_PIPELINE_MAX is fine; a decoder first is fine. */
  o = OPTS(&H_LP, &H_A, &H_B, &H_C, &H_D, &H_IN_ONLY, &H_OUT_ONLY, &H_NOTHING);
  assert_int_equal(o.nhandlers, SH_PIPELINE_MAX);
  start(&pl, o);
  stop(&pl);
  assert_int_equal(sh_pipeline_inbound(&pl, NULL), -EINVAL);
  assert_int_equal(sh_pctx_fire(NULL, new_note(1)), -EINVAL);
}

#define FRESH(t) cmocka_unit_test_setup_teardown(t, fresh, done)

int main(void) {
  fiu_init(0);
  const struct CMUnitTest tests[] = {
      FRESH(test_order_through_four_handlers),
      FRESH(test_handlers_without_callbacks_are_skipped),
      FRESH(test_reply_from_the_middle),
      FRESH(test_decoder_split_at_every_offset),
      FRESH(test_encoder_writes_the_out_buffer),
      FRESH(test_bytes_without_decoder_move),
      FRESH(test_errors_stop_the_path),
      FRESH(test_out_of_memory),
      FRESH(test_closed_once_tail_first_then_refuses),
      FRESH(test_states_zeroed_aligned_distinct),
      FRESH(test_init_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
