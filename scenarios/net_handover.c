/*
 * The acceptor's failure paths: connections it accepts but cannot hand
 * over. One worker, so that connects queue up for the acceptor; a server
 * of one or two connection actors with a notice mailbox of one, so that a
 * hand-over to an actor whose mailbox is full is refused (-EAGAIN); an
 * actor that stops itself after its first connection, so that the next
 * ones are refused as stopped, dropped from its mailbox at its stop, or
 * reach a stopped house; and (in the simulator) a serve whose actors' init
 * fails, after which the same port must serve again.
 *
 * What is checked: every connect gets a connection that the server ends,
 * served (a greeting, every byte checked, then EOF) or refused (EOF at
 * once): the client hears CLOSED, cleanly, within 2 s of virtual time, or
 * the run fails naming the port (a connection the acceptor kept is one no
 * peer ever hears the end of); the server counts each connection once,
 * accepted or refused; no channel is left open; and at the end, the
 * simulator fails a run that left a socket open (FAIL:socket).
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/net.h>
#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

#include "netref.h"

#define MAX_CONNS 24
#define BUSY_STEPS 2000
#define DEADLINE_MS 2000
#define FAILED_PORT 7311 /* the simulator's: no real port is taken */

typedef struct cconn {
  sh_channel *ch; /* from OPEN to CLOSED */
  uint16_t port;
  uint64_t received;
  bool bad;
  nr_events ev;
} cconn;

typedef struct world {
  sh_tcp_server *server;
  sh_netaddr at;
  uint32_t nconns, opened, stoppers;
  cconn conns[MAX_CONNS];
  atomic_uint served, left;
  int reserve; /* the serve again on the port of a failed one */
} world;

static uint64_t greet_len(uint16_t port) { return 1 + (port * 37u) % 3000u; }

static sh_yield idle_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

/* A connection handed over: greeted, then closed after the greeting; an
 * actor that is a stopper stops after its first. */
static void held_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)error;
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  if (ev != SH_CHANNEL_OPEN) return;
  atomic_fetch_add(&wd->served, 1); /* seq_cst: a count, read after the shutdown */
  sh_netaddr peer;
  sh_channel_peer(ch, &peer);
  sh_bytes *b = nr_bytes(2000u + peer.port, 0, 0, greet_len(peer.port));
  int rc = b == NULL ? -ENOMEM : sh_channel_write(ch, &b->hdr);
  SH_SCN_CHECK(s, rc == 0, "greeting to port %u: %d", peer.port, rc);
  sh_channel_close_after_flush(ch);
  if (sh_scn_id(self) < wd->stoppers) sh_stop(sh_self(self));
}

static int held_init(sh_actor *self, void *arg) {
  const sh_scn_arg *a = arg;
  world *wd = sh_scn_state(a->s);
  /* Instance numbers are not given to init: the first ones made stop. */
  sh_scn_arg mine = {a->s, wd->opened++};
  return sh_scn_actor_init(self, &mine);
}

static const sh_actor_class held_class = {
    .name = "handover_held",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .notice_capacity = 1, /* a second hand-over while one waits is refused */
    .init = held_init,
    .channel = idle_channel,
    .channel_event = held_event,
};

static int failing_init(sh_actor *self, void *arg) {
  (void)self, (void)arg;
  return -EPERM;
}

static const sh_actor_class failing_class = {
    .name = "handover_failing",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .init = failing_init,
    .channel = idle_channel,
};

typedef struct plocals {
  sh_future *f[MAX_CONNS];
  sh_future *sleep;
} plocals;

enum { P_CONNECTED = 1, P_DEADLINE };

/* Every connection not closed by the deadline is one the server kept. */
static void deadline(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  for (uint32_t j = 0; j < wd->nconns; j++) {
    cconn *c = &wd->conns[j];
    if (c->port == 0 || c->ev.closed) continue; /* a failed connect: counted then */
    SH_SCN_CHECK(s, false, "connection from port %u: not closed %d ms after its connect "
                 "(%llu bytes, eof %d): the server kept it", c->port, DEADLINE_MS,
                 (unsigned long long)c->received, c->ev.eof);
    if (c->ch != NULL) sh_channel_close(c->ch); /* counts down */
  }
  sh_scn_count_down(s, sys, &wd->left);
}

static sh_yield probe_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  plocals *l = sh_stack_locals(st);
  sh_system *sys = sh_actor_system(self);
  switch (sh_stack_state(st)) {
  case SH_START:
    for (uint32_t j = 0; j < wd->nconns; j++) {
      l->f[j] = sh_tcp_connect(st, &wd->at, NULL);
      if (l->f[j] == NULL) return sh_throw(st, -ENOMEM);
    }
    /* The one worker stays here a while, so that the connects queue up. */
    for (uint32_t k = 0; k < BUSY_STEPS; k++) sh_yield_point("net_handover busy");
    return sh_suspend(st, P_CONNECTED);
  case P_CONNECTED:
    for (uint32_t j = 0; j < wd->nconns; j++) {
      if (!sh_future_failed(l->f[j])) continue;
      SH_SCN_CHECK(s, false, "connect %u: %d", j, sh_future_error(l->f[j]));
      sh_scn_count_down(s, sys, &wd->left);
    }
    l->sleep = sh_sleep(st, DEADLINE_MS);
    return l->sleep != NULL ? sh_suspend(st, P_DEADLINE) : sh_throw(st, -ENOMEM);
  default:
    deadline(s, sys);
    return sh_return(st, NULL);
  }
}

static sh_yield probe_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  cconn *c = sh_channel_data(sh_stack_channel(st));
  if (c == NULL || c->bad) return sh_return(st, NULL);
  c->bad = !nr_check(s, &sh_stack_msg_as(st, sh_bytes)->buf, 0, 2000u + c->port, &c->received,
                     "greeting on port", c->port);
  SH_SCN_CHECK(s, c->received <= greet_len(c->port), "port %u: %llu bytes, want %llu", c->port,
               (unsigned long long)c->received, (unsigned long long)greet_len(c->port));
  return sh_return(st, NULL);
}

static void probe_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  cconn *c = sh_channel_data(ch);
  if (ev == SH_CHANNEL_OPEN) {
    sh_netaddr me;
    sh_channel_local(ch, &me);
    for (uint32_t j = 0; j < wd->nconns && c == NULL; j++) /* bounded by the connects */
      if (wd->conns[j].port == 0) c = &wd->conns[j], c->port = me.port;
    if (!SH_SCN_CHECK(s, c != NULL, "more connections than connects")) return;
    c->ch = ch;
    sh_channel_set_data(ch, c);
  }
  if (c == NULL) return;
  nr_note(s, &c->ev, "connection from port", c->port, ev, error);
  if (ev == SH_CHANNEL_CLOSED) c->ch = NULL;
  if (ev == SH_CHANNEL_CLOSED) sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class probe_class = {
    .name = "handover_probe",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(plocals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = probe_notice,
    .channel = probe_channel,
    .channel_event = probe_event,
};

/* A serve whose actors cannot start fails with their init's error and
 * keeps nothing: the same port serves again at once. */
static int failed_serve(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  sh_netaddr at = {.ip = 0x7f000001, .port = FAILED_PORT};
  const sh_scn_arg arg = {s, 0};
  int rc = sh_tcp_serve(sys, &at, &failing_class, (void *)&arg, 1, NULL, NULL);
  if (sh_scn_fault_error(s, rc) && rc != -EPERM) return rc;
  SH_SCN_CHECK(s, rc == -EPERM, "a serve whose init fails: %d", rc);
  wd->reserve = sh_tcp_serve(sys, &at, &held_class, (void *)&arg, 1, NULL, &wd->server);
  SH_SCN_CHECK(s, wd->reserve == 0 || sh_scn_fault_error(s, wd->reserve),
               "a serve on the port of a failed one: %d", wd->reserve);
  return wd->reserve;
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->nconns = 1 + (uint32_t)sh_scn_below(s, MAX_CONNS);
  uint32_t instances = 1 + (uint32_t)sh_scn_below(s, 2);
  wd->stoppers = (uint32_t)sh_scn_below(s, instances + 1);
  atomic_store(&wd->left, wd->nconns + 1);
  const sh_scn_arg arg = {s, 0};
  int rc = 0;
  if (sh_scn_simulated(s) && sh_scn_below(s, 2) == 0) {
    rc = failed_serve(s, sys);
    wd->opened = 0; /* the actors of the serve that failed count for nothing */
  }
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  if (rc == 0 && wd->server == NULL)
    rc = sh_tcp_serve(sys, &any, &held_class, (void *)&arg, instances, NULL, &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  const sh_addr *probe;
  if (rc == 0) rc = sh_scn_spawn(s, sys, &probe_class, 0, 1, &probe);
  return rc == 0 ? sh_scn_kick(probe) : rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (wd->server == NULL) return;
  sh_tcp_stats ts;
  sh_tcp_server_stats(wd->server, &ts);
  SH_SCN_CHECK_EQ(s, ts.open, 0, "server channels open after shutdown");
  if (sh_scn_faulty(s)) return;
  uint32_t served = atomic_load(&wd->served), greeted = 0;
  SH_SCN_CHECK(s, ts.accepted + ts.refused == wd->nconns,
               "%llu accepted + %llu refused, %u connects", (unsigned long long)ts.accepted,
               (unsigned long long)ts.refused, wd->nconns);
  for (uint32_t j = 0; j < wd->nconns; j++) {
    const cconn *c = &wd->conns[j];
    greeted += c->received > 0;
    bool whole = c->received == 0 || c->received == greet_len(c->port);
    SH_SCN_CHECK(s, c->ev.closed && c->ev.err == 0 && whole,
                 "connection from port %u: closed %d error %d, %llu bytes", c->port, c->ev.closed,
                 c->ev.err, (unsigned long long)c->received);
  }
  SH_SCN_CHECK(s, greeted == served, "%u connections greeted, %u served", greeted, served);
}

static const sh_scenario net_handover = {
    .name = "net_handover",
    .summary = "accepted connections the acceptor cannot hand over: closed, counted, none kept",
    .flags = SH_SCN_NET,
    .workers = 1, /* the acceptor and the connects share it: they queue up */
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_handover);
