/*
 * The inflight system of a channel (net.h, inflight.h): the actor's
 * requests to the network (channel futures) and the network's requests to
 * the actor (channel stacks), each direction a pending FIFO and an
 * inflight list whose rules (limits, barriers, head-of-line) inflight.c
 * keeps. This file moves items between the queues and the rest of the
 * runtime: it writes requests through the pipeline, completes futures
 * with responses, runs stacks and writes their results.
 *
 * A future is found again by its ask id in its house's table, never by
 * pointer: a stack that ended, or a stop, may have resolved it already,
 * and then a late response is dropped, as a late reply to an ask is.
 */
#include "net/chanflow.h"

#include "base/check.h"
#include "actor/future.h"
#include "actor/house.h"
#include "mem/mem.h"
#include "actor/stack.h"

static const sh_stack_sink_ops stack_sink;

static sh_chrec *rec_new(sh_channel *ch) {
  sh_chrec *r = sh_mem_alloc(sizeof(*r));
  if (r == NULL) return NULL;
  *r = (sh_chrec){.ch = ch, .sink = {&stack_sink}};
  return r;
}

static void rec_free(sh_chrec *r) {
  sh_msg_free(r->msg);
  sh_msg_free(r->reply);
  sh_mem_free(r);
}

static sh_chrec *rec_of(sh_ifl_item *it) { return SH_LIST_ENTRY(it, sh_chrec, it); }

/* ---- the pipeline's tail ------------------------------------------------ */

static int answer(sh_channel *ch, sh_msg *m) {
  sh_ifl_item *it = sh_ifl_match(&ch->futs, ch->o.match_by_id, m->id);
  if (it == NULL) {
    /* Nobody asked (or the asker is gone): dropped, as a late reply is. */
    sh_msg_free(m);
    return 0;
  }
  sh_chrec *r = rec_of(it);
  sh_future_resolve(ch->house, r->fid, m, 0);
  rec_free(r);
  return 0;
}

static int request(sh_channel *ch, sh_msg *m) {
  sh_chrec *r = rec_new(ch);
  if (r == NULL) {
    sh_msg_free(m);
    return -ENOMEM;
  }
  r->msg = m;
  /* By default every request is a barrier: one at a time, in order. */
  bool barrier = ch->o.stack_barrier == NULL || SH_USER(ch->o.stack_barrier(m));
  sh_ifl_add(&ch->stacks, &r->it, barrier);
  return 0;
}

int sh_chanflow_to_tail(void *owner, sh_msg *m) {
  sh_channel *ch = owner;
  if (ch->state & (SH_CHS_CLOSED | SH_CHS_CLOSING)) {
    sh_msg_free(m);
    return 0;
  }
  return m->type->kind == SH_REPLY ? answer(ch, m) : request(ch, m);
}

/* ---- starting what may start -------------------------------------------- */

static bool stopped(const sh_channel *ch) { return ch->state & (SH_CHS_CLOSED | SH_CHS_CLOSING); }

static void write_request(sh_channel *ch, sh_chrec *r) {
  sh_msg *m = r->msg;
  r->msg = NULL;
  int rc = sh_pipeline_write(&ch->pl, m);
  if (rc < 0) sh_channel_close_with(ch, rc);
}

static void start_stack(sh_channel *ch, sh_chrec *r) {
  sh_stack *st = sh_stack_new(ch->house, SH_STACK_CHANNEL, 0);
  if (st == NULL) {
    sh_ifl_remove(&ch->stacks, &r->it);
    rec_free(r);
    sh_channel_close_with(ch, -ENOMEM);
    return;
  }
  st->msg = r->msg;
  r->msg = NULL;
  st->sink = &r->sink;
  ch->refs++;
  sh_stack_run(st);
}

void sh_chanflow_pump(sh_channel *ch) {
  sh_ifl_item *it;
  /* Each loop starts at most the items pending as it begins, one a turn.
   * A turn may add more: a stack's ask, or a request that a pipeline turns
   * back inbound from a write. Those come through a nested entry, which
   * sends the outermost leave round again (channel.c), and start then: a
   * pipeline that answers itself for ever cannot hold the actor here. */
  uint32_t n = ch->futs.npending;
  for (; n > 0 && !stopped(ch) && (it = sh_ifl_start(&ch->futs)) != NULL; n--)
    write_request(ch, rec_of(it));
  n = ch->stacks.npending;
  for (; n > 0 && !stopped(ch) && (it = sh_ifl_start(&ch->stacks)) != NULL; n--)
    start_stack(ch, rec_of(it));
}

bool sh_chanflow_idle(const sh_channel *ch) {
  return ch->futs.npending + ch->futs.ninflight + ch->stacks.npending + ch->stacks.ninflight == 0;
}

/* ---- channel stacks ending ---------------------------------------------- */

static sh_chrec *rec_of_sink(sh_stack_sink *s) { return SH_LIST_ENTRY(s, sh_chrec, sink); }

sh_channel *sh_stack_channel(const sh_stack *st) {
  SH_FROM_USER();
  if (st == NULL || st->sink == NULL || st->sink->ops != &stack_sink) return NULL;
  return rec_of_sink(st->sink)->ch;
}

/* A channel stack's outcome (its sink's result): its result, or what it
 * threw. */
static void stack_result(sh_stack_sink *s, sh_msg *reply, int error) {
  sh_chrec *r = rec_of_sink(s);
  SH_ASSERT(r->reply == NULL);
  r->reply = reply;
  r->error = error;
}

/* Writes the results whose turn came (all of them without head-of-line). */
static void release(sh_channel *ch) {
  sh_ifl_item *it;
  /* Bounded by the inflight stacks: each turn removes one, and none starts
   * meanwhile (only the pump starts them, from the outermost leave). */
  uint32_t left = ch->stacks.ninflight;
  while ((it = sh_ifl_release(&ch->stacks)) != NULL) {
    SH_ASSERT(left-- > 0);
    sh_chrec *r = rec_of(it);
    sh_msg *reply = r->reply;
    r->reply = NULL;
    rec_free(r);
    if (reply == NULL || stopped(ch)) {
      sh_msg_free(reply);
      continue;
    }
    int rc = sh_pipeline_write(&ch->pl, reply);
    if (rc < 0) sh_channel_close_with(ch, rc);
  }
}

/* A channel stack ended (its sink's end: after the stack was freed). */
static void stack_end(sh_stack_sink *s) {
  sh_chrec *r = rec_of_sink(s);
  sh_channel *ch = r->ch;
  SH_ASSERT(ch->refs > 0);
  ch->refs--;
  sh_channel_enter(ch);
  if (!r->failed && r->reply == NULL && ch->o.fallback_reply != NULL) {
    r->reply = SH_USER(ch->o.fallback_reply(ch, r->error));
    if (r->reply != NULL) r->error = 0;
  }
  if (r->failed) {
    /* The channel closed while the stack ran: its result goes nowhere. */
    rec_free(r);
  } else if (r->error != 0) {
    int error = r->error;
    sh_ifl_remove(&ch->stacks, &r->it);
    rec_free(r);
    sh_channel_close_with(ch, error);
  } else {
    r->ended = true;
    sh_ifl_finish(&ch->stacks, &r->it);
    release(ch);
  }
  sh_channel_leave(ch);
}

static const sh_stack_sink_ops stack_sink = {stack_result, stack_end};

/* ---- futures and sends --------------------------------------------------- */

/* The future keeps the channel allocated while the stack may read it. */
static void hold(sh_future *f, sh_channel *ch) { sh_future_own(f, &ch->holder); }

static bool usable(const sh_stack *st, const sh_channel *ch, const sh_msg *m) {
  return st != NULL && ch != NULL && m != NULL && st->house == ch->house;
}

sh_future *sh_channel_ask(sh_stack *st, sh_channel *ch, sh_msg *m) {
  SH_FROM_USER();
  if (!usable(st, ch, m)) {
    sh_msg_free(m);
    return NULL;
  }
  sh_future *f = sh_future_new(st);
  sh_chrec *r = f != NULL ? rec_new(ch) : NULL;
  if (r == NULL) {
    if (f != NULL) sh_future_unmake(f);
    sh_msg_free(m);
    return NULL;
  }
  hold(f, ch);
  /* After the peer's end of stream no response can come. */
  if (stopped(ch) || (ch->state & (SH_CHS_SHUT | SH_CHS_CLOSE_FLUSH | SH_CHS_EOF))) {
    rec_free(r);
    sh_msg_free(m);
    sh_future_end_now(f, NULL, ch->error != 0 ? ch->error : -EPIPE);
    return f;
  }
  sh_future_track(f);
  r->fid = sh_future_id(f);
  r->msg = m;
  r->it.id = m->id;
  bool barrier = ch->o.future_barrier != NULL && SH_USER(ch->o.future_barrier(m));
  sh_channel_enter(ch);
  sh_ifl_add(&ch->futs, &r->it, barrier);
  sh_channel_leave(ch);
  return f;
}

sh_future *sh_channel_send(sh_stack *st, sh_channel *ch, sh_msg *m) {
  SH_FROM_USER();
  if (!usable(st, ch, m)) {
    sh_msg_free(m);
    return NULL;
  }
  sh_future *f = sh_future_new(st);
  if (f == NULL) {
    sh_msg_free(m);
    return NULL;
  }
  /* Held by its future: the write's flush may fail and close the channel
   * (outside an entry: at once), and it is still there to look at. */
  hold(f, ch);
  int rc = sh_channel_write(ch, m);
  if (rc == 0 && stopped(ch)) rc = ch->error != 0 ? ch->error : -EPIPE;
  sh_chrec *r = NULL;
  if (rc == 0 && ch->out.len >= ch->o.write_high) {
    r = rec_new(ch);
    if (r == NULL) rc = -ENOMEM;
  }
  if (r != NULL) {
    sh_future_track(f);
    r->fid = sh_future_id(f);
    sh_list_push_back(&ch->sends, &r->it.link);
    ch->nsends++;
  } else {
    sh_future_end_now(f, NULL, rc);
  }
  return f;
}

/* Completes with `error` the sends waiting now. Only those: a stack that
 * one resumes may send again at once, and that send, past the high
 * watermark, waits for the next drain (completed here, it would let the
 * stack fill the buffer to its limit). */
static void end_sends(sh_channel *ch, int error) {
  if (sh_list_empty(&ch->sends)) return;
  const sh_list *last = ch->sends.prev;
  bool more = true;
  sh_list *l;
  /* Bounded by the sends waiting at the start (nsends); a close under a
   * resume empties the list (and no send waits on a closed channel). */
  uint32_t left = ch->nsends;
  while (more && (l = sh_list_pop_front(&ch->sends)) != NULL) {
    SH_ASSERT(left-- > 0 && ch->nsends > 0);
    ch->nsends--;
    more = l != last;
    sh_chrec *r = SH_LIST_ENTRY(l, sh_chrec, it.link);
    sh_future_resolve(ch->house, r->fid, NULL, error);
    rec_free(r);
  }
}

void sh_chanflow_writable(sh_channel *ch) { end_sends(ch, 0); }

void sh_chanflow_fail_futures(sh_channel *ch, int error) {
  sh_ifl_item *it;
  /* Bounded by the queue: each turn removes one item, and none joins it
   * meanwhile (a stack it resumes asks a channel that is closing or at its
   * end of stream: that ask fails at once). */
  uint32_t left = ch->futs.npending + ch->futs.ninflight;
  while ((it = sh_ifl_pop_any(&ch->futs)) != NULL) {
    SH_ASSERT(left-- > 0);
    sh_chrec *r = rec_of(it);
    sh_future_resolve(ch->house, r->fid, NULL, error);
    rec_free(r);
  }
}

void sh_chanflow_fail_all(sh_channel *ch, int error) {
  sh_ifl_item *it;
  sh_chanflow_fail_futures(ch, error);
  end_sends(ch, error);
  while ((it = sh_ifl_pop_any(&ch->stacks)) != NULL) {
    sh_chrec *r = rec_of(it);
    /* Pending (no stack ever saw it) or finished: nothing holds it. */
    if (r->msg != NULL || r->ended)
      rec_free(r);
    else
      r->failed = true; /* its stack still runs; its end frees the record */
  }
}
