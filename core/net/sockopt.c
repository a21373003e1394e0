/*
 * The sockets of channels and their options (sockopt.h).
 */
#include "net/sockopt.h"

#include <stddef.h>

#include "base/atomic.h"
#include "net/channel.h"

/* The runtime's own options, per use: what the epoll backend once set
 * itself, so a connection costs the system calls it did. */
static const struct {
  sh_sockuse use;
  sh_sockopt opt;
  int value;
} defaults[] = {
    {SH_USE_LISTENER, SH_SO_REUSEADDR, 1},
    {SH_USE_ACCEPTED, SH_TCP_NODELAY, 1},
    {SH_USE_CONNECT, SH_TCP_NODELAY, 1},
};

/* Whether a socket for `use` takes the user's option opt: an accepted
 * connection is bound already (its listener's binding options were its
 * listener's business). */
static bool takes(sh_sockuse use, sh_sockopt opt) {
  if (opt == 0) return false;
  return use != SH_USE_ACCEPTED || (opt != SH_SO_REUSEADDR && opt != SH_SO_REUSEPORT);
}

/* Whether the user's options o set opt for `use`. */
static bool user_sets(const sh_channel_opts *o, sh_sockuse use, sh_sockopt opt) {
  for (int i = 0; o != NULL && i < SH_SOCKOPTS_MAX; i++)
    if (o->sockopts[i].opt == opt && takes(use, opt)) return true;
  return false;
}

int sh_sockopt_apply(sh_sock s, sh_sockuse use, const sh_channel_opts *o) {
  for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
    if (defaults[i].use != use || user_sets(o, use, defaults[i].opt)) continue;
    int rc = sh_net_setopt(s, defaults[i].opt, defaults[i].value);
    if (rc != 0) return rc;
  }
  for (int i = 0; o != NULL && i < SH_SOCKOPTS_MAX; i++) {
    if (!takes(use, o->sockopts[i].opt)) continue;
    int rc = sh_net_setopt(s, o->sockopts[i].opt, o->sockopts[i].value);
    if (rc != 0) return rc;
  }
  return 0;
}

/* A new socket of `type` with the options of `use`. */
static int open_with(sh_net_type type, sh_sockuse use, const sh_channel_opts *o, sh_sock *out) {
  int rc = sh_net_socket(type, out);
  if (rc != 0) return rc;
  rc = sh_sockopt_apply(*out, use, o);
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

int sh_sockopt_listen(const sh_netaddr *at, int backlog, const sh_channel_opts *o, sh_sock *out) {
  sh_sock s;
  int rc = open_with(SH_NET_TCP, SH_USE_LISTENER, o, &s);
  if (rc != 0) return rc;
  rc = sh_net_bind(s, at);
  if (rc == 0) rc = sh_net_listen(s, backlog);
  return done(s, rc, out);
}

int sh_sockopt_connect(const sh_netaddr *to, const sh_channel_opts *o, sh_sock *out) {
  sh_sock s;
  int rc = open_with(SH_NET_TCP, SH_USE_CONNECT, o, &s);
  return rc != 0 ? rc : done(s, sh_net_connect(s, to), out);
}

int sh_sockopt_udp(const sh_netaddr *at, const sh_channel_opts *o, sh_sock *out) {
  sh_sock s;
  int rc = open_with(SH_NET_UDP, SH_USE_UDP, o, &s);
  return rc != 0 ? rc : done(s, sh_net_bind(s, at), out);
}

/* ---- the actor's calls ------------------------------------------------------------ */

/* The channel's socket for an option call, or -EINVAL / -EPIPE. */
static int live_socket(const sh_channel *ch, sh_sock *s) {
  if (ch == NULL) return -EINVAL;
  if (ch->state & (SH_CHS_CLOSED | SH_CHS_CLOSING)) return -EPIPE;
  *s = ch->sock;
  return 0;
}

int sh_channel_setopt(sh_channel *ch, sh_sockopt opt, int value) {
  SH_FROM_USER();
  sh_sock s;
  int rc = live_socket(ch, &s);
  return rc != 0 ? rc : sh_net_setopt(s, opt, value);
}

int sh_channel_getopt(const sh_channel *ch, sh_sockopt opt, int *value) {
  SH_FROM_USER();
  sh_sock s;
  int rc = live_socket(ch, &s);
  if (rc == 0 && value == NULL) rc = -EINVAL;
  return rc != 0 ? rc : sh_net_getopt(s, opt, value);
}
