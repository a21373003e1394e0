/*
 * failover's channels, on a node: one connection of its own to each peer,
 * which carries its lease requests out and the peer's answers back, and
 * the channels others opened to it (peers' requests, clients').
 *
 * A peer may be down, crash without a FIN, be cut off one way or both, or
 * reset: so a connection whose oldest unanswered request is older than a
 * lease is closed and made again (one idle for half a lease is pinged), a
 * connect has a timeout, and an incoming channel silent for four leases is
 * closed (a peer that crashed leaves its half of it behind; every channel
 * is tracked from its OPEN event, our own until the connect that made it
 * takes it back). Nothing here blocks or spins: the heartbeat's tick looks
 * at every channel, connects run in stacks.
 *
 * A channel's data points at its fo_conn; a fo_conn whose ch is no longer
 * that channel forgot it on purpose (we closed it), so its CLOSED event is
 * only acknowledged.
 */
#include <errno.h>

#include "fo_int.h"

const sh_msg_type fo_connect_type = {"fo_connect", sizeof(fo_connect), SH_NOTICE, 0, NULL, NULL};

static int64_t link_timeout_ms(const fo_node *n) { return n->cfg.lease_ms; }
static int64_t keepalive_ms(const fo_node *n) { return n->cfg.lease_ms / 2; }
static int64_t idle_ms(const fo_node *n) { return 4 * n->cfg.lease_ms; }
static int64_t retry_ms(const fo_node *n) { return 2 * n->cfg.heartbeat_ms; }

static int64_t connect_ms(const fo_node *n) {
  return n->cfg.lease_ms / 2 > 10 ? n->cfg.lease_ms / 2 : 10;
}

void fo_links_init(fo_node *n) {
  FO_ASSERT(n->cfg.npeers <= FO_MAX_PEERS);
  for (int i = 0; i < n->cfg.npeers; i++) n->out[i] = (fo_conn){.peer = i};
  for (int i = 0; i < FO_MAX_INCOMING; i++) n->in[i] = (fo_conn){.peer = -1};
}

const sh_netaddr *fo_peer_addr(const fo_node *n, int id) {
  for (int i = 0; i < n->cfg.npeers; i++)
    if (n->cfg.peers[i].id == id) return &n->cfg.peers[i].addr;
  return NULL;
}

static void say(const fo_node *n, const fo_conn *c, const char *what, int error) {
  if (!n->cfg.verbose || c->peer < 0) return;
  fprintf(stderr, "node %d: link to node %d: %s (%d)\n", n->cfg.id, n->cfg.peers[c->peer].id,
          what, error);
}

/* Forgets c's channel and closes it (its CLOSED event finds c moved on). */
static void drop(fo_node *n, fo_conn *c, int64_t now, const char *why) {
  sh_channel *ch = c->ch;
  FO_ASSERT(ch != NULL);
  say(n, c, why, 0);
  c->ch = NULL;
  c->waiting = false;
  c->retry_ms = now;
  sh_channel_close(ch);
}

/* Writes f on c's connection; a write that fails drops it. */
static void write_to(fo_node *n, fo_conn *c, const fo_frame *f, int64_t now) {
  FO_ASSERT(c->ch != NULL && c->peer >= 0);
  fo_frame *m = fo_frame_new(f);
  if (m == NULL) return; /* this peer misses a round; the next tick sends again */
  if (sh_channel_write(c->ch, &m->hdr) != 0) {
    drop(n, c, now, "write failed");
    return;
  }
  c->sent_ms = now;
  if (!c->waiting) {
    c->waiting = true;
    c->since_ms = now;
  }
}

void fo_links_tick(fo_node *n, int64_t now) {
  for (int i = 0; i < n->cfg.npeers; i++) {
    fo_conn *c = &n->out[i];
    /* Half-open (a peer gone without a FIN) or cut: made again. */
    if (c->ch != NULL && c->waiting && now - c->since_ms >= link_timeout_ms(n))
      drop(n, c, now, "no answer, reconnecting");
    /* A backup sends nothing of its own: a ping keeps the peer from taking
     * the connection for a dead one, and us from missing that it is. */
    if (c->ch != NULL && now - c->sent_ms >= keepalive_ms(n)) {
      fo_frame ping = {.kind = FO_PING, .from = (uint8_t)n->cfg.id};
      write_to(n, c, &ping, now);
    }
    if (c->connecting && now >= c->connect_until_ms) c->connecting = false; /* lost */
    if (c->ch != NULL || c->connecting || now < c->retry_ms) continue;
    fo_connect *m = (fo_connect *)sh_msg_alloc(&fo_connect_type);
    if (m == NULL) continue;
    m->peer = i;
    m->gen = ++c->gen;
    if (sh_notice(sh_self(&n->base), &m->hdr) != 0) continue;
    c->connecting = true;
    c->connect_until_ms = now + connect_ms(n) + 2 * retry_ms(n);
  }
  for (int i = 0; i < FO_MAX_INCOMING; i++) {
    fo_conn *c = &n->in[i];
    if (c->ch != NULL && now - c->since_ms >= idle_ms(n)) drop(n, c, now, "idle");
  }
}

void fo_links_send(fo_node *n, const fo_frame *f, int64_t now) {
  for (int i = 0; i < n->cfg.npeers; i++)
    if (n->out[i].ch != NULL) write_to(n, &n->out[i], f, now);
}

/* An incoming channel seen first: a free slot, or the one idle longest. */
static fo_conn *track(fo_node *n, sh_channel *ch, int64_t now) {
  fo_conn *c = NULL;
  for (int i = 0; i < FO_MAX_INCOMING && c == NULL; i++)
    if (n->in[i].ch == NULL) c = &n->in[i];
  if (c == NULL) {
    c = &n->in[0];
    for (int i = 1; i < FO_MAX_INCOMING; i++)
      if (n->in[i].since_ms < c->since_ms) c = &n->in[i];
    drop(n, c, now, "evicted");
  }
  FO_ASSERT(c->ch == NULL && c->peer == -1);
  c->ch = ch;
  c->since_ms = now;
  sh_channel_set_data(ch, c);
  return c;
}

fo_conn *fo_links_heard(fo_node *n, sh_channel *ch, int64_t now) {
  fo_conn *c = sh_channel_data(ch);
  if (c == NULL) c = track(n, ch, now); /* its OPEN came before we could track it */
  FO_ASSERT(c->peer >= -1 && c->peer < n->cfg.npeers);
  if (c->peer >= 0) c->waiting = false; /* answered */
  else c->since_ms = now;
  return c;
}

enum { C_START = SH_START, C_DONE };

/* Whether the connect of this stack is still the one its fo_conn waits for. */
static bool current(const fo_node *n, const fo_connect_locals *l) {
  FO_ASSERT(l->peer >= 0 && l->peer < n->cfg.npeers);
  return n->out[l->peer].connecting && n->out[l->peer].gen == l->gen;
}

/* A connect given up for lost came after all: its channel goes. */
static sh_yield stale(sh_stack *st, const fo_connect_locals *l) {
  if (l->f != NULL && !sh_future_failed(l->f))
    sh_channel_close(sh_future_reply(l->f, sh_channel_msg)->ch);
  return sh_return(st, NULL);
}

/* The stack of a fo_connect notice: connects to one peer, with a timeout. */
sh_yield fo_links_connect(fo_node *n, sh_stack *st) {
  fo_connect_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == C_START) {
    l->peer = sh_stack_msg_as(st, fo_connect)->peer;
    l->gen = sh_stack_msg_as(st, fo_connect)->gen;
    l->f = NULL;
    if (!current(n, l)) return stale(st, l);
    sh_channel_opts o = {.handlers = {&fo_codec_async}, .nhandlers = 1,
                         .connect_timeout_ms = connect_ms(n)};
    l->f = sh_tcp_connect(st, &n->cfg.peers[l->peer].addr, &o);
    if (l->f != NULL) return sh_suspend(st, C_DONE);
  }
  if (!current(n, l)) return stale(st, l);
  fo_conn *c = &n->out[l->peer];
  int64_t now = sh_clock_ms();
  c->connecting = false;
  int rc = l->f == NULL ? -ENOMEM : sh_future_error(l->f);
  sh_channel *ch = rc == 0 ? sh_future_reply(l->f, sh_channel_msg)->ch : NULL;
  int v;
  /* Its OPEN event took it for an incoming channel; it may have closed
   * since (the peer greeted and left: calls say -EPIPE), or been dropped
   * as one (evicted: that fo_conn forgot it). */
  fo_conn *seen = ch != NULL ? sh_channel_data(ch) : NULL;
  if (ch != NULL && sh_channel_getopt(ch, SH_TCP_NODELAY, &v) == -EPIPE) rc = -EPIPE;
  else if (seen != NULL && seen->ch != ch) rc = -ECONNABORTED;
  if (rc != 0) {
    say(n, c, "connect failed", rc);
    c->retry_ms = now + retry_ms(n);
    return sh_return(st, NULL);
  }
  if (seen != NULL) {
    FO_ASSERT(seen->peer == -1);
    seen->ch = NULL; /* ours, not an incoming one */
  }
  FO_ASSERT(c->ch == NULL);
  say(n, c, "connected", 0);
  c->ch = ch;
  c->waiting = false;
  c->sent_ms = now;
  sh_channel_set_data(ch, c);
  return sh_return(st, NULL);
}

void fo_links_event(fo_node *n, sh_channel *ch, int event, int error) {
  fo_conn *c = sh_channel_data(ch);
  /* Tracked from its start, so that one that never says a word is closed
   * once idle too (our own connects' channels are taken back from here). */
  if (event == SH_CHANNEL_OPEN && c == NULL) track(n, ch, sh_clock_ms());
  if (event != SH_CHANNEL_CLOSED) return;
  if (c == NULL || c->ch != ch) return; /* never tracked, or dropped on purpose */
  say(n, c, "closed", error);
  c->ch = NULL;
  c->waiting = false;
  c->retry_ms = sh_clock_ms() + (c->peer >= 0 ? retry_ms(n) : 0);
}
