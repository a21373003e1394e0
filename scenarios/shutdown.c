/*
 * shutdown_inflight: the system shuts down with asks in flight (an orderly
 * stop: every pending ask fails, every actor's stop runs once).
 *
 * Clients run LANES asking stacks each; a lane asks a relay, which asks a
 * server, which answers at once -- except one ask per "parking" lane (drawn
 * in setup), which the server forwards to a holder that never answers: the
 * holder's first ask becomes a barrier stack that waits on an ask to the
 * holder itself, which its barrier holds, so every ask sent to it waits
 * until shutdown. A lane
 * that is not parked asks again as soon as it gets its reply, up to ROUNDS.
 * The workload ends once every parking lane is parked and either half the
 * planned replies came back or every other lane finished: the chains
 * client -> relay -> server (-> holder) are then full of asks, and shutdown
 * must end all of them.
 *
 * Checked, from counts the actors keep:
 *   - every stack that suspended resumed, as often as it suspended (clients,
 *     relays, servers, the holder), and every lane stack ended;
 *   - every resume saw its ask answered right or failed with -ESHUTDOWN,
 *     nothing else; a parked lane's ask can only end with -ESHUTDOWN;
 *   - every actor's stop hook ran exactly once, and no handler ran after it;
 *   - only the holder's first ask got past its barrier;
 * and, by the framework, every ask resolved once and every message counted.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/scenario.h>

#define LANES 4
#define ROUNDS 16
#define MAX_WORKERS 16 /* relays and servers: one per worker, up to this */
#define MAX_CLIENTS 16
#define MAX_LANES (LANES * MAX_CLIENTS)
#define MAX_ACTORS (MAX_CLIENTS + 2 * MAX_WORKERS + 1)

enum role { R_CLIENT = 0, R_RELAY, R_SERVER, R_HOLDER, R_ROLES };
static const char *const role_name[R_ROLES] = {"client", "relay", "server", "holder"};

/* One actor's counts. relaxed: an actor's handlers and hooks run one at a
 * time, ordered by the runtime; verify reads them after the workers joined. */
typedef struct actor_rec {
  atomic_int stops;
  atomic_int late_handlers; /* handlers that ran after the stop hook */
  atomic_int suspends, resumes;
  uint32_t role;
} actor_rec;

typedef struct lane_plan {
  uint32_t park_round; /* the round whose ask is held; >= ROUNDS: none */
  uint64_t v0;
  bool parked;         /* counted in world.parked (by the lane's own stack) */
  atomic_int ended;
  atomic_int last_error;
} lane_plan;

/* The workload's counters are seq_cst (the default): the end condition
 * (maybe_done) reads several of them together. */
typedef struct world {
  actor_rec rec[MAX_ACTORS];
  atomic_uint nactors;
  lane_plan lane[MAX_LANES];
  uint32_t nlanes, nparkers, planned_replies;
  const sh_addr *relays, *servers, *holder;
  atomic_uint started;        /* lanes whose stack began */
  atomic_uint replies;        /* right replies clients got */
  atomic_uint parked;         /* parking lanes that made their held ask (or ended before) */
  atomic_uint others_ended;   /* lanes without a held ask that ended */
  atomic_uint shut_resumes;   /* client resumes that saw -ESHUTDOWN */
  atomic_uint pending_at_done; /* client asks out when the workload ended */
  atomic_uint client_out;     /* client asks made and not yet resumed */
} world;

/* Client -> relay -> server (-> holder). */
typedef struct inf_ask {
  sh_msg hdr;
  uint64_t v;
  bool park;
} inf_ask;
static SH_MSG_DEFINE(inf_ask, SH_ASK, 0);

/* Replies are sh_scn_nums; a lane starts with an sh_scn_go whose n is the
 * lane. sa.id is the actor's record: the instances of one spawn share their
 * argument, so init draws it. */
typedef struct tracked {
  sh_scn_actor sa;
  bool locked; /* the holder: its barrier stack is waiting */
} tracked;

typedef struct one_future {
  sh_future *f;
  uint32_t round;
} one_future;

static int tracked_init(sh_actor *self, void *arg, enum role role) {
  sh_scn_actor *sa = (sh_scn_actor *)self;
  sh_scn_actor_init(self, arg);
  world *wd = sh_scn_state(sa->s);
  sa->id = atomic_fetch_add(&wd->nactors, 1);
  if (sa->id >= MAX_ACTORS) return -ENOSPC;
  wd->rec[sa->id].role = role;
  return 0;
}

static int client_init(sh_actor *self, void *arg) { return tracked_init(self, arg, R_CLIENT); }
static int relay_init(sh_actor *self, void *arg) { return tracked_init(self, arg, R_RELAY); }
static int server_init(sh_actor *self, void *arg) { return tracked_init(self, arg, R_SERVER); }
static int holder_init(sh_actor *self, void *arg) { return tracked_init(self, arg, R_HOLDER); }

static actor_rec *rec_of(sh_actor *self) {
  return &((world *)sh_scn_state(sh_scn_of(self)))->rec[sh_scn_id(self)];
}

static void tracked_stop(sh_actor *self) {
  atomic_fetch_add_explicit(&rec_of(self)->stops, 1, memory_order_relaxed);
}

/* Every handler entry: none may come after the stop hook. */
static sh_scn *enter(sh_actor *self, sh_stack *st) {
  actor_rec *r = rec_of(self);
  if (atomic_load_explicit(&r->stops, memory_order_relaxed) != 0)
    atomic_fetch_add_explicit(&r->late_handlers, 1, memory_order_relaxed);
  if (sh_stack_state(st) != SH_START) atomic_fetch_add_explicit(&r->resumes, 1, memory_order_relaxed);
  return sh_scn_of(self);
}

static sh_yield suspend_on(sh_actor *self, sh_stack *st, int next) {
  atomic_fetch_add_explicit(&rec_of(self)->suspends, 1, memory_order_relaxed);
  return sh_suspend(st, next);
}

/* A forwarded ask: `to` gets the same question; its answer (or error)
 * comes back as this stack's. */
static sh_yield forward(sh_actor *self, sh_stack *st, const sh_addr *to, int add) {
  sh_scn *s = sh_scn_of(self);
  one_future *l = sh_stack_locals(st);
  const inf_ask *q = sh_stack_msg_as(st, inf_ask);
  if (sh_stack_state(st) == SH_START) {
    inf_ask *fq = sh_msg_new(inf_ask, .v = q->v, .park = q->park);
    l->f = sh_ask(st, to, fq != NULL ? &fq->hdr : NULL, SH_FOREVER);
    if (!SH_SCN_CHECK(s, l->f != NULL, "a forwarded ask failed")) return sh_throw(st, -ENOMEM);
    return suspend_on(self, st, 1);
  }
  int err = sh_future_error(l->f);
  const sh_scn_num *r = sh_future_reply(l->f, sh_scn_num);
  SH_SCN_CHECK(s, err == 0 || err == -ESHUTDOWN, "a forwarded ask ended with %d", err);
  if (err != 0 || r == NULL) return sh_throw(st, err != 0 ? err : -EPROTO);
  return sh_scn_answer(st, r->v + (uint64_t)add);
}

/* ---- relay, server, holder ---------------------------------------------------- */

static sh_yield relay_ask(sh_actor *self, sh_stack *st) {
  sh_scn *s = enter(self, st);
  return forward(self, st, ((world *)sh_scn_state(s))->servers, 1);
}

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  sh_scn *s = enter(self, st);
  const inf_ask *q = sh_stack_msg_as(st, inf_ask);
  if (q->park) {
    /* Only -ESHUTDOWN can end this: the holder answers nothing. */
    one_future *l = sh_stack_locals(st);
    if (sh_stack_state(st) != SH_START)
      SH_SCN_CHECK(s, sh_future_error(l->f) == -ESHUTDOWN, "a held ask ended with %d",
                   sh_future_error(l->f));
    return forward(self, st, ((world *)sh_scn_state(s))->holder, 0);
  }
  return sh_scn_answer(st, q->v + 1);
}

/* The first ask to reach the holder becomes its barrier stack, which waits
 * on an ask to the holder itself: held by the barrier like every later ask,
 * until shutdown stops the holder. */
static bool holder_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((tracked *)self)->locked;
}

static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  sh_scn *s = enter(self, st);
  tracked *t = (tracked *)self;
  one_future *l = sh_stack_locals(st);
  if (sh_stack_state(st) != SH_START) {
    SH_SCN_CHECK(s, sh_future_error(l->f) == -ESHUTDOWN, "the holder's pin ended with %d",
                 sh_future_error(l->f));
    return sh_throw(st, -ESHUTDOWN);
  }
  if (!SH_SCN_CHECK(s, !t->locked, "an ask passed the holder's barrier"))
    return sh_throw(st, -EPROTO);
  t->locked = true;
  inf_ask *pin = sh_msg_new(inf_ask, .v = 0);
  l->f = sh_ask(st, sh_self(self), pin != NULL ? &pin->hdr : NULL, SH_FOREVER);
  if (!SH_SCN_CHECK(s, l->f != NULL, "the holder's pin failed")) return sh_throw(st, -ENOMEM);
  return suspend_on(self, st, 1);
}

static const sh_actor_class relay_class = {.name = "relay", .size = sizeof(tracked),
    .locals_size = sizeof(one_future), .init = relay_init, .stop = tracked_stop, .ask = relay_ask};
static const sh_actor_class server_class = {.name = "server", .size = sizeof(tracked),
    .locals_size = sizeof(one_future), .init = server_init, .stop = tracked_stop,
    .ask = server_ask};
static const sh_actor_class holder_class = {.name = "holder", .size = sizeof(tracked),
    .locals_size = sizeof(one_future), .init = holder_init, .stop = tracked_stop,
    .ask = holder_ask, .barrier = holder_barrier};

/* ---- clients ------------------------------------------------------------------------ */

static void maybe_done(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  /* seq_cst loads after seq_cst updates: whoever makes the last update of
   * the condition sees all of it. Every lane must have begun: a start
   * notice still queued at shutdown is dropped (rightly), and its lane
   * would never run. (The simulator found this: with the outside fiber
   * preempted while it sent the start notices, the other lanes reached the
   * end before the last one began.) */
  if (atomic_load(&wd->started) != wd->nlanes) return;
  if (atomic_load(&wd->parked) != wd->nparkers) return;
  if (atomic_load(&wd->replies) * 2 < wd->planned_replies &&
      atomic_load(&wd->others_ended) != wd->nlanes - wd->nparkers)
    return;
  unsigned out = atomic_load(&wd->client_out);
  unsigned zero = 0;
  /* The first to see the condition records how much was in flight. */
  if (atomic_compare_exchange_strong(&wd->pending_at_done, &zero, out + 1))
    sh_scn_done(s, sys);
}

static void count_parked(sh_scn *s, lane_plan *p, sh_system *sys) {
  p->parked = true;
  atomic_fetch_add(&((world *)sh_scn_state(s))->parked, 1);
  maybe_done(s, sys);
}

static bool lane_ask(sh_actor *self, sh_stack *st, uint32_t lane) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  one_future *l = sh_stack_locals(st);
  lane_plan *p = &wd->lane[lane];
  bool park = l->round == p->park_round;
  inf_ask *q = sh_msg_new(inf_ask, .v = p->v0 + l->round, .park = park);
  l->f = sh_ask(st, wd->relays, q != NULL ? &q->hdr : NULL, SH_FOREVER);
  if (!SH_SCN_CHECK(s, l->f != NULL, "lane %u: ask failed", lane)) return false;
  atomic_fetch_add(&wd->client_out, 1);
  if (park) count_parked(s, p, sh_actor_system(self));
  return true;
}

/* A lane that ends early (a failed check) still counts toward the end of
 * the workload: the run then fails instead of hanging. */
static sh_yield lane_end(sh_actor *self, sh_stack *st, uint32_t lane, int err) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  lane_plan *p = &wd->lane[lane];
  atomic_fetch_add(&p->ended, 1);
  atomic_store(&p->last_error, err);
  if (p->park_round >= ROUNDS) {
    atomic_fetch_add(&wd->others_ended, 1);
    maybe_done(s, sh_actor_system(self));
  } else if (!p->parked) {
    count_parked(s, p, sh_actor_system(self));
  }
  return sh_return(st, NULL);
}

/* A lane: ROUNDS asks in a row, each made when the one before came back. */
static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = enter(self, st);
  world *wd = sh_scn_state(s);
  one_future *l = sh_stack_locals(st);
  uint32_t lane = sh_scn_go_n(st);
  lane_plan *p = &wd->lane[lane];
  if (sh_stack_state(st) == SH_START) {
    l->round = 0;
    atomic_fetch_add(&wd->started, 1);
    bool asked = lane_ask(self, st, lane);
    maybe_done(s, sh_actor_system(self));
    return asked ? suspend_on(self, st, 1) : lane_end(self, st, lane, -EPROTO);
  }
  atomic_fetch_sub(&wd->client_out, 1);
  int err = sh_future_error(l->f);
  const sh_scn_num *r = sh_future_reply(l->f, sh_scn_num);
  if (l->round == p->park_round)
    SH_SCN_CHECK(s, err == -ESHUTDOWN, "lane %u: its held ask ended with %d", lane, err);
  if (err == -ESHUTDOWN) {
    atomic_fetch_add(&wd->shut_resumes, 1);
    return lane_end(self, st, lane, err);
  }
  uint64_t want = p->v0 + l->round + 2;
  if (!SH_SCN_CHECK(s, err == 0 && r != NULL && r->v == want,
                    "lane %u round %u: error %d, reply %llu, want %llu", lane, l->round, err,
                    r != NULL ? (unsigned long long)r->v : 0ull, (unsigned long long)want))
    return lane_end(self, st, lane, err != 0 ? err : -EPROTO);
  atomic_fetch_add(&wd->replies, 1);
  maybe_done(s, sh_actor_system(self));
  if (++l->round == ROUNDS) return lane_end(self, st, lane, 0);
  return lane_ask(self, st, lane) ? suspend_on(self, st, 1) : lane_end(self, st, lane, -EPROTO);
}

static const sh_actor_class client_class = {.name = "client", .size = sizeof(tracked),
    .locals_size = sizeof(one_future), .init = client_init, .stop = tracked_stop,
    .notice = client_notice};

/* ---- the run -------------------------------------------------------------------------- */

static void plan_lanes(sh_scn *s, world *wd) {
  for (uint32_t i = 0; i < wd->nlanes; i++) {
    lane_plan *p = &wd->lane[i];
    /* A third of the lanes never park, the others park in the first half
     * of their rounds (lane 0 always, early: something is certainly held
     * when the workload ends). */
    uint64_t r = sh_scn_rand(s);
    p->park_round = i == 0 ? 1 : r % 3 == 0 ? ROUNDS : (uint32_t)((r / 3) % (ROUNDS / 2));
    p->v0 = (sh_scn_rand(s) >> 8) * 64;
    if (p->park_round < ROUNDS) wd->nparkers++;
    wd->planned_replies += p->park_round < ROUNDS ? p->park_round : ROUNDS;
  }
}

static int send_lanes(sh_system *sys, sh_scn *s, uint32_t nclients) {
  int rc = 0;
  for (uint32_t c = 0; c < nclients && rc == 0; c++) {
    const sh_addr *a;
    rc = sh_scn_spawn(s, sys, &client_class, 0, 1, &a);
    for (uint32_t k = 0; k < LANES && rc == 0; k++) rc = sh_scn_kick_n(a, c * LANES + k);
  }
  return rc;
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  uint32_t w = sh_scn_workers(s) < MAX_WORKERS ? sh_scn_workers(s) : MAX_WORKERS;
  uint32_t nclients = 2 * w < MAX_CLIENTS ? 2 * w : MAX_CLIENTS;
  wd->nlanes = nclients * LANES;
  plan_lanes(s, wd);
  int rc = sh_scn_spawn(s, sys, &holder_class, 0, 1, &wd->holder);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &server_class, 0, w, &wd->servers);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &relay_class, 0, w, &wd->relays);
  if (rc == 0) rc = send_lanes(sys, s, nclients);
  return rc;
}

static void verify_actors(sh_scn *s, world *wd) {
  uint32_t n = atomic_load(&wd->nactors);
  for (uint32_t i = 0; i < n && i < MAX_ACTORS; i++) {
    actor_rec *r = &wd->rec[i];
    const char *role = role_name[r->role];
    SH_SCN_CHECK(s, atomic_load(&r->stops) == 1, "%s %u: stop ran %d times", role, i,
                 atomic_load(&r->stops));
    SH_SCN_CHECK(s, atomic_load(&r->late_handlers) == 0, "%s %u: %d handlers after its stop",
                 role, i, atomic_load(&r->late_handlers));
    SH_SCN_CHECK(s, atomic_load(&r->suspends) == atomic_load(&r->resumes),
                 "%s %u: %d suspends, %d resumes", role, i, atomic_load(&r->suspends),
                 atomic_load(&r->resumes));
  }
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  verify_actors(s, wd);
  for (uint32_t i = 0; i < wd->nlanes; i++) {
    lane_plan *p = &wd->lane[i];
    int err = atomic_load(&p->last_error);
    SH_SCN_CHECK(s, atomic_load(&p->ended) == 1, "lane %u ended %d times", i,
                 atomic_load(&p->ended));
    SH_SCN_CHECK(s, err == 0 || err == -ESHUTDOWN, "lane %u ended with %d", i, err);
    if (p->park_round < ROUNDS)
      SH_SCN_CHECK(s, err == -ESHUTDOWN, "parking lane %u ended with %d", i, err);
  }
  SH_SCN_CHECK(s, atomic_load(&wd->client_out) == 0, "%u client asks never resumed",
               atomic_load(&wd->client_out));
  /* pending_at_done is out + 1; every parking lane was out at the end. */
  unsigned at_done = atomic_load(&wd->pending_at_done);
  SH_SCN_CHECK(s, at_done >= wd->nparkers + 1,
               "%u client asks out when the workload ended, want >= %u",
               at_done == 0 ? 0 : at_done - 1, wd->nparkers);
  SH_SCN_CHECK(s, atomic_load(&wd->shut_resumes) >= wd->nparkers,
               "%u lanes saw -ESHUTDOWN, %u were parked", atomic_load(&wd->shut_resumes),
               wd->nparkers);
  SH_SCN_CHECK(s, st->asks_timed_out == 0, "%llu asks timed out",
               (unsigned long long)st->asks_timed_out);
}

static const sh_scenario shutdown_inflight = {
    .name = "shutdown_inflight",
    .summary = "shutdown with ask chains in flight: every stack resumes, every stop runs once",
    .workers = 2,
    /* The shutdown must meet the chains full of asks: no idle stretch. */
    .flags = SH_SCN_NO_IDLE,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(shutdown_inflight);
