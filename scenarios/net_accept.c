/*
 * Connects that fail or end at once, checked by what each side hears: a
 * connect to a port where nobody listens fails with -ECONNREFUSED; and up
 * to 80 connects at once, made to queue up (one worker, busy meanwhile)
 * past the acceptor's 64 accepts per readiness event (the listen backlog
 * is the runtime's 1024, which the fake network does not enforce), reach
 * a server that ends each as soon as it opens:
 * a close with nothing sent, a close after a greeting of a size around a
 * page or the window, or a shutdown after one. The client reads the whole
 * greeting, every byte checked (netref.h), then EOF, then a clean close;
 * the server's channel hears OPEN, then CLOSED, once each; the server
 * accepted every connect and has no channel left open.
 */
#include <stdatomic.h>

#include <stackhouse/net.h>
#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

#include "netref.h"

#define MAX_GREETS 80
#define BUSY_STEPS 2000

typedef struct greet {
  uint16_t port;
  uint64_t want, received;
  bool bad;
  nr_events ev;
} greet;

typedef struct world {
  sh_tcp_server *closer;
  sh_netaddr closer_at;
  uint32_t ngreets, opened;
  int refused;
  greet greets[MAX_GREETS];
  nr_events served[MAX_GREETS];
  atomic_uint nserved, left;
} world;

enum { G_CLOSE, G_FLUSH, G_SHUT };

/* What the server does with a connection, by its port: the client knows
 * its own. */
static uint32_t greet_kind(uint16_t port) { return (port * 7u / 3u) % 3u; }
static uint64_t greet_len(uint16_t port) {
  static const uint32_t sizes[] = {0, 1, SH_PAGE_DATA - 1, SH_PAGE_DATA, SH_PAGE_DATA + 1,
                                   65535, 65536, 65537, 100000, 17};
  return greet_kind(port) == G_CLOSE ? 0 : sizes[(port * 13u) % 10u];
}

static sh_yield idle_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

/* The server's side of a connection: its events, then, at its opening, a
 * greeting and an end at once. */
static void closer_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  nr_events *e = sh_channel_data(ch);
  if (ev == SH_CHANNEL_OPEN) {
    uint32_t i = atomic_fetch_add(&wd->nserved, 1); /* seq_cst: a count, any order will do */
    if (!SH_SCN_CHECK(s, i < MAX_GREETS, "more server channels than connects")) return;
    e = &wd->served[i];
    sh_channel_set_data(ch, e);
  }
  if (e == NULL) return;
  nr_note(s, e, "server channel", (uint32_t)(e - wd->served), ev, error);
  if (ev == SH_CHANNEL_CLOSED) sh_scn_count_down(s, sh_actor_system(self), &wd->left);
  if (ev != SH_CHANNEL_OPEN) return;
  sh_netaddr peer;
  sh_channel_peer(ch, &peer);
  uint64_t n = greet_len(peer.port);
  sh_bytes *b = n > 0 ? nr_bytes(1000u + peer.port, 0, 0, n) : NULL;
  int rc = n == 0 ? 0 : b == NULL ? -ENOMEM : sh_channel_write(ch, &b->hdr);
  SH_SCN_CHECK(s, rc == 0, "greeting to port %u: %d", peer.port, rc);
  uint32_t kind = greet_kind(peer.port);
  if (kind == G_CLOSE) sh_channel_close(ch);
  if (kind == G_FLUSH) sh_channel_close_after_flush(ch);
  if (kind == G_SHUT) sh_channel_shutdown(ch);
}

static const sh_actor_class closer_class = {
    .name = "stream_closer",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .channel = idle_channel, /* its clients send nothing */
    .channel_event = closer_event,
};

typedef struct plocals {
  sh_future *f[MAX_GREETS];
} plocals;

enum { P_REFUSED = 1, P_GREETED };

/* Connects to a port where nobody listens, then many times at once to the
 * closing server. */
static sh_yield probe_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  plocals *l = sh_stack_locals(st);
  sh_system *sys = sh_actor_system(self);
  if (sh_stack_state(st) == SH_START) {
    l->f[0] = sh_tcp_connect(st, &(sh_netaddr){.ip = 0x7f000001, .port = 1}, NULL);
    return l->f[0] != NULL ? sh_suspend(st, P_REFUSED) : sh_throw(st, -ENOMEM);
  }
  if (sh_stack_state(st) == P_REFUSED) {
    wd->refused = sh_future_error(l->f[0]);
    if (wd->refused == 0) sh_channel_close(sh_future_reply(l->f[0], sh_channel_msg)->ch);
    sh_scn_count_down(s, sys, &wd->left);
    for (uint32_t j = 0; j < wd->ngreets; j++) {
      l->f[j] = sh_tcp_connect(st, &wd->closer_at, NULL);
      if (l->f[j] == NULL) return sh_throw(st, -ENOMEM);
    }
    /* The one worker stays here a while (in the simulator, a step of
     * virtual time each), so that the connects queue up for the acceptor. */
    for (uint32_t k = 0; k < BUSY_STEPS; k++) sh_yield_point("net_accept busy");
    return sh_suspend(st, P_GREETED);
  }
  for (uint32_t j = 0; j < wd->ngreets; j++) {
    if (!sh_future_failed(l->f[j])) continue;
    SH_SCN_CHECK(s, false, "connect %u to the closing server: %d", j, sh_future_error(l->f[j]));
    sh_scn_count_down(s, sys, &wd->left);
    sh_scn_count_down(s, sys, &wd->left);
  }
  return sh_return(st, NULL);
}

static sh_yield probe_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  greet *g = sh_channel_data(sh_stack_channel(st));
  if (g == NULL) return sh_return(st, NULL);
  SH_SCN_CHECK(s, !g->ev.closed, "greeting on port %u read after the close", g->port);
  if (!g->bad)
    g->bad = !nr_check(s, &sh_stack_msg_as(st, sh_bytes)->buf, 0, 1000u + g->port,
                        &g->received, "greeting on port", g->port);
  SH_SCN_CHECK(s, g->received <= g->want, "greeting on port %u: %llu bytes, want %llu", g->port,
               (unsigned long long)g->received, (unsigned long long)g->want);
  return sh_return(st, NULL);
}

static void probe_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  greet *g = sh_channel_data(ch);
  if (ev == SH_CHANNEL_OPEN) {
    uint32_t j = wd->opened++; /* the probe's alone */
    if (!SH_SCN_CHECK(s, j < wd->ngreets, "more greeting channels than connects")) return;
    sh_netaddr me;
    sh_channel_local(ch, &me);
    g = &wd->greets[j];
    *g = (greet){.port = me.port, .want = greet_len(me.port)};
    sh_channel_set_data(ch, g);
  }
  if (g == NULL) return;
  nr_note(s, &g->ev, "greeting on port", g->port, ev, error);
  if (ev == SH_CHANNEL_CLOSED) sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class probe_class = {
    .name = "stream_probe",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(plocals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = probe_notice,
    .channel = probe_channel,
    .channel_event = probe_event,
};


static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->ngreets = sh_scn_below(s, 4) == 0 ? 65 + (uint32_t)sh_scn_below(s, 16)
                                        : (uint32_t)sh_scn_below(s, 8);
  atomic_store(&wd->left, 2 * wd->ngreets + 1);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  const sh_scn_arg arg = {s, 0};
  int rc = sh_tcp_serve(sys, &any, &closer_class, (void *)&arg, SH_SPAWN_PER_WORKER, NULL,
                        &wd->closer);
  if (rc == 0) rc = sh_tcp_server_addr(wd->closer, &wd->closer_at);
  const sh_addr *probe;
  if (rc == 0) rc = sh_scn_spawn(s, sys, &probe_class, 0, 1, &probe);
  return rc == 0 ? sh_scn_kick(probe) : rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (wd->closer != NULL) {
    sh_tcp_stats ts;
    sh_tcp_server_stats(wd->closer, &ts);
    SH_SCN_CHECK_EQ(s, ts.open, 0, "server channels open after shutdown");
    if (!sh_scn_faulty(s)) SH_SCN_CHECK_EQ(s, ts.accepted, wd->ngreets, "connections accepted");
  }
  if (sh_scn_faulty(s)) return;
  SH_SCN_CHECK(s, wd->refused == -ECONNREFUSED, "connect to a closed port: %d", wd->refused);
  for (uint32_t j = 0; j < wd->ngreets; j++) {
    const greet *g = &wd->greets[j];
    const nr_events *e = &wd->served[j];
    SH_SCN_CHECK(s, g->received == g->want && g->ev.eof && g->ev.closed && g->ev.err == 0,
                 "greeting on port %u: %llu of %llu bytes, eof %d, closed %d error %d", g->port,
                 (unsigned long long)g->received, (unsigned long long)g->want, g->ev.eof,
                 g->ev.closed, g->ev.err);
    SH_SCN_CHECK(s, e->open && e->closed && e->err == 0, "server channel %u: closed %d error %d",
                 j, e->closed, e->err);
  }
}

static const sh_scenario net_accept = {
    .name = "net_accept",
    .summary = "refused connects, and many connects to a server that ends each at once",
    .flags = SH_SCN_NET,
    .workers = 1, /* the acceptor and the connects share it: they queue up */
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_accept);
