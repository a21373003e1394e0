/* The simulator's memory model: weak loads (memmodel.h). */
#include "memmodel.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "base/atomic.h"
#include "base/check.h"
#include "modelrules.h"
#include "replay.h"
#include "rng.h"
#include "run.h"

_Static_assert((SH_SIMMEM_WINDOW & (SH_SIMMEM_WINDOW - 1)) == 0, "the window is a power of two");
_Static_assert((SH_SIMMEM_HANDOFFS & (SH_SIMMEM_HANDOFFS - 1)) == 0, "wraps with the index");

/* Fibers whose reads the model tracks (a bit each in sh_simmem_store.seen);
 * the others always read the newest value. */
#define SH_SIMMEM_FIBERS 64u

/* One store the model heard of: the word, its values before and after, when
 * (the model's clock), by whom, and which fibers read the value it left.
 * rel: an acquire that reads this value has seen every store up to rel (the
 * store itself if it releases, the release whose sequence it continues if
 * it is a relaxed read-modify-write, none if it is a relaxed store). sc: a
 * seq_cst operation; rmw: a read-modify-write (it read its predecessor, so
 * no store can be ordered between them). */
typedef struct sh_simmem_store {
  const volatile void *a;
  uint64_t before, after;
  uint64_t t;
  uint64_t rel;
  uint32_t writer;
  bool sc, rmw;
  uint64_t seen;
} sh_simmem_store;

static struct {
  sh_simmem_store ring[SH_SIMMEM_WINDOW]; /* the last stores, newest at head - 1 */
  uint32_t head;
  /* A filter over the ring's words: bit b set while some store in the ring
   * is to a word of bucket b (in[b] of them). Most loads are of words no
   * recent store touched, and skip the scan. The address only picks the
   * bucket: a miss in the filter is a miss in the ring, so the outcome is
   * the same for any layout of memory. */
  uint64_t filter;
  uint8_t in[64];
  uint64_t clock; /* stores heard of, ever: a store's t */
  /* Per fiber: every store with t <= sync[f] happens before its next operation. */
  uint64_t sync[SH_SIM_MAX_FIBERS];
  uint32_t permille;
  bool points; /* options.atomic_points */
  sh_simrng rng;
  uint64_t step; /* the step of the last candidate, and how many it held */
  uint32_t rank;
  uint64_t stale;
  /* The last hand-offs of plain data (SH_MEM_HANDOFF), newest at hhead - 1:
   * where, when (the clock: a hand-off counts as a store) and by whom. */
  struct {
    const volatile void *a;
    uint64_t t;
    uint32_t writer;
  } hand[SH_SIMMEM_HANDOFFS];
  uint32_t hhead;
} M;

bool sh_plat_mem_on;

void sh_simmem_configure(const sh_sim_options *o, uint64_t *x) {
  memset(&M, 0, sizeof(M));
  M.permille = o->stale_permille <= SH_SIMMEM_MAX_PERMILLE ? o->stale_permille
                                                          : SH_SIMMEM_MAX_PERMILLE;
  M.points = o->atomic_points != 0;
  /* Under replay the schedule decides: the model runs whatever the rate. */
  sh_plat_mem_on = M.permille > 0 || o->schedule != NULL || M.points;
  sh_simrng_seed(&M.rng, x);
}

void sh_simmem_forget_all(void) {
  /* Stores and hand-offs the model remembers may be of memory a crash
   * freed, which a new allocation may take: every one counts as seen by
   * all (the store buffers drained), which the C11 model allows too. */
  memset(M.ring, 0, sizeof(M.ring));
  M.filter = 0;
  memset(M.in, 0, sizeof(M.in));
  memset(M.hand, 0, sizeof(M.hand));
}

void sh_simmem_sync(uint32_t f) {
  if (f < SH_SIM_MAX_FIBERS) M.sync[f] = M.clock;
}

uint64_t sh_simmem_stale_reads(void) { return M.stale; }

void sh_plat_mem_sync(void) {
  /* The program's code gave control back: whatever it synchronized with
   * happens before what follows. */
  if (sh_simrun_active() != NULL) sh_simmem_sync(sh_simrun_cur());
}

static uint32_t bucket(const volatile void *a) {
  return (uint32_t)(((uintptr_t)a >> 3) * 0x9E3779B97F4A7C15ull >> 58);
}

/* The newest store to a within the window, or NULL. Bounded by the window. */
static sh_simmem_store *newest(const volatile void *a) {
  if ((M.filter >> bucket(a) & 1u) == 0) return NULL;
  for (uint32_t i = 1; i <= SH_SIMMEM_WINDOW; i++) {
    sh_simmem_store *s = &M.ring[(M.head - i) & (SH_SIMMEM_WINDOW - 1)];
    if (s->a == a) return s;
  }
  return NULL;
}

/* Just before the oldest store the window holds: everything up to it is
 * visible. (The clock also counts hand-offs, so it is not the clock less
 * the window.) */
static uint64_t window_start(void) {
  uint64_t t = M.ring[M.head & (SH_SIMMEM_WINDOW - 1)].t;
  return t > 0 ? t - 1 : 0;
}

static bool acquires(memory_order mo) {
  return mo != memory_order_relaxed && mo != memory_order_release;
}

static bool releases(memory_order mo) {
  return mo == memory_order_release || mo == memory_order_acq_rel || mo == memory_order_seq_cst;
}

/* The running fiber read what store s left: with acquire, it has seen all
 * before s. s is NULL for a store the model does not know: t_unknown is a
 * time no earlier than that store's. */
static void reads(uint32_t f, sh_simmem_store *s, memory_order mo, uint64_t t_unknown) {
  if (s != NULL && f < SH_SIMMEM_FIBERS) s->seen |= 1ull << f;
  if (!acquires(mo)) return;
  /* An acquire synchronizes with a release only: reading a relaxed store
   * teaches nothing beyond the word. */
  uint64_t t = s != NULL ? s->rel : t_unknown;
  if (M.sync[f] < t) M.sync[f] = t;
}

/* Whether this candidate load reads stale: the schedule's decision. */
static bool decide_stale(uint32_t f) {
  sh_simrun *S = &sh_simrun_state;
  if (M.step != S->steps) {
    M.step = S->steps;
    M.rank = 0;
  }
  uint32_t rank = M.rank++;
  if (rank >= SH_SIMMEM_STEP_CANDIDATES) return false;
  bool stale;
  if (sh_simreplay_on())
    stale = sh_simreplay_stale(S->steps, rank);
  else
    stale = M.permille != 0 && sh_simrng_below(&M.rng, 1000) < M.permille;
  if (!stale) return false;
  M.stale++;
  sh_simreplay_record(S->steps, rank, SH_SIM_STALE);
  sh_simrun_mix(SH_SIMRUN_MIX_STALE);
  sh_simrun_mix(((uint64_t)rank << 32) | f);
  return true;
}

void sh_plat_mem_write_next(void) {
  if (M.points) sh_simrun_point("atomic.write", false);
}

void sh_plat_mem_fresh(const volatile void *p, size_t n) {
  uintptr_t lo = (uintptr_t)p, hi = lo + n;
  /* Bounded by the hand-offs kept. */
  for (uint32_t i = 0; i < SH_SIMMEM_HANDOFFS; i++)
    if ((uintptr_t)M.hand[i].a >= lo && (uintptr_t)M.hand[i].a < hi) M.hand[i].a = NULL;
  /* Bounded by the window. */
  for (uint32_t i = 0; i < SH_SIMMEM_WINDOW; i++) {
    sh_simmem_store *s = &M.ring[i];
    uintptr_t a = (uintptr_t)s->a;
    if (s->a == NULL || a < lo || a >= hi) continue;
    uint32_t b = bucket(s->a);
    SH_ASSERT(M.in[b] > 0); /* it counts this store */
    if (--M.in[b] == 0) M.filter &= ~(1ull << b);
    s->a = NULL;
  }
}

/* The newest store to a if the word still holds its value, else NULL: a
 * word written behind the model's back (initialized, reused) since, its
 * newest value all there is, from a store of unknown time (*t_unknown, as
 * for a word no store in the window touched). */
static sh_simmem_store *known(const volatile void *a, uint64_t now, uint64_t *t_unknown) {
  sh_simmem_store *s = newest(a);
  *t_unknown = window_start();
  if (s != NULL && s->after != now) {
    *t_unknown = M.clock;
    return NULL;
  }
  return s;
}

uint64_t sh_plat_mem_load(const volatile void *a, uint64_t now, memory_order mo) {
  sh_simtab *p = sh_simrun_active();
  if (p == NULL) return now;
  uint32_t f = p->cur;
  uint64_t t_unknown;
  sh_simmem_store *s = known(a, now, &t_unknown);
  /* A seq_cst load reads the newest store if that store is seq_cst too (the
   * simulator's order is their total order); any other load may miss the
   * newest store unless that store happens before it, the fiber made it,
   * or the fiber saw it already (coherence: no going back). A seq_cst load
   * may miss a weaker store: C11 orders it only against seq_cst ones. */
  bool total = mo == memory_order_seq_cst && s != NULL && s->sc;
  if (s != NULL && !total && f < SH_SIMMEM_FIBERS && s->writer != f &&
      s->t > M.sync[f] && (s->seen >> f & 1u) == 0 && s->before != s->after && decide_stale(f)) {
    /* Read the value before s: what happens before it, this fiber has seen. */
    if (acquires(mo) && M.sync[f] < s->t - 1) M.sync[f] = s->t - 1;
    return s->before;
  }
  reads(f, s, mo, t_unknown);
  return now;
}

/* What an acquire that reads a store of f with order mo learns (its rel),
 * the store's predecessor being prev (NULL: unknown, no later than
 * t_unknown). */
static uint64_t carried(uint32_t f, const sh_simmem_store *prev, uint64_t t_unknown,
                        memory_order mo, bool rmw) {
  if (releases(mo)) return M.clock + 1; /* the store itself */
  /* A relaxed read-modify-write continues the release sequence it read;
   * a relaxed store continues its own fiber's (C11's rule, the older and
   * the more generous: no false alarms). */
  if (prev == NULL) return rmw ? t_unknown : 0;
  return rmw || prev->writer == f ? prev->rel : 0;
}

static void record(uint32_t f, const volatile void *a, uint64_t before, uint64_t after,
                   memory_order mo, bool rmw, uint64_t rel) {
  sh_simmem_store *s = &M.ring[M.head++ & (SH_SIMMEM_WINDOW - 1)];
  if (s->a != NULL) {
    uint32_t old = bucket(s->a);
    SH_ASSERT(M.in[old] > 0);
    if (--M.in[old] == 0) M.filter &= ~(1ull << old);
  }
  uint32_t b = bucket(a);
  SH_ASSERT(M.in[b] < SH_SIMMEM_WINDOW); /* a bucket counts stores of the ring only */
  M.in[b]++;
  M.filter |= 1ull << b;
  *s = (sh_simmem_store){.a = a, .before = before, .after = after, .t = ++M.clock, .rel = rel,
                         .writer = f, .sc = mo == memory_order_seq_cst, .rmw = rmw,
                         .seen = f < SH_SIMMEM_FIBERS ? 1ull << f : 0};
}

/* Whether fiber f's store of `after` with order mo may be ordered before
 * s, the newest store to its word (a store buffer that drains late): s is
 * a plain store of another fiber that does not happen before this one,
 * whose value f has not read (coherence), and not both are seq_cst (their
 * total order is the simulator's). */
static bool may_delay(uint32_t f, const sh_simmem_store *s, uint64_t after, memory_order mo) {
  return f < SH_SIMMEM_FIBERS && !s->rmw && s->writer != f && s->t > M.sync[f] &&
         (s->seen >> f & 1u) == 0 && s->after != after && !(s->sc && mo == memory_order_seq_cst);
}

uint64_t sh_plat_mem_store(const volatile void *a, uint64_t before, uint64_t after,
                           memory_order mo) {
  sh_simtab *p = sh_simrun_active();
  if (p == NULL) return after;
  uint32_t f = p->cur;
  uint64_t t_unknown;
  sh_simmem_store *s = known(a, before, &t_unknown);
  if (s != NULL && may_delay(f, s, after, mo) && decide_stale(f)) {
    /* Ours comes first in the word's order: s overwrites it, and a load
     * that misses s reads ours. */
    s->before = after;
    return s->after;
  }
  record(f, a, before, after, mo, false, carried(f, s, t_unknown, mo, false));
  return after;
}

/* A read-modify-write reads the newest value, and writes (unless it left
 * the word as it was: a failed compare-and-exchange). */
void sh_plat_mem_rmw(const volatile void *a, uint64_t before, uint64_t after, memory_order mo) {
  sh_simtab *p = sh_simrun_active();
  if (p == NULL) return;
  uint32_t f = p->cur;
  uint64_t t_unknown;
  sh_simmem_store *s = known(a, before, &t_unknown);
  reads(f, s, mo, t_unknown);
  if (before != after) record(f, a, before, after, mo, true, carried(f, s, t_unknown, mo, true));
}

void sh_plat_mem_handoff(const volatile void *p) {
  sh_simtab *pl = sh_simrun_active();
  if (pl == NULL) return;
  M.hand[M.hhead++ % SH_SIMMEM_HANDOFFS] = (__typeof__(M.hand[0])){
      .a = p, .t = ++M.clock, .writer = pl->cur};
}

void sh_plat_mem_receive(const volatile void *p, const char *what) {
  sh_simtab *pl = sh_simrun_active();
  if (pl == NULL || p == NULL) return; /* nothing linked yet */
  uint32_t f = pl->cur;
  /* Newest first, bounded by the hand-offs kept: an older one was made
   * long enough ago to count as visible. */
  for (uint32_t i = 1; i <= SH_SIMMEM_HANDOFFS; i++) {
    __typeof__(M.hand[0]) *h = &M.hand[(M.hhead - i) % SH_SIMMEM_HANDOFFS];
    if (h->a != p) continue;
    h->a = NULL;
    if (h->writer != f && f < SH_SIM_MAX_FIBERS && h->t > M.sync[f])
      sh_simmodel_violation("mem.handoff: %s received before its writer's writes happen before "
                            "(the atomic that handed it over does not synchronize)",
                            what);
    return;
  }
}
