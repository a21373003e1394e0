/*
 * UDP over channels with a protocol that copes with the network: one IO
 * actor has two UDP channels, an echo side and a client side. The client
 * sends numbered datagrams; the echo side returns each to its sender; the
 * client keeps a bitmap of the numbers that came back and sends the missing
 * ones again, round after round. Loss, duplication and reordering (the
 * simulator's sh/net/drop, dup, reorder) only cost rounds.
 *
 * Invariants: every datagram that comes back carries intact the contents
 * of one that was sent, and each side hears only the other; a duplicate is recognised as one, never counted
 * as new; without faults every number comes back in the first rounds.
 */
#include <stdatomic.h>
#include <string.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#define DGRAMS 64
#define SIZE 200
#define ROUNDS 60

typedef struct world {
  uint32_t got[DGRAMS];  /* times each number came back */
  uint32_t unique, dups, bad;
  uint32_t strangers;    /* datagrams from an address that is not the other side's */
  bool done;
} world;

typedef struct udp_actor {
  sh_scn_actor a;
  sh_channel *echo, *client;
  sh_netaddr echo_at, client_at;
} udp_actor;

static void fill(uint8_t *p, uint32_t n) {
  memcpy(p, &n, 4);
  for (uint32_t i = 4; i < SIZE; i++) p[i] = (uint8_t)(n * 17u + i);
}

static void udp_mount(sh_actor *self) {
  udp_actor *u = (udp_actor *)self;
  sh_scn *s = u->a.s;
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  int rc = sh_udp_open(self, &any, NULL, &u->echo);
  if (rc == 0) rc = sh_udp_open(self, &any, NULL, &u->client);
  if (rc == 0) sh_channel_local(u->echo, &u->echo_at);
  if (rc == 0) sh_channel_local(u->client, &u->client_at);
  SH_SCN_CHECK(s, rc == 0 || sh_scn_faulty(s), "udp open: %d", rc);
}

/* The echo side returns the datagram; the client side checks it. */
static sh_yield udp_channel(sh_actor *self, sh_stack *st) {
  udp_actor *u = (udp_actor *)self;
  world *wd = sh_scn_state(u->a.s);
  sh_datagram *d = sh_stack_msg_as(st, sh_datagram);
  bool to_echo = sh_stack_channel(st) == u->echo;
  /* Each side hears the other alone: a copy is its original's, sender included. */
  const sh_netaddr *other = to_echo ? &u->client_at : &u->echo_at;
  if (d->peer.ip != other->ip || d->peer.port != other->port) {
    wd->strangers++;
    return sh_return(st, NULL);
  }
  if (to_echo) {
    sh_datagram *r = sh_datagram_new(&d->peer, NULL, 0);
    if (r == NULL || sh_buf_move(&r->buf, &d->buf, sh_buf_len(&d->buf)) != 0) {
      if (r != NULL) sh_msg_free(&r->hdr);
      return sh_return(st, NULL); /* as if the network lost it */
    }
    return sh_return(st, &r->hdr);
  }
  uint8_t p[SIZE], want[SIZE];
  uint32_t n = UINT32_MAX;
  if (sh_buf_len(&d->buf) == SIZE) {
    sh_buf_peek(&d->buf, 0, p, SIZE);
    memcpy(&n, p, 4);
  }
  if (n < DGRAMS) fill(want, n);
  if (n >= DGRAMS || memcmp(p, want, SIZE) != 0) {
    wd->bad++;
  } else if (wd->got[n]++ == 0) {
    wd->unique++;
  } else {
    wd->dups++;
  }
  return sh_return(st, NULL);
}

typedef struct round_locals {
  uint32_t round;
  sh_future *nap;
} round_locals;

/* One round: send every number still missing, then give them a while. */
static sh_yield udp_notice(sh_actor *self, sh_stack *st) {
  udp_actor *u = (udp_actor *)self;
  sh_scn *s = u->a.s;
  world *wd = sh_scn_state(s);
  round_locals *l = sh_stack_locals(st);
  /* Bounded by ROUNDS: each invocation is a round. */
  if (u->client != NULL && u->echo != NULL && wd->unique < DGRAMS && l->round++ < ROUNDS) {
    uint8_t p[SIZE];
    for (uint32_t i = 0; i < DGRAMS; i++) {
      if (wd->got[i] != 0) continue;
      fill(p, i);
      sh_datagram *d = sh_datagram_new(&u->echo_at, p, SIZE);
      if (d != NULL) sh_channel_write(u->client, &d->hdr);
    }
    l->nap = sh_sleep(st, 2);
    if (l->nap != NULL) return sh_suspend(st, 1);
  }
  wd->done = true;
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

/* A channel a fault closed is forgotten (its pointer dies with it). */
static void udp_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)error;
  udp_actor *u = (udp_actor *)self;
  if (ev != SH_CHANNEL_CLOSED) return;
  if (ch == u->echo) u->echo = NULL;
  if (ch == u->client) u->client = NULL;
}

static const sh_actor_class udp_class = {
    .name = "udp_pair",
    .size = sizeof(udp_actor),
    .locals_size = sizeof(round_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .mount = udp_mount,
    .notice = udp_notice,
    .channel = udp_channel,
    .channel_event = udp_event,
};

static int setup(sh_scn *s, sh_system *sys) {
  const sh_addr *a;
  int rc = sh_scn_spawn(s, sys, &udp_class, 0, 1, &a);
  return rc == 0 ? sh_scn_kick(a) : rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, wd->bad, 0, "datagrams that came back damaged");
  SH_SCN_CHECK_EQ(s, wd->strangers, 0, "datagrams from a sender that is not the other side");
  uint32_t sum = 0;
  for (uint32_t i = 0; i < DGRAMS; i++) sum += wd->got[i];
  SH_SCN_CHECK_EQ(s, sum, wd->unique + wd->dups, "datagrams counted");
  if (!sh_scn_faulty(s)) SH_SCN_CHECK_EQ(s, wd->unique, DGRAMS, "numbers that came back");
}

static const sh_scenario net_udp = {
    .name = "net_udp",
    .summary = "UDP with loss, duplication and reordering: a resending protocol gets every number",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .workers = 1,
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_udp);
