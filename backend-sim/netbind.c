/*
 * The fake network's addresses and socket options (net.c describes the
 * model): new sockets, which socket holds which ip:port, the ports it
 * hands out, and what each socket's options are.
 *
 * Holding an address. A listener, a UDP socket and a bound connection
 * hold theirs, a connection a listener accepted holds the listener's, and
 * a TCP connection that closes first holds its own for SH_SIMNET_TIME_WAIT
 * after (TIME_WAIT). A bind may share an address with each socket holding
 * it as Linux lets it: both set SO_REUSEPORT, or both set SO_REUSEADDR and
 * the holder does not listen; else it is -EADDRINUSE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "netsock.h"
#include "nodemem.h"
#include "node.h"
#include "run.h"

#define SH_SIMNET_FIRST_PORT 49152u
/* How long a TCP connection that closed first holds its address: Linux's
 * TIME_WAIT, 60 s. */
#define SH_SIMNET_TIME_WAIT (60ull * 1000000000ull)

/* An address a closed connection holds until `until`. */
typedef struct sh_simnet_tw {
  sh_netaddr addr;
  bool reuseaddr, reuseport;
  uint64_t until;
} sh_simnet_tw;

static struct {
  sh_sock *ids; /* the sockets holding an address, in the order they took it */
  uint32_t n, cap;
  sh_simnet_tw *tw; /* closed connections' addresses, oldest first */
  uint32_t ntw, captw;
  uint32_t next_port;
} B = {.next_port = SH_SIMNET_FIRST_PORT};

/* ---- sockets and options --------------------------------------------------------- */

int sh_net_socket(sh_net_type type, sh_sock *out) {
  if (type != SH_NET_TCP && type != SH_NET_UDP) return -EINVAL;
  sh_simnet_sock *k;
  int rc = sh_simnet_sock_new(type == SH_NET_TCP ? SH_SIMNET_STREAM : SH_SIMNET_UDP, &k);
  if (rc == 0) *out = k->id;
  return rc;
}

void sh_simnet_opts_init(sh_simnet_sock *k) {
  k->opts[SH_SO_SNDBUF] = SH_SIMNET_WINDOW;
  k->opts[SH_SO_RCVBUF] = SH_SIMNET_WINDOW;
}

static bool is_flag(sh_sockopt opt) { return opt != SH_SO_SNDBUF && opt != SH_SO_RCVBUF; }

/* The socket whose option is asked for, after the seam's checks. */
static int opt_socket(sh_sock s, sh_sockopt opt, sh_simnet_sock **out) {
  sh_simnet_sock *k = sh_simnet_get(s, 0);
  if (k == NULL) return -EBADF;
  if ((int)opt < (int)SH_SO_REUSEADDR || (int)opt > (int)SH_TCP_NODELAY) return -EINVAL;
  bool tcp_only = opt == SH_SO_KEEPALIVE || opt == SH_TCP_NODELAY;
  if (tcp_only && k->kind == SH_SIMNET_UDP) return -ENOPROTOOPT;
  *out = k;
  return 0;
}

int sh_net_setopt(sh_sock s, sh_sockopt opt, int value) {
  sh_simnet_sock *k;
  int rc = opt_socket(s, opt, &k);
  if (rc != 0) return rc;
  if (is_flag(opt) ? value != 0 && value != 1 : value < 1) return -EINVAL;
  k->opts[opt] = value;
  k->opts_set |= 1u << opt;
  sh_simrun_mix(SH_SIMRUN_MIX_NET);
  sh_simrun_mix(((uint64_t)opt << 32) | (uint32_t)k->id);
  sh_simrun_mix((uint64_t)(uint32_t)value);
  if (!is_flag(opt) && k->kind == SH_SIMNET_STREAM) sh_simnet_tcp_window_changed(k);
  return 0;
}

int sh_net_getopt(sh_sock s, sh_sockopt opt, int *value) {
  sh_simnet_sock *k;
  int rc = opt_socket(s, opt, &k);
  if (rc != 0) return rc;
  if (value == NULL) return -EINVAL;
  *value = k->opts[opt];
  return 0;
}

/* ---- addresses ---------------------------------------------------------------- */

static bool same_addr(uint32_t bound_ip, uint16_t bound_port, const sh_netaddr *a) {
  return bound_port == a->port && (bound_ip == a->ip || bound_ip == 0 || a->ip == 0);
}

static bool is_tcp(sh_simnet_kind kind) { return kind != SH_SIMNET_UDP; }

/* Whether k may bind where a holder with these flags is (Linux's rule). */
static bool may_share(const sh_simnet_sock *k, bool reuseaddr, bool reuseport, bool listens) {
  if (k->opts[SH_SO_REUSEPORT] && reuseport) return true;
  return k->opts[SH_SO_REUSEADDR] && reuseaddr && !listens;
}

/* Forgets the TIME_WAIT addresses whose time is over. */
static void tw_expire(void) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < B.ntw; i++)
    if (B.tw[i].until > sh_simrun_state.now) B.tw[n++] = B.tw[i];
  B.ntw = n;
}

/* Whether a, for k, is held by a socket of k's protocol (or, for TCP, a
 * closed connection) that may not share it; any: by any at all (a port to
 * choose must be free, as Linux chooses). */
static bool taken(const sh_simnet_sock *k, const sh_netaddr *a, bool any) {
  for (uint32_t i = 0; i < B.n; i++) {
    sh_simnet_sock *e = sh_simnet_get(B.ids[i], 0);
    if (e == k || is_tcp(e->kind) != is_tcp(k->kind)) continue;
    if (!same_addr(e->local.ip, e->local.port, a)) continue;
    bool listens = e->kind == SH_SIMNET_LISTENER;
    if (any || !may_share(k, e->opts[SH_SO_REUSEADDR], e->opts[SH_SO_REUSEPORT], listens))
      return true;
  }
  for (uint32_t i = 0; is_tcp(k->kind) && i < B.ntw; i++) {
    const sh_simnet_tw *t = &B.tw[i];
    if (t->until <= sh_simrun_state.now || !same_addr(t->addr.ip, t->addr.port, a)) continue;
    if (any || !may_share(k, t->reuseaddr, t->reuseport, false)) return true;
  }
  return false;
}

/* A hash of `from` (FNV-1a), to spread over a SO_REUSEPORT group. */
static uint32_t spread(const sh_netaddr *from) {
  uint32_t h = 2166136261u;
  uint64_t v = ((uint64_t)from->ip << 16) | from->port;
  for (int i = 0; i < 6; i++) h = (h ^ (uint8_t)(v >> (8 * i))) * 16777619u;
  return h;
}

/* A socket of the simulation's own bound to 0.0.0.0 is not at a node's
 * address: that is another host. */
static bool foreign(const sh_simnet_sock *k, const sh_netaddr *a) {
  return k->node == 0 && k->local.ip == 0 && sh_simnode_by_ip(a->ip) != 0;
}

sh_simnet_sock *sh_simnet_find(sh_simnet_kind kind, const sh_netaddr *a, const sh_netaddr *from) {
  sh_simnet_sock *first = NULL;
  uint32_t group = 0;
  for (uint32_t i = 0; i < B.n; i++) {
    sh_simnet_sock *k = sh_simnet_get(B.ids[i], 0);
    if (k->kind != kind || !same_addr(k->local.ip, k->local.port, a) || foreign(k, a)) continue;
    if (first == NULL) first = k;
    if (k->opts[SH_SO_REUSEPORT]) group++;
  }
  if (first == NULL || !first->opts[SH_SO_REUSEPORT] || group < 2) return first;
  uint32_t pick = spread(from) % group;
  for (uint32_t i = 0; i < B.n; i++) { /* bounded: the pick-th member is there */
    sh_simnet_sock *k = sh_simnet_get(B.ids[i], 0);
    if (k->kind != kind || !same_addr(k->local.ip, k->local.port, a) || foreign(k, a)) continue;
    if (k->opts[SH_SO_REUSEPORT] && pick-- == 0) return k;
  }
  return first;
}

bool sh_simnet_host(uint32_t ip) {
  uint32_t n = sh_simnode_by_ip(ip);
  if (n != 0) return sh_simnode_is_up(n); /* a node answers while it is booted */
  if (ip >> 24 == 127) return true;
  for (uint32_t i = 0; i < B.n; i++) {
    uint32_t b = sh_simnet_get(B.ids[i], 0)->local.ip;
    if (b == ip || b == 0) return true;
  }
  return false;
}

uint16_t sh_simnet_port(void) {
  uint16_t p = (uint16_t)B.next_port;
  B.next_port = B.next_port >= 65535u ? SH_SIMNET_FIRST_PORT : B.next_port + 1;
  return p;
}

int sh_simnet_bind(sh_simnet_sock *k, const sh_netaddr *at) {
  sh_netaddr a = *at;
  int rc = sh_simnet_bind_ip(k, at->ip, &a.ip);
  if (rc != 0) return rc;
  /* Bounded: the ephemeral range, once round. */
  tw_expire();
  for (uint32_t i = 0; a.port == 0 && i <= 65535u - SH_SIMNET_FIRST_PORT; i++) {
    sh_netaddr c = {a.ip, sh_simnet_port()};
    if (!taken(k, &c, true)) a = c;
  }
  if (a.port == 0 || taken(k, &a, false)) return -EADDRINUSE;
  if (sh_simnet_grow((void **)&B.ids, &B.cap, B.n + 1, sizeof(*B.ids)) != 0) return -ENOMEM;
  B.ids[B.n++] = k->id;
  k->local = a;
  k->bound = true;
  return 0;
}

void sh_simnet_hold(sh_simnet_sock *k, const sh_netaddr *at) {
  k->local = *at;
  if (sh_simnet_grow((void **)&B.ids, &B.cap, B.n + 1, sizeof(*B.ids)) != 0) return;
  B.ids[B.n++] = k->id;
  k->bound = true;
}

/* k, a connection that closes first, holds its address a while longer. */
static void time_wait(const sh_simnet_sock *k) {
  tw_expire();
  if (sh_simnet_grow((void **)&B.tw, &B.captw, B.ntw + 1, sizeof(*B.tw)) != 0) return;
  B.tw[B.ntw++] = (sh_simnet_tw){k->local, k->opts[SH_SO_REUSEADDR] != 0,
                                 k->opts[SH_SO_REUSEPORT] != 0,
                                 sh_simrun_state.now + SH_SIMNET_TIME_WAIT};
}

void sh_simnet_unbind(sh_simnet_sock *k) {
  for (uint32_t i = 0; i < B.n; i++)
    if (B.ids[i] == k->id) {
      memmove(&B.ids[i], &B.ids[i + 1], (B.n - i - 1) * sizeof(*B.ids));
      B.n--;
      break;
    }
  /* Closed first: the peer's end of stream has not come, nor a reset. */
  if (k->kind == SH_SIMNET_STREAM && k->state == SH_SIMNET_CONNECTED && !k->reset && !k->rd_eof)
    time_wait(k);
  k->bound = false;
}

int sh_net_bind(sh_sock s, const sh_netaddr *at) {
  sh_simnet_sock *k = sh_simnet_get(s, 0);
  if (k == NULL) return -EBADF;
  if (k->bound || k->state != SH_SIMNET_IDLE || k->kind == SH_SIMNET_LISTENER) return -EINVAL;
  return sh_simnet_bind(k, at);
}

void sh_simnet_bind_end(void) {
  sh_simraw_free(B.ids);
  sh_simraw_free(B.tw);
  memset(&B, 0, sizeof(B));
  B.next_port = SH_SIMNET_FIRST_PORT;
}
