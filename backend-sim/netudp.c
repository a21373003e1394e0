/*
 * The fake network's UDP (net.c describes the model): datagrams kept
 * whole, lost, duplicated or held back by the fault points.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <fiu-local.h>

#include "base/faults.h"
#include "netsock.h"
#include "nodemem.h"
#include "run.h"

/* A held datagram goes alone after this if no other follows it. */
#define SH_SIMNET_HOLD_NS 1000000u

/* d (taken) leaves k now. */
static int send_dgram(sh_simnet_sock *k, sh_simnet_seg *d) {
  sh_simnet_ev ev = {.kind = SH_SIMNET_EV_DGRAM, .src = k->id, .dst = -1, .to = d->to, .seg = d};
  ev.at = sh_simnet_arrival(k, d->to.ip);
  int rc = sh_simnet_send(&ev);
  if (rc != 0) sh_simnet_seg_free(d);
  return rc;
}

static sh_simnet_seg *dgram_new(const sh_simnet_sock *k, const void *buf, size_t len,
                                const sh_netaddr *to) {
  struct iovec iov = {(void *)(uintptr_t)buf, len};
  sh_simnet_seg *d = sh_simnet_seg_new(&iov, 1, 0, len);
  if (d == NULL) return NULL;
  d->from = k->local;
  d->to = *to;
  return d;
}

/* sh/net/reorder: d (taken) waits for k's next datagram, or the release. */
static int hold(sh_simnet_sock *k, sh_simnet_seg *d) {
  sh_simnet_ev ev = {.kind = SH_SIMNET_EV_RELEASE, .src = k->id, .dst = -1, .ref = k->held_ref + 1};
  ev.at = sh_simrun_state.now + SH_SIMNET_HOLD_NS;
  if (sh_simnet_send(&ev) != 0) return send_dgram(k, d);
  k->held = d;
  k->held_ref = ev.ref;
  return 0;
}

/* d (taken) goes, then the datagram held back, which arrives after it. */
static int send_then_held(sh_simnet_sock *k, sh_simnet_seg *d) {
  int rc = send_dgram(k, d);
  sh_simnet_seg *h = k->held;
  k->held = NULL;
  (void)send_dgram(k, h); /* out of memory: it is lost, as UDP may */
  return rc;
}

int64_t sh_net_sendto(sh_sock s, const void *buf, size_t len, const sh_netaddr *to) {
  sh_simnet_sock *k = sh_simnet_get(s, SH_SIMNET_UDP);
  if (k == NULL) return -EBADF;
  if (len > SH_NET_MAX_DATAGRAM) return -EMSGSIZE;
  /* Not bound yet: a free port of every address, as Linux does. */
  int rc = k->bound ? 0 : sh_simnet_bind(k, &(sh_netaddr){0, 0});
  if (rc != 0) return rc;
  sh_simnet_seg *d = dgram_new(k, buf, len, to);
  if (d == NULL) return -ENOMEM;
  if (sh_fault("sh/net/drop")) {
    sh_simrun_mix(SH_SIMRUN_MIX_NET);
    sh_simrun_mix(len);
    sh_simnet_seg_free(d);
    return (int64_t)len;
  }
  if (sh_fault("sh/net/dup")) {
    sh_simnet_seg *c = dgram_new(k, buf, len, to);
    if (c != NULL) (void)send_dgram(k, c); /* out of memory: no copy */
  }
  if (k->held != NULL)
    rc = send_then_held(k, d);
  else if (sh_fault("sh/net/reorder"))
    rc = hold(k, d);
  else
    rc = send_dgram(k, d);
  return rc != 0 ? rc : (int64_t)len;
}

int64_t sh_net_recvfrom(sh_sock s, void *buf, size_t len, sh_netaddr *from) {
  sh_simnet_sock *k = sh_simnet_get(s, SH_SIMNET_UDP);
  if (k == NULL) return -EBADF;
  sh_simnet_seg *d = k->rx;
  if (d == NULL) return -EAGAIN;
  k->rx = d->next;
  if (k->rx == NULL) k->rx_tail = NULL;
  k->rx_count--;
  k->rx_bytes -= d->len;
  size_t n = len < d->len ? len : d->len;
  memcpy(buf, d->data, n);
  if (from != NULL) *from = d->from;
  sh_simraw_free(d);
  sh_simrun_mix(SH_SIMRUN_MIX_NET);
  sh_simrun_mix(((uint64_t)n << 32) | (uint32_t)k->id);
  return (int64_t)n;
}

sh_simnet_sock *sh_simnet_udp_deliver(sh_simnet_ev *ev) {
  if (ev->kind == SH_SIMNET_EV_RELEASE) {
    sh_simnet_sock *k = sh_simnet_get(ev->src, SH_SIMNET_UDP);
    if (k != NULL && k->held != NULL && k->held_ref == ev->ref) {
      sh_simnet_seg *h = k->held;
      k->held = NULL;
      (void)send_dgram(k, h); /* out of memory: it is lost, as UDP may */
    }
    return NULL;
  }
  sh_simnet_sock *k = sh_simnet_find(SH_SIMNET_UDP, &ev->to, &ev->seg->from);
  /* Nobody there, or full (by count, or by SO_RCVBUF if set): lost. */
  bool set = k != NULL && (k->opts_set & (1u << SH_SO_RCVBUF)) != 0;
  if (k == NULL || k->rx_count >= SH_SIMNET_UDP_QUEUE ||
      (set && k->rx_bytes + ev->seg->len > (uint32_t)k->opts[SH_SO_RCVBUF])) {
    sh_simnet_seg_free(ev->seg);
    return NULL;
  }
  sh_simnet_rx_push(k, ev->seg);
  sh_simnet_notify(k, SH_IO_IN);
  return k;
}
