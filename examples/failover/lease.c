/*
 * failover's lease protocol: what a node decides, on its own clock, when
 * a heartbeat tick, a lease request, an answer, a client's request or its
 * lease's end comes. No I/O here but fo_links_send; README.md has the
 * argument these rules make, in short:
 *
 *   - A grantor that granted candidate C at its local time g grants no
 *     other candidate while its clock reads less than g + promise_ms
 *     (promise_ms = L plus the drift bound plus a margin); a node that just
 *     booted (it remembers no promise) grants nothing for promise_ms.
 *   - A candidate reads its clock (start) before it sends a round; a
 *     majority (itself included) granting that round lets it serve while
 *     its clock reads less than start + serve_ms (L less the drift bound
 *     less a margin). Its own grant to itself is a promise like any other.
 *   - So two majorities share a grantor, whose promise to the first outlasts,
 *     in true time, every moment the first may serve from it: two nodes
 *     never serve at the same true time.
 *   - Epochs only grow: a candidate takes one above every epoch it has
 *     seen and above its wall clock, its id in the low bits (so no two
 *     nodes ever take the same one), and a grantor grants no epoch below
 *     one it granted.
 */
#include <errno.h>

#include "fo_int.h"

static const char *const kind_name[] = {"?", "SERVE_BEGIN", "SERVE_END", "SERVED"};

static void say(const fo_node *n, const char *what, int64_t now) {
  if (!n->cfg.verbose) return;
  fprintf(stderr, "node %d: %s (epoch %llu, t=%lld ms)\n", n->cfg.id, what,
          (unsigned long long)n->epoch, (long long)now);
}

static void emit(const fo_node *n, failover_event_kind k, int64_t local_ms) {
  FO_ASSERT(k >= FO_SERVE_BEGIN && k <= FO_SERVED);
  if (k != FO_SERVED) say(n, kind_name[k], local_ms);
  fo_observe(n->cfg.id, k, n->epoch, local_ms);
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static int popcount(uint32_t v) {
  int c = 0;
  /* Bounded by the bits of v: each turn clears one. */
  for (; v != 0; v &= v - 1) c++;
  return c;
}

/* The lease lapsed: serving ends at its exact end, however late we look. */
static void refresh(fo_node *n, int64_t now) {
  if (!n->serving || now < n->lease_end_ms) return;
  n->serving = false;
  n->cand_since_ms = now; /* the give-up window starts again */
  emit(n, FO_SERVE_END, n->lease_end_ms);
}

static void arm_lease_timer(fo_node *n, int64_t now) {
  if (n->lease_armed || !n->serving) return;
  FO_ASSERT(n->lease_end_ms > now);
  if (sh_timer_start(&n->base, n->lease_end_ms - now, 0, &n->lease_timer, &n->lease_timer) == 0)
    n->lease_armed = true; /* else the next tick sees the lapse */
}

/* A round's answers so far: serve from it if a majority granted it in time. */
static void count_round(fo_node *n, const fo_round *r, int64_t now) {
  if (1 + popcount(r->granted) < n->majority || now >= r->start_ms + n->serve_ms) return;
  /* Serving needs our own promise to ourselves to outlast it (lease.c's
   * head): a grant to another would otherwise be possible meanwhile. */
  FO_ASSERT(n->promise_to == n->cfg.id && n->promise_until_ms >= r->start_ms + n->promise_ms);
  int64_t end = r->start_ms + n->serve_ms;
  if (end > n->lease_end_ms) n->lease_end_ms = end;
  if (!n->serving) {
    n->serving = n->won = true;
    emit(n, FO_SERVE_BEGIN, now);
  }
  arm_lease_timer(n, now);
}

/* No more candidacy: its rounds are forgotten (late grants ignored), and so
 * is the promise to itself, which only its own rounds relied on. An epoch
 * that never served is no one's to fence off: its grant to itself is taken
 * back too, or a node that stood alone behind a partition would refuse the
 * primary's renewals (older epoch) once it heals. */
static void give_up(fo_node *n, int64_t now) {
  FO_ASSERT(n->candidate && !n->serving);
  say(n, "gives up", now);
  n->candidate = false;
  n->epoch = 0;
  for (int i = 0; i < FO_ROUNDS; i++) n->rounds[i].id = 0;
  if (n->promise_to == n->cfg.id) {
    n->promise_to = 0;
    n->promise_until_ms = now;
  }
  /* A candidate grants no one else, so this undoes only its own grants. */
  FO_ASSERT(n->granted_before <= n->max_granted);
  if (!n->won) n->max_granted = n->granted_before;
  /* xorshift64: a jitter of its own for each node, so rivals drift apart. */
  n->rng ^= n->rng << 13;
  n->rng ^= n->rng >> 7;
  n->rng ^= n->rng << 17;
  int64_t h = n->cfg.heartbeat_ms;
  n->backoff_until_ms = now + h * (1 + n->cfg.id) + (int64_t)(n->rng % (uint64_t)h);
}

/* Grants itself and asks every peer: a candidacy's round or a renewal. */
static void start_round(fo_node *n, int64_t now) {
  FO_ASSERT(n->candidate && n->epoch != 0);
  /* A candidate grants no one else, so its promise is its own. */
  FO_ASSERT(n->promise_to == n->cfg.id || n->promise_to == 0 || now >= n->promise_until_ms);
  n->promise_to = n->cfg.id;
  if (n->promise_until_ms < now + n->promise_ms) n->promise_until_ms = now + n->promise_ms;
  n->max_granted = max_u64(n->max_granted, n->epoch);
  fo_round *r = &n->rounds[n->next_round % FO_ROUNDS];
  *r = (fo_round){.id = n->next_round++, .start_ms = now};
  fo_frame req = {.kind = FO_LEASE_REQ, .from = (uint8_t)n->cfg.id, .epoch = n->epoch,
                  .seq = r->id};
  fo_links_send(n, &req, now);
  count_round(n, r, now); /* a node alone is its own majority */
}

static bool may_stand(const fo_node *n, int64_t now) {
  int64_t stagger = (n->cfg.id - 1) * n->cfg.heartbeat_ms; /* lower ids try first */
  return now >= n->quiet_until_ms && now >= n->backoff_until_ms &&
         now >= n->promise_until_ms + stagger;
}

static void stand(fo_node *n, int64_t now) {
  FO_ASSERT(!n->candidate && !n->serving);
  /* Above every epoch seen, and above the wall clock (README.md, "Epochs"). */
  uint64_t base = max_u64(n->max_seen >> FO_ID_BITS, (uint64_t)sh_time_ms());
  n->epoch = (base + 1) << FO_ID_BITS | (uint64_t)n->cfg.id;
  n->max_seen = n->epoch;
  n->granted_before = n->max_granted;
  n->won = false;
  n->candidate = true;
  n->cand_since_ms = now;
  say(n, "stands", now);
  start_round(n, now);
}

void fo_lease_boot(fo_node *n, int64_t now) {
  int64_t drift = (n->cfg.lease_ms * n->cfg.drift_ppm + 999999) / 1000000;
  n->serve_ms = n->cfg.lease_ms - drift - FO_MARGIN_MS;
  n->promise_ms = n->cfg.lease_ms + drift + FO_MARGIN_MS;
  FO_ASSERT(n->serve_ms > 0 && n->serve_ms < n->promise_ms);
  n->majority = (1 + n->cfg.npeers) / 2 + 1;
  /* It may have granted a lease before it crashed: it waits that out. */
  n->quiet_until_ms = now + n->promise_ms;
  n->promise_until_ms = n->quiet_until_ms;
  n->max_granted = n->max_seen = (uint64_t)sh_time_ms() << FO_ID_BITS;
  n->next_round = 1;
  n->rng = 0x9e3779b97f4a7c15ull * (uint64_t)n->cfg.id ^ (uint64_t)now;
  if (n->rng == 0) n->rng = 1;
}

void fo_lease_tick(fo_node *n, int64_t now) {
  refresh(n, now);
  if (!n->candidate) {
    if (may_stand(n, now)) stand(n, now);
    return;
  }
  /* A candidate that is not serving gets four heartbeats to win. */
  if (!n->serving && now - n->cand_since_ms >= 4 * n->cfg.heartbeat_ms) give_up(n, now);
  else start_round(n, now);
}

void fo_lease_timer(fo_node *n, int64_t now) {
  n->lease_armed = false;
  refresh(n, now);
  arm_lease_timer(n, now); /* renewed meanwhile: the new end */
}

void fo_lease_stop(fo_node *n, int64_t now) {
  if (!n->serving) return;
  n->serving = false;
  emit(n, FO_SERVE_END, now < n->lease_end_ms ? now : n->lease_end_ms);
}

fo_frame *fo_lease_on_request(fo_node *n, const fo_frame *req, int64_t now) {
  refresh(n, now);
  int c = req->from;
  n->max_seen = max_u64(n->max_seen, req->epoch);
  bool unbound = n->promise_to == 0 || n->promise_to == c || now >= n->promise_until_ms;
  bool grant = n->started && now >= n->quiet_until_ms && c >= 1 && c <= FO_MAX_NODES &&
               c != n->cfg.id && unbound && req->epoch >= n->max_granted;
  if (grant) {
    /* Unbound means our own promise is over, so we serve no more. */
    FO_ASSERT(!n->serving);
    if (n->candidate) give_up(n, now);
    n->promise_to = c;
    n->promise_until_ms = now + n->promise_ms;
    n->max_granted = req->epoch;
  }
  bool bound = n->promise_to != 0 && now < n->promise_until_ms;
  fo_frame ack = {.kind = FO_LEASE_ACK, .from = (uint8_t)n->cfg.id,
                  .status = grant ? FO_OK : FO_DENIED,
                  .holder = (uint8_t)(bound ? n->promise_to : 0), .epoch = req->epoch,
                  .seq = req->seq, .value = n->max_granted};
  return fo_frame_new(&ack);
}

void fo_lease_on_ack(fo_node *n, const fo_frame *ack, int peer, int64_t now) {
  FO_ASSERT(peer >= 0 && peer < n->cfg.npeers);
  refresh(n, now);
  n->max_seen = max_u64(n->max_seen, ack->value);
  if (!n->candidate || ack->epoch != n->epoch || ack->from != n->cfg.peers[peer].id) return;
  fo_round *r = &n->rounds[ack->seq % FO_ROUNDS];
  if (r->id == 0 || r->id != ack->seq) return; /* forgotten, or too old */
  uint32_t bit = 1u << peer;
  if (ack->status == FO_OK) r->granted |= bit;
  else r->denied |= bit;
  count_round(n, r, now);
  /* The latest round cannot win any more: let the others try. */
  int can = 1 + n->cfg.npeers - popcount(r->denied);
  if (!n->serving && r->id + 1 == n->next_round && can < n->majority) give_up(n, now);
}

fo_frame *fo_lease_on_client(fo_node *n, const fo_frame *req, int64_t now) {
  refresh(n, now);
  fo_frame resp = {.kind = FO_CLIENT_RESP, .from = (uint8_t)n->cfg.id, .seq = req->seq};
  if (n->serving) {
    FO_ASSERT(now < n->lease_end_ms);
    resp.status = FO_OK;
    resp.epoch = n->epoch;
    resp.value = ++n->served;
    emit(n, FO_SERVED, now);
    return fo_frame_new(&resp);
  }
  resp.status = FO_DENIED;
  if (n->promise_to != 0 && n->promise_to != n->cfg.id && now < n->promise_until_ms) {
    const sh_netaddr *a = fo_peer_addr(n, n->promise_to);
    resp.holder = (uint8_t)n->promise_to;
    if (a != NULL) resp.hint = *a;
  }
  return fo_frame_new(&resp);
}
