/*
 * Shrinking a failing schedule (sim.h: sh_sim_shrink).
 *
 * First the cheap cuts: no choice at all; the shortest prefix that still
 * fails, by bisection (a run often goes wrong early, and every choice
 * after that only decorates it); every choice of one kind (preemptions,
 * forced switches, faults, stale reads) at once. Then Zeller's ddmin,
 * complements only: split the schedule into k chunks and
 * try it without each chunk in turn; a smaller schedule that still fails
 * replaces it (and k shrinks by one, at least 2); when no chunk can go, the
 * chunks halve (k doubles) until they are single choices. A choice that is
 * left then matters: without it, the failure goes away. A replay of a
 * shorter schedule is a different run (choices at later steps may no longer
 * line up), which is fine: the test is only whether it still fails.
 */
#include <stdlib.h>
#include <string.h>

#include <stackhouse/sim.h>

typedef struct shrinker {
  sh_sim_choice *s;      /* the current failing schedule */
  size_t n;
  sh_sim_choice *trial;  /* scratch: a candidate */
  sh_sim_fails_fn fails;
  void *ctx;
  uint32_t trials, max_trials;
} shrinker;

/* Tries s without [lo, hi); keeps it if it still fails. */
static bool try_without(shrinker *k, size_t lo, size_t hi) {
  if (k->trials >= k->max_trials) return false;
  size_t m = lo + (k->n - hi);
  memcpy(k->trial, k->s, lo * sizeof(*k->s));
  memcpy(k->trial + lo, k->s + hi, (k->n - hi) * sizeof(*k->s));
  k->trials++;
  if (!k->fails(k->ctx, k->trial, m)) return false;
  memcpy(k->s, k->trial, m * sizeof(*k->s));
  k->n = m;
  return true;
}

/* Tries s without its choices of kind `kind`; keeps it if it still fails. */
static bool try_without_kind(shrinker *k, uint32_t kind) {
  if (k->trials >= k->max_trials) return false;
  size_t m = 0;
  for (size_t i = 0; i < k->n; i++)
    if (k->s[i].kind != kind) k->trial[m++] = k->s[i];
  if (m == k->n) return false;
  k->trials++;
  if (!k->fails(k->ctx, k->trial, m)) return false;
  memcpy(k->s, k->trial, m * sizeof(*k->s));
  k->n = m;
  return true;
}

/* A short prefix that still fails, by bisection over its length: failing
 * is not monotonic in it, so this is a prefix that fails, not always the
 * shortest. Bounded by log2(n) trials. */
static void cut_tail(shrinker *k) {
  size_t lo = 0; /* prefixes shorter than lo are not tried again */
  while (lo < k->n && k->trials < k->max_trials) {
    size_t mid = lo + (k->n - lo) / 2;
    if (!try_without(k, mid, k->n)) lo = mid + 1;
  }
}

/* One pass over chunks of the size `chunks` chunks give: true if some
 * could go. A chunk that goes is not tried again, nor are those before it:
 * the pass goes on with the chunk that took its place, so a pass costs at
 * most `chunks` trials however many go (restarting from the first chunk
 * after each success made shrinking quadratic in long schedules). */
static bool pass(shrinker *k, size_t chunks) {
  size_t size = (k->n + chunks - 1) / chunks;
  bool any = false;
  for (size_t lo = 0; lo < k->n;) {
    size_t hi = lo + size < k->n ? lo + size : k->n;
    if (try_without(k, lo, hi))
      any = true;
    else
      lo = hi;
  }
  return any;
}

size_t sh_sim_shrink(sh_sim_choice *s, size_t n, sh_sim_fails_fn still_fails, void *ctx,
                     uint32_t max_trials, uint32_t *trials_out) {
  shrinker k = {.s = s, .n = n, .fails = still_fails, .ctx = ctx, .max_trials = max_trials};
  k.trial = n > 0 ? malloc(n * sizeof(*s)) : NULL;
  if (n > 0 && k.trial != NULL) {
    /* Often no preemption at all is needed: the cheapest answer first. */
    if (!try_without(&k, 0, k.n)) {
      cut_tail(&k);
      for (uint32_t kind = SH_SIM_PREEMPT; kind <= SH_SIM_STALE; kind++) try_without_kind(&k, kind);
      size_t chunks = 2;
      /* Bounded: each round either drops a chunk (n falls) or doubles the
       * chunks, up to n; and by max_trials. */
      while (k.n > 0 && k.trials < k.max_trials) {
        if (chunks > k.n) chunks = k.n;
        if (pass(&k, chunks)) {
          chunks = chunks > 2 ? chunks - 1 : 2;
        } else if (chunks == k.n) {
          break; /* no single choice can go */
        } else {
          chunks *= 2;
        }
      }
    }
  }
  free(k.trial);
  if (trials_out != NULL) *trials_out = k.trials;
  return k.n;
}
