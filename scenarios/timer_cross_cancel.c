/*
 * timer_cross_cancel: actor timers cancelled from another worker than the
 * one whose wheel holds them, right at their expiry.
 *
 * A timer lives in the wheel of the worker its actor ran on when it started
 * it; an actor that follows its senders moves, and then cancels from
 * another worker while that wheel may be firing the timer. The runtime
 * guarantees: after sh_timer_cancel returns 0, the handler never runs for that
 * timer (stackhouse.h). Here:
 *   - one pacer per worker, pinned there, ticks every millisecond (a
 *     periodic timer); at each tick every ticker gets one kick, from the
 *     pacers in turn, so the tickers are readied from every worker and
 *     follow;
 *   - a kicked ticker cancels every timer of its batch still armed (each
 *     cancel must return 0: nothing delivered it yet), then arms a new
 *     batch of BATCH one-shots, due at the wheels' next millisecond tick:
 *     the one at which the next kick comes, often from the other worker,
 *     while the old batch's wheel fires it.
 * Invariant: a timer whose cancel returned 0 never reaches the handler; a
 * timeout is always one of the ticker's armed timers, with its argument.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/scenario.h>

#define MAX_WORKERS 8
#define MAX_TICKERS 8
#define BATCH 8        /* one-shots a ticker keeps armed */
#define TICKS 12       /* a pacer's ticks before it stops */
#define PERIOD_MS 1
#define SHOT_MS 1

typedef struct tally {
  uint32_t started, fired, cancelled;
} tally;

typedef struct world {
  const sh_addr *tickers[MAX_TICKERS];
  tally tal[MAX_TICKERS];
  uint32_t ntickers, npacers;
  atomic_uint pacers_left;
} world;

typedef struct ticker {
  sh_scn_actor a; /* a.id: its index among the tickers */
  uint64_t shot[BATCH]; /* the batch's ids; each timer's argument is its cell */
  bool armed[BATCH];
} ticker;

typedef struct pacer {
  sh_scn_actor a; /* a.id: its worker */
  uint64_t period; /* its periodic timer's id */
  uint32_t ticks;
} pacer;

static void arm(ticker *t, uint32_t i) {
  world *wd = sh_scn_state(t->a.s);
  int rc = sh_timer_start(&t->a.base, SHOT_MS, 0, &t->shot[i], &t->shot[i]);
  t->armed[i] = rc == 0;
  if (t->armed[i]) wd->tal[t->a.id].started++;
  /* -ESHUTDOWN: a kick handled as the workload's end stops the ticker. */
  SH_SCN_CHECK(t->a.s, rc == 0 || rc == -ESHUTDOWN || sh_scn_fault_error(t->a.s, rc),
               "ticker %u: timer not started: %d", t->a.id, rc);
}

static sh_yield ticker_notice(sh_actor *self, sh_stack *st) {
  ticker *t = (ticker *)self;
  world *wd = sh_scn_state(t->a.s);
  for (uint32_t i = 0; i < BATCH; i++) {
    if (!t->armed[i]) continue;
    int rc = sh_timer_cancel(self, t->shot[i]);
    SH_SCN_CHECK(t->a.s, rc == 0, "ticker %u: cancelling its armed timer %llu: %d", t->a.id,
                 (unsigned long long)t->shot[i], rc);
    t->armed[i] = false;
    wd->tal[t->a.id].cancelled++;
  }
  for (uint32_t i = 0; i < BATCH; i++) arm(t, i);
  return sh_return(st, NULL);
}

static void ticker_timeout(sh_actor *self, uint64_t id, void *arg) {
  ticker *t = (ticker *)self;
  world *wd = sh_scn_state(t->a.s);
  uint32_t i = 0;
  while (i < BATCH && !(t->armed[i] && t->shot[i] == id)) i++;
  if (!SH_SCN_CHECK(t->a.s, i < BATCH,
                    "ticker %u: timer %llu fired, not armed: fired after its cancel returned 0",
                    t->a.id, (unsigned long long)id))
    return;
  SH_SCN_CHECK(t->a.s, arg == &t->shot[i], "ticker %u: timer %llu fired with another's argument",
               t->a.id, (unsigned long long)id);
  t->armed[i] = false;
  wd->tal[t->a.id].fired++;
}

static const sh_actor_class ticker_class = {
    .name = "ticker",
    .size = sizeof(ticker),
    .init = sh_scn_actor_init,
    .notice = ticker_notice,
    .timeout = ticker_timeout,
};

static sh_yield pacer_notice(sh_actor *self, sh_stack *st) {
  pacer *p = (pacer *)self;
  int rc = sh_timer_start(self, PERIOD_MS, PERIOD_MS, NULL, &p->period);
  SH_SCN_CHECK(p->a.s, rc == 0 || sh_scn_fault_error(p->a.s, rc), "pacer %u: timer not started: %d",
               p->a.id, rc);
  if (rc != 0) {
    world *wd = sh_scn_state(p->a.s);
    sh_scn_count_down(p->a.s, sh_actor_system(self), &wd->pacers_left);
  }
  return sh_return(st, NULL);
}

static void pacer_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id, (void)arg;
  pacer *p = (pacer *)self;
  world *wd = sh_scn_state(p->a.s);
  /* Each ticker gets one kick a tick, from the pacers in turn. */
  for (uint32_t i = 0; i < wd->ntickers; i++) {
    if ((p->ticks + i) % wd->npacers != p->a.id) continue;
    int rc = sh_scn_kick(wd->tickers[i]);
    SH_SCN_CHECK(p->a.s, rc == 0 || sh_scn_fault_error(p->a.s, rc), "pacer %u: kick %u: %d",
                 p->a.id, i, rc);
  }
  if (++p->ticks < TICKS) return;
  int rc = sh_timer_cancel(self, p->period);
  SH_SCN_CHECK(p->a.s, rc == 0, "pacer %u: cancelling its period: %d", p->a.id, rc);
  sh_scn_count_down(p->a.s, sh_actor_system(self), &wd->pacers_left);
}

static const sh_actor_class pacer_class = {
    .name = "pacer",
    .size = sizeof(pacer),
    .init = sh_scn_actor_init,
    .notice = pacer_notice,
    .timeout = pacer_timeout,
};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  uint32_t workers = sh_scn_workers(s);
  wd->npacers = workers < MAX_WORKERS ? workers : MAX_WORKERS;
  wd->ntickers = 2 * workers < MAX_TICKERS ? 2 * workers : MAX_TICKERS;
  atomic_store(&wd->pacers_left, wd->npacers);
  /* Tickers are not pinned: they follow whichever pacer readies them. */
  int rc = sh_scn_spawn_each(s, sys, &ticker_class, wd->ntickers, 0, wd->tickers);
  for (uint32_t i = 0; rc == 0 && i < wd->npacers; i++) {
    const sh_addr *p;
    rc = sh_scn_spawn_on(s, sys, &pacer_class, i, i, &p);
    if (rc == 0) rc = sh_scn_kick(p);
  }
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  for (uint32_t i = 0; i < wd->ntickers; i++) {
    const tally *t = &wd->tal[i];
    /* The batch still armed at the end is neither fired nor cancelled. */
    SH_SCN_CHECK(s, t->fired + t->cancelled + BATCH >= t->started && t->fired + t->cancelled <= t->started,
                 "ticker %u: %u timers started, %u fired, %u cancelled", i, t->started, t->fired,
                 t->cancelled);
  }
  SH_SCN_CHECK(s, st->asks == 0, "no asks expected");
}

static const sh_scenario timer_cross_cancel = {
    .name = "timer_cross_cancel",
    .summary = "actor timers cancelled from another worker at their expiry: none fires after",
    .workers = 2,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(timer_cross_cancel);
