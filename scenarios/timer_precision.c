/*
 * timer_precision: every timer the public API offers (a one-shot and a
 * periodic actor timer, a stack's sleep, an ask's timeout, a cancel racing
 * a fire) fires neither early nor late, to the nanosecond, on a system
 * where nothing else happens, so that no unrelated wake-up can cover for a
 * worker that parked past a due timer.
 *
 * Probers, one per worker (up to MAX_PROBERS, pinned), take turns: each
 * runs ROUNDS rounds and then passes the turn on, so that one actor at a
 * time has timers armed. A round draws what it arms: one probe of each kind
 * alone, a victim timer with a canceller due a tick before, at or after it
 * (or after a periodic victim's j-th tick), or two probes in one wheel;
 * delays come from a table of 0, 1 ms, sub-64 values, both sides of the
 * wheel's level boundaries (64, 4096 and 262144 ticks) and long ones;
 * before arming, a drawn number of scheduling points moves the clock off
 * the tick grid (100 ns or 2 us each in the simulator). In one run in 64
 * the first prober's first round is a burst of BURST one-shots due
 * together, more than a worker fires in one turn (4096, core/time/timer.c SH_TIMER_FIRE_MAX),
 * so that some wait on the wheel's due list for the worker's next turn.
 * An ask goes to a sink whose ask handler sleeps HOLD_MS, past the wheel's
 * top level (its overflow list), and answers when the workload stops it.
 *
 * Checks, on the scenario's clock (sh_scn_clock_ns, read just before the
 * arming call and first thing in the handler or the resumed stack):
 *   - never early: a fire comes at least `delay` after the arming, a
 *     periodic timer's k-th at least delay + (k-1) * period after it;
 *   - never late: each fire comes at most LATE_NS after it was due (the
 *     arming plus the delay; for a periodic tick, the tick before plus the
 *     period). LATE_NS is the wheel's tick (1 ms, core/time/wheel.h
 *     SH_WHEEL_TICK_NS: an expiry rounds up to it) plus SLACK_NS of
 *     scheduling (the arming's own steps, the worker's wake, its idle polls
 *     before it parks, the run of the actor): on an idle system nothing
 *     else delays a fire. A burst is due by the end of its arming and gets
 *     BURST_LATE_NS, for the thousands of handlers run before the last;
 *   - a cancel that returned 0 is followed by no fire of its timer, one
 *     that returned -ENOENT came after its one-shot fired, and every probe
 *     fired as often as it should (a periodic timer until its cancel);
 *   - asks_timed_out counts exactly the ask probes.
 * The reference model checks every fire of every scenario against its
 * expiry in the runtime's own nanoseconds (timer.early); this scenario adds
 * lateness, which only an idle system can bound.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

#define MAX_PROBERS 4
#define ROUNDS 6
#define MAX_PROBES 2
#define TICK_NS 1000000ull /* SH_WHEEL_TICK_NS, core/time/wheel.h */
#define SLACK_NS 1000000ull
#define LATE_NS (TICK_NS + SLACK_NS)
#define BURST 4100u /* > 4096, SH_TIMER_FIRE_MAX (core/time/timer.c) */
#define BURST_LATE_NS 100000000ull
#define BURN_MAX 100000u          /* steps of sh_yield_cpu, at least 100 ns each */
#define HOLD_MS (5ll * 3600 * 1000) /* past 64^4 ticks (~4.66 h): the overflow list */
#define NDELAYS 16

static const int64_t delays_ms[NDELAYS] = {0,    1,    2,    3,      5,      17,     63,    64,
                                           65,   4095, 4096, 4097,   262143, 262144, 262145, 1000};

enum kind { K_ONE_SHOT = 0, K_PERIODIC, K_SLEEP, K_ASK, K_KINDS };
static const char *const kind_name[K_KINDS] = {"one-shot", "periodic", "sleep", "ask"};

typedef struct probe {
  enum kind kind;
  int64_t delay_ms, period_ms;
  uint32_t want;       /* fires before the probe is done (periodic: its ticks) */
  uint32_t fires;
  uint64_t armed_ns;   /* the scenario's clock just before the arming call */
  uint64_t due_ns;     /* the next fire comes no earlier (check_fire) */
  uint64_t late_ns;    /* ...and no later than LATE_NS after this */
  uint64_t timer_id;
  int victim;          /* the probe this one cancels when it fires, or -1 */
  int cancel_rc;       /* the cancel of this probe: 1 until tried */
  bool open;           /* counted in the round's open probes */
} probe;

typedef struct prober {
  sh_scn_actor a;
  probe p[MAX_PROBES];
  uint32_t nprobes, open, round;
  uint32_t burst_armed, burst_fired;
  uint64_t burst_due_ns; /* every burst timer is due by then */
  sh_future *f;          /* the round's sleep or ask */
  int stack_probe;       /* its probe, or -1 */
} prober;

typedef struct world {
  const sh_addr *probers[MAX_PROBERS];
  const sh_addr *sink;
  uint32_t nprobers;
  atomic_uint asks;     /* ask probes made */
  atomic_uint rounds;   /* rounds finished */
  uint64_t max_late_ns; /* the latest fire seen: noted in the trace */
} world;

static sh_scn *scn(prober *pr) { return pr->a.s; }
static world *world_of(prober *pr) { return sh_scn_state(pr->a.s); }

/* ---- the sink: holds each ask until it is stopped ---------------------------- */

typedef struct one_future {
  sh_future *f;
} one_future;

static sh_yield sink_ask(sh_actor *self, sh_stack *st) {
  one_future *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_sleep(st, HOLD_MS);
    if (l->f != NULL) return sh_suspend(st, 1);
  }
  (void)self;
  /* Stopped (or out of memory): the asker timed out long ago. */
  return sh_scn_answer(st, 0);
}

static const sh_actor_class sink_class = {
    .name = "sink",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(one_future),
    .init = sh_scn_actor_init,
    .ask = sink_ask,
};

/* ---- checks ------------------------------------------------------------------- */

/* One fire of probe k at now_ns. Early: before due_ns, the arming plus the
 * delay and the periods since (each tick is re-armed at the runtime's fire
 * of the one before, never before it was due). Late: more than LATE_NS
 * after late_ns, the arming plus the delay, then the tick before's handler
 * plus the period (the runtime's fire came no later than that handler). */
static void check_fire(prober *pr, int k, uint64_t now_ns) {
  probe *p = &pr->p[k];
  world *wd = world_of(pr);
  SH_SCN_CHECK(scn(pr), now_ns >= p->due_ns,
               "prober %u round %u: %s (delay %lld ms, period %lld ms) fire %u came %llu ns "
               "early (%llu ns after its arming)", pr->a.id, pr->round, kind_name[p->kind],
               (long long)p->delay_ms, (long long)p->period_ms, p->fires + 1,
               (unsigned long long)(p->due_ns - now_ns),
               (unsigned long long)(now_ns - p->armed_ns));
  uint64_t late = now_ns > p->late_ns ? now_ns - p->late_ns : 0;
  if (late > wd->max_late_ns) wd->max_late_ns = late;
  SH_SCN_CHECK(scn(pr), late <= LATE_NS,
               "prober %u round %u: %s (delay %lld ms, period %lld ms) fire %u came %llu ns "
               "late, bound %llu ns (idle system)", pr->a.id, pr->round, kind_name[p->kind],
               (long long)p->delay_ms, (long long)p->period_ms, p->fires + 1,
               (unsigned long long)late, (unsigned long long)LATE_NS);
  p->fires++;
  uint64_t period_ns = (uint64_t)p->period_ms * 1000000u;
  p->due_ns += period_ns;
  p->late_ns = now_ns + period_ns;
}

static void next_round(prober *pr);

static void close_probe(prober *pr, int k) {
  if (!pr->p[k].open) return;
  pr->p[k].open = false;
  if (--pr->open == 0) next_round(pr);
}

/* ---- arming -------------------------------------------------------------------- */

/* Moves the clock off the tick grid by a drawn number of scheduling points. */
static void drift(sh_scn *s) {
  uint64_t mode = sh_scn_below(s, 3), n;
  if (mode == 1) {
    n = sh_scn_below(s, 32);
    for (uint64_t i = 0; i < n; i++) sh_yield_point("timer_precision.drift");
  } else if (mode == 2) {
    n = sh_scn_below(s, 512);
    for (uint64_t i = 0; i < n; i++) sh_yield_cpu();
  }
}

static int64_t draw_delay(sh_scn *s) { return delays_ms[sh_scn_below(s, NDELAYS)]; }

static probe *add_probe(prober *pr, enum kind kind, int64_t delay_ms) {
  SH_SCN_CHECK(scn(pr), pr->nprobes < MAX_PROBES, "too many probes");
  probe *p = &pr->p[pr->nprobes++];
  *p = (probe){.kind = kind, .delay_ms = delay_ms, .want = 1, .victim = -1, .cancel_rc = 1};
  return p;
}

static void arm_timer(prober *pr, probe *p) {
  p->armed_ns = sh_scn_clock_ns();
  p->due_ns = p->late_ns = p->armed_ns + (uint64_t)p->delay_ms * 1000000u;
  int rc = sh_timer_start(&pr->a.base, p->delay_ms, p->period_ms, p, &p->timer_id);
  if (!SH_SCN_CHECK(scn(pr), rc == 0, "prober %u: sh_timer_start: %d", pr->a.id, rc)) return;
  p->open = true;
  pr->open++;
}

/* A sleep or an ask, waited on by the round's stack. */
static sh_yield arm_stack_probe(prober *pr, sh_stack *st, probe *p) {
  world *wd = world_of(pr);
  p->armed_ns = sh_scn_clock_ns();
  p->due_ns = p->late_ns = p->armed_ns + (uint64_t)p->delay_ms * 1000000u;
  if (p->kind == K_SLEEP) {
    pr->f = sh_sleep(st, p->delay_ms);
  } else {
    atomic_fetch_add_explicit(&wd->asks, 1, memory_order_relaxed);
    pr->f = sh_scn_ask_num(st, wd->sink, pr->round, p->delay_ms);
  }
  if (!SH_SCN_CHECK(scn(pr), pr->f != NULL, "prober %u: %s failed", pr->a.id, kind_name[p->kind]))
    return sh_return(st, NULL);
  p->open = true;
  pr->open++;
  pr->stack_probe = (int)(p - pr->p);
  return sh_suspend(st, 1);
}

/* ---- a round ------------------------------------------------------------------- */

static const int64_t periods_ms[4] = {1, 2, 3, 64};

static int64_t draw_period(sh_scn *s) { return periods_ms[sh_scn_below(s, 4)]; }

/* A timer probe: a one-shot, or a periodic one cancelled at its want-th
 * tick (want 0: by a canceller). */
static probe *timer_probe(prober *pr, bool periodic, int64_t delay_ms, uint32_t want) {
  probe *p = add_probe(pr, periodic ? K_PERIODIC : K_ONE_SHOT, delay_ms);
  if (periodic) {
    p->period_ms = draw_period(scn(pr));
    p->want = want;
  }
  return p;
}

/* A victim and a one-shot that cancels it a tick before, at or a tick
 * after its (j-th) due time, racing its fire in the same or the next tick. */
static void cancel_race(prober *pr) {
  sh_scn *s = scn(pr);
  bool periodic = sh_scn_below(s, 2) == 1;
  probe *v = timer_probe(pr, periodic, draw_delay(s), 0);
  int64_t at = v->delay_ms + (periodic ? (int64_t)sh_scn_below(s, 3) * v->period_ms : 0);
  at += (int64_t)sh_scn_below(s, 3) - 1;
  probe *c = timer_probe(pr, false, at < 0 ? 0 : at, 1);
  c->victim = 0;
  arm_timer(pr, v);
  arm_timer(pr, c);
}

static int burst_tag; /* the argument of a burst's timers */

/* BURST one-shots due at once, then the clock run past their tick before
 * the worker's next turn, which then finds more due than it fires in one
 * (file comment); and a watch one-shot, the only other wake-up. */
static sh_yield start_burst(prober *pr, sh_stack *st) {
  for (uint32_t i = 0; i < BURST; i++) {
    int rc = sh_timer_start(&pr->a.base, 0, 0, &burst_tag, NULL);
    if (!SH_SCN_CHECK(scn(pr), rc == 0, "prober %u: burst timer %u: %d", pr->a.id, i, rc)) break;
    pr->burst_armed++;
  }
  pr->burst_due_ns = sh_scn_clock_ns(); /* each burst timer is due by now: delay 0 */
  /* Bounded by BURN_MAX steps; at least TICK_NS / 100 ns of them pass a tick. */
  for (uint32_t i = 0; i < BURN_MAX && sh_scn_clock_ns() <= pr->burst_due_ns + TICK_NS; i++)
    sh_yield_cpu();
  if (pr->burst_armed > 0) pr->open++;
  arm_timer(pr, timer_probe(pr, false, 500, 1));
  return sh_return(st, NULL);
}

static void burst_fire(prober *pr, uint64_t now_ns) {
  uint64_t late = now_ns - pr->burst_due_ns;
  SH_SCN_CHECK(scn(pr), late <= BURST_LATE_NS,
               "prober %u: burst timer %u of %u fired %llu ns after it was due, bound %llu ns",
               pr->a.id, pr->burst_fired + 1, pr->burst_armed, (unsigned long long)late,
               (unsigned long long)BURST_LATE_NS);
  if (++pr->burst_fired == pr->burst_armed && --pr->open == 0) next_round(pr);
}

static sh_yield start_round(prober *pr, sh_stack *st) {
  sh_scn *s = scn(pr);
  pr->nprobes = pr->open = pr->burst_armed = pr->burst_fired = 0;
  pr->stack_probe = -1;
  if (pr->a.id == 0 && pr->round == 0 && sh_scn_below(s, 64) == 63) return start_burst(pr, st);
  uint64_t plan = sh_scn_below(s, 6);
  drift(s);
  switch (plan) {
  case 0: arm_timer(pr, timer_probe(pr, false, draw_delay(s), 1)); break;
  case 1: arm_timer(pr, timer_probe(pr, true, draw_delay(s), 1 + (uint32_t)sh_scn_below(s, 3)));
    break;
  case 2: return arm_stack_probe(pr, st, add_probe(pr, K_SLEEP, draw_delay(s)));
  case 3: {
    int64_t d = draw_delay(s);
    return arm_stack_probe(pr, st, add_probe(pr, K_ASK, d > 0 ? d : 1)); /* 0: -EINVAL */
  }
  case 4: cancel_race(pr); break;
  default: {
    /* Two in one wheel: a timer, then a sleep. */
    arm_timer(pr, timer_probe(pr, sh_scn_below(s, 2) == 1, draw_delay(s), 2));
    return arm_stack_probe(pr, st, add_probe(pr, K_SLEEP, draw_delay(s)));
  }
  }
  return sh_return(st, NULL);
}

/* ---- the prober ------------------------------------------------------------------ */

static void cancel_victim(prober *pr, int k) {
  probe *v = &pr->p[k];
  int rc = sh_timer_cancel(&pr->a.base, v->timer_id);
  v->cancel_rc = rc;
  /* A one-shot that ran is gone (-ENOENT); one that did not never will. A
   * periodic victim is live until this cancel. */
  bool ok = v->kind == K_PERIODIC ? rc == 0 : rc == (v->fires > 0 ? -ENOENT : 0);
  SH_SCN_CHECK(scn(pr), ok, "prober %u round %u: cancelling a %s that fired %u times: %d",
               pr->a.id, pr->round, kind_name[v->kind], v->fires, rc);
  if (rc == 0) close_probe(pr, k);
}

static void prober_timeout(sh_actor *self, uint64_t id, void *arg) {
  prober *pr = (prober *)self;
  uint64_t now = sh_scn_clock_ns();
  if (arg == &burst_tag) {
    burst_fire(pr, now);
    return;
  }
  probe *p = arg;
  int k = (int)(p - pr->p);
  if (!SH_SCN_CHECK(scn(pr), k >= 0 && k < (int)pr->nprobes && p->timer_id == id,
                    "prober %u: timer %llu fired, not one of its round's", pr->a.id,
                    (unsigned long long)id))
    return;
  SH_SCN_CHECK(scn(pr), p->cancel_rc != 0, "prober %u round %u: a %s fired after its cancel "
               "returned 0", pr->a.id, pr->round, kind_name[p->kind]);
  check_fire(pr, k, now);
  if (p->victim >= 0) cancel_victim(pr, p->victim);
  if (p->kind == K_PERIODIC && p->fires == p->want) {
    p->cancel_rc = sh_timer_cancel(self, id);
    SH_SCN_CHECK(scn(pr), p->cancel_rc == 0, "prober %u: cancelling a periodic timer at its "
                 "tick %u: %d", pr->a.id, p->fires, p->cancel_rc);
  }
  if (p->kind == K_ONE_SHOT || p->fires == p->want) close_probe(pr, k);
}

static sh_yield prober_notice(sh_actor *self, sh_stack *st) {
  prober *pr = (prober *)self;
  if (sh_stack_state(st) == SH_START) return start_round(pr, st);
  uint64_t now = sh_scn_clock_ns();
  int k = pr->stack_probe;
  SH_SCN_CHECK(scn(pr), k >= 0 && sh_future_done(pr->f), "prober %u: resumed, nothing done",
               pr->a.id);
  if (k < 0) return sh_return(st, NULL);
  probe *p = &pr->p[k];
  int err = sh_future_error(pr->f), want = p->kind == K_SLEEP ? 0 : -ETIMEDOUT;
  SH_SCN_CHECK(scn(pr), err == want, "prober %u round %u: %s of %lld ms ended with %d, want %d",
               pr->a.id, pr->round, kind_name[p->kind], (long long)p->delay_ms, err, want);
  check_fire(pr, k, now);
  pr->f = NULL;
  pr->stack_probe = -1;
  close_probe(pr, k);
  return sh_return(st, NULL);
}

static const sh_actor_class prober_class = {
    .name = "prober",
    .size = sizeof(prober),
    .init = sh_scn_actor_init,
    .notice = prober_notice,
    .timeout = prober_timeout,
};

/* The round is over: the next one, or the next prober's turn, or the end. */
static void next_round(prober *pr) {
  world *wd = world_of(pr);
  atomic_fetch_add_explicit(&wd->rounds, 1, memory_order_relaxed);
  const sh_addr *to = NULL;
  if (++pr->round < ROUNDS) to = sh_self(&pr->a.base);
  else if (pr->a.id + 1 < wd->nprobers) to = wd->probers[pr->a.id + 1];
  if (to != NULL) {
    int rc = sh_scn_kick(to);
    SH_SCN_CHECK(scn(pr), rc == 0, "prober %u: passing the turn: %d", pr->a.id, rc);
    return;
  }
  sh_stop(wd->sink); /* its held asks' stacks answer, late */
  sh_scn_done(scn(pr), sh_actor_system(&pr->a.base));
}

/* ---- the run ---------------------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  uint32_t w = sh_scn_workers(s);
  wd->nprobers = w < MAX_PROBERS ? w : MAX_PROBERS;
  int rc = sh_scn_spawn_on(s, sys, &sink_class, 0, w - 1, &wd->sink);
  if (rc == 0)
    rc = sh_scn_spawn_each(s, sys, &prober_class, wd->nprobers, SH_SCN_EACH_PINNED, wd->probers);
  return rc != 0 ? rc : sh_scn_kick(wd->probers[0]);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->rounds), wd->nprobers * ROUNDS, "rounds finished");
  SH_SCN_CHECK_EQ(s, st->asks_timed_out, atomic_load(&wd->asks), "asks timed out");
  sh_scn_note(s, "the latest fire came %llu ns after it was due", (unsigned long long)wd->max_late_ns);
}

static const sh_scenario timer_precision = {
    .name = "timer_precision",
    .summary = "timers, sleeps, ask timeouts, cancels on an idle system: never early, late at "
               "most a tick and a slack (ns)",
    .workers = 2,
    .vtime_limit_ms = 3 * 3600 * 1000, /* 24 rounds of at most ~263 s: under 2 h */
    .flags = SH_SCN_SIM_ONLY | SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(timer_precision);
