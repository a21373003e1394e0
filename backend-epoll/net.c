/*
 * The socket seam (core/netplat.h) on Linux: non-blocking, close-on-exec
 * IPv4 sockets, watched edge-triggered on their worker's epoll set, whose
 * events the worker's wait (plat.c, sh_plat_wait) reports (net.h).
 *
 * sh_net_close is called on the thread of the worker that watches the
 * socket (or on the thread that drives that worker by waiting as it): it
 * finds the socket's epoll set through that thread's platform.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif

#include "net.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fiu-local.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/check.h"
#include "base/faults.h"
#include "proc.h"

/* The largest UDP payload over IPv4 (65535 - 8 - 20), unless the public
 * header sets a smaller limit. */

/* Runs a system call again while a signal interrupts it. */
#define SH_NET_RETRY(r, call) \
  do {                        \
    (r) = (call);             \
  } while ((r) < 0 && errno == EINTR)

/* ---- readiness ----------------------------------------------------------- */

void sh_net_set_ready(sh_plat *p, sh_net_ready_fn fn) {
  assert(p != NULL);
  sh_plat_net(p)->ready = fn;
}

/* Makes slot s exist; under st->mu. */
static int sh_net_slots_reserve(sh_net_state *st, size_t s) {
  if (s < st->nslots) return 0;
  size_t n = st->nslots > 0 ? st->nslots : 64;
  while (n <= s) n *= 2;
  sh_net_slot *slots = realloc(st->slots, n * sizeof *slots);
  if (slots == NULL) return -ENOMEM;
  memset(slots + st->nslots, 0, (n - st->nslots) * sizeof *slots);
  st->slots = slots;
  st->nslots = n;
  return 0;
}

/* Records (or, with token NULL, clears) who watches s; the previous slot
 * goes to *old if not NULL. */
static int sh_net_slot_set(sh_net_state *st, sh_sock s, void *token, uint32_t worker,
                           sh_net_slot *old) {
  pthread_mutex_lock(&st->mu);
  int rc = sh_net_slots_reserve(st, (size_t)s);
  if (rc == 0) {
    if (old != NULL) *old = st->slots[s];
    st->slots[s] = (sh_net_slot){.token = token, .worker = worker};
  }
  pthread_mutex_unlock(&st->mu);
  return rc;
}

int sh_net_watch(sh_plat *p, uint32_t worker, sh_sock s, void *token) {
  assert(p != NULL && worker < sh_plat_nworkers(p) && s >= 0);
  /* A NULL pointer marks the worker's wakeup eventfd in the epoll set. */
  assert(token != NULL);
  sh_net_state *st = sh_plat_net(p);
  sh_net_slot old = {0};
  int rc = sh_net_slot_set(st, s, token, worker, &old);
  if (rc < 0) return rc;
  /* One worker at most (netplat.h): the core watches a socket once, and
   * epoll_ctl below refuses only a second watch by the same worker. */
  SH_ASSERT(old.token == NULL || old.worker == worker);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = token};
  if (epoll_ctl(sh_plat_epfd(p, worker), EPOLL_CTL_ADD, s, &ev) == 0) return 0;
  rc = -errno;
  /* The slot exists now, so this cannot fail; a watch refused as a second
   * one (-EEXIST) leaves the first in place. */
  (void)sh_net_slot_set(st, s, old.token, old.worker, NULL);
  return rc;
}

/* ---- addresses ------------------------------------------------------------ */

static struct sockaddr_in sh_net_sockaddr(const sh_netaddr *a) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(sh_proc_addr_out(a->ip)); /* a cluster's node: its loopback one */
  sa.sin_port = htons(a->port);
  return sa;
}

static void sh_net_from_sockaddr(const struct sockaddr_in *sa, sh_netaddr *out) {
  out->ip = sh_proc_addr_in(ntohl(sa->sin_addr.s_addr));
  out->port = ntohs(sa->sin_port);
}

/* ---- sockets and options -------------------------------------------------- */

int sh_net_socket(sh_net_type type, sh_sock *out) {
  assert(out != NULL);
  int t = type == SH_NET_TCP ? SOCK_STREAM : type == SH_NET_UDP ? SOCK_DGRAM : -1;
  if (t < 0) return -EINVAL;
  int fd = socket(AF_INET, t | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sh_proc_socket_made(fd);
  *out = fd;
  return 0;
}

/* setsockopt's level and name for opt; -EINVAL for an unknown one. */
static int sh_net_optname(sh_sockopt opt, int *level, int *name) {
  *level = SOL_SOCKET;
  switch (opt) {
  case SH_SO_REUSEADDR: *name = SO_REUSEADDR; return 0;
  case SH_SO_REUSEPORT: *name = SO_REUSEPORT; return 0;
  case SH_SO_KEEPALIVE: *name = SO_KEEPALIVE; return 0;
  case SH_SO_SNDBUF: *name = SO_SNDBUF; return 0;
  case SH_SO_RCVBUF: *name = SO_RCVBUF; return 0;
  case SH_TCP_NODELAY:
    *level = IPPROTO_TCP;
    *name = TCP_NODELAY;
    return 0;
  }
  return -EINVAL;
}

static bool sh_net_is_flag(sh_sockopt opt) { return opt != SH_SO_SNDBUF && opt != SH_SO_RCVBUF; }

/* -ENOPROTOOPT for SO_KEEPALIVE on a socket that is not a stream: Linux
 * takes it there without effect, the seam says the transport lacks it.
 * (TCP_NODELAY on a UDP socket Linux refuses by itself.) Asked of the
 * socket only for that option: the others cost no extra call. */
static int sh_net_check_stream(sh_sock s, sh_sockopt opt) {
  if (opt != SH_SO_KEEPALIVE) return 0;
  int type = 0;
  socklen_t len = sizeof type;
  if (getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &len) < 0) return -errno;
  return type == SOCK_STREAM ? 0 : -ENOPROTOOPT;
}

int sh_net_setopt(sh_sock s, sh_sockopt opt, int value) {
  int level, name;
  int rc = sh_net_optname(opt, &level, &name);
  if (rc < 0) return rc;
  if (sh_net_is_flag(opt) ? value != 0 && value != 1 : value < 1) return -EINVAL;
  rc = sh_net_check_stream(s, opt);
  if (rc < 0) return rc;
  return setsockopt(s, level, name, &value, sizeof value) < 0 ? -errno : 0;
}

int sh_net_getopt(sh_sock s, sh_sockopt opt, int *value) {
  int level, name;
  int rc = sh_net_optname(opt, &level, &name);
  if (rc < 0 || value == NULL) return -EINVAL;
  rc = sh_net_check_stream(s, opt);
  if (rc < 0) return rc;
  int v = 0;
  socklen_t len = sizeof v;
  /* TCP_NODELAY of a UDP socket: Linux says EOPNOTSUPP here, ENOPROTOOPT
   * at setsockopt; the seam says ENOPROTOOPT for both. */
  if (getsockopt(s, level, name, &v, &len) < 0)
    return errno == EOPNOTSUPP && level == IPPROTO_TCP ? -ENOPROTOOPT : -errno;
  *value = sh_net_is_flag(opt) ? v != 0 : v;
  return 0;
}

int sh_net_bind(sh_sock s, const sh_netaddr *at) {
  assert(at != NULL);
  if (sh_proc_addr_foreign(at->ip)) return -EADDRNOTAVAIL; /* a cluster's other node's */
  struct sockaddr_in sa = sh_net_sockaddr(at);
  return bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 ? -errno : 0;
}

/* ---- TCP ------------------------------------------------------------------ */

int sh_net_listen(sh_sock s, int backlog) { return listen(s, backlog) < 0 ? -errno : 0; }

int sh_net_accept(sh_sock l, sh_sock *out, sh_netaddr *peer) {
  assert(out != NULL);
  /* Before the call, so the connection stays queued as when out of fds. */
  if (sh_fault("sh/net/accept")) return -EMFILE;
  struct sockaddr_in sa;
  socklen_t len;
  int fd;
  /* ECONNABORTED: that connection is gone, another may be queued. */
  do {
    len = sizeof sa;
    fd = accept4(l, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (fd < 0 && (errno == EINTR || errno == ECONNABORTED));
  if (fd < 0) return -errno;
  if (peer != NULL) sh_net_from_sockaddr(&sa, peer);
  *out = fd;
  return 0;
}

int sh_net_connect(sh_sock s, const sh_netaddr *to) {
  assert(to != NULL);
  if (sh_fault("sh/net/connect")) return -ECONNREFUSED;
  struct sockaddr_in sa = sh_net_sockaddr(to);
  sh_proc_source(s, ntohl(sa.sin_addr.s_addr));
  /* Not retried on EINTR: the connect goes on in the background (a second
   * call would say EALREADY), and its end is reported like EINPROGRESS's. */
  if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS && errno != EINTR)
    return -errno;
  return 0;
}

int sh_net_error(sh_sock s) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -errno;
  return -err;
}

int sh_net_local(sh_sock s, sh_netaddr *out) {
  assert(out != NULL);
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  if (getsockname(s, (struct sockaddr *)&sa, &len) < 0) return -errno;
  sh_net_from_sockaddr(&sa, out);
  return 0;
}

int64_t sh_net_read(sh_sock s, void *buf, size_t len) {
  if (sh_fault("sh/net/read")) return -ECONNRESET;
  ssize_t r;
  SH_NET_RETRY(r, recv(s, buf, len, 0));
  return r < 0 ? -errno : r;
}

int64_t sh_net_writev(sh_sock s, const struct iovec *iov, int iovcnt) {
  if (sh_fault("sh/net/write")) return -EPIPE;
  /* sendmsg rather than writev: only it takes MSG_NOSIGNAL, so a write to
   * a closed peer is -EPIPE and not a SIGPIPE that kills the process. */
  struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
  ssize_t r;
  SH_NET_RETRY(r, sendmsg(s, &msg, MSG_NOSIGNAL));
  return r < 0 ? -errno : r;
}

int sh_net_shutdown(sh_sock s) { return shutdown(s, SHUT_WR) < 0 ? -errno : 0; }

/* Forgets who watches s, taking it out of its worker's epoll set (which a
 * close does only once no other descriptor shares the socket). Needs the
 * platform this thread drives. */
static void sh_net_unwatch(sh_sock s) {
  sh_plat *p = sh_plat_current();
  if (p == NULL) return;
  sh_net_state *st = sh_plat_net(p);
  sh_net_slot old = {0};
  pthread_mutex_lock(&st->mu);
  if ((size_t)s < st->nslots) {
    old = st->slots[s];
    st->slots[s] = (sh_net_slot){0};
  }
  pthread_mutex_unlock(&st->mu);
  if (old.token == NULL) return;
  (void)epoll_ctl(sh_plat_epfd(p, old.worker), EPOLL_CTL_DEL, s, NULL);
}

void sh_net_close(sh_sock s) {
  if (s < 0) return;
  sh_net_unwatch(s);
  /* Not retried on EINTR: Linux frees the descriptor anyway, and a retry
   * could close one another thread just opened. */
  close(s);
}

/* ---- UDP ------------------------------------------------------------------ */

int64_t sh_net_sendto(sh_sock s, const void *buf, size_t len, const sh_netaddr *to) {
  assert(to != NULL);
  if (len > SH_NET_MAX_DATAGRAM) return -EMSGSIZE;
  struct sockaddr_in sa = sh_net_sockaddr(to);
  sh_proc_source(s, ntohl(sa.sin_addr.s_addr)); /* a node's datagrams: from its own address */
  ssize_t r;
  SH_NET_RETRY(r, sendto(s, buf, len, MSG_NOSIGNAL, (struct sockaddr *)&sa, sizeof sa));
  return r < 0 ? -errno : r;
}

int64_t sh_net_recvfrom(sh_sock s, void *buf, size_t len, sh_netaddr *from) {
  struct sockaddr_in sa;
  socklen_t salen = sizeof sa;
  ssize_t r;
  SH_NET_RETRY(r, recvfrom(s, buf, len, 0, (struct sockaddr *)&sa, &salen));
  if (r < 0) return -errno;
  if (from != NULL) sh_net_from_sockaddr(&sa, from);
  return r;
}
