/*
 * The fake network's addresses and socket options (net.c describes the
 * model): new sockets, which socket holds which ip:port, the ports it
 * hands out, and what each socket's options are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "netsock.h"
#include "run.h"

#define SH_SIMNET_FIRST_PORT 49152u

static struct {
  sh_sock *ids; /* the bound sockets, in the order they were bound */
  uint32_t n, cap;
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
  sh_simrun_mix(SH_SIMRUN_MIX_NET);
  sh_simrun_mix(((uint64_t)opt << 32) | (uint32_t)k->id);
  sh_simrun_mix((uint64_t)(uint32_t)value);
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

/* A socket of k's protocol other than k that holds an address matching
 * a, or NULL. */
static sh_simnet_sock *holder(const sh_simnet_sock *k, const sh_netaddr *a) {
  for (uint32_t i = 0; i < B.n; i++) {
    sh_simnet_sock *e = sh_simnet_get(B.ids[i], 0);
    if (e != k && is_tcp(e->kind) == is_tcp(k->kind) && same_addr(e->local.ip, e->local.port, a))
      return e;
  }
  return NULL;
}

sh_simnet_sock *sh_simnet_find(sh_simnet_kind kind, const sh_netaddr *a) {
  for (uint32_t i = 0; i < B.n; i++) {
    sh_simnet_sock *k = sh_simnet_get(B.ids[i], 0);
    if (k->kind == kind && same_addr(k->local.ip, k->local.port, a)) return k;
  }
  return NULL;
}

bool sh_simnet_host(uint32_t ip) {
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
  /* Bounded: the ephemeral range, once round. */
  for (uint32_t i = 0; a.port == 0 && i <= 65535u - SH_SIMNET_FIRST_PORT; i++) {
    sh_netaddr c = {at->ip, sh_simnet_port()};
    if (holder(k, &c) == NULL) a = c;
  }
  if (a.port == 0 || holder(k, &a) != NULL) return -EADDRINUSE;
  if (sh_simnet_grow((void **)&B.ids, &B.cap, B.n + 1, sizeof(*B.ids)) != 0) return -ENOMEM;
  B.ids[B.n++] = k->id;
  k->local = a;
  k->bound = true;
  return 0;
}

void sh_simnet_unbind(sh_simnet_sock *k) {
  for (uint32_t i = 0; i < B.n; i++)
    if (B.ids[i] == k->id) {
      memmove(&B.ids[i], &B.ids[i + 1], (B.n - i - 1) * sizeof(*B.ids));
      B.n--;
      break;
    }
  k->bound = false;
}

int sh_net_bind(sh_sock s, const sh_netaddr *at) {
  sh_simnet_sock *k = sh_simnet_get(s, 0);
  if (k == NULL) return -EBADF;
  if (k->bound || k->state != SH_SIMNET_IDLE || k->kind == SH_SIMNET_LISTENER) return -EINVAL;
  return sh_simnet_bind(k, at);
}

void sh_simnet_bind_end(void) {
  free(B.ids);
  memset(&B, 0, sizeof(B));
  B.next_port = SH_SIMNET_FIRST_PORT;
}
