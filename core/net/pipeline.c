/*
 * A channel's pipeline (contract in pipeline.h and net.h).
 *
 * Ownership: a message handed on is taken, always. Whoever receives a
 * message (a handler's callback, a sink) owns it whatever it returns: a
 * callback that fails frees the message or has passed it on, and the
 * pipeline never frees a message once it has handed it on. An error thus
 * only travels back up the calls that carried the message, each returning
 * it unchanged, and stops that message's path; the channel closes with it.
 *
 * Order: handler i fires to the nearest handler above i with an inbound
 * (toward the tail), and writes to the nearest one below i with an outbound
 * (toward the head); a message that passes the last (first) handler leaves
 * through to_tail (to_head). The walks are bounded by SH_PIPELINE_MAX.
 */
#include "net/pipeline.h"

#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "base/atomic.h"
#include "net/buffer.h"
#include "base/check.h"
#include "mem/mem.h"

/* Each handler's state starts at a multiple of this, as malloc's would. */
#define STATE_ALIGN alignof(max_align_t)

static size_t state_span(const sh_handler *h) {
  return (h->state_size + STATE_ALIGN - 1) / STATE_ALIGN * STATE_ALIGN;
}

/* -EINVAL unless o lists at most SH_PIPELINE_MAX handlers, none NULL, and
 * only the first decodes. */
static int check_handlers(const sh_channel_opts *o) {
  if (o->nhandlers > SH_PIPELINE_MAX) return -EINVAL;
  for (uint32_t i = 0; i < o->nhandlers; i++) {
    if (o->handlers[i] == NULL) return -EINVAL;
    if (i > 0 && o->handlers[i]->decode != NULL) return -EINVAL;
  }
  return 0;
}

/* One zeroed allocation for every handler's state; a handler without state
 * gets NULL. */
static int alloc_states(sh_pipeline *pl) {
  size_t total = 0;
  for (uint32_t i = 0; i < pl->n; i++) total += state_span(pl->h[i]);
  if (total == 0) return 0;
  uint8_t *s = sh_mem_alloc(total);
  if (s == NULL) return -ENOMEM;
  memset(s, 0, total);
  pl->states = s;
  for (uint32_t i = 0; i < pl->n; i++) {
    if (pl->h[i]->state_size > 0) pl->ctx[i].state = s;
    s += state_span(pl->h[i]);
  }
  return 0;
}

int sh_pipeline_init(sh_pipeline *pl, const sh_channel_opts *o, sh_buf *in, sh_buf *out,
                     sh_pipeline_sink to_tail, sh_pipeline_sink to_head, void *owner,
                     sh_channel *ch) {
  if (pl == NULL || o == NULL || to_tail == NULL || to_head == NULL) return -EINVAL;
  int rc = check_handlers(o);
  if (rc != 0) return rc;
  memset(pl, 0, sizeof *pl);
  pl->n = o->nhandlers;
  for (uint32_t i = 0; i < pl->n; i++) {
    pl->h[i] = o->handlers[i];
    pl->ctx[i] = (sh_pctx){.pl = pl, .index = i, .state = NULL};
  }
  pl->in = in;
  pl->out = out;
  pl->to_tail = to_tail;
  pl->to_head = to_head;
  pl->owner = owner;
  pl->ch = ch;
  return alloc_states(pl);
}

void sh_pipeline_fini(sh_pipeline *pl) {
  sh_mem_free(pl->states);
  pl->states = NULL;
  for (uint32_t i = 0; i < pl->n; i++) pl->ctx[i].state = NULL;
}

/* m to the first handler from index i up with an inbound, or to the tail. */
static int inbound_from(sh_pipeline *pl, uint32_t i, sh_msg *m) {
  SH_ASSERT(i <= pl->n && pl->n <= SH_PIPELINE_MAX); /* the walk's bound */
  for (; i < pl->n; i++) {
    const sh_handler *h = pl->h[i];
    if (h->inbound != NULL) return SH_USER(h->inbound(&pl->ctx[i], m));
  }
  return pl->to_tail(pl->owner, m);
}

/* m to the first handler below index i with an outbound, or to the head. */
static int outbound_below(sh_pipeline *pl, uint32_t i, sh_msg *m) {
  SH_ASSERT(i <= pl->n && pl->n <= SH_PIPELINE_MAX); /* the walk's bound */
  while (i-- > 0) {
    const sh_handler *h = pl->h[i];
    if (h->outbound != NULL) return SH_USER(h->outbound(&pl->ctx[i], m));
  }
  return pl->to_head(pl->owner, m);
}

/* Every entry's checks: 0 when m may travel; else m (taken like any
 * message handed on) is freed, and the error says why: -EINVAL, or -EPIPE
 * once the channel closed. */
static int admit(const sh_pipeline *pl, sh_msg *m) {
  int rc = pl == NULL || m == NULL ? -EINVAL : pl->closed ? -EPIPE : 0;
  if (rc != 0) sh_msg_free(m);
  return rc;
}

int sh_pipeline_inbound(sh_pipeline *pl, sh_msg *m) {
  int rc = admit(pl, m);
  return rc != 0 ? rc : inbound_from(pl, 0, m);
}

int sh_pipeline_write(sh_pipeline *pl, sh_msg *m) {
  int rc = admit(pl, m);
  return rc != 0 ? rc : outbound_below(pl, pl->n, m);
}

/* Without a decoder every byte read goes on as one sh_bytes: its pages move
 * from the read buffer, nothing is copied. */
static int wrap_bytes(sh_pipeline *pl) {
  sh_bytes *b = (sh_bytes *)sh_msg_alloc(&sh_bytes_type);
  if (b == NULL) return -ENOMEM;
  int rc = sh_buf_move(&b->buf, pl->in, sh_buf_len(pl->in));
  if (rc != 0) {
    sh_msg_free(&b->hdr);
    return rc;
  }
  return inbound_from(pl, 0, &b->hdr);
}

int sh_pipeline_read(sh_pipeline *pl) {
  if (pl->closed || pl->in == NULL || sh_buf_len(pl->in) == 0) return 0;
  if (pl->n > 0 && pl->h[0]->decode != NULL)
    return SH_USER(pl->h[0]->decode(&pl->ctx[0], pl->in));
  return wrap_bytes(pl);
}

void sh_pipeline_closed(sh_pipeline *pl, int error) {
  if (pl->closed) return;
  pl->closed = true;
  for (uint32_t i = pl->n; i-- > 0;) {
    const sh_handler *h = pl->h[i];
    if (h->closed != NULL) SH_USER_VOID(h->closed(&pl->ctx[i], error));
  }
}

int sh_pctx_fire(sh_pctx *c, sh_msg *m) {
  SH_FROM_USER();
  int rc = admit(c != NULL ? c->pl : NULL, m);
  return rc != 0 ? rc : inbound_from(c->pl, c->index + 1, m);
}

int sh_pctx_write(sh_pctx *c, sh_msg *m) {
  SH_FROM_USER();
  int rc = admit(c != NULL ? c->pl : NULL, m);
  return rc != 0 ? rc : outbound_below(c->pl, c->index, m);
}

sh_buf *sh_pctx_out(sh_pctx *c) { return c->pl->out; }

void *sh_pctx_state(sh_pctx *c) { return c->state; }

sh_channel *sh_pctx_channel(sh_pctx *c) { return c->pl->ch; }
