/*
 * TCP on channels: the stream transport (reading into the read buffer,
 * writing from the write buffer, its watermarks, the end of stream,
 * shutdown) and connecting.
 * Servers are tcpserver.c.
 */
#include "net/tcp.h"

#include <stdlib.h>

#include "base/atomic.h"
#include "net/buffer.h"
#include "net/chanflow.h"
#include "net/channel.h"
#include "net/sockopt.h"
#include "base/check.h"
#include "actor/future.h"
#include "actor/house.h"
#include "base/spinlock.h"
#include "actor/stack.h"
#include "sched/system.h"
#include "time/timeout.h"
#include "time/timer.h"
#include "sched/worker.h"

/* Writes per flush; iovecs per write. */
#define SH_FLUSH_WRITES 16
#define SH_FLUSH_IOV 16

SH_MSG_DEFINE(sh_channel_msg, SH_REPLY, 0);

/* ---- the stream transport ------------------------------------------------- */

/* Reads go through the worker's buffer, as large as a read may be, and are
 * appended to the channel's pages: one system call for what would take one
 * per page read in place (a copy is cheaper than a call). */
_Static_assert(SH_IO_SCRATCH >= 16u * SH_PAGE_DATA, "a read of 16 pages fits the worker's buffer");

/* One read of at most len (<= SH_IO_SCRATCH) bytes into the read buffer. */
static int64_t read_into(sh_channel *ch, size_t len) {
  SH_ASSERT(len >= 1 && len <= SH_IO_SCRATCH); /* the worker's buffer's size */
  uint8_t *scratch = sh_worker_scratch(sh_worker_current());
  if (scratch == NULL) return -ENOMEM;
  int64_t n = sh_net_read(ch->sock, scratch, len);
  /* At most what it was asked, as read(2): read_some's budget counts it. */
  SH_ASSERT(n <= (int64_t)len);
  if (n > 0) {
    int rc = sh_buf_append(&ch->in, scratch, (size_t)n);
    if (rc != 0) return rc;
  }
  return n;
}

static void read_some(sh_channel *ch) {
  bool got = false;
  size_t budget = (size_t)ch->o.read_pages * SH_PAGE_DATA;
  /* Bounded by the byte budget (each turn reads at least a byte, and at
   * most what is left: read_into checks it, or stops): a busy peer cannot
   * hold the actor. */
  while (budget > 0) {
    if ((ch->state & (SH_CHS_EOF | SH_CHS_CLOSING)) || !(ch->state & SH_CHS_READABLE) ||
        sh_channel_full(ch))
      break;
    size_t asked = budget < SH_IO_SCRATCH ? budget : SH_IO_SCRATCH;
    int64_t n = read_into(ch, asked);
    if (n > 0) {
      budget -= (size_t)n;
      got = true;
      /* Fewer than asked: nothing more now, and more will be reported
       * (netplat.h), so no read just to hear -EAGAIN. Not once the peer's
       * end was reported: no report comes for the end itself again. */
      if ((size_t)n < asked && !(ch->state & SH_CHS_HUP)) ch->state &= ~SH_CHS_READABLE;
    } else if (n == 0) {
      ch->state |= SH_CHS_EOF;
    } else if (n == -EAGAIN) {
      ch->state &= ~SH_CHS_READABLE;
    } else {
      sh_channel_close_with(ch, (int)n);
    }
  }
  if (!got || (ch->state & SH_CHS_CLOSING)) return;
  int rc = sh_pipeline_read(&ch->pl);
  /* Undecoded input is bounded too: a peer that never ends a frame. */
  if (rc == 0 && ch->in.len > ch->o.write_limit) rc = -EMSGSIZE;
  if (rc < 0) sh_channel_close_with(ch, rc);
}

int sh_tcp_to_head(void *owner, sh_msg *m) {
  sh_channel *ch = owner;
  int rc = 0;
  if (m->type != &sh_bytes_type) {
    rc = -EPROTO;
  } else {
    sh_bytes *b = (sh_bytes *)m;
    if (ch->out.len + b->buf.len > ch->o.write_limit)
      rc = -ENOBUFS;
    else
      rc = sh_buf_move(&ch->out, &b->buf, b->buf.len);
  }
  sh_msg_free(m);
  if (rc == 0 && ch->out.len >= ch->o.write_high) ch->state |= SH_CHS_HIGH;
  return rc;
}

static void watermarks(sh_channel *ch) {
  if (ch->out.len >= ch->o.write_high) {
    ch->state |= SH_CHS_HIGH;
  } else if ((ch->state & SH_CHS_HIGH) && ch->out.len <= ch->o.write_low) {
    ch->state &= ~SH_CHS_HIGH;
    sh_chanflow_writable(ch);
    sh_channel_tell(ch, SH_CHANNEL_WRITABLE, 0);
  }
}

static void write_some(sh_channel *ch) {
  for (int i = 0; i < SH_FLUSH_WRITES && ch->out.len > 0 && (ch->state & SH_CHS_WRITABLE); i++) {
    struct iovec iov[SH_FLUSH_IOV];
    int cnt = sh_buf_iov(&ch->out, iov, SH_FLUSH_IOV, ch->out.len);
    int64_t n = sh_net_writev(ch->sock, iov, cnt);
    if (n > 0) {
      sh_buf_consume(&ch->out, (size_t)n);
    } else if (n == -EAGAIN || n == 0) {
      ch->state &= ~SH_CHS_WRITABLE;
    } else {
      sh_channel_close_with(ch, (int)n);
      return;
    }
  }
  /* The socket still takes bytes but the budget ran out: later. */
  if (ch->out.len > 0 && (ch->state & SH_CHS_WRITABLE)) sh_channel_poke(ch);
}

static void flush(sh_channel *ch) {
  const uint32_t not_now = SH_CHS_CLOSED | SH_CHS_CLOSING | SH_CHS_CONNECTING;
  if ((ch->state & not_now) || !(ch->state & SH_CHS_OPEN)) return;
  write_some(ch);
  if (ch->state & SH_CHS_CLOSING) return;
  watermarks(ch);
  if (ch->out.len > 0) return;
  if ((ch->state & SH_CHS_SHUT) && !(ch->state & SH_CHS_SHUT_DONE)) {
    ch->state |= SH_CHS_SHUT_DONE;
    int rc = sh_net_shutdown(ch->sock);
    if (rc != 0) sh_channel_close_with(ch, rc);
  }
  if (ch->state & SH_CHS_CLOSE_FLUSH) sh_channel_close_with(ch, 0);
}

/* The end of stream was read: the actor hears it once, the futures fail
 * (their responses could only have come before it), and once every
 * request is handled the channel closes after its last byte went out. */
static void after_eof(sh_channel *ch) {
  if (!(ch->state & SH_CHS_EOF)) return;
  if (!(ch->state & SH_CHS_EOF_TOLD)) {
    ch->state |= SH_CHS_EOF_TOLD;
    sh_channel_tell(ch, SH_CHANNEL_EOF, 0);
    sh_chanflow_fail_futures(ch, -EPIPE);
  }
  if (sh_chanflow_idle(ch)) ch->state |= SH_CHS_CLOSE_FLUSH;
}

void sh_tcp_deferred(sh_channel *ch) {
  sh_chanflow_pump(ch);
  after_eof(ch);
  flush(ch);
}

/* ---- connecting ------------------------------------------------------------ */

/* A connect's channel (a server's connections are tcpserver.c's). */
static const sh_channel_ops stream_ops = {
    .kind = SH_CH_TCP,
    .on_ready = sh_tcp_on_ready,
    .deferred = sh_tcp_deferred,
    .to_head = sh_tcp_to_head,
    .to_tail = sh_chanflow_to_tail,
    .fail_all = sh_chanflow_fail_all,
};

static void connect_done(sh_channel *ch) {
  sh_house *h = ch->house;
  uint64_t fid = ch->connect_fid;
  ch->connect_fid = 0;
  ch->state &= ~SH_CHS_CONNECTING;
  int err = sh_net_error(ch->sock);
  sh_channel_msg *r = err == 0 ? (sh_channel_msg *)sh_msg_alloc(&sh_channel_msg_type) : NULL;
  if (err == 0 && r == NULL) err = -ENOMEM;
  if (err != 0) {
    sh_future_resolve(h, fid, NULL, err);
    sh_channel_close_with(ch, err);
    return;
  }
  r->ch = ch;
  sh_channel_open(ch);
  /* The asker gave up (its timeout, its stack ended): nobody wants it. */
  if (!sh_future_resolve(h, fid, &r->hdr, 0)) sh_channel_close_with(ch, -ETIMEDOUT);
}

/* The connect's future holds its channel (future.h), and its timeout
 * closes it: the socket goes back now, not when the network gives up. */
static sh_channel *of_connector(sh_future_owner *o) {
  return SH_LIST_ENTRY(o, sh_channel, connector);
}
static void connector_hold(sh_future_owner *o) { sh_channel_hold(of_connector(o)); }
static void connector_unhold(sh_future_owner *o) { sh_channel_unhold(of_connector(o)); }

static void connect_expired(sh_future_owner *o) {
  sh_channel *ch = of_connector(o);
  ch->connect_fid = 0;
  sh_channel_close_with(ch, -ETIMEDOUT);
}

static const sh_future_owner_ops connector_ops = {connector_hold, connector_unhold,
                                                  connect_expired};

static bool io_actor_here(const sh_house *h) {
  return h->cls->kind == SH_IO_ACTOR && sh_worker_current() == &h->sys->workers[h->owner];
}

/* Starts the connect of future f; its outcome is the future's. */
static int connect_start(sh_stack *st, sh_future *f, const sh_netaddr *to,
                         const sh_channel_opts *o) {
  sh_house *h = st->house;
  sh_sock s;
  int rc = sh_sockopt_connect(to, o, &s);
  sh_channel *ch = NULL;
  if (rc == 0) rc = sh_channel_new(h, &stream_ops, s, o, &ch);
  if (rc != 0) return rc;
  int64_t ms = ch->o.connect_timeout_ms;
  sh_future_track(f);
  if (ms > 0)
    f->timer = sh_timer_ask(sh_worker_current(), h, sh_future_id(f), sh_timeout_ns(ms),
                            &sh_future_timeout_type);
  ch->peer = *to;
  ch->connect_fid = sh_future_id(f);
  ch->connector.ops = &connector_ops;
  sh_future_own(f, &ch->connector);
  ch->state |= SH_CHS_CONNECTING;
  return 0;
}

sh_future *sh_tcp_connect(sh_stack *st, const sh_netaddr *to, const sh_channel_opts *o) {
  SH_FROM_USER();
  if (st == NULL || to == NULL || !io_actor_here(st->house)) return NULL;
  if (o != NULL && o->connect_timeout_ms < SH_FOREVER) return NULL;
  sh_future *f = sh_future_new(st);
  if (f == NULL) return NULL;
  /* A stopping actor opens nothing new: its channels are being closed. */
  int rc = sh_house_stopped(st->house) ? -ESHUTDOWN : connect_start(st, f, to, o);
  if (rc != 0) sh_future_end_now(f, NULL, rc);
  return f;
}

/* ---- readiness --------------------------------------------------------------- */

void sh_tcp_on_ready(sh_channel *ch, uint32_t bits) {
  /* Noted before a connect takes the report: the one that ends a connect
   * may also carry the peer's end (it greeted and closed before we
   * looked), and no report comes for that end again. */
  if (bits & (SH_IO_HUP | SH_IO_ERR)) ch->state |= SH_CHS_HUP;
  if (ch->state & SH_CHS_CONNECTING) {
    if (bits & (SH_IO_OUT | SH_IO_ERR | SH_IO_HUP)) connect_done(ch);
    return;
  }
  if (bits & (SH_IO_IN | SH_IO_HUP | SH_IO_ERR)) ch->state |= SH_CHS_READABLE;
  if (bits & (SH_IO_OUT | SH_IO_HUP | SH_IO_ERR)) ch->state |= SH_CHS_WRITABLE;
  if (ch->state & SH_CHS_OPEN) read_some(ch);
}
