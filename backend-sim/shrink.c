/*
 * Shrinking a failing choice sequence (sim.h: sh_sim_shrink), the way
 * Hypothesis shrinks its choice sequence: the switches, faults and stale
 * reads of the schedule and every value drawn (a workload's, the network's)
 * are one sequence, shrunk as a whole.
 *
 * The sequence holds two classes of choices: the schedule's, anchored by
 * their step, and the draws, anchored by their place in their stream.
 * Cutting one class leaves the other where it was, so each is cut in turn,
 * the schedule first with the draws as recorded (so a schedule shrinks as
 * far as it did before draws were choices), then the draws.
 *
 * First the cheap cuts: no choice at all; per class, a short prefix that
 * still fails, by bisection (a run often goes wrong early, and every choice
 * after that only decorates it); every choice of one kind (preemptions,
 * forced switches, faults, stale reads, draws) at once. Then Zeller's
 * ddmin per class, complements only: split the class into k chunks and try
 * the sequence without each chunk in turn; a smaller one that still fails
 * replaces it (and k shrinks by one, at least 2); when no chunk can go, the
 * chunks halve (k doubles) until they are single choices. A choice that is
 * left then matters: without it, the failure goes away. A replay of a
 * shorter sequence is a different run (choices at later steps may no
 * longer line up), which is fine: the test is only whether it still fails.
 * Then the values: each draw is lowered toward 0 (0, else bisection), and
 * each stream's draws sorted, which makes the failing workload the
 * simplest one; and when that changed something, ddmin once more, since
 * operations that were needed before may be no longer. A stream's draws
 * of 0 at its end are dropped without a trial: a replay draws 0 past a
 * stream's last value anyway.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/sim.h>

#include "base/check.h"
#include "nodemem.h"

/* Values above WIDE_VALUE are first tried at 1 .. SMALL_TRIES (lower_values). */
#define WIDE_VALUE (1ull << 32)
#define SMALL_TRIES 4u

typedef struct shrinker {
  sh_sim_choice *s;      /* the current failing sequence */
  size_t n;
  sh_sim_choice *trial;  /* scratch: a candidate */
  sh_sim_fails_fn fails;
  void *ctx;
  uint32_t trials, max_trials;
} shrinker;

/* Replays the candidate trial[0..m); keeps it if it still fails. */
static bool try_trial(shrinker *k, size_t m) {
  assert(m <= k->n);
  if (k->trials >= k->max_trials) return false;
  k->trials++;
  if (!k->fails(k->ctx, k->trial, m)) return false;
  memcpy(k->s, k->trial, m * sizeof(*k->s));
  k->n = m;
  return true;
}

/* The two classes of choices, cut one at a time. */
enum { CLS_SCHEDULE = 0, CLS_DRAWS = 1 };

static bool in_class(const sh_sim_choice *c, int cls) {
  return (c->kind == SH_SIM_DRAW) == (cls == CLS_DRAWS);
}

static size_t class_count(const shrinker *k, int cls) {
  size_t m = 0;
  for (size_t i = 0; i < k->n; i++) m += in_class(&k->s[i], cls);
  return m;
}

/* Tries s without the choices of class cls whose rank in the class is in
 * [lo, hi); keeps it if it still fails. */
static bool try_without(shrinker *k, int cls, size_t lo, size_t hi) {
  if (k->trials >= k->max_trials) return false;
  size_t m = 0, rank = 0;
  for (size_t i = 0; i < k->n; i++) {
    bool mine = in_class(&k->s[i], cls);
    if (!mine || rank < lo || rank >= hi) k->trial[m++] = k->s[i];
    rank += mine;
  }
  return m != k->n && try_trial(k, m);
}

/* Tries s without its choices of kind `kind`; keeps it if it still fails. */
static bool try_without_kind(shrinker *k, uint32_t kind) {
  size_t m = 0;
  for (size_t i = 0; i < k->n; i++)
    if (k->s[i].kind != kind) k->trial[m++] = k->s[i];
  return m != k->n && try_trial(k, m);
}

/* Tries s with draw i's value v (< its own); keeps it if it still fails. */
static bool try_value(shrinker *k, size_t i, uint64_t v) {
  assert(k->s[i].kind == SH_SIM_DRAW && v < k->s[i].value);
  memcpy(k->trial, k->s, k->n * sizeof(*k->s));
  k->trial[i].value = v;
  return try_trial(k, k->n);
}

/* Trials lower_values may spend on one draw: 0, the small values, and a
 * bisection of a 64-bit value's range. */
#define DRAW_TRIALS (1u + SMALL_TRIES + 64u)

/* Each draw toward 0: 0 itself, else (for a wide value) 1 to SMALL_TRIES,
 * else the least value that still fails by bisection between 0 (passes)
 * and its own (fails), as if failing were monotonic in it (at most
 * DRAW_TRIALS, 69, trials a draw, and the budget). True if any went
 * lower. */
static bool lower_values(shrinker *k) {
  bool any = false;
  for (size_t i = 0; i < k->n && k->trials < k->max_trials; i++) {
    if (k->s[i].kind != SH_SIM_DRAW || k->s[i].value == 0) continue;
    uint32_t before = k->trials;
    if (try_value(k, i, 0)) {
      any = true;
      continue;
    }
    /* A wide value is most often a whole 64-bit draw taken modulo some n
     * (sh_scn_rand(s) % n): there, bisection finds no small value, and the
     * small ones are the simplest. */
    uint64_t lo = 0; /* it and every value below it pass (as tried) */
    for (uint64_t v = 1; v <= SMALL_TRIES && k->s[i].value > WIDE_VALUE; v++) {
      if (try_value(k, i, v)) {
        any = true;
        break;
      }
      lo = v;
    }
    while (k->s[i].value - lo > 1 && k->trials < k->max_trials) {
      uint64_t mid = lo + (k->s[i].value - lo) / 2;
      if (try_value(k, i, mid)) any = true;
      else lo = mid;
    }
    SH_ASSERT(k->trials - before <= DRAW_TRIALS);
  }
  return any;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Each stream's draws sorted, in their places: one trial a stream. */
static bool sort_streams(shrinker *k) {
  bool any = false;
  uint64_t *v = sh_simraw_malloc(k->n * sizeof(uint64_t));
  for (uint32_t st = 0; v != NULL && st < SH_SIM_STREAMS; st++) {
    size_t m = 0;
    for (size_t i = 0; i < k->n; i++)
      if (k->s[i].kind == SH_SIM_DRAW && k->s[i].to == st) v[m++] = k->s[i].value;
    qsort(v, m, sizeof(*v), cmp_u64);
    memcpy(k->trial, k->s, k->n * sizeof(*k->s));
    bool moved = false;
    for (size_t i = 0, j = 0; i < k->n; i++) {
      if (k->trial[i].kind != SH_SIM_DRAW || k->trial[i].to != st) continue;
      moved |= k->trial[i].value != v[j];
      k->trial[i].value = v[j++];
    }
    if (moved && try_trial(k, k->n)) any = true;
  }
  sh_simraw_free(v);
  return any;
}

/* Drops each stream's trailing draws of 0: the replay's draws past a
 * stream's last are 0, so the run is the same without them. */
static void drop_trailing_zeros(shrinker *k) {
  bool done[SH_SIM_STREAMS] = {false};
  size_t m = k->n;
  for (size_t i = k->n; i-- > 0;) {
    sh_sim_choice *c = &k->s[i];
    if (c->kind != SH_SIM_DRAW || done[c->to]) continue;
    if (c->value != 0) {
      done[c->to] = true;
      continue;
    }
    memmove(c, c + 1, (m - i - 1) * sizeof(*c));
    m--;
  }
  k->n = m;
}

/* A short prefix that still fails, by bisection over its length: failing
 * is not monotonic in it, so this is a prefix that fails, not always the
 * shortest. Bounded by log2(n) trials (counted: at most 64, n's bits). */
static void cut_tail(shrinker *k, int cls) {
  size_t lo = 0; /* prefixes shorter than lo are not tried again */
  size_t n = class_count(k, cls);
  for (uint32_t turns = 1; lo < n && k->trials < k->max_trials; turns++) {
    SH_ASSERT(turns <= 64);
    size_t mid = lo + (n - lo) / 2;
    if (try_without(k, cls, mid, n)) n = mid;
    else lo = mid + 1;
  }
}

/* One pass over the class's chunks of the size `chunks` chunks give: true
 * if some could go. A chunk that goes is not tried again, nor are those
 * before it: the pass goes on with the chunk that took its place, so a pass
 * costs at most `chunks` trials however many go (restarting from the first
 * chunk after each success made shrinking quadratic in long schedules). */
static bool pass(shrinker *k, int cls, size_t chunks) {
  size_t n = class_count(k, cls), size = (n + chunks - 1) / chunks;
  bool any = false;
  uint32_t before = k->trials;
  for (size_t lo = 0; lo < n;) {
    SH_ASSERT(k->trials - before < chunks);
    size_t hi = lo + size < n ? lo + size : n;
    if (try_without(k, cls, lo, hi)) {
      any = true;
      n -= hi - lo;
    } else {
      lo = hi;
    }
  }
  return any;
}

/* ddmin, complements only, over one class. Bounded: each round either
 * drops a chunk (the class shrinks: checked) or doubles the chunks, up to
 * the class's size; and by max_trials. */
static void ddmin(shrinker *k, int cls) {
  size_t chunks = 2;
  for (size_t n = class_count(k, cls); n > 0 && k->trials < k->max_trials;
       n = class_count(k, cls)) {
    if (chunks > n) chunks = n;
    if (pass(k, cls, chunks)) {
      SH_ASSERT(class_count(k, cls) < n);
      chunks = chunks > 2 ? chunks - 1 : 2;
    } else if (chunks == n) {
      break; /* no single choice can go */
    } else {
      chunks *= 2;
    }
  }
}

size_t sh_sim_shrink(sh_sim_choice *s, size_t n, sh_sim_fails_fn still_fails, void *ctx,
                     uint32_t max_trials, uint32_t *trials_out) {
  shrinker k = {.s = s, .n = n, .fails = still_fails, .ctx = ctx, .max_trials = max_trials};
  k.trial = n > 0 ? sh_simraw_malloc(n * sizeof(*s)) : NULL;
  /* Often no decision at all is needed: the cheapest answer first. */
  if (n > 0 && k.trial != NULL && !try_trial(&k, 0)) {
    for (uint32_t kind = SH_SIM_PREEMPT; kind <= SH_SIM_DRAW; kind++) try_without_kind(&k, kind);
    for (int cls = CLS_SCHEDULE; cls <= CLS_DRAWS; cls++) {
      cut_tail(&k, cls);
      ddmin(&k, cls);
    }
    /* Bounded: values only fall, so each round that changes one ends. */
    for (int round = 0; round < 4 && k.trials < k.max_trials; round++) {
      bool lower = lower_values(&k);
      bool sorted = sort_streams(&k);
      if (!lower && !sorted) break;
      drop_trailing_zeros(&k);
      ddmin(&k, CLS_DRAWS);
      ddmin(&k, CLS_SCHEDULE);
    }
    drop_trailing_zeros(&k);
  }
  sh_simraw_free(k.trial);
  if (trials_out != NULL) *trials_out = k.trials;
  return k.n;
}
