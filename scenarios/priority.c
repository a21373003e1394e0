/*
 * priority: the scheduling order (an actor is queued high when it has more
 * than 2 replies or more than 4 events waiting, or no pending future; a
 * worker's queue pops its high sub-queue first; an actor handles replies
 * before asks and notices).
 *
 * Priority is a hint taken when a house is queued, and nothing public shows
 * which sub-queue a house went to, so the scenario checks order only where
 * the runtime guarantees it: among houses of worker 0 made ready by one
 * invocation of an actor of worker 0 (that worker runs one house at a time,
 * and nobody steals from it: it never holds more ready houses than the
 * steal floor). Three parts run at once:
 *
 *   ordering  Z (worker 0) marks P1, P2, Q1, Q2 (worker 0) in a seeded order
 *             from one invocation. P1 and P2 each wait on an ask a holder
 *             never answers (normal priority); Q1 and Q2 wait on nothing
 *             (high). The marks must run Qs first, then Ps, each pair in the
 *             order Z sent them. At the end the holder is stopped and the
 *             Ps' asks fail with -ESHUTDOWN.
 *   replies   R (worker 0) asks E (worker 0); E sends R a notice and then
 *             the reply. Both wait in R's mailboxes when R next runs: the
 *             reply must resume R's stack before the notice starts, though
 *             it was sent after it.
 *   storm     M (last worker) fans out asks to servers on every worker
 *             (replies pile up: > 2) while EVENTS timers of delay 0 fire on
 *             it (> 4 events): both paths to high priority are taken; here
 *             the checks are that every reply and every timer arrives once.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define ROUNDS 40        /* ordering */
#define PROBES 40        /* replies */
#define STORMS 8         /* storm */
#define MARKERS 4        /* P1, P2 (normal), Q1, Q2 (high) */
#define NORMAL 2         /* markers [0, NORMAL) hold an ask */
#define STORM_SERVERS 4
#define FAN 12           /* asks per storm: 3 per server */
#define EVENTS 6         /* timers per storm */
#define W0_HOUSES 16     /* houses on worker 0, at most: the steal floor must not be below */
#define PARTS 3

enum op {
  OP_START = 1, /* Z: begin */
  OP_HOLD,      /* P: ask the holder, tell Z */
  OP_HELD,      /* to Z: a P's ask is pending */
  OP_MARK,      /* to a marker: record when it runs */
  OP_MARKED,    /* to Z */
  OP_RELEASED,  /* to Z: a P's held ask ended */
  OP_PROBE,     /* R: one round of the replies part */
  OP_EARLY,     /* from E to R, before E's reply */
};

typedef struct pr_cmd {
  sh_msg hdr;
  uint32_t op, arg;
} pr_cmd;
static SH_MSG_DEFINE(pr_cmd, SH_NOTICE, 0);

/* Asks are sh_scn_num_asks, except the Ps' holds: a barrier, the holder
 * takes no other ask after one. M's storms start with sh_scn_go. */
typedef sh_scn_num_ask pr_hold;
static SH_MSG_DEFINE(pr_hold, SH_ASK, SH_MSG_BARRIER);

typedef struct world {
  uint8_t perm[ROUNDS][MARKERS]; /* the order Z marks in, drawn in setup */
  const sh_addr *z, *holder, *r, *e, *m;
  const sh_addr *markers[MARKERS];
  const sh_addr *servers[STORM_SERVERS];
  /* The order clock: relaxed, because marks that happen one after the other
   * read increasing values of one atomic anyway (coherence). */
  atomic_uint clock;
  uint32_t ticks[ROUNDS][MARKERS];
  /* Written by Z, R and M, each of its own; read by verify after the join. */
  uint32_t rounds_checked, probes_checked, storms_done, fired;
  atomic_uint parts_left; /* each part, when done; 0 ends the workload */
} world;

static int post(const sh_addr *to, uint32_t op, uint32_t arg) {
  pr_cmd *c = sh_msg_new(pr_cmd, .op = op, .arg = arg);
  return c != NULL ? sh_notice(to, &c->hdr) : -ENOMEM;
}

#define POST(s, to, op, arg) \
  SH_SCN_CHECK((s), post((to), (op), (arg)) == 0, "notice %s failed", #op)

/* Actors carry the run and an index; the class says what they are. */
typedef struct actor {
  sh_scn_actor sa;
  uint32_t round;    /* Z: ordering round; R: probe; M: storm */
  uint32_t count;    /* Z: helds, then marks; M: parts of a storm */
  uint32_t released; /* Z */
  uint32_t resumed;  /* R: probes whose reply resumed the stack */
  uint32_t early;    /* R: probes whose early notice started */
  uint64_t timer[EVENTS]; /* M: this storm's timers */
  bool fired[EVENTS];
} actor;

typedef struct locals {
  sh_future *f[FAN];
} locals;

enum { RESUMED = 1 };

static actor *me(sh_actor *self) { return (actor *)self; }
static world *world_of(actor *a) { return sh_scn_state(a->sa.s); }

static void part_done(actor *a) {
  sh_scn_count_down(a->sa.s, sh_actor_system(&a->sa.base), &world_of(a)->parts_left);
}

static uint32_t op_of(sh_stack *st) { return sh_stack_msg_as(st, pr_cmd)->op; }
static uint32_t arg_of(sh_stack *st) { return sh_stack_msg_as(st, pr_cmd)->arg; }

/* ---- ordering: the holder ----------------------------------------------------- */

/* Its first hold ask's stack waits on an ask to itself, which its own
 * barrier holds back: pending until the holder is stopped. */
static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  actor *h = me(self);
  locals *l = sh_stack_locals(st);
  if (!sh_msg_is(sh_stack_msg(st), &pr_hold_type)) {
    SH_SCN_CHECK(h->sa.s, false, "holder: an ask passed its barrier");
    return sh_scn_answer(st, 0);
  }
  if (sh_stack_state(st) == RESUMED) return sh_throw(st, sh_future_error(l->f[0]));
  l->f[0] = sh_scn_ask_num(st, sh_self(self), 0, SH_FOREVER);
  if (!SH_SCN_CHECK(h->sa.s, l->f[0] != NULL, "holder: ask failed")) return sh_throw(st, -ENOMEM);
  return sh_suspend(st, RESUMED);
}

static const sh_actor_class holder_class = {
    .name = "prio_holder",
    .size = sizeof(actor),
    .locals_size = sizeof(locals),
    .init = sh_scn_actor_init,
    .ask = holder_ask,
};

/* ---- ordering: the markers ---------------------------------------------------- */

/* OP_HOLD's stack: pending (the P's normal priority) until the holder stops. */
static sh_yield marker_hold(actor *p, sh_stack *st) {
  world *wd = world_of(p);
  locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == RESUMED) {
    SH_SCN_CHECK(p->sa.s, sh_future_error(l->f[0]) == -ESHUTDOWN,
                 "P%u: held ask ended with %d, want -ESHUTDOWN", p->sa.id,
                 sh_future_error(l->f[0]));
    POST(p->sa.s, wd->z, OP_RELEASED, p->sa.id);
    return sh_return(st, NULL);
  }
  l->f[0] = sh_scn_ask_num_as(st, &pr_hold_type, wd->holder, p->sa.id, SH_FOREVER);
  if (!SH_SCN_CHECK(p->sa.s, l->f[0] != NULL, "P%u: ask failed", p->sa.id))
    return sh_return(st, NULL);
  POST(p->sa.s, wd->z, OP_HELD, p->sa.id);
  return sh_suspend(st, RESUMED);
}

static sh_yield marker_notice(sh_actor *self, sh_stack *st) {
  actor *p = me(self);
  world *wd = world_of(p);
  if (op_of(st) == OP_HOLD) return marker_hold(p, st);
  uint32_t round = arg_of(st);
  if (SH_SCN_CHECK(p->sa.s, op_of(st) == OP_MARK && round < ROUNDS, "marker: bad notice"))
    wd->ticks[round][p->sa.id] = atomic_fetch_add_explicit(&wd->clock, 1, memory_order_relaxed) + 1;
  POST(p->sa.s, wd->z, OP_MARKED, p->sa.id);
  return sh_return(st, NULL);
}

static const sh_actor_class marker_class = {
    .name = "prio_marker",
    .size = sizeof(actor),
    .locals_size = sizeof(locals),
    .init = sh_scn_actor_init,
    .notice = marker_notice,
};

/* ---- ordering: Z ------------------------------------------------------------------ */

static void start_round(actor *z) {
  world *wd = world_of(z);
  for (uint32_t i = 0; i < MARKERS; i++)
    POST(z->sa.s, wd->markers[wd->perm[z->round][i]], OP_MARK, z->round);
}

/* The run order a round must have had: high markers as sent, then normal. */
static void check_round(actor *z) {
  world *wd = world_of(z);
  const uint8_t *perm = wd->perm[z->round];
  uint32_t prev = 0;
  for (int high = 1; high >= 0; high--)
    for (uint32_t i = 0; i < MARKERS; i++) {
      uint32_t k = perm[i];
      if ((k >= NORMAL) != high) continue;
      uint32_t t = wd->ticks[z->round][k];
      SH_SCN_CHECK(z->sa.s, t > prev, "round %u: %s%u ran out of order (sent %u %u %u %u)",
                   z->round, k >= NORMAL ? "Q" : "P", k % NORMAL + 1, perm[0], perm[1], perm[2],
                   perm[3]);
      prev = t;
    }
  wd->rounds_checked++;
}

static void on_marked(actor *z) {
  world *wd = world_of(z);
  if (++z->count < MARKERS) return;
  z->count = 0;
  check_round(z);
  if (++z->round < ROUNDS)
    start_round(z);
  else
    SH_SCN_CHECK(z->sa.s, sh_stop(wd->holder) == 0, "Z: could not stop the holder");
}

static sh_yield z_notice(sh_actor *self, sh_stack *st) {
  actor *z = me(self);
  world *wd = world_of(z);
  switch (op_of(st)) {
  case OP_START:
    for (uint32_t i = 0; i < NORMAL; i++) POST(z->sa.s, wd->markers[i], OP_HOLD, 0);
    break;
  case OP_HELD:
    /* Both Ps have settled with their ask pending: they run before Z. */
    if (++z->count == NORMAL) {
      z->count = 0;
      start_round(z);
    }
    break;
  case OP_MARKED: on_marked(z); break;
  case OP_RELEASED:
    if (++z->released == NORMAL) part_done(z);
    break;
  default: SH_SCN_CHECK(z->sa.s, false, "Z: bad notice %u", op_of(st)); break;
  }
  return sh_return(st, NULL);
}

static const sh_actor_class z_class = {
    .name = "prio_driver",
    .size = sizeof(actor),
    .init = sh_scn_actor_init,
    .notice = z_notice,
};

/* ---- replies: R and E ----------------------------------------------------------- */

/* The early notice first, then the answer. */
static sh_yield e_ask(sh_actor *self, sh_stack *st) {
  actor *e = me(self);
  uint64_t v = sh_stack_msg_as(st, sh_scn_num_ask)->v;
  POST(e->sa.s, world_of(e)->r, OP_EARLY, (uint32_t)v);
  return sh_scn_answer(st, v + 1);
}

static const sh_actor_class e_class = {
    .name = "prio_echo",
    .size = sizeof(actor),
    .init = sh_scn_actor_init,
    .ask = e_ask,
};

static sh_yield r_probe(actor *r, sh_stack *st) {
  world *wd = world_of(r);
  locals *l = sh_stack_locals(st);
  uint32_t k = arg_of(st);
  if (sh_stack_state(st) == SH_START) {
    l->f[0] = sh_scn_ask_num(st, wd->e, k, SH_FOREVER);
    if (!SH_SCN_CHECK(r->sa.s, l->f[0] != NULL, "R: ask failed")) return sh_return(st, NULL);
    return sh_suspend(st, RESUMED);
  }
  uint64_t v = 0;
  SH_SCN_CHECK(r->sa.s, sh_scn_num_of(l->f[0], &v) && v == (uint64_t)k + 1,
               "R: probe %u answered wrong", k);
  SH_SCN_CHECK(r->sa.s, r->early == k, "R: probe %u resumed after its early notice", k);
  r->resumed = k + 1;
  return sh_return(st, NULL);
}

static sh_yield r_notice(sh_actor *self, sh_stack *st) {
  actor *r = me(self);
  world *wd = world_of(r);
  if (op_of(st) == OP_PROBE) return r_probe(r, st);
  uint32_t k = arg_of(st);
  SH_SCN_CHECK(r->sa.s, op_of(st) == OP_EARLY && r->resumed == k + 1,
               "R: early notice %u started before the reply sent after it", k);
  r->early = k + 1;
  wd->probes_checked++;
  if (k + 1 < PROBES)
    POST(r->sa.s, sh_self(self), OP_PROBE, k + 1);
  else
    part_done(r);
  return sh_return(st, NULL);
}

static const sh_actor_class r_class = {
    .name = "prio_prober",
    .size = sizeof(actor),
    .locals_size = sizeof(locals),
    .init = sh_scn_actor_init,
    .notice = r_notice,
};

/* ---- storm: M and its servers ----------------------------------------------------- */

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_scn_answer(st, 3 * sh_stack_msg_as(st, sh_scn_num_ask)->v + 1);
}

static const sh_actor_class server_class = {
    .name = "prio_server",
    .size = sizeof(actor),
    .init = sh_scn_actor_init,
    .ask = server_ask,
};

/* A storm is over when its stack and all its timers are: then the next. */
static void storm_part(actor *m) {
  world *wd = world_of(m);
  if (++m->count < 1 + EVENTS) return;
  m->count = 0;
  wd->storms_done++;
  sh_scn_next_round(&m->sa.base, ++m->round < STORMS, &wd->parts_left);
}

static void storm_timers(actor *m) {
  for (uint32_t i = 0; i < EVENTS; i++) {
    m->fired[i] = false;
    SH_SCN_CHECK(m->sa.s, sh_timer_start(&m->sa.base, 0, 0, NULL, &m->timer[i]) == 0,
                 "M: timer did not start");
  }
}

static uint64_t storm_value(const actor *m, uint32_t i) { return (uint64_t)m->round * FAN + i; }

static sh_yield m_notice(sh_actor *self, sh_stack *st) {
  actor *m = me(self);
  world *wd = world_of(m);
  locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    storm_timers(m);
    for (uint32_t i = 0; i < FAN; i++) {
      l->f[i] = sh_scn_ask_num(st, wd->servers[i % STORM_SERVERS], storm_value(m, i), SH_FOREVER);
      SH_SCN_CHECK(m->sa.s, l->f[i] != NULL, "M: ask failed");
    }
    return sh_suspend(st, RESUMED);
  }
  for (uint32_t i = 0; i < FAN; i++) {
    uint64_t v = 0;
    SH_SCN_CHECK(m->sa.s, sh_scn_num_of(l->f[i], &v) && v == 3 * storm_value(m, i) + 1,
                 "M: storm %u ask %u answered wrong", m->round, i);
  }
  storm_part(m);
  return sh_return(st, NULL);
}

static void m_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)arg;
  actor *m = me(self);
  uint32_t i = 0;
  while (i < EVENTS && m->timer[i] != id) i++;
  if (!SH_SCN_CHECK(m->sa.s, i < EVENTS && !m->fired[i], "M: timer %llu fired twice or unknown",
                    (unsigned long long)id))
    return;
  m->fired[i] = true;
  world_of(m)->fired++;
  storm_part(m);
}

static const sh_actor_class m_class = {
    .name = "prio_storm",
    .size = sizeof(actor),
    .locals_size = sizeof(locals),
    .init = sh_scn_actor_init,
    .notice = m_notice,
    .timeout = m_timeout,
};

/* ---- the run ---------------------------------------------------------------------- */

static void configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  /* The orders checked hold only while nobody steals from worker 0. */
  if (cfg->steal_floor < W0_HOUSES) cfg->steal_floor = W0_HOUSES;
}

static void draw_perms(sh_scn *s, world *wd) {
  for (uint32_t r = 0; r < ROUNDS; r++) {
    uint8_t *p = wd->perm[r];
    for (uint32_t i = 0; i < MARKERS; i++) p[i] = (uint8_t)i;
    for (uint32_t i = MARKERS - 1; i > 0; i--) {
      uint32_t j = (uint32_t)(sh_scn_rand(s) % (i + 1));
      uint8_t t = p[i];
      p[i] = p[j];
      p[j] = t;
    }
  }
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  uint32_t workers = sh_scn_workers(s);
  draw_perms(s, wd);
  atomic_store(&wd->parts_left, PARTS);
  int rc = sh_scn_spawn_on(s, sys, &z_class, 0, 0, &wd->z);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &holder_class, 0, 0, &wd->holder);
  for (uint32_t i = 0; i < MARKERS && rc == 0; i++)
    rc = sh_scn_spawn_on(s, sys, &marker_class, i, 0, &wd->markers[i]);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &r_class, 0, 0, &wd->r);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &e_class, 0, 0, &wd->e);
  if (rc == 0)
    rc = sh_scn_spawn_each(s, sys, &server_class, STORM_SERVERS, SH_SCN_EACH_PINNED, wd->servers);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &m_class, 0, workers - 1, &wd->m);
  if (rc == 0) rc = post(wd->z, OP_START, 0);
  if (rc == 0) rc = post(wd->r, OP_PROBE, 0);
  if (rc == 0) rc = sh_scn_kick(wd->m);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK(s, wd->rounds_checked == ROUNDS, "%u ordering rounds, want %d", wd->rounds_checked,
               ROUNDS);
  SH_SCN_CHECK(s, wd->probes_checked == PROBES, "%u reply probes, want %d", wd->probes_checked,
               PROBES);
  SH_SCN_CHECK(s, wd->storms_done == STORMS && wd->fired == STORMS * EVENTS,
               "%u storms and %u timers, want %d and %d", wd->storms_done, wd->fired, STORMS,
               STORMS * EVENTS);
  /* The Ps' holds and the holder's ask to itself, the probes, the storms. */
  SH_SCN_CHECK_EQ(s, st->asks, NORMAL + 1 + PROBES + (uint64_t)STORMS * FAN, "asks");
  SH_SCN_CHECK(s, st->asks_timed_out == 0, "%llu asks timed out",
               (unsigned long long)st->asks_timed_out);
}

static const sh_scenario priority = {
    .name = "priority",
    .summary = "high before normal on one worker, replies before notices, reply/event storms",
    .workers = 2,
    .state_size = sizeof(world),
    .configure = configure,
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(priority);
