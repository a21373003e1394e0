/*
 * What the timer wheel's tests (test_wheel.c, test_wheel_far.c) share: a
 * fixed-seed generator, a timer as a test sees it, and a harness whose
 * fire callback checks that nothing fires early, logs what fired in order
 * and re-adds periodic timers.
 */
#ifndef TESTS_WHEEL_FIXTURE_H
#define TESTS_WHEEL_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "time/wheel.h"
#include "support/harness.h"

#define MS SH_WHEEL_TICK_NS
#define SEC (1000 * MS)
#define HOUR (3600 * SEC)

/* Fixed-seed generator so that every run checks the same schedules. */
static uint64_t rng_state;
static void rng_seed(uint64_t seed) { rng_state = seed ? seed : 1; }
static uint64_t rng_below(uint64_t n) { return th_xorshift(&rng_state) % n; }

static uint64_t tick_up_ns(uint64_t ns) { return (ns + MS - 1) / MS * MS; }

/* A timer as a test sees it: the link plus what fire() records. */
typedef struct timer {
  sh_wheel_link link;
  uint64_t expire_ns;
  uint64_t period_ns; /* re-added from fire when non-zero */
  uint32_t fires;
  uint64_t last_fire_ns;
  struct timer *victim; /* removed from fire when non-NULL and linked */
} timer;

/* What fire() needs: the wheel (for re-adding), the advance's now, and a
 * log of fired timers in order. */
typedef struct harness {
  sh_wheel w;
  uint64_t now_ns;
  timer **log;
  size_t nlog, caplog;
  bool readd_at_now; /* re-add every fired timer for "now" */
} harness;

static timer *timer_of(sh_wheel_link *l) {
  return (timer *)(void *)((char *)l - offsetof(timer, link));
}

static void on_fire(sh_wheel_link *l, void *ctx) {
  harness *h = ctx;
  timer *t = timer_of(l);
  assert_false(sh_wheel_linked(l));
  assert_true(h->now_ns >= t->expire_ns);
  t->fires++;
  t->last_fire_ns = h->now_ns;
  if (h->nlog < h->caplog) h->log[h->nlog++] = t;
  if (t->victim && sh_wheel_linked(&t->victim->link)) sh_wheel_remove(&h->w, &t->victim->link);
  if (t->period_ns) {
    t->expire_ns += t->period_ns;
    sh_wheel_add(&h->w, l, t->expire_ns);
  } else if (h->readd_at_now) {
    assert_true(t->fires < 100); /* a spinning advance fails instead of hanging */
    t->expire_ns = h->now_ns;
    sh_wheel_add(&h->w, l, t->expire_ns);
  }
}

static harness *harness_new(uint64_t now_ns, size_t caplog) {
  harness *h = calloc(1, sizeof *h);
  assert_non_null(h);
  sh_wheel_init(&h->w, now_ns);
  h->now_ns = now_ns;
  h->caplog = caplog;
  h->log = caplog ? calloc(caplog, sizeof *h->log) : NULL;
  return h;
}

static void harness_free(harness *h) {
  free(h->log);
  free(h);
}

static uint32_t advance(harness *h, uint64_t now_ns, uint32_t max) {
  h->now_ns = now_ns;
  return sh_wheel_advance(&h->w, now_ns, max, on_fire, h);
}

static void add(harness *h, timer *t, uint64_t expire_ns) {
  t->expire_ns = expire_ns;
  sh_wheel_add(&h->w, &t->link, expire_ns);
}

static uint64_t earliest_linked_tick_ns(const timer *ts, size_t n) {
  uint64_t best = UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    if (sh_wheel_linked(&ts[i].link) && tick_up_ns(ts[i].expire_ns) < best)
      best = tick_up_ns(ts[i].expire_ns);
  }
  return best;
}

#endif
