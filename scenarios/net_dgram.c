/*
 * UDP datagrams of drawn sizes with the weight on the limit: 0, 1, a few
 * bytes, up to 65,507 (IPv4's largest datagram, the most a UDP channel
 * sends), 65,506 and 65,507 themselves, and 65,508 and more. One IO actor
 * has two UDP channels: the client writes each datagram (sh_channel_write)
 * and waits for it to come back; the echo side checks it and returns it as
 * its channel stack's result (sh_return of an sh_datagram). A datagram
 * that does not come back is sent again (the network's weather may lose,
 * double or reorder datagrams), one at a time, so that an echo is known by
 * its size and its bytes (netref.h's pattern, keyed by its number).
 *
 * Invariants: every datagram up to the limit crosses whole, both ways, and
 * comes back within its resends; each one the echo side or the client
 * reads is one that was sent, byte for byte; a write past the limit fails
 * with -EMSGSIZE and the channel stays open (the datagrams after it go
 * through); neither channel closes before the end.
 */
#include <stdatomic.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#include "netref.h"

#define DGRAM_MAX 65507u
#define MAX_DGRAMS 16
#define RESENDS 200
#define WAIT_MS 5

typedef struct world {
  uint32_t n;
  uint32_t size[MAX_DGRAMS];
  uint32_t current; /* the one the client waits for */
  bool back[MAX_DGRAMS];
  uint32_t damaged, strangers, too_big_ok, resent;
  bool done;
} world;

typedef struct dgram_actor {
  sh_scn_actor a;
  sh_channel *echo, *client;
  sh_netaddr echo_at, client_at;
  nr_events echo_ev, client_ev;
} dgram_actor;

static uint32_t key_of(uint32_t i) { return 7000u + i; }

static void dgram_mount(sh_actor *self) {
  dgram_actor *u = (dgram_actor *)self;
  sh_scn *s = u->a.s;
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  int rc = sh_udp_open(self, &any, NULL, &u->echo);
  if (rc == 0) rc = sh_udp_open(self, &any, NULL, &u->client);
  if (rc == 0) sh_channel_local(u->echo, &u->echo_at);
  if (rc == 0) sh_channel_local(u->client, &u->client_at);
  SH_SCN_CHECK(s, rc == 0 || sh_scn_faulty(s), "udp open: %d", rc);
}

/* Whether d is datagram i whole. */
static bool is_dgram(const world *wd, uint32_t i, const sh_datagram *d) {
  if (sh_buf_len(&d->buf) != wd->size[i]) return false;
  const uint8_t *p;
  size_t n, off = 0;
  /* Bounded by the datagram's length: each turn passes a span. */
  while ((n = sh_buf_span(&d->buf, off, &p)) > 0) {
    for (size_t k = 0; k < n; k++)
      if (p[k] != nr_pattern(key_of(i), off + k)) return false;
    off += n;
  }
  return true;
}

/* The datagram of the plan that d is, or -1. */
static int which(const world *wd, const sh_datagram *d) {
  for (uint32_t i = 0; i < wd->n; i++)
    if (wd->size[i] <= DGRAM_MAX && is_dgram(wd, i, d)) return (int)i;
  return -1;
}

static bool from(const sh_datagram *d, const sh_netaddr *a) {
  return d->peer.ip == a->ip && d->peer.port == a->port;
}

/* The echo side returns what it read; the client marks what came back. */
static sh_yield dgram_channel(sh_actor *self, sh_stack *st) {
  dgram_actor *u = (dgram_actor *)self;
  sh_scn *s = u->a.s;
  world *wd = sh_scn_state(s);
  sh_datagram *d = sh_stack_msg_as(st, sh_datagram);
  bool to_echo = sh_stack_channel(st) == u->echo;
  if (!from(d, to_echo ? &u->client_at : &u->echo_at)) {
    wd->strangers++;
    return sh_return(st, NULL);
  }
  int i = which(wd, d);
  SH_SCN_CHECK(s, i >= 0, "%s read a datagram of %zu bytes that was never sent",
               to_echo ? "the echo side" : "the client", sh_buf_len(&d->buf));
  if (i < 0) {
    wd->damaged++;
    return sh_return(st, NULL);
  }
  if (!to_echo) {
    wd->back[i] = true;
    return sh_return(st, NULL);
  }
  sh_datagram *r = sh_datagram_new(&d->peer, NULL, 0);
  if (r == NULL || sh_buf_move(&r->buf, &d->buf, sh_buf_len(&d->buf)) != 0) {
    if (r != NULL) sh_msg_free(&r->hdr);
    return sh_return(st, NULL); /* as if the network lost it */
  }
  return sh_return(st, &r->hdr);
}

/* Writes datagram i to the echo side: its outcome is known before. */
static void send_one(sh_scn *s, dgram_actor *u, world *wd, uint32_t i) {
  sh_datagram *d = sh_datagram_new(&u->echo_at, NULL, 0);
  if (d == NULL || nr_fill(&d->buf, key_of(i), 0, 0, wd->size[i]) != 0) {
    if (d != NULL) sh_msg_free(&d->hdr);
    return; /* out of memory: lost, and sent again */
  }
  int rc = sh_channel_write(u->client, &d->hdr);
  int want = wd->size[i] > DGRAM_MAX ? -EMSGSIZE : 0;
  SH_SCN_CHECK(s, rc == want, "datagram %u of %u bytes: write %d, want %d", i, wd->size[i], rc,
               want);
  if (rc == -EMSGSIZE && want == -EMSGSIZE) wd->too_big_ok++;
}

typedef struct dlocals {
  sh_future *nap;
  uint32_t tries;
} dlocals;

/* One datagram after the other: each sent until it comes back. */
static sh_yield dgram_notice(sh_actor *self, sh_stack *st) {
  dgram_actor *u = (dgram_actor *)self;
  sh_scn *s = u->a.s;
  world *wd = sh_scn_state(s);
  dlocals *l = sh_stack_locals(st);
  /* Bounded by the plan: each turn passes a datagram too large to send. */
  while (u->client != NULL && u->echo != NULL && wd->current < wd->n) {
    uint32_t i = wd->current;
    if (wd->back[i] || (wd->size[i] > DGRAM_MAX && l->tries > 0)) {
      wd->current++;
      l->tries = 0;
      continue;
    }
    if (l->tries++ >= RESENDS) {
      SH_SCN_CHECK(s, sh_scn_faulty(s), "datagram %u of %u bytes never came back", i,
                   wd->size[i]);
      break;
    }
    wd->resent += l->tries > 1;
    send_one(s, u, wd, i);
    /* A datagram too large went nowhere: the next one, after a turn. */
    l->nap = sh_sleep(st, wd->size[i] > DGRAM_MAX ? 0 : WAIT_MS);
    if (l->nap == NULL) break;
    return sh_suspend(st, 1);
  }
  wd->done = true;
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static void dgram_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  dgram_actor *u = (dgram_actor *)self;
  sh_scn *s = u->a.s;
  bool echo = ch == u->echo;
  if (!echo && ch != u->client) return;
  nr_note(s, echo ? &u->echo_ev : &u->client_ev, echo ? "echo channel" : "client channel", 0, ev,
          error);
  if (ev != SH_CHANNEL_CLOSED) return;
  SH_SCN_CHECK(s, error == -ESHUTDOWN || sh_scn_faulty(s), "a UDP channel closed: %d", error);
  /* Forgotten: its pointer dies with it. */
  if (ch == u->echo) u->echo = NULL;
  if (ch == u->client) u->client = NULL;
}

static const sh_actor_class dgram_class = {
    .name = "dgram_pair",
    .size = sizeof(dgram_actor),
    .locals_size = sizeof(dlocals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .mount = dgram_mount,
    .notice = dgram_notice,
    .channel = dgram_channel,
    .channel_event = dgram_event,
};

/* Sizes with the weight on the limit; each size under 4 once at most, so
 * that a late echo of one is never taken for the next. */
static uint32_t draw_size(sh_scn *s, const bool *small_used) {
  uint32_t n;
  switch (sh_scn_below(s, 8)) {
  case 0: n = 0; break;
  case 1: n = 1; break;
  case 2: n = DGRAM_MAX - 1; break;
  case 3: n = DGRAM_MAX; break;
  case 4: n = DGRAM_MAX + 1; break;
  case 5: n = DGRAM_MAX + 1 + (uint32_t)sh_scn_below(s, 70000); break;
  case 6: n = (uint32_t)sh_scn_below(s, 3 * SH_PAGE_DATA); break;
  default: n = (uint32_t)sh_scn_below(s, DGRAM_MAX + 1); break;
  }
  return n < 4 && small_used[n] ? 4 + n : n;
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  bool small_used[4] = {false};
  wd->n = 4 + (uint32_t)sh_scn_below(s, MAX_DGRAMS - 3);
  for (uint32_t i = 0; i < wd->n; i++) {
    wd->size[i] = draw_size(s, small_used);
    if (wd->size[i] < 4) small_used[wd->size[i]] = true;
  }
  const sh_addr *a;
  int rc = sh_scn_spawn(s, sys, &dgram_class, 0, 1, &a);
  return rc == 0 ? sh_scn_kick(a) : rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, wd->damaged, 0, "datagrams read that were never sent");
  SH_SCN_CHECK_EQ(s, wd->strangers, 0, "datagrams from a sender that is not the other side");
  if (sh_scn_faulty(s)) return;
  SH_SCN_CHECK(s, wd->done && wd->current == wd->n, "datagrams done: %u of %u", wd->current,
               wd->n);
  uint32_t too_big = 0;
  for (uint32_t i = 0; i < wd->n; i++) {
    if (wd->size[i] > DGRAM_MAX) too_big++;
    else SH_SCN_CHECK(s, wd->back[i], "datagram %u of %u bytes did not come back", i, wd->size[i]);
  }
  SH_SCN_CHECK_EQ(s, wd->too_big_ok, too_big, "writes past the limit refused");
}

static const sh_scenario net_dgram = {
    .name = "net_dgram",
    .summary = "UDP datagrams of sizes around the limit: whole or refused, the channel open",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_dgram);
