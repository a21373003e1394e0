/*
 * msgpct: PCT over messages rather than over fiber steps (after PCTCP,
 * Ozkan et al., "Randomized testing of distributed systems with
 * probabilistic guarantees", OOPSLA 2018). The unit of a schedule is a
 * delivery: which actor gets its next message before which. Each house (an
 * actor's life, by its creation number) has a random priority; a worker
 * fiber that runs a house has that house's priority for the run, and one
 * that runs none (a worker between runs, a thread fiber) a random priority
 * of its own. At every scheduling point the runnable fiber of highest
 * priority runs, as under pct, so deliveries to high houses go first
 * wherever the workers race. pct_depth - 1 change points fall among the
 * first pct_steps deliveries: at each, the house being delivered to drops
 * below every other priority (d - i for the i-th), as the fiber does under
 * pct. So the bound d counts messages, not the thousands of yield points a
 * handler passes, and a bug that needs d - 1 deliveries out of their usual
 * order is found with probability about 1 / (houses * deliveries^(d-1)).
 *
 * A priority is a hash of the house's creation number (or the fiber's
 * index) with a salt drawn at the start from the schedule's stream: no
 * table grows with the houses, and the same seed gives the same
 * priorities. Only the houses a change point dropped are kept (at most
 * SH_SIM_MAX_CHANGES). The hooks come from the runtime's trace points
 * (plat.c sh_plat_trace: a run's begin and end, a delivery), which are not
 * scheduling points: a priority changes there, and the next scheduling
 * point acts on it.
 */
#include "strategy.h"

#include "base/check.h"

#define T sh_simstrategy_state

/* A priority drawn from a hash lies in [HASHED_FLOOR, HASHED_FLOOR + 2^40):
 * above every change point's (d - i <= d) and every demotion (below 0). */
#define HASHED_FLOOR ((int64_t)SH_SIM_MAX_CHANGES + 2)

/* splitmix64's finaliser: a bijection that spreads neighbouring creation
 * numbers over the whole range. */
static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static int64_t hashed(uint64_t key) { return HASHED_FLOOR + (int64_t)(mix(key ^ T.salt) >> 24); }

/* Houses and fibers hash apart: a fiber's key has its top bit set (creation
 * numbers never get there). */
static int64_t fiber_prio(uint32_t index) { return hashed((1ull << 63) | index); }

static int64_t house_prio(uint64_t house) {
  /* The latest change point that dropped it counts (lowest priority). */
  for (uint32_t i = T.ndropped; i-- > 0;)
    if (T.dropped[i] == house) return (int64_t)T.pct_depth - (int64_t)(i + 1);
  return hashed(house);
}

void sh_simmsgpct_start(sh_simtab *p) {
  T.salt = sh_simrng_next(&T.rng);
  T.deliveries = 0;
  T.ndropped = 0;
  T.prio_floor = 0;
  for (uint32_t i = 0; i < p->nfibers; i++) p->f[i].prio = fiber_prio(i);
  sh_simstrategy_draw_points();
}

void sh_simmsgpct_place(sh_simrun_fiber *nf) { nf->prio = fiber_prio(nf->index); }

void sh_simmsgpct_run(sh_simtab *p, uint64_t house, bool begin) {
  SH_ASSERT(T.kind == SH_SIM_MSGPCT && p->cur < p->nfibers);
  p->f[p->cur].prio = begin ? house_prio(house) : fiber_prio(p->cur);
}

void sh_simmsgpct_deliver(sh_simtab *p, uint64_t house) {
  SH_ASSERT(T.kind == SH_SIM_MSGPCT && p->cur < p->nfibers);
  T.deliveries++;
  /* Change points drawn equal all fall on this delivery; each drops the
   * house once more (bounded by nchanges). */
  while (T.next_change < T.nchanges && T.deliveries >= T.changes[T.next_change]) {
    SH_ASSERT(T.ndropped < SH_SIM_MAX_CHANGES);
    T.dropped[T.ndropped++] = house;
    T.next_change++;
  }
  p->f[p->cur].prio = house_prio(house);
}
