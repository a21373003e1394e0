/*
 * Channels: their life, their readiness event, and the calls an actor makes
 * on them (the model is in channel.h; the transports are tcp.c and udp.c,
 * the inflight system chanflow.c, all reached through a channel's ops).
 */
#include "net/channel.h"

#include <string.h>

#include "net/buffer.h"
#include "base/check.h"
#include "actor/future.h"
#include "actor/house.h"
#include "mem/mem.h"
#include "sched/system.h"
#include "sched/worker.h"

/* Defaults of sh_channel_opts (net.h). */
#define SH_CH_WRITE_HIGH (64u << 10)
#define SH_CH_WRITE_LOW (16u << 10)
#define SH_CH_WRITE_LIMIT (4u << 20)
#define SH_CH_READ_PAGES 16u
#define SH_CH_MAX_PENDING 64u
/* Rounds of deferred work one outermost leave does before it leaves the
 * rest to a later run (each round may free room or end stacks). */
#define SH_CH_LEAVE_ROUNDS 16

static void fill_defaults(sh_channel_opts *o) {
  if (o->max_future_inflight == 0) o->max_future_inflight = 1;
  if (o->max_stack_inflight == 0) o->max_stack_inflight = 1;
  if (o->max_pending_stacks == 0) o->max_pending_stacks = SH_CH_MAX_PENDING;
  if (o->write_high == 0) o->write_high = SH_CH_WRITE_HIGH;
  if (o->write_low == 0 || o->write_low > o->write_high) o->write_low = o->write_high / 4;
  if (o->write_limit == 0) o->write_limit = SH_CH_WRITE_LIMIT;
  if (o->write_limit < o->write_high) o->write_limit = o->write_high;
  if (o->read_pages == 0) o->read_pages = SH_CH_READ_PAGES;
}

static sh_worker *owner_of(const sh_house *h) { return &h->sys->workers[h->owner]; }

static const sh_future_owner_ops holder_ops;
static const sh_event_type event_type;
static void ready(sh_io_watch *w, uint32_t events);
static void close_all(sh_house *h);

static int setup(sh_channel *ch, sh_house *h, const sh_channel_ops *ops, sh_sock s,
                 const sh_channel_opts *o) {
  ch->ev.type = &event_type.msg;
  ch->holder.ops = &holder_ops;
  ch->watch.ready = ready;
  ch->house = h;
  ch->ops = ops;
  ch->kind = ops->kind;
  ch->sock = s;
  ch->worker = h->owner;
  if (o != NULL) ch->o = *o;
  fill_defaults(&ch->o);
  sh_ifl_init(&ch->futs, ch->o.max_future_inflight, false);
  sh_ifl_init(&ch->stacks, ch->o.max_stack_inflight, ch->o.head_of_line);
  sh_list_init(&ch->sends);
  int rc = sh_pipeline_init(&ch->pl, &ch->o, &ch->in, &ch->out, ops->to_tail, ops->to_head, ch, ch);
  if (rc != 0) return rc;
  rc = sh_net_watch(h->sys->plat, ch->worker, s, &ch->watch);
  if (rc != 0) {
    sh_pipeline_fini(&ch->pl);
    return rc;
  }
  return 0;
}

int sh_channel_new(sh_house *h, const sh_channel_ops *ops, sh_sock s, const sh_channel_opts *o,
                   sh_channel **out) {
  /* A stopped house makes no channel: its stop closes the ones it has, and
   * a close resumes stacks at once (a failed future), which may connect
   * again; a channel made then would slip under that close and keep the
   * house (an endless connect) from ever being retired. First, before the
   * worker check: the shutdown's drain mounts houses that are stopped
   * already (an acceptor spawned just before the shutdown). */
  if (sh_house_stopped(h)) {
    sh_net_close(s);
    return -ESHUTDOWN;
  }
  /* Channels live on their actor's worker (channel.h): only IO actors,
   * only there. */
  SH_ASSERT(h->cls->kind == SH_IO_ACTOR && sh_worker_current() == owner_of(h));
  sh_channel *ch = sh_mem_alloc(sizeof(*ch));
  int rc = ch == NULL ? -ENOMEM : 0;
  if (ch != NULL) {
    memset(ch, 0, sizeof(*ch));
    rc = setup(ch, h, ops, s, o);
    if (rc != 0) sh_mem_free(ch);
  }
  if (rc != 0) {
    sh_net_close(s);
    return rc;
  }
  ch->state = SH_CHS_WATCHED;
  owner_of(h)->watched++;
  (void)sh_net_local(s, &ch->local);
  /* Attached to its house (house.h), whose stop closes it. */
  h->close_attached = close_all;
  sh_list_push_back(&h->attached, &ch->link);
  *out = ch;
  return 0;
}

void sh_channel_tell(sh_channel *ch, sh_channel_event ev, int error) {
  sh_house *h = ch->house;
  if (h->cls->channel_event != NULL)
    SH_USER_VOID(h->cls->channel_event(h->actor, ch, (int)ev, error));
}

void sh_channel_open(sh_channel *ch) {
  /* Readable and writable until a call says otherwise (edge triggered:
   * bytes may have come before the watch began). */
  ch->state |= SH_CHS_OPEN | SH_CHS_READABLE | SH_CHS_WRITABLE;
  sh_channel_enter(ch);
  sh_channel_tell(ch, SH_CHANNEL_OPEN, 0);
  sh_channel_poke(ch);
  sh_channel_leave(ch);
}

/* ---- readiness ------------------------------------------------------------ */

void sh_channel_poke(sh_channel *ch) {
  if (ch->state & (SH_CHS_EVENT | SH_CHS_CLOSED | SH_CHS_CLOSING)) return;
  ch->state |= SH_CHS_EVENT;
  sh_house_push(ch->house, SH_BOX_EVENT, &ch->ev);
}

/* The socket's readiness (its watch's, worker.h), on the channel's worker. */
static void ready(sh_io_watch *w, uint32_t events) {
  sh_channel *ch = SH_LIST_ENTRY(w, sh_channel, watch);
  ch->ready |= events;
  sh_channel_poke(ch);
}

/* The house takes the channel's readiness event. */
static void on_event(sh_house *h, sh_msg *m) {
  sh_channel *ch = (sh_channel *)(void *)m;
  SH_ASSERT(ch->house == h && (ch->state & SH_CHS_EVENT));
  ch->state &= ~SH_CHS_EVENT;
  uint32_t bits = ch->ready;
  ch->ready = 0;
  sh_channel_enter(ch);
  if (!(ch->state & SH_CHS_CLOSED)) ch->ops->on_ready(ch, bits);
  sh_channel_leave(ch);
}

static const sh_event_type event_type = {
    {"sh_channel_event", sizeof(sh_msg), SH_NOTICE, SH_MSG_RUNTIME, NULL, NULL}, on_event};

/* ---- closing and freeing ---------------------------------------------------- */

/* A closed channel is freed from its own event, never inside the call that
 * closed it. The close may come from inside a handler of its actor that
 * holds the channel in a local and holds nothing of it the channel counts:
 * a write whose flush finds the connection reset, the actor's own close, a
 * stack's end that a call ran. Freed there, the channel would be gone under
 * that handler's next call on it (a send would hold and let go of freed
 * memory, and free it a second time). The house takes its events between
 * handlers (dispatch.c), never inside one: when the event runs, no handler
 * that began before the close is still running, and one that begins after
 * it learned of the close from the hook, or holds a future of the channel
 * or runs one of its requests (refs). */
static void queue_free(sh_channel *ch) {
  SH_ASSERT((ch->state & SH_CHS_CLOSED) && !(ch->state & SH_CHS_FREE_DUE));
  ch->state |= SH_CHS_FREE_DUE;
  if (ch->state & SH_CHS_EVENT) return; /* queued already: it frees the channel */
  ch->state |= SH_CHS_EVENT;
  sh_house_push(ch->house, SH_BOX_EVENT, &ch->ev);
}

static void maybe_free(sh_channel *ch) {
  /* Its event queued: the event frees it (queue_free). */
  const uint32_t held = SH_CHS_EVENT;
  if (!(ch->state & SH_CHS_FREE_DUE) || (ch->state & held) || ch->refs > 0 || ch->busy > 0) return;
  sh_list_remove(&ch->link);
  sh_pipeline_fini(&ch->pl);
  sh_mem_free(ch);
}

static int fail_error(const sh_channel *ch) { return ch->error != 0 ? ch->error : -ECONNABORTED; }

static void teardown(sh_channel *ch) {
  int error = ch->error;
  ch->state = (ch->state | SH_CHS_CLOSED) & ~SH_CHS_CLOSING;
  ch->ops->fail_all(ch, fail_error(ch));
  sh_pipeline_closed(&ch->pl, error);
  sh_net_close(ch->sock);
  if (ch->state & SH_CHS_WATCHED) owner_of(ch->house)->watched--;
  sh_buf_clear(&ch->in);
  sh_buf_clear(&ch->out);
  if (ch->ops->closed != NULL) ch->ops->closed(ch);
  if (ch->state & SH_CHS_OPEN) sh_channel_tell(ch, SH_CHANNEL_CLOSED, error);
  queue_free(ch);
}

void sh_channel_hold(sh_channel *ch) { ch->refs++; }

void sh_channel_unhold(sh_channel *ch) {
  SH_ASSERT(ch->refs > 0);
  ch->refs--;
  maybe_free(ch);
}

/* A future of the channel's asks and sends holds it (future.h). */
static sh_channel *of_holder(sh_future_owner *o) { return SH_LIST_ENTRY(o, sh_channel, holder); }
static void holder_hold(sh_future_owner *o) { sh_channel_hold(of_holder(o)); }
static void holder_unhold(sh_future_owner *o) { sh_channel_unhold(of_holder(o)); }
static const sh_future_owner_ops holder_ops = {holder_hold, holder_unhold, NULL};

void sh_channel_close_with(sh_channel *ch, int error) {
  if (ch->state & (SH_CHS_CLOSED | SH_CHS_CLOSING)) return;
  ch->error = error;
  ch->state |= SH_CHS_CLOSING;
  sh_channel_enter(ch);
  /* Whoever waits on the channel learns at once, even when the rest of
   * the close waits for the outermost entry to leave. */
  if (ch->connect_fid != 0) sh_future_resolve(ch->house, ch->connect_fid, NULL, fail_error(ch));
  ch->connect_fid = 0;
  ch->ops->fail_all(ch, fail_error(ch));
  sh_channel_leave(ch);
}

/* One round of what waits for the outermost entry to leave. */
static void deferred_work(sh_channel *ch) {
  ch->ops->deferred(ch);
  /* More to read (a page budget ran out, or requests drained below the
   * limit), or to accept: later, after the others had their turn. */
  if ((ch->state & SH_CHS_READABLE) && !(ch->state & SH_CHS_EOF) && !sh_channel_full(ch))
    sh_channel_poke(ch);
}

void sh_channel_leave(sh_channel *ch) {
  SH_ASSERT(ch->busy > 0);
  if (ch->busy > 1) {
    /* Something happened inside (a stack ended, bytes were written): the
     * outermost leave goes round once more. */
    ch->busy--;
    ch->dirty = true;
    return;
  }
  /* Still counted busy: what runs here (stacks, hooks) only nests. Each
   * round may end stacks or free room that the next round acts on. */
  int i;
  for (i = 0; i < SH_CH_LEAVE_ROUNDS && !(ch->state & SH_CHS_CLOSED); i++) {
    if (ch->state & SH_CHS_CLOSING) {
      teardown(ch);
      break;
    }
    ch->dirty = false;
    deferred_work(ch);
    if (!ch->dirty && !(ch->state & SH_CHS_CLOSING)) break;
  }
  /* A close asked for in the last round cannot wait for a later run: a
   * closing channel's event is never queued again. */
  if (ch->state & SH_CHS_CLOSING) teardown(ch);
  ch->busy = 0;
  /* Still more to do after the bound: in a later run. */
  if (i == SH_CH_LEAVE_ROUNDS) sh_channel_poke(ch);
  maybe_free(ch);
}

/* The house stops: closes every channel of it with -ESHUTDOWN (its
 * close_attached, house.h). */
static void close_all(sh_house *h) {
  /* Every channel is held first, so that what a close runs (the actor's
   * hook closing another channel, a stack a failed future resumes) frees
   * none under our feet; then each is closed and let go, which frees it.
   * A stopped actor opens no new channel (its connects fail), and the
   * walks stop at the n held ones anyway: new ones go at the tail. */
  uint32_t n = 0;
  sh_list *l;
  for (l = sh_list_first(&h->attached); l != NULL; l = sh_list_next(&h->attached, l), n++)
    sh_channel_enter(SH_LIST_ENTRY(l, sh_channel, link));
  l = sh_list_first(&h->attached);
  for (uint32_t i = 0; i < n; i++, l = sh_list_next(&h->attached, l)) {
    SH_ASSERT(l != NULL); /* a held channel is not freed: the n first stay */
    sh_channel_close_with(SH_LIST_ENTRY(l, sh_channel, link), -ESHUTDOWN);
  }
  l = sh_list_first(&h->attached);
  /* Bounded by the held channels: each turn lets one go, and the one it
   * lets go (maybe freed) is passed already. */
  for (uint32_t i = 0; i < n; i++) {
    SH_ASSERT(l != NULL);
    sh_list *next = sh_list_next(&h->attached, l);
    sh_channel_leave(SH_LIST_ENTRY(l, sh_channel, link));
    l = next;
  }
}

/* ---- the actor's calls ------------------------------------------------------------ */

void sh_channel_set_data(sh_channel *ch, void *data) { ch->data = data; }
void *sh_channel_data(const sh_channel *ch) { return ch->data; }

int sh_channel_peer(const sh_channel *ch, sh_netaddr *out) {
  if (ch == NULL || out == NULL) return -EINVAL;
  *out = ch->peer;
  return 0;
}

int sh_channel_local(const sh_channel *ch, sh_netaddr *out) {
  if (ch == NULL || out == NULL) return -EINVAL;
  *out = ch->local;
  return 0;
}

size_t sh_channel_pending_bytes(const sh_channel *ch) { return ch != NULL ? ch->out.len : 0; }

int sh_channel_write(sh_channel *ch, sh_msg *m) {
  SH_FROM_USER();
  if (ch == NULL || m == NULL) {
    sh_msg_free(m);
    return -EINVAL;
  }
  if (ch->state & (SH_CHS_CLOSED | SH_CHS_CLOSING | SH_CHS_SHUT | SH_CHS_CLOSE_FLUSH)) {
    sh_msg_free(m);
    return -EPIPE;
  }
  sh_channel_enter(ch);
  int rc = sh_pipeline_write(&ch->pl, m);
  sh_channel_leave(ch);
  return rc;
}

static void request_end(sh_channel *ch, uint32_t bit) {
  if (ch == NULL || (ch->state & SH_CHS_CLOSED)) return;
  ch->state |= bit;
  sh_channel_enter(ch);
  sh_channel_leave(ch);
}

int sh_channel_shutdown(sh_channel *ch) {
  SH_FROM_USER();
  if (ch == NULL || ch->kind != SH_CH_TCP) return -EINVAL;
  if (ch->state & SH_CHS_CLOSED) return -EPIPE;
  request_end(ch, SH_CHS_SHUT);
  return 0;
}

void sh_channel_close(sh_channel *ch) {
  SH_FROM_USER();
  if (ch != NULL) sh_channel_close_with(ch, 0);
}

void sh_channel_close_after_flush(sh_channel *ch) {
  SH_FROM_USER();
  request_end(ch, SH_CHS_CLOSE_FLUSH);
}
