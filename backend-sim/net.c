/*
 * core/netplat.h on the simulator: a deterministic fake network of
 * simulated IPv4 addresses, one per simulation (sh_sim_configure resets it,
 * sh_plat_free frees it). Nothing touches a real socket.
 *
 * Sockets are numbered 0, 1, 2, ... in the order they are created (a
 * listener's connection when the connect arrives); a number is never
 * reused. Addresses are simulated: a socket binds ip:port (port 0: the
 * next free port from 49152 up; 0.0.0.0 binds every ip), and a listen
 * before a bind takes a free port. A connecting socket gets the
 * destination's ip and the next port from the same counter.
 *
 * Binding and the options (netbind.c). A listener, a UDP socket, a bound
 * connection and every connection a listener accepted hold their address,
 * and a TCP connection that closed first (its peer's end of stream had not
 * come) holds its own for 60 s of virtual time (TIME_WAIT). A bind shares
 * an address with each holder as Linux lets it, or is -EADDRINUSE: both
 * set SO_REUSEPORT, or both SO_REUSEADDR and the holder does not listen.
 * Listeners (UDP sockets) sharing a port by SO_REUSEPORT get connections
 * (datagrams) by a hash of the sender's address. SO_SNDBUF and SO_RCVBUF
 * bound the TCP window below (a UDP socket's SO_RCVBUF, once set, bounds
 * its unread bytes); SO_KEEPALIVE and TCP_NODELAY are recorded (nothing
 * here idles out a connection, and writes are never held back). An
 * accepted connection starts with its listener's options.
 *
 * Time. Whatever is sent arrives one latency later on the virtual clock:
 * 20 us plus a jitter of 0-30 us, drawn from the network's own stream
 * (seeded from the run's seed after the others, so that the schedule's,
 * the core's and the faults' draws stay what they were). Arrivals from one
 * socket never go backwards, so a stream stays in order. Arrivals are
 * events of the clock: run.c delivers those due before it wakes fibers,
 * and when every fiber sleeps the clock jumps to the earliest of the
 * fibers' deadlines and the next arrival.
 *
 * TCP. A connect arrives after one latency: with a listener there, the
 * connection is made (the listener: SH_IO_IN and one more queued
 * connection; the connector: SH_IO_OUT, sh_net_error 0); without one, the
 * connector gets SH_IO_OUT|SH_IO_ERR and -ECONNREFUSED, if a host is there
 * (a loopback address, or one some socket is bound to; a socket bound to
 * 0.0.0.0 makes every address a host). At an address with no host nobody
 * answers: the connect never ends (the caller's timeout does). The backlog
 * is not enforced. A write takes at most what the window leaves (in flight
 * plus unread per direction: the smaller of the writer's SO_SNDBUF and the
 * reader's SO_RCVBUF, 64 KiB each by default): past it a write is
 * partial, then -EAGAIN, and the writer gets SH_IO_OUT when the reader
 * makes room (or a buffer grows). A write's bytes are cut into 1 to 3
 * segments of random sizes, each with its own latency; a read returns
 * only bytes arrived by now. shutdown and
 * close send the end of the stream after the bytes: the peer reads them,
 * then 0, with SH_IO_IN|SH_IO_HUP; after a close arrived its writes say
 * -EPIPE. Bytes arriving at a closed socket are lost.
 *
 * UDP. A datagram (at most SH_NET_MAX_DATAGRAM bytes, IPv4's 65,507, else
 * -EMSGSIZE) arrives one latency later at the socket bound to its
 * destination then, if any (else it is lost, as when 1024 are unread, or
 * when its bytes would pass the SO_RCVBUF the program set); recvfrom
 * returns one datagram, cut to the length asked for.
 *
 * Readiness is edge-triggered: an arrival (or room to write) adds the
 * socket to its watching worker's ready list, once, with the events ORed,
 * and makes that worker runnable if parked; its wait (sh_plat_wait)
 * returns at once while the list has something, and hands it to the
 * readiness function with, as epoll does, whatever else holds then (writable,
 * readable, at the end of stream, reset). A new watch reports what the
 * socket already has. Closing a socket takes it out of every list.
 *
 * Faults (core/base/faults.h: decided, recorded, replayed and shrunk by
 * fault.c, never drawn from the network's stream; their sizes are):
 *   sh/net/reset      at a write (which fails) or a segment's arrival: the
 *                     connection is reset; both ends get -ECONNRESET from
 *                     every read and write, and SH_IO_HUP|SH_IO_ERR
 *   sh/net/delay      something sent (a segment, an end of stream, a
 *                     connect, a datagram) is 1-20 ms late (order kept)
 *   sh/net/partition  at a connect or write: the two ips are cut for
 *                     50-200 ms; what is sent meanwhile, connects included,
 *                     arrives when it heals
 *   sh/net/write      a write takes fewer bytes than it could (at least 1)
 *   sh/net/read       a read returns fewer bytes than it could (at least
 *                     1): a short read, never an error here
 *   sh/net/connect    a connect is refused even with a listener there
 *   sh/net/accept     an accept fails with -EMFILE; the connection stays
 *   sh/net/drop       a datagram is lost
 *   sh/net/dup        a datagram arrives twice
 *   sh/net/reorder    a datagram is held back until the socket's next one
 *                     is sent, and arrives after it (or goes alone 1 ms on)
 *
 * Determinism. Every draw of the stream (latency, segmentation, sizes),
 * every send and every arrival is mixed into the trace hash; with a trace
 * file, each segment or datagram delivered is a flow arrow ("net") from
 * the sender's track at the send to the receiving worker's at the arrival.
 */
#include "net.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fiu-local.h>

#include "base/check.h"
#include "base/faults.h"
#include "netsock.h"
#include "node.h"
#include "nodemem.h"
#include "run.h"

#define SH_SIMNET_LATENCY_NS 20000u
#define SH_SIMNET_JITTER_NS 30000u
#define SH_SIMNET_DELAY_NS 1000000u   /* sh/net/delay: at least this, */
#define SH_SIMNET_DELAY_SPAN 19000000u /* plus up to this */
#define SH_SIMNET_CUT_NS 50000000u    /* sh/net/partition: at least this, */
#define SH_SIMNET_CUT_SPAN 150000000u /* plus up to this */
#define SH_SIMNET_MAX_CUTS 16

typedef struct sh_simnet_cut {
  uint32_t a, b;
  uint64_t until;
} sh_simnet_cut;

typedef struct sh_simnet_list {
  sh_sock *ids;
  uint32_t n, cap;
} sh_simnet_list;

static struct {
  sh_simrng rng;
  sh_simnet_sock **tab; /* by number; NULL once closed */
  uint32_t nsocks, capsocks;
  sh_simnet_ev *heap; /* arrivals, earliest (at, seq) first */
  uint32_t nev, capev;
  uint64_t seq;
  sh_simnet_cut cuts[SH_SIMNET_MAX_CUTS];
  uint32_t ncuts;
  sh_net_ready_fn ready_fn;
  sh_simnet_list ready[SH_SIM_MAX_FIBERS]; /* by the watching worker's fiber */
} N;

static sh_simrun *const S = &sh_simrun_state;

/* ---- small growable arrays ------------------------------------------------- */

int sh_simnet_grow(void **a, uint32_t *cap, uint32_t need, size_t size) {
  if (need <= *cap) return 0;
  uint32_t c = *cap != 0 ? *cap * 2 : 16;
  while (c < need) c *= 2;
  void *n = sh_simraw_realloc(*a, (size_t)c * size);
  if (n == NULL) return -ENOMEM;
  *a = n;
  *cap = c;
  return 0;
}

static int list_push(sh_simnet_list *l, sh_sock id) {
  if (sh_simnet_grow((void **)&l->ids, &l->cap, l->n + 1, sizeof(*l->ids)) != 0) return -ENOMEM;
  l->ids[l->n++] = id;
  return 0;
}

/* ---- sockets ------------------------------------------------------------------ */

sh_simnet_sock *sh_simnet_get(sh_sock s, sh_simnet_kind kind) {
  if (s < 0 || (uint32_t)s >= N.nsocks || N.tab[s] == NULL) return NULL;
  return kind == 0 || N.tab[s]->kind == kind ? N.tab[s] : NULL;
}

uint32_t sh_simnet_count(void) { return N.nsocks; }

int sh_simnet_sock_new(sh_simnet_kind kind, sh_simnet_sock **out) {
  if (N.nsocks == INT32_MAX) return -EMFILE;
  if (sh_simnet_grow((void **)&N.tab, &N.capsocks, N.nsocks + 1, sizeof(*N.tab)) != 0)
    return -ENOMEM;
  sh_simnet_sock *k = sh_simraw_calloc(1, sizeof(*k));
  if (k == NULL) return -ENOMEM;
  k->id = (sh_sock)N.nsocks;
  k->kind = kind;
  k->peer_id = -1;
  k->watcher = SH_SIMNET_NO_WORKER;
  k->node = sh_simnode_cur();
  sh_simnet_opts_init(k);
  N.tab[N.nsocks++] = k;
  sh_simrun_mix(SH_SIMRUN_MIX_NET);
  sh_simrun_mix(((uint64_t)kind << 32) | (uint32_t)k->id);
  *out = k;
  return 0;
}

void sh_simnet_sock_free(sh_simnet_sock *k) {
  if (k->bound) sh_simnet_unbind(k);
  sh_simnet_seg_free(k->rx);
  sh_simnet_seg_free(k->held);
  sh_simraw_free(k->acceptq);
  N.tab[k->id] = NULL; /* its ready-list entry is skipped from now on */
  sh_simraw_free(k);
}

/* ---- time --------------------------------------------------------------------- */

/* Every value the network draws is a decision of the run's choice sequence
 * (its own stream): replayed from a replay file, and lowered toward 0 (no
 * delay, one segment, the shortest cut) by shrinking. */
uint64_t sh_simnet_draw(uint64_t n) {
  uint64_t v = sh_sim_draw(SH_SIM_STREAM_NET, n, sh_simrng_below(&N.rng, n));
  sh_simrun_mix(SH_SIMRUN_MIX_NET);
  sh_simrun_mix(v);
  return v;
}

static bool cut_matches(const sh_simnet_cut *c, uint32_t a, uint32_t b) {
  return (c->a == a && c->b == b) || (c->a == b && c->b == a);
}

void sh_simnet_maybe_partition(uint32_t a, uint32_t b) {
  if (!sh_fault("sh/net/partition")) return;
  uint64_t until = S->now + SH_SIMNET_CUT_NS + sh_simnet_draw(SH_SIMNET_CUT_SPAN);
  for (uint32_t i = 0; i < N.ncuts; i++)
    if (cut_matches(&N.cuts[i], a, b) || N.cuts[i].until <= S->now) {
      N.cuts[i] = (sh_simnet_cut){a, b, until > N.cuts[i].until ? until : N.cuts[i].until};
      return;
    }
  if (N.ncuts < SH_SIMNET_MAX_CUTS) N.cuts[N.ncuts++] = (sh_simnet_cut){a, b, until};
}

uint64_t sh_simnet_arrival(sh_simnet_sock *k, uint32_t to) {
  uint64_t at = S->now + SH_SIMNET_LATENCY_NS + sh_simnet_draw(SH_SIMNET_JITTER_NS);
  if (sh_fault("sh/net/delay")) at += SH_SIMNET_DELAY_NS + sh_simnet_draw(SH_SIMNET_DELAY_SPAN);
  for (uint32_t i = 0; i < N.ncuts; i++)
    if (cut_matches(&N.cuts[i], k->local.ip, to) && N.cuts[i].until > at) at = N.cuts[i].until;
  if (at < k->last_at) at = k->last_at;
  k->last_at = at;
  return at;
}

/* ---- arrivals: a binary heap on (at, seq) ------------------------------------------ */

static bool before(const sh_simnet_ev *a, const sh_simnet_ev *b) {
  return a->at != b->at ? a->at < b->at : a->seq < b->seq;
}

static void swap_ev(uint32_t i, uint32_t j) {
  sh_simnet_ev t = N.heap[i];
  N.heap[i] = N.heap[j];
  N.heap[j] = t;
}

static void pop_ev(sh_simnet_ev *out) {
  *out = N.heap[0];
  N.heap[0] = N.heap[--N.nev];
  for (uint32_t i = 0, depth = 0;; depth++) { /* bounded by the heap's depth */
    SH_ASSERT(depth < 32); /* i at least doubles each turn, below nev */
    uint32_t l = 2 * i + 1, m = i;
    if (l < N.nev && before(&N.heap[l], &N.heap[m])) m = l;
    if (l + 1 < N.nev && before(&N.heap[l + 1], &N.heap[m])) m = l + 1;
    if (m == i) return;
    swap_ev(i, m);
    i = m;
  }
}

/* A flow's id: the arrival's number, apart from the asks' ids. */
static uint64_t flow_id(uint64_t seq) { return 0x4E45540000000000ull ^ seq; }

static const char *ev_name(const sh_simnet_ev *ev) {
  static const char *const names[] = {"?", "tcp", "fin", "connect", "udp", "release"};
  return names[ev->kind <= SH_SIMNET_EV_RELEASE ? ev->kind : 0];
}

int sh_simnet_send(sh_simnet_ev *ev) {
  /* Later than now: what a delivery sends waits for a later one (deliver). */
  SH_ASSERT(ev->at > S->now);
  if (sh_simnet_grow((void **)&N.heap, &N.capev, N.nev + 1, sizeof(*N.heap)) != 0) return -ENOMEM;
  ev->seq = N.seq++;
  const sh_simnet_sock *from = sh_simnet_get(ev->src, 0);
  ev->from_node = from != NULL ? from->node : sh_simnode_cur();
  uint32_t i = N.nev++;
  N.heap[i] = *ev;
  for (; i > 0 && before(&N.heap[i], &N.heap[(i - 1) / 2]); i = (i - 1) / 2)
    swap_ev(i, (i - 1) / 2);
  sh_simrun_mix(SH_SIMRUN_MIX_NET);
  sh_simrun_mix(((uint64_t)ev->kind << 32) | (uint32_t)ev->src);
  sh_simrun_mix(ev->at);
  sh_simrun_mix(ev->seg != NULL ? ev->seg->len : 0);
  if (S->trace != NULL)
    sh_simtrace_net(S->trace, S->now, sh_simrun_cur(), true, flow_id(ev->seq), ev_name(ev));
  /* The clock must stop at it: it is as good as a sleeper's deadline. */
  if (S->tab != NULL && ev->at < S->tab->next_deadline) S->tab->next_deadline = ev->at;
  return 0;
}

uint64_t sh_simnet_next(void) { return N.nev > 0 ? N.heap[0].at : SH_PLAT_NO_DEADLINE; }

static sh_simnet_sock *deliver_one(sh_simnet_ev *ev) {
  if (ev->kind == SH_SIMNET_EV_DGRAM || ev->kind == SH_SIMNET_EV_RELEASE)
    return sh_simnet_udp_deliver(ev);
  return sh_simnet_tcp_deliver(ev);
}

void sh_simnet_deliver_ev(sh_simnet_ev *ev, uint64_t now) {
  sh_simnet_sock *k = deliver_one(ev);
  sh_simrun_mix(SH_SIMRUN_MIX_NET);
  sh_simrun_mix(ev->seq);
  sh_simrun_mix(k != NULL ? (uint64_t)(uint32_t)k->id : UINT64_MAX);
  if (S->trace != NULL && k != NULL && ev->kind != SH_SIMNET_EV_RELEASE) {
    uint32_t track = k->watcher != SH_SIMNET_NO_WORKER ? k->watcher : sh_simrun_cur();
    sh_simtrace_net(S->trace, now, track, false, flow_id(ev->seq), ev_name(ev));
  }
}

void sh_simnet_deliver(uint64_t now) {
  /* Bounded: each pass takes one arrival; a delivery sends only later ones. */
  while (N.nev > 0 && N.heap[0].at <= now) {
    sh_simnet_ev ev;
    pop_ev(&ev);
    if (!sh_simnet_cut_holds(&ev)) sh_simnet_deliver_ev(&ev, now);
  }
}

/* ---- segments ---------------------------------------------------------------------- */

sh_simnet_seg *sh_simnet_seg_new(const struct iovec *iov, int iovcnt, size_t skip, size_t len) {
  sh_simnet_seg *s = sh_simraw_malloc(sizeof(*s) + len);
  if (s == NULL) return NULL;
  memset(s, 0, sizeof(*s));
  s->len = (uint32_t)len;
  size_t done = 0;
  for (int i = 0; i < iovcnt && done < len; i++) {
    size_t l = iov[i].iov_len;
    if (skip >= l) {
      skip -= l;
      continue;
    }
    size_t n = l - skip < len - done ? l - skip : len - done;
    memcpy(s->data + done, (const char *)iov[i].iov_base + skip, n);
    done += n;
    skip = 0;
  }
  return s;
}

void sh_simnet_seg_free(sh_simnet_seg *s) {
  while (s != NULL) { /* bounded by the chain, whose end rx_push marks */
    sh_simnet_seg *n = s->next;
    sh_simraw_free(s);
    s = n;
  }
}

void sh_simnet_rx_push(sh_simnet_sock *k, sh_simnet_seg *s) {
  s->next = NULL;
  if (k->rx_tail != NULL)
    k->rx_tail->next = s;
  else
    k->rx = s;
  k->rx_tail = s;
  k->rx_count++;
  k->rx_bytes += s->len - s->off;
}

/* ---- readiness ------------------------------------------------------------------------ */

void sh_simnet_notify(sh_simnet_sock *k, uint32_t events) {
  k->ready |= events;
  if (k->watcher == SH_SIMNET_NO_WORKER || k->listed) return;
  /* Out of memory loses the report, not the state: the next one lists it. */
  if (list_push(&N.ready[k->watcher], k->id) != 0) return;
  k->listed = true;
  sh_simtab *p = S->tab;
  if (p == NULL || !sh_simrun_is_worker(p, k->watcher)) return;
  sh_simrun_fiber *f = &p->f[k->watcher];
  if (f->state != SH_SIMRUN_PARKED) return; /* its next wait sees the list */
  sh_simrun_make_runnable(f);
  sh_simrun_recompute_deadline(p);
}

uint32_t sh_simnet_level(const sh_simnet_sock *k) {
  if (k->kind == SH_SIMNET_UDP) return SH_IO_OUT | (k->rx != NULL ? SH_IO_IN : 0u);
  return sh_simnet_tcp_level(k);
}

/* Drops the entries of closed sockets; whether one is left. */
bool sh_simnet_ready(uint32_t w) {
  if (w >= SH_SIM_MAX_FIBERS) return false;
  sh_simnet_list *l = &N.ready[w];
  uint32_t n = 0;
  for (uint32_t i = 0; i < l->n; i++)
    if (sh_simnet_get(l->ids[i], 0) != NULL) l->ids[n++] = l->ids[i];
  l->n = n;
  return n > 0;
}

/* One function for every system: the core's, the same in each. */
void sh_net_set_ready(sh_plat *p, sh_net_ready_fn fn) {
  (void)p;
  N.ready_fn = fn;
}

int sh_net_watch(sh_plat *p, uint32_t worker, sh_sock s, void *token) {
  sh_simnet_sock *k = sh_simnet_get(s, 0);
  if (k == NULL) return -EBADF;
  if (p == NULL || worker >= p->nworkers) return -EINVAL;
  if (k->watcher != SH_SIMNET_NO_WORKER) return -EEXIST;
  k->watcher = p->fiber[worker];
  k->token = token;
  uint32_t now = k->ready | sh_simnet_level(k);
  k->ready = 0;
  if (now != 0) sh_simnet_notify(k, now);
  return 0;
}

uint32_t sh_simnet_report(uint32_t worker, uint32_t max) {
  if (worker >= SH_SIM_MAX_FIBERS) return 0;
  sh_simnet_list *l = &N.ready[worker];
  uint32_t i = 0, got = 0;
  /* Bounded by max. The list may grow meanwhile: the readiness function
   * queues its channel's event, whose scheduling points let other fibers
   * list more sockets for this worker, always at the end (nothing takes an
   * entry out but this walk and the worker's own park), which the walk by
   * index relies on. */
  for (; i < l->n && got < max; i++) {
    sh_simnet_sock *k = sh_simnet_get(l->ids[i], 0);
    if (k == NULL) continue;
    /* As epoll's edge-triggered reports: the edge decides when, the
     * report says all the socket has now. */
    uint32_t ev = k->ready | sh_simnet_level(k);
    k->ready = 0;
    k->listed = false;
    got++;
    sh_simrun_mix(SH_SIMRUN_MIX_NET);
    sh_simrun_mix(((uint64_t)ev << 32) | (uint32_t)k->id);
    uint32_t listed = l->n;
    if (N.ready_fn != NULL) N.ready_fn(k->token, ev);
    SH_ASSERT(l->n >= listed); /* only grown, at its end */
  }
  if (i > 0) memmove(l->ids, l->ids + i, (l->n - i) * sizeof(*l->ids));
  l->n -= i;
  return got;
}

/* ---- the simulation's network -------------------------------------------------------------- */

void sh_simnet_end(void) {
  while (N.nev > 0) { /* bounded by the heap */
    sh_simnet_ev ev;
    pop_ev(&ev);
    sh_simnet_seg_free(ev.seg);
  }
  for (uint32_t i = 0; i < N.nsocks; i++)
    if (N.tab[i] != NULL) sh_simnet_sock_free(N.tab[i]);
  sh_simraw_free(N.tab);
  sh_simraw_free(N.heap);
  sh_simnet_bind_end();
  sh_simnet_node_end();
  for (uint32_t w = 0; w < SH_SIM_MAX_FIBERS; w++) sh_simraw_free(N.ready[w].ids);
  memset(&N, 0, sizeof(N));
}

void sh_simnet_configure(const sh_sim_options *o, uint64_t *x) {
  (void)o;
  sh_simnet_end();
  sh_simrng_seed(&N.rng, x);
}
