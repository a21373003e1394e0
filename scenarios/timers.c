/*
 * actor_timers: one-shot and periodic actor timers and their cancellation
 * (a timer's expiry reaches the actor as an event, which calls its class's
 * timeout handler).
 *
 * Every actor, in one handler, starts (in this order):
 *   - one-shots O0..O3 with delays 1, 4, 10, 25 ms;
 *   - a periodic P (every PERIOD_MS, first after PERIOD_MS);
 *   - a one-shot C, cancelled at once: sh_timer_cancel returns 0 and C never
 *     fires;
 *   - a one-shot D (delay drawn in setup) that P's handler cancels at P's
 *     CANCEL_D_TICK-th tick, racing with D's own expiry: either the cancel
 *     returns 0 and D never fires, or D already fired and it returns -ENOENT;
 * and P's handler cancels P itself at its TICKS-th tick (0, then -ENOENT the
 * second time) and starts a sentinel one-shot SENTINEL_MS later: when the
 * sentinel fires, P must have fired exactly TICKS times.
 *
 * No public clock exists, so "a timer never fires before it is due" is
 * checked through order, which holds however late the workers run:
 *   - the one-shots, all on one worker's wheel, fire in the order of their
 *     delays (a 10 ms timer before a 25 ms one started just after it);
 *   - P was started after O_k, and P's n-th tick is due no earlier than
 *     n * PERIOD_MS after P started (each period counts from the tick
 *     before). Delays are whole milliseconds, none a multiple of PERIOD_MS,
 *     so when O_k (delay d) fires P has ticked at most floor(d / PERIOD_MS)
 *     times; one tick more would mean P fired early or O_k late out of order.
 * Every callback must carry the argument its timer was started with.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/scenario.h>

#define MAX_ACTORS 32
#define PERIOD_MS 3u
#define TICKS 5           /* P is cancelled at this tick */
#define CANCEL_D_TICK 3   /* D is cancelled at this tick of P */
#define D_MIN_MS 10u      /* D's delay: D_MIN_MS..D_MIN_MS + D_SPREAD_MS - 1, around tick 3 */
#define D_SPREAD_MS 6u
#define SENTINEL_MS (2 * PERIOD_MS + 1)
#define ONE_SHOTS 4

static const uint32_t one_shot_ms[ONE_SHOTS] = {1, 4, 10, 25};

/* Which timer a callback is for; also the index of its argument cell. */
enum which { W_O0 = 0, W_P = ONE_SHOTS, W_C, W_D, W_SENTINEL, W_COUNT };

typedef struct record {
  int ticks;           /* P's callbacks */
  int one_shots;       /* O callbacks, in order */
  int sentinel;
  int c_fired, d_fired;
  int d_cancel_rc;     /* 1 until tried */
  int p_cancel_rc[2];  /* 1 until tried */
  int finished;        /* the actor's done points reached (O3 and the sentinel) */
} record;

typedef struct world {
  record rec[MAX_ACTORS];
  uint32_t d_ms[MAX_ACTORS];
  uint32_t nactors;
  atomic_uint actors_left; /* actors yet to reach both done points */
} world;

typedef struct ticker {
  sh_scn_actor a; /* a.id: its index in the world's arrays */
  uint64_t id[W_COUNT];
  char arg[W_COUNT]; /* each timer's argument: the address of its cell */
} ticker;

static record *rec_of(ticker *t) { return &((world *)sh_scn_state(t->a.s))->rec[t->a.id]; }

static bool start(ticker *t, enum which w, uint64_t delay_ms, uint64_t period_ms) {
  int rc = sh_timer_start(&t->a.base, delay_ms, period_ms, &t->arg[w], &t->id[w]);
  return SH_SCN_CHECK(t->a.s, rc == 0, "actor %u: timer %d did not start: %d", t->a.id, (int)w, rc);
}

static void finish_point(ticker *t) {
  world *wd = sh_scn_state(t->a.s);
  if (++rec_of(t)->finished < 2) return;
  sh_scn_count_down(t->a.s, sh_actor_system(&t->a.base), &wd->actors_left);
}

static sh_yield ticker_notice(sh_actor *self, sh_stack *st) {
  ticker *t = (ticker *)self;
  world *wd = sh_scn_state(t->a.s);
  record *r = rec_of(t);
  r->d_cancel_rc = r->p_cancel_rc[0] = r->p_cancel_rc[1] = 1;
  /* The one-shots first, in order of delay, then P: see the file comment. */
  for (int k = 0; k < ONE_SHOTS; k++) start(t, (enum which)(W_O0 + k), one_shot_ms[k], 0);
  start(t, W_P, PERIOD_MS, PERIOD_MS);
  if (start(t, W_C, 2, 0)) {
    int rc = sh_timer_cancel(self, t->id[W_C]);
    SH_SCN_CHECK(t->a.s, rc == 0, "actor %u: cancelling a fresh one-shot: %d", t->a.id, rc);
  }
  start(t, W_D, wd->d_ms[t->a.id], 0);
  for (int a = 0; a < W_SENTINEL; a++)
    for (int b = a + 1; b < W_SENTINEL; b++)
      SH_SCN_CHECK(t->a.s, t->id[a] != t->id[b], "actor %u: timers %d and %d share id %llu",
                   t->a.id, a, b, (unsigned long long)t->id[a]);
  return sh_return(st, NULL);
}

static void on_one_shot(ticker *t, int k) {
  record *r = rec_of(t);
  SH_SCN_CHECK(t->a.s, r->one_shots == k, "actor %u: the %u ms one-shot fired after %d others",
               t->a.id, one_shot_ms[k], r->one_shots);
  int bound = (int)(one_shot_ms[k] / PERIOD_MS);
  SH_SCN_CHECK(t->a.s, r->ticks <= bound,
               "actor %u: %d ticks of a %u ms period before the %u ms one-shot (at most %d)",
               t->a.id, r->ticks, PERIOD_MS, one_shot_ms[k], bound);
  r->one_shots++;
  int rc = sh_timer_cancel(&t->a.base, t->id[W_O0 + k]);
  SH_SCN_CHECK(t->a.s, rc == -ENOENT, "actor %u: cancelling a fired one-shot: %d", t->a.id, rc);
  if (k == ONE_SHOTS - 1) finish_point(t);
}

static void on_tick(ticker *t) {
  record *r = rec_of(t);
  r->ticks++;
  SH_SCN_CHECK(t->a.s, r->ticks <= TICKS, "actor %u: tick %d after the cancel at %d", t->a.id,
               r->ticks, TICKS);
  if (r->ticks == CANCEL_D_TICK) {
    r->d_cancel_rc = sh_timer_cancel(&t->a.base, t->id[W_D]);
    /* 0: D never ran and now never will; -ENOENT: D's handler already ran. */
    SH_SCN_CHECK(t->a.s, r->d_cancel_rc == (r->d_fired ? -ENOENT : 0),
                 "actor %u: cancelling D (%s) returned %d", t->a.id,
                 r->d_fired ? "fired" : "not fired", r->d_cancel_rc);
  }
  if (r->ticks == TICKS) {
    r->p_cancel_rc[0] = sh_timer_cancel(&t->a.base, t->id[W_P]);
    r->p_cancel_rc[1] = sh_timer_cancel(&t->a.base, t->id[W_P]);
    SH_SCN_CHECK(t->a.s, r->p_cancel_rc[0] == 0 && r->p_cancel_rc[1] == -ENOENT,
                 "actor %u: cancelling the periodic: %d, then %d", t->a.id, r->p_cancel_rc[0],
                 r->p_cancel_rc[1]);
    start(t, W_SENTINEL, SENTINEL_MS, 0);
  }
}

static void ticker_timeout(sh_actor *self, uint64_t id, void *arg) {
  ticker *t = (ticker *)self;
  record *r = rec_of(t);
  int w = 0;
  while (w < W_COUNT && t->id[w] != id) w++;
  if (!SH_SCN_CHECK(t->a.s, w < W_COUNT, "actor %u: unknown timer %llu fired", t->a.id,
                    (unsigned long long)id))
    return;
  SH_SCN_CHECK(t->a.s, arg == &t->arg[w], "actor %u: timer %d fired with another's argument",
               t->a.id, w);
  switch (w) {
  case W_P: on_tick(t); break;
  case W_C:
    r->c_fired++;
    SH_SCN_CHECK(t->a.s, false, "actor %u: a one-shot cancelled before it was due fired", t->a.id);
    break;
  case W_D:
    r->d_fired++;
    SH_SCN_CHECK(t->a.s, r->d_cancel_rc != 0, "actor %u: D fired after its cancel returned 0",
                 t->a.id);
    break;
  case W_SENTINEL:
    r->sentinel++;
    SH_SCN_CHECK(t->a.s, r->ticks == TICKS, "actor %u: %d ticks when the sentinel fired, want %d",
                 t->a.id, r->ticks, TICKS);
    finish_point(t);
    break;
  default: on_one_shot(t, w - W_O0); break;
  }
}

static const sh_actor_class ticker_class = {
    .name = "ticker",
    .size = sizeof(ticker),
    .init = sh_scn_actor_init,
    .notice = ticker_notice,
    .timeout = ticker_timeout,
};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->nactors = 2 * sh_scn_workers(s) < MAX_ACTORS ? 2 * sh_scn_workers(s) : MAX_ACTORS;
  atomic_store(&wd->actors_left, wd->nactors);
  for (uint32_t i = 0; i < wd->nactors; i++)
    wd->d_ms[i] = D_MIN_MS + (uint32_t)(sh_scn_rand(s) % D_SPREAD_MS);
  return sh_scn_spawn_each(s, sys, &ticker_class, wd->nactors, SH_SCN_EACH_KICK, NULL);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  for (uint32_t i = 0; i < wd->nactors; i++) {
    const record *r = &wd->rec[i];
    SH_SCN_CHECK(s, r->ticks == TICKS && r->sentinel == 1 && r->one_shots == ONE_SHOTS,
                 "actor %u: %d ticks (want %d), sentinel %d, one-shots %d", i, r->ticks, TICKS,
                 r->sentinel, r->one_shots);
    SH_SCN_CHECK(s, r->c_fired == 0, "actor %u: the cancelled one-shot fired", i);
    bool d_ok = (r->d_cancel_rc == 0 && r->d_fired == 0) ||
                (r->d_cancel_rc == -ENOENT && r->d_fired == 1);
    SH_SCN_CHECK(s, d_ok, "actor %u: D cancel %d, fired %d times", i, r->d_cancel_rc, r->d_fired);
  }
  SH_SCN_CHECK(s, st->asks == 0 && st->asks_timed_out == 0, "no asks expected");
}

static const sh_scenario actor_timers = {
    .name = "actor_timers",
    .summary = "actor timers: one-shots fire in order, periodic ticks counted, cancels hold",
    .workers = 2,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(actor_timers);
