/*
 * UDP on channels: each datagram read becomes an sh_datagram message that
 * enters the pipeline at its head (no byte decoding: a datagram is a
 * frame); an sh_datagram that reaches the head on the way out is sent at
 * once. UDP keeps no write buffer: a datagram the socket cannot take now
 * is dropped, as the network could have dropped it.
 */
#include "net/udp.h"

#include "net/buffer.h"
#include "net/chanflow.h"
#include "net/channel.h"
#include "net/sockopt.h"
#include "base/check.h"
#include "actor/house.h"
#include "sched/system.h"
#include "sched/worker.h"

/* One datagram at a time goes through the worker's buffer: read whole,
 * then copied into pooled pages; on the way out, gathered from its pages. */
_Static_assert(SH_IO_SCRATCH >= SH_NET_MAX_DATAGRAM, "a datagram fits the worker's buffer");

static void read_one(sh_channel *ch) {
  sh_netaddr from;
  uint8_t *scratch = sh_worker_scratch(sh_worker_current());
  if (scratch == NULL) {
    /* Out of memory: the datagram waits in the socket for a later try. */
    ch->state &= ~SH_CHS_READABLE;
    return;
  }
  int64_t n = sh_net_recvfrom(ch->sock, scratch, SH_NET_MAX_DATAGRAM, &from);
  SH_ASSERT(n <= SH_NET_MAX_DATAGRAM); /* at most the room it was given (netplat.h) */
  if (n == -EAGAIN) {
    ch->state &= ~SH_CHS_READABLE;
    return;
  }
  if (n < 0) {
    /* A datagram's own trouble (an ICMP error for an earlier send) ends
     * nothing on an unconnected socket. */
    return;
  }
  sh_datagram *d = (sh_datagram *)sh_msg_alloc(&sh_datagram_type);
  if (d != NULL && sh_buf_append(&d->buf, scratch, (size_t)n) != 0) {
    sh_msg_free(&d->hdr);
    d = NULL;
  }
  /* Out of memory, a datagram is lost, as the network could lose it. */
  if (d == NULL) return;
  d->peer = from;
  int rc = sh_pipeline_inbound(&ch->pl, &d->hdr);
  if (rc < 0) sh_channel_close_with(ch, rc);
}

static void on_ready(sh_channel *ch, uint32_t bits) {
  if (bits & (SH_IO_IN | SH_IO_ERR)) ch->state |= SH_CHS_READABLE;
  /* Bounded by the page budget, each datagram counted as a page whatever
   * its size (up to SH_NET_MAX_DATAGRAM, 17 pages): a count of reads. */
  for (uint32_t i = 0; i < ch->o.read_pages; i++) {
    if (!(ch->state & SH_CHS_READABLE) || (ch->state & SH_CHS_CLOSING) || sh_channel_full(ch))
      break;
    read_one(ch);
  }
}

static int to_head(void *owner, sh_msg *m) {
  sh_channel *ch = owner;
  int rc = -EPROTO;
  if (m->type == &sh_datagram_type) {
    sh_datagram *d = (sh_datagram *)m;
    size_t len = d->buf.len;
    uint8_t *scratch = sh_worker_scratch(sh_worker_current());
    rc = len > SH_NET_MAX_DATAGRAM ? -EMSGSIZE : scratch == NULL ? -ENOMEM : 0;
    if (rc == 0) {
      sh_buf_peek(&d->buf, 0, scratch, len);
      int64_t n = sh_net_sendto(ch->sock, scratch, len, &d->peer);
      /* Not now (-EAGAIN) is a loss, as the network's own would be. */
      rc = n < 0 && n != -EAGAIN ? (int)n : 0;
    }
  }
  sh_msg_free(m);
  return rc;
}

static const sh_channel_ops udp_ops = {
    .kind = SH_CH_UDP,
    .on_ready = on_ready,
    .deferred = sh_chanflow_pump,
    .to_head = to_head,
    .to_tail = sh_chanflow_to_tail,
    .fail_all = sh_chanflow_fail_all,
};

int sh_udp_open(sh_actor *self, const sh_netaddr *at, const sh_channel_opts *opts,
                sh_channel **out) {
  SH_FROM_USER();
  if (self == NULL || at == NULL || out == NULL) return -EINVAL;
  sh_house *h = self->house;
  if (h->cls->kind != SH_IO_ACTOR || sh_worker_current() != &h->sys->workers[h->owner])
    return -EINVAL;
  if (sh_house_stopped(h)) return -ESHUTDOWN;
  sh_sock s;
  int rc = sh_sockopt_udp(at, opts, &s);
  if (rc != 0) return rc;
  sh_channel *ch;
  rc = sh_channel_new(h, &udp_ops, s, opts, &ch);
  if (rc != 0) return rc;
  *out = ch;
  sh_channel_open(ch);
  return 0;
}
