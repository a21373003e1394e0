/*
 * The reference model's rules of a channel's inflight queues (net.h: a
 * channel's max_future_inflight, max_stack_inflight, head_of_line and
 * barrier requests; model.c has the list of every rule):
 *
 *   inflight.fifo     items start in the order they were added;
 *   inflight.limit    at most max_inflight items are inflight at once;
 *   inflight.barrier  a barrier starts only when nothing is inflight, and
 *                     nothing starts while one is;
 *   inflight.order    a response without an id answers the oldest inflight
 *                     request; with head-of-line, a result is released only
 *                     once every older stack released its own; a result
 *                     only of a stack that finished.
 *
 * The queue's own code (net/inflight.c) keeps counts and lists; the model
 * keeps its own, from the notes alone: each item by (queue, seq), with two
 * cursors that only move forward (every item at or past the first pending
 * one is pending or gone, since items start in order; every item before
 * the oldest inflight one is gone).
 */
#include "modelrules.h"

#include <stddef.h>

#include "base/check.h"

#define get sh_simmodel_get
#define violation sh_simmodel_violation
#define K_IFLQ SH_SIMMODEL_K_IFLQ
#define K_IFLI SH_SIMMODEL_K_IFLI

enum { PENDING = 1, INFLIGHT, DONE };

static sh_simmodel_entry *item(uintptr_t q, uint64_t seq, const char *what) {
  sh_simmodel_entry *e = sh_simmodeltab_find(K_IFLI, q, seq);
  if (e == NULL) violation("inflight.order: %s of item #%llu, not in its queue", what,
                           (unsigned long long)seq + 1);
  return e;
}

/* The first pending item's place (the cursor moved past started and gone
 * ones); the next place when none is pending. */
static uint64_t first_pending(uintptr_t q, sh_simmodel_entry *c) {
  sh_simmodel_entry *e;
  while (c->v < c->x && ((e = sh_simmodeltab_find(K_IFLI, q, c->v)) == NULL || e->v != PENDING))
    c->v++;
  return c->v;
}

/* The oldest inflight (or finished) item's place; the first pending one's
 * when none is inflight. */
static uint64_t oldest_inflight(uintptr_t q, sh_simmodel_entry *c) {
  while (c->w < c->x && sh_simmodeltab_find(K_IFLI, q, c->w) == NULL) c->w++;
  return c->w;
}

/* A new life: what the queue's memory held before is forgotten. Bounded by
 * the places of the last life not yet gone (at most its inflight and
 * pending items once the cursors skip the gone ones). */
static void ifl_init(uintptr_t q, uint64_t max, uint64_t hol) {
  sh_simmodel_entry *c = get(K_IFLQ, q, 1);
  for (uint64_t s = oldest_inflight(q, c); s < c->x; s++) {
    sh_simmodel_entry *e = sh_simmodeltab_find(K_IFLI, q, s);
    if (e != NULL) sh_simmodeltab_del(e);
  }
  c->v = c->w = c->x = 0;
  sh_simmodel_entry *h = get(K_IFLQ, q, 0);
  h->v = max;
  h->w = hol;
  h->x = 0;
  h->y = 0;
}

static void ifl_add(uintptr_t q, uint64_t seq, uint64_t barrier) {
  sh_simmodel_entry *c = get(K_IFLQ, q, 1);
  SH_ASSERT(seq == c->x); /* places are given in order (inflight.c next_seq) */
  c->x = seq + 1;
  sh_simmodel_entry *e = get(K_IFLI, q, seq);
  e->v = PENDING;
  e->w = barrier;
}

static void ifl_start(uintptr_t q, uint64_t seq) {
  sh_simmodel_entry *h = get(K_IFLQ, q, 0), *c = get(K_IFLQ, q, 1);
  sh_simmodel_entry *e = item(q, seq, "a start");
  uint64_t first = first_pending(q, c);
  if (e->v != PENDING || seq != first)
    violation("inflight.fifo: item #%llu started while #%llu, added before it, waits",
              (unsigned long long)seq + 1, (unsigned long long)first + 1);
  if (h->x >= h->v)
    violation("inflight.limit: an item started with %llu of at most %llu inflight",
              (unsigned long long)h->x, (unsigned long long)h->v);
  if (h->y > 0) violation("inflight.barrier: item #%llu started while a barrier is inflight",
                          (unsigned long long)seq + 1);
  if (e->w && h->x > 0)
    violation("inflight.barrier: a barrier started with %llu items inflight",
              (unsigned long long)h->x);
  e->v = INFLIGHT;
  h->x++;
  h->y += e->w;
}

/* Item seq leaves its queue (released, matched, removed, popped). */
static void ifl_gone(uintptr_t q, uint64_t seq, const char *what) {
  sh_simmodel_entry *e = item(q, seq, what);
  if (e->v != PENDING) {
    sh_simmodel_entry *h = get(K_IFLQ, q, 0);
    SH_ASSERT(h->x > 0 && h->y >= e->w); /* it was counted at its start */
    h->x--;
    h->y -= e->w;
  }
  sh_simmodeltab_del(e);
}

static void ifl_release(uintptr_t q, uint64_t seq) {
  sh_simmodel_entry *e = item(q, seq, "a release");
  if (e->v != DONE)
    violation("inflight.order: the result of item #%llu released before its stack finished",
              (unsigned long long)seq + 1);
  uint64_t oldest = oldest_inflight(q, get(K_IFLQ, q, 1));
  if (get(K_IFLQ, q, 0)->w && seq != oldest)
    violation("inflight.order: head-of-line, item #%llu's result released before #%llu's",
              (unsigned long long)seq + 1, (unsigned long long)oldest + 1);
  ifl_gone(q, seq, "a release");
}

static void ifl_match(uintptr_t q, uint64_t seq, uint64_t by_id) {
  sh_simmodel_entry *e = item(q, seq, "a response");
  uint64_t oldest = oldest_inflight(q, get(K_IFLQ, q, 1));
  if (e->v == PENDING) violation("inflight.order: a response to item #%llu, not yet sent",
                                 (unsigned long long)seq + 1);
  if (!by_id && seq != oldest)
    violation("inflight.order: a response matched to item #%llu while #%llu was sent first",
              (unsigned long long)seq + 1, (unsigned long long)oldest + 1);
  ifl_gone(q, seq, "a response");
}

void sh_simmodel_ifl(sh_model_event ev, uintptr_t q, uintptr_t b, uint64_t c) {
  switch (ev) {
  case SH_MODEL_IFL_INIT: ifl_init(q, b, c); break;
  case SH_MODEL_IFL_ADD: ifl_add(q, b, c); break;
  case SH_MODEL_IFL_START: ifl_start(q, b); break;
  case SH_MODEL_IFL_FINISH: item(q, b, "a finish")->v = DONE; break;
  case SH_MODEL_IFL_RELEASE: ifl_release(q, b); break;
  case SH_MODEL_IFL_MATCH: ifl_match(q, b, c); break;
  case SH_MODEL_IFL_GONE: ifl_gone(q, b, "a removal"); break;
  default: SH_ASSERT(0 && "not an inflight queue's event");
  }
}
