/*
 * The sockets of channels and their options (sockopt.h).
 */
#include "net/sockopt.h"

#include <stddef.h>

/* The runtime's own options, per use: what the backend used to set itself. */
static const struct {
  sh_sockuse use;
  sh_sockopt opt;
  int value;
} defaults[] = {
    {SH_USE_LISTENER, SH_SO_REUSEADDR, 1},
    {SH_USE_ACCEPTED, SH_TCP_NODELAY, 1},
    {SH_USE_CONNECT, SH_TCP_NODELAY, 1},
};

int sh_sockopt_apply(sh_sock s, sh_sockuse use) {
  for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
    if (defaults[i].use != use) continue;
    int rc = sh_net_setopt(s, defaults[i].opt, defaults[i].value);
    if (rc != 0) return rc;
  }
  return 0;
}

/* A new socket of `type` with the options of `use`. */
static int open_with(sh_net_type type, sh_sockuse use, sh_sock *out) {
  int rc = sh_net_socket(type, out);
  if (rc != 0) return rc;
  rc = sh_sockopt_apply(*out, use);
  if (rc != 0) sh_net_close(*out);
  return rc;
}

/* *out = s if rc is 0, else s is closed: the tail of every opening (*out
 * is written only on success). */
static int done(sh_sock s, int rc, sh_sock *out) {
  if (rc != 0)
    sh_net_close(s);
  else
    *out = s;
  return rc;
}

int sh_sockopt_listen(const sh_netaddr *at, int backlog, sh_sock *out) {
  sh_sock s;
  int rc = open_with(SH_NET_TCP, SH_USE_LISTENER, &s);
  if (rc != 0) return rc;
  rc = sh_net_bind(s, at);
  if (rc == 0) rc = sh_net_listen(s, backlog);
  return done(s, rc, out);
}

int sh_sockopt_connect(const sh_netaddr *to, sh_sock *out) {
  sh_sock s;
  int rc = open_with(SH_NET_TCP, SH_USE_CONNECT, &s);
  return rc != 0 ? rc : done(s, sh_net_connect(s, to), out);
}

int sh_sockopt_udp(const sh_netaddr *at, sh_sock *out) {
  sh_sock s;
  int rc = open_with(SH_NET_UDP, SH_USE_UDP, &s);
  return rc != 0 ? rc : done(s, sh_net_bind(s, at), out);
}
