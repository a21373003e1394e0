/*
 * TCP servers: an acceptor actor (an IO actor of the runtime's own) owns
 * the listening channel and hands each accepted socket, as a notice, to
 * one of the server's connection actors in turn (a round-robin address of
 * the user's class); the runtime turns that notice into a channel of the
 * receiving actor (adopt) before the actor's handlers see anything.
 * A server lives as long as its system: the first one registers the
 * servers' teardown with it (sh_system_teardown), which frees them all.
 */
#include "net/tcpserver.h"

#include <stdlib.h>

#include "base/atomic.h"
#include "net/chanflow.h"
#include "net/channel.h"
#include "net/sockopt.h"
#include "net/tcp.h"
#include "base/check.h"
#include "actor/house.h"
#include "base/spinlock.h"
#include "sched/system.h"
#include "sched/worker.h"

/* Accepts per readiness event before the acceptor lets others run. */
#define SH_ACCEPTS_PER_EVENT 64u
/* After running out of descriptors the acceptor waits this long. */
#define SH_ACCEPT_BACKOFF_MS 10
#define SH_LISTEN_BACKLOG 1024

struct sh_tcp_server {
  sh_system *sys;
  sh_netaddr addr;
  sh_sock sock;
  bool adopted; /* the acceptor's channel owns the socket */
  const sh_addr *workers;
  sh_channel_opts opts;
  /* Written by the acceptor's worker (accepted, refused) and by every
   * connection actor's (open); read by sh_tcp_server_stats from anywhere.
   * relaxed: figures, nothing is published through them. */
  _Atomic uint64_t accepted, refused, open;
  struct sh_tcp_server *next; /* the system's servers (reg_lock) */
  uint32_t number;            /* in that list, from 1, as servers register */
};

typedef struct sh_accepted {
  sh_msg hdr;
  sh_sock sock;
  sh_netaddr peer;
  sh_tcp_server *server;
} sh_accepted;

/* A socket that never reached its actor (a stop, a refusal) is closed with
 * the message that carried it. */
static void accepted_drop(sh_msg *m) {
  sh_accepted *a = (sh_accepted *)m;
  if (a->sock >= 0) sh_net_close(a->sock);
}

/* The accepted socket travels to a connection actor as a notice of the
 * runtime's own type, which turns it into the actor's channel when the
 * house takes it (adopt), before the actor's handlers see anything. */
static void adopt(sh_house *h, sh_msg *m);
static const sh_event_type accepted_type = {
    {"sh_accepted", sizeof(sh_accepted), SH_NOTICE, SH_MSG_RUNTIME, accepted_drop, NULL}, adopt};

typedef struct acceptor {
  sh_actor base;
  sh_tcp_server *server;
  sh_channel *ch;
} acceptor;

static void count(_Atomic uint64_t *c, int64_t n) {
  if (n > 0)
    sh_atomic_fetch_add(c, (uint64_t)n, memory_order_relaxed);
  else
    sh_atomic_fetch_sub(c, (uint64_t)-n, memory_order_relaxed);
}

/* Hands socket s to a connection actor; false when it was refused (the
 * socket is closed then). */
static bool hand_over(sh_tcp_server *srv, sh_sock s, const sh_netaddr *peer) {
  sh_accepted *a = (sh_accepted *)sh_msg_alloc(&accepted_type.msg);
  if (a == NULL) {
    sh_net_close(s);
    return false;
  }
  a->sock = s;
  a->peer = *peer;
  a->server = srv;
  if (sh_notice_try(srv->workers, &a->hdr) == 0) return true;
  sh_msg_free(&a->hdr); /* its drop closes the socket */
  return false;
}

/* Out of descriptors or memory: the connection waits in the backlog, the
 * acceptor serves what it has and looks again after a while (no busy
 * loop: it stops reading until the timer). */
static void back_off(sh_channel *ch) {
  acceptor *a = (acceptor *)ch->house->actor;
  ch->state &= ~SH_CHS_READABLE;
  uint64_t id;
  if (sh_timer_start(&a->base, SH_ACCEPT_BACKOFF_MS, 0, NULL, &id) != 0)
    sh_channel_close_with(ch, -ENOMEM);
}

static void accept_some(sh_channel *ch) {
  acceptor *a = (acceptor *)ch->house->actor;
  sh_tcp_server *srv = a->server;
  for (uint32_t i = 0; i < SH_ACCEPTS_PER_EVENT && (ch->state & SH_CHS_READABLE); i++) {
    sh_sock s;
    sh_netaddr peer;
    int rc = sh_net_accept(ch->sock, &s, &peer);
    if (rc == 0 && sh_sockopt_apply(s, SH_USE_ACCEPTED, &srv->opts) != 0) {
      sh_net_close(s); /* its options would not take: refused, as out of memory */
      count(&srv->refused, 1);
    } else if (rc == 0) {
      count(hand_over(srv, s, &peer) ? &srv->accepted : &srv->refused, 1);
    } else if (rc == -EAGAIN) {
      ch->state &= ~SH_CHS_READABLE;
    } else if (rc == -ECONNABORTED || rc == -EPROTO || rc == -EPERM) {
      /* That connection's own trouble (reset while queued, refused by a
       * firewall rule): the next one may be fine. */
    } else {
      /* Out of descriptors or memory, or anything the listener itself
       * suffers: count it, wait, and try again, never in a tight loop. */
      count(&srv->refused, 1);
      back_off(ch);
    }
  }
}

/* The listener's readiness: connections to accept. */
static void listener_ready(sh_channel *ch, uint32_t bits) {
  if (bits & SH_IO_IN) ch->state |= SH_CHS_READABLE;
  accept_some(ch);
}

static const sh_channel_ops listener_ops = {
    .kind = SH_CH_LISTENER,
    .on_ready = listener_ready,
    .deferred = sh_chanflow_pump,
    .to_head = sh_tcp_to_head,
    .to_tail = sh_chanflow_to_tail,
    .fail_all = sh_chanflow_fail_all,
};

static int acceptor_init(sh_actor *self, void *arg) {
  ((acceptor *)self)->server = arg;
  return 0;
}

static void acceptor_mount(sh_actor *self) {
  acceptor *a = (acceptor *)self;
  sh_tcp_server *srv = a->server;
  srv->adopted = true;
  if (sh_channel_new(self->house, &listener_ops, srv->sock, NULL, &a->ch) != 0) return;
  a->ch->data = srv;
  sh_channel_open(a->ch);
}

static void acceptor_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id, (void)arg;
  acceptor *a = (acceptor *)self;
  if (a->ch == NULL) return;
  a->ch->state |= SH_CHS_READABLE;
  sh_channel_poke(a->ch);
}

static void acceptor_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch, (void)error;
  if (ev == SH_CHANNEL_CLOSED) ((acceptor *)self)->ch = NULL;
}

static const sh_actor_class acceptor_class = {
    .name = "sh_acceptor",
    .size = sizeof(acceptor),
    .kind = SH_IO_ACTOR,
    .init = acceptor_init,
    .mount = acceptor_mount,
    .timeout = acceptor_timeout,
    .channel_event = acceptor_event,
};

/* ---- connection actors ------------------------------------------------------- */

/* An accepted connection closed: its server's open count. */
static void server_closed(sh_channel *ch) { count(&ch->server->open, -1); }

/* An accepted connection: a stream (tcp.c) that tells its server when it
 * closes. */
static const sh_channel_ops accepted_ops = {
    .kind = SH_CH_TCP,
    .on_ready = sh_tcp_on_ready,
    .deferred = sh_tcp_deferred,
    .to_head = sh_tcp_to_head,
    .to_tail = sh_chanflow_to_tail,
    .fail_all = sh_chanflow_fail_all,
    .closed = server_closed,
};

static void adopt(sh_house *h, sh_msg *m) {
  sh_accepted *a = (sh_accepted *)m;
  sh_sock s = a->sock;
  sh_tcp_server *srv = a->server;
  sh_netaddr peer = a->peer;
  a->sock = -1; /* the channel owns it now, or it is closed below */
  sh_msg_free(m);
  sh_channel *ch;
  if (sh_channel_new(h, &accepted_ops, s, &srv->opts, &ch) != 0) {
    count(&srv->refused, 1);
    return;
  }
  ch->peer = peer;
  ch->server = srv;
  count(&srv->open, 1);
  sh_channel_open(ch);
}

/* ---- the public calls -------------------------------------------------------------- */

static int check_serve(sh_system *sys, const sh_netaddr *at, const sh_actor_class *cls,
                       uint32_t instances) {
  if (sys == NULL || at == NULL || cls == NULL || instances == 0) return -EINVAL;
  if (cls->kind != SH_IO_ACTOR || cls->channel == NULL) return -EINVAL;
  return 0;
}

/* The system is freed: its servers go, with any listening socket no
 * acceptor took (data: the list of servers). */
static void servers_free(sh_system *sys, void *data) {
  (void)sys;
  sh_tcp_server *s = data;
  /* Bounded by the servers made: their numbers count down to 1. */
  while (s != NULL) {
    sh_tcp_server *next = s->next;
    SH_ASSERT(next != NULL ? next->number == s->number - 1 : s->number == 1);
    if (!s->adopted && s->sock >= 0) sh_net_close(s->sock);
    free(s);
    s = next;
  }
}

static void server_register(sh_tcp_server *srv) {
  sh_system *sys = srv->sys;
  sh_spin_lock(&sys->reg_lock);
  void **servers = sh_system_teardown(sys, servers_free);
  srv->next = *servers;
  srv->number = srv->next != NULL ? srv->next->number + 1 : 1;
  *servers = srv;
  sh_spin_unlock(&sys->reg_lock);
}

int sh_tcp_serve(sh_system *sys, const sh_netaddr *at, const sh_actor_class *cls, void *arg,
                 uint32_t instances, const sh_channel_opts *opts, sh_tcp_server **out) {
  SH_FROM_USER();
  int rc = check_serve(sys, at, cls, instances);
  if (rc != 0) return rc;
  sh_tcp_server *srv = calloc(1, sizeof(*srv));
  if (srv == NULL) return -ENOMEM;
  srv->sys = sys;
  srv->sock = -1;
  if (opts != NULL) srv->opts = *opts;
  if (instances == SH_SPAWN_PER_WORKER) instances = sh_system_workers(sys);
  rc = sh_sockopt_listen(at, SH_LISTEN_BACKLOG, opts, &srv->sock);
  if (rc == 0) rc = sh_net_local(srv->sock, &srv->addr);
  /* Registered before the spawns: from here on the system frees it, and
   * closes the socket if no acceptor took it. */
  if (srv->sock >= 0) server_register(srv);
  if (rc == 0) rc = sh_spawn(sys, cls, arg, instances, &srv->workers);
  const sh_addr *acc;
  if (rc == 0) rc = sh_spawn(sys, &acceptor_class, srv, 1, &acc);
  if (rc != 0) {
    if (srv->sock < 0) {
      free(srv);
      return rc;
    }
    /* No acceptor was made (its spawn, or the connection actors', failed:
     * an init that refused, no memory), so none can take the socket: it
     * closes now, not at sh_system_free. Kept open, it held the port
     * (a serve again there said -EADDRINUSE) and let connects in that no
     * one would ever accept. */
    SH_ASSERT(!srv->adopted);
    sh_net_close(srv->sock);
    srv->sock = -1;
    return rc;
  }
  if (out != NULL) *out = srv;
  return 0;
}

int sh_tcp_server_addr(const sh_tcp_server *s, sh_netaddr *out) {
  if (s == NULL || out == NULL) return -EINVAL;
  *out = s->addr;
  return 0;
}

const sh_addr *sh_tcp_server_workers(const sh_tcp_server *s) {
  return s != NULL ? s->workers : NULL;
}

int sh_tcp_server_stats(const sh_tcp_server *s, sh_tcp_stats *out) {
  if (s == NULL || out == NULL) return -EINVAL;
  out->accepted = sh_atomic_load(&s->accepted, memory_order_relaxed);
  out->refused = sh_atomic_load(&s->refused, memory_order_relaxed);
  out->open = sh_atomic_load(&s->open, memory_order_relaxed);
  return 0;
}
