/*
 * The fake network's TCP (net.c describes the model): listeners,
 * connections, byte streams with a window, end of stream, resets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <fiu-local.h>

#include "base/check.h"
#include "base/faults.h"
#include "netsock.h"
#include "nodemem.h"
#include "run.h"

static sh_simnet_sock *peer_of(const sh_simnet_sock *k) {
  return sh_simnet_get(k->peer_id, SH_SIMNET_STREAM);
}

/* What k may have in flight plus unread at its peer: the smaller of its
 * SO_SNDBUF and the peer's SO_RCVBUF (a window each by default). */
static uint32_t window(const sh_simnet_sock *k) {
  const sh_simnet_sock *p = peer_of(k);
  uint32_t snd = (uint32_t)k->opts[SH_SO_SNDBUF];
  uint32_t rcv = p != NULL ? (uint32_t)p->opts[SH_SO_RCVBUF] : UINT32_MAX;
  return snd < rcv ? snd : rcv;
}

/* The writer k has room again: told once, if it waited for it. */
static void room_back(sh_simnet_sock *k) {
  if (!k->want_out || k->inflight >= window(k)) return;
  k->want_out = false;
  sh_simnet_notify(k, SH_IO_OUT);
}

void sh_simnet_tcp_window_changed(sh_simnet_sock *k) {
  room_back(k); /* its send buffer */
  sh_simnet_sock *w = peer_of(k);
  if (w != NULL) room_back(w); /* its receive buffer, the peer's window */
}

/* Drops what k has not read. */
static void rx_clear(sh_simnet_sock *k) {
  sh_simnet_seg_free(k->rx);
  k->rx = k->rx_tail = NULL;
  k->rx_count = 0;
  k->rx_bytes = 0;
}

/* Both ends of k's connection are reset. */
static void reset_conn(sh_simnet_sock *k) {
  sh_simnet_sock *ends[2] = {k, peer_of(k)};
  for (int i = 0; i < 2; i++) {
    sh_simnet_sock *e = ends[i];
    if (e == NULL || e->reset) continue;
    e->reset = true;
    e->err = ECONNRESET;
    rx_clear(e);
    sh_simnet_notify(e, SH_IO_HUP | SH_IO_ERR);
  }
}

void sh_simnet_tcp_reset(sh_simnet_sock *k) { reset_conn(k); }

uint32_t sh_simnet_tcp_level(const sh_simnet_sock *k) {
  if (k->kind == SH_SIMNET_LISTENER) return k->nq > 0 ? SH_IO_IN : 0u;
  if (k->reset) return SH_IO_HUP | SH_IO_ERR;
  if (k->state == SH_SIMNET_REFUSED) return SH_IO_OUT | SH_IO_ERR;
  if (k->state != SH_SIMNET_CONNECTED) return 0;
  uint32_t e = k->inflight < window(k) ? SH_IO_OUT : 0u;
  if (k->rx != NULL || k->rd_eof) e |= SH_IO_IN;
  if (k->rd_eof) e |= SH_IO_HUP;
  return e;
}

/* ---- listeners --------------------------------------------------------------- */

int sh_net_listen(sh_sock s, int backlog) {
  (void)backlog; /* not enforced: a connect always finds room */
  sh_simnet_sock *k = sh_simnet_get(s, SH_SIMNET_STREAM);
  if (k == NULL) return sh_simnet_get(s, SH_SIMNET_LISTENER) != NULL ? 0 : -EBADF;
  if (k->state != SH_SIMNET_IDLE) return -EINVAL;
  /* Not bound yet: a free port of every address, as Linux does. */
  int rc = k->bound ? 0 : sh_simnet_bind(k, &(sh_netaddr){0, 0});
  if (rc == 0) k->kind = SH_SIMNET_LISTENER;
  return rc;
}

int sh_net_accept(sh_sock l, sh_sock *out, sh_netaddr *peer) {
  sh_simnet_sock *k = sh_simnet_get(l, SH_SIMNET_LISTENER);
  if (k == NULL) return -EBADF;
  if (k->nq == 0) return -EAGAIN;
  if (sh_fault("sh/net/accept")) return -EMFILE;
  sh_simnet_sock *c = sh_simnet_get(k->acceptq[0], SH_SIMNET_STREAM);
  memmove(k->acceptq, k->acceptq + 1, (k->nq - 1) * sizeof(*k->acceptq));
  k->nq--;
  *out = c->id;
  if (peer != NULL) *peer = c->peer;
  return 0;
}

/* The connect of c failed: it learns so now. */
static sh_simnet_sock *refuse(sh_simnet_sock *c) {
  c->state = SH_SIMNET_REFUSED;
  c->err = ECONNREFUSED;
  sh_simnet_notify(c, SH_IO_OUT | SH_IO_ERR);
  return c;
}

/* c's connect reached a listener l: the server's end is queued on l. */
static sh_simnet_sock *connect_to(sh_simnet_sock *c, sh_simnet_sock *l, const sh_netaddr *to) {
  if (l->nq == l->capq) {
    uint32_t cap = l->capq != 0 ? l->capq * 2 : 8;
    sh_sock *q = sh_simraw_realloc(l->acceptq, cap * sizeof(*q));
    if (q == NULL) return refuse(c);
    l->acceptq = q;
    l->capq = cap;
  }
  sh_simnet_sock *srv;
  if (sh_simnet_sock_new(SH_SIMNET_STREAM, &srv) != 0) return refuse(c);
  srv->state = SH_SIMNET_CONNECTED;
  srv->node = l->node; /* made by the network, on whatever fiber runs: the listener's */
  memcpy(srv->opts, l->opts, sizeof(srv->opts)); /* as Linux does, the listener's */
  srv->opts_set = l->opts_set;
  sh_simnet_hold(srv, to);
  srv->peer = c->local;
  srv->peer_id = c->id;
  c->peer_id = srv->id;
  c->state = SH_SIMNET_CONNECTED;
  c->want_out = false;
  l->acceptq[l->nq++] = srv->id;
  sh_simnet_notify(l, SH_IO_IN);
  sh_simnet_notify(c, SH_IO_OUT);
  return l;
}

static sh_simnet_sock *connect_arrives(const sh_simnet_ev *ev) {
  sh_simnet_sock *c = sh_simnet_get(ev->src, SH_SIMNET_STREAM);
  if (c == NULL || c->state != SH_SIMNET_CONNECTING) return NULL; /* closed meanwhile */
  sh_simnet_sock *l = ev->flag ? NULL : sh_simnet_find(SH_SIMNET_LISTENER, &ev->to, &c->local);
  if (l == NULL && !ev->flag && !sh_simnet_host(ev->to.ip)) return NULL; /* nobody answers */
  return l != NULL ? connect_to(c, l, &ev->to) : refuse(c);
}

int sh_net_connect(sh_sock s, const sh_netaddr *to) {
  sh_simnet_sock *k = sh_simnet_get(s, SH_SIMNET_STREAM);
  if (k == NULL) return sh_simnet_get(s, 0) != NULL ? -EOPNOTSUPP : -EBADF;
  if (k->state != SH_SIMNET_IDLE) return k->state == SH_SIMNET_CONNECTING ? -EALREADY : -EISCONN;
  k->state = SH_SIMNET_CONNECTING;
  /* One host per address: the connection starts from the one it goes to
   * (or from the address it was bound to). */
  if (!k->bound) k->local = (sh_netaddr){sh_simnet_source_ip(k, to->ip), sh_simnet_port()};
  k->peer = *to;
  sh_simnet_maybe_partition(k->local.ip, to->ip);
  sh_simnet_ev ev = {.kind = SH_SIMNET_EV_CONNECT, .src = k->id, .dst = -1, .to = *to};
  ev.flag = sh_fault("sh/net/connect");
  ev.at = sh_simnet_arrival(k, to->ip);
  int rc = sh_simnet_send(&ev);
  if (rc != 0) k->state = SH_SIMNET_IDLE; /* out of memory: the caller closes it */
  return rc;
}

int sh_net_error(sh_sock s) {
  sh_simnet_sock *k = sh_simnet_get(s, 0);
  if (k == NULL) return -EBADF;
  int e = k->err;
  k->err = 0;
  return -e;
}

int sh_net_local(sh_sock s, sh_netaddr *out) {
  sh_simnet_sock *k = sh_simnet_get(s, 0);
  if (k == NULL) return -EBADF;
  *out = k->local;
  return 0;
}

/* ---- byte streams ------------------------------------------------------------- */

/* Takes n unread bytes of k into buf. */
static void rx_take(sh_simnet_sock *k, unsigned char *buf, size_t n) {
  size_t done = 0;
  SH_ASSERT(n <= k->rx_bytes);
  while (done < n) { /* bounded: n <= k->rx_bytes, the bytes of the chain */
    sh_simnet_seg *s = k->rx;
    SH_ASSERT(s != NULL);
    size_t c = s->len - s->off < n - done ? s->len - s->off : n - done;
    memcpy(buf + done, s->data + s->off, c);
    s->off += (uint32_t)c;
    done += c;
    if (s->off < s->len) break;
    k->rx = s->next;
    if (k->rx == NULL) k->rx_tail = NULL;
    k->rx_count--;
    sh_simraw_free(s);
  }
  k->rx_bytes -= n;
}

int64_t sh_net_read(sh_sock s, void *buf, size_t len) {
  sh_simnet_sock *k = sh_simnet_get(s, SH_SIMNET_STREAM);
  if (k == NULL) return -EBADF;
  if (k->reset) return -ECONNRESET;
  if (k->state != SH_SIMNET_CONNECTED)
    return k->state == SH_SIMNET_CONNECTING ? -EAGAIN : -ENOTCONN;
  if (k->rx == NULL) return k->rd_eof ? 0 : -EAGAIN;
  size_t n = len < k->rx_bytes ? len : k->rx_bytes;
  if (n > 1 && sh_fault("sh/net/read")) n = 1 + sh_simnet_draw(n - 1);
  rx_take(k, buf, n);
  /* A short read with bytes left behind reports them again (netplat.h):
   * the caller may take a short read for "nothing more now". */
  if (n < len && k->rx != NULL) sh_simnet_notify(k, SH_IO_IN);
  sh_simrun_mix(SH_SIMRUN_MIX_NET);
  sh_simrun_mix(((uint64_t)n << 32) | (uint32_t)k->id);
  sh_simnet_sock *w = peer_of(k);
  if (w != NULL) {
    w->inflight -= (uint32_t)n;
    room_back(w);
  }
  return (int64_t)n;
}

/* Sends n bytes of iov as 1 to 3 segments of random sizes; how many went
 * (fewer only when out of memory). */
static size_t send_segments(sh_simnet_sock *k, const struct iovec *iov, int iovcnt, size_t n) {
  uint64_t nseg = 1 + sh_simnet_draw(n < 3 ? n : 3);
  size_t off = 0;
  for (uint64_t i = 0; i < nseg; i++) {
    size_t left = nseg - i - 1; /* segments after this one, a byte each at least */
    size_t size = left == 0 ? n - off : 1 + sh_simnet_draw(n - off - left);
    SH_ASSERT(size >= 1 && off + size + left <= n);
    sh_simnet_ev ev = {.kind = SH_SIMNET_EV_SEG, .src = k->id, .dst = k->peer_id};
    ev.seg = sh_simnet_seg_new(iov, iovcnt, off, size);
    if (ev.seg == NULL) break;
    ev.at = sh_simnet_arrival(k, k->peer.ip);
    if (sh_simnet_send(&ev) != 0) {
      sh_simnet_seg_free(ev.seg);
      break;
    }
    off += size;
  }
  return off;
}

int64_t sh_net_writev(sh_sock s, const struct iovec *iov, int iovcnt) {
  sh_simnet_sock *k = sh_simnet_get(s, SH_SIMNET_STREAM);
  if (k == NULL) return -EBADF;
  if (k->reset) return -ECONNRESET;
  if (k->state == SH_SIMNET_CONNECTING) {
    k->want_out = true;
    return -EAGAIN;
  }
  if (k->state != SH_SIMNET_CONNECTED) return -ENOTCONN;
  if (k->wr_shut || k->peer_closed) return -EPIPE;
  size_t total = 0;
  for (int i = 0; i < iovcnt; i++) total += iov[i].iov_len;
  if (total == 0) return 0;
  if (sh_fault("sh/net/reset")) {
    reset_conn(k);
    return -ECONNRESET;
  }
  sh_simnet_maybe_partition(k->local.ip, k->peer.ip);
  uint32_t win = window(k);
  size_t room = win > k->inflight ? win - k->inflight : 0;
  size_t n = total < room ? total : room;
  if (n < total) k->want_out = true; /* reported when the reader makes room */
  if (n == 0) return -EAGAIN;
  bool cut = n > 1 && sh_fault("sh/net/write");
  if (cut) n = 1 + sh_simnet_draw(n - 1);
  n = send_segments(k, iov, iovcnt, n);
  if (n == 0) return -ENOMEM;
  k->inflight += (uint32_t)n;
  /* Cut short with room left: an edge, as the room is there now. */
  if (cut && k->inflight < win) sh_simnet_notify(k, SH_IO_OUT);
  return (int64_t)n;
}

/* The end of k's stream goes after its bytes (closed: k is closing). */
static int send_fin(sh_simnet_sock *k, bool closed) {
  sh_simnet_ev ev = {.kind = SH_SIMNET_EV_FIN, .flag = closed, .src = k->id, .dst = k->peer_id};
  ev.at = sh_simnet_arrival(k, k->peer.ip);
  return sh_simnet_send(&ev);
}

int sh_net_shutdown(sh_sock s) {
  sh_simnet_sock *k = sh_simnet_get(s, SH_SIMNET_STREAM);
  if (k == NULL) return -EBADF;
  if (k->state != SH_SIMNET_CONNECTED) return -ENOTCONN;
  if (k->wr_shut || k->reset) return 0;
  k->wr_shut = true;
  return send_fin(k, false);
}

void sh_net_close(sh_sock s) {
  sh_simnet_sock *k = sh_simnet_get(s, 0);
  if (k == NULL) return;
  /* Connections never accepted: their connectors see a reset. */
  for (uint32_t i = 0; k->kind == SH_SIMNET_LISTENER && i < k->nq; i++) {
    sh_simnet_sock *c = sh_simnet_get(k->acceptq[i], SH_SIMNET_STREAM);
    reset_conn(c);
    sh_simnet_sock_free(c);
  }
  /* Out of memory: the peer is not told (it may still be reset later). */
  if (k->kind == SH_SIMNET_STREAM && k->state == SH_SIMNET_CONNECTED && !k->reset)
    (void)send_fin(k, true);
  sh_simnet_sock_free(k);
}

/* ---- arrivals -------------------------------------------------------------------- */

static sh_simnet_sock *seg_arrives(sh_simnet_ev *ev) {
  sh_simnet_sock *k = sh_simnet_get(ev->dst, SH_SIMNET_STREAM);
  if (k == NULL || k->reset) { /* closed or reset meanwhile: lost */
    if (k == NULL) sh_simnet_dead_end(ev);
    sh_simnet_seg_free(ev->seg);
    return NULL;
  }
  if (sh_fault("sh/net/reset")) {
    sh_simnet_seg_free(ev->seg);
    reset_conn(k);
    return k;
  }
  sh_simnet_rx_push(k, ev->seg);
  sh_simnet_notify(k, SH_IO_IN);
  return k;
}

static sh_simnet_sock *fin_arrives(const sh_simnet_ev *ev) {
  sh_simnet_sock *k = sh_simnet_get(ev->dst, SH_SIMNET_STREAM);
  if (k == NULL) sh_simnet_dead_end(ev);
  if (k == NULL || k->reset) return NULL;
  k->rd_eof = true;
  uint32_t e = SH_IO_IN | SH_IO_HUP;
  if (ev->flag) {
    k->peer_closed = true;
    /* A writer waiting for room would wait for ever: it learns now. */
    if (k->want_out) e |= SH_IO_OUT;
    k->want_out = false;
  }
  sh_simnet_notify(k, e);
  return k;
}

sh_simnet_sock *sh_simnet_tcp_deliver(sh_simnet_ev *ev) {
  switch (ev->kind) {
  case SH_SIMNET_EV_CONNECT:
    return connect_arrives(ev);
  case SH_SIMNET_EV_SEG:
    return seg_arrives(ev);
  case SH_SIMNET_EV_FIN:
    return fin_arrives(ev);
  default:
    return NULL;
  }
}
