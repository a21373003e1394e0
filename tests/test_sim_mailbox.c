/*
 * The mailbox (core/actor/mailbox.c) on the deterministic simulator: producers on
 * thread fibers put in chunks while the consumer (the outside fiber) takes
 * until the mailbox looks empty, again and again, so that the sentinel is
 * re-linked between puts. The mailbox's scheduling points let the simulator
 * interleave the puts with the takes; every strategy, several seeds. After
 * each run: each producer's messages came in order with no gap and none
 * was lost, the mailbox ran empty between puts more than once, and its
 * counts agree at the end (taken == pushed). The same seed gives the same
 * run.
 *
 * Fibers never call cmocka asserts (they longjmp): they record what they
 * saw and the test checks it after the join.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/stackhouse.h>

#include "actor/mailbox.h"
#include "plat.h"
#include <stackhouse/sim.h>

#define WATCHDOG_S 120
#define SEEDS 16u
#define PRODUCERS 3u
#define PER_PRODUCER 64u
#define CHUNK 4u
#define TOTAL (PRODUCERS * PER_PRODUCER)

static const sh_sim_strategy strategies[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};
#define NSTRATEGIES (sizeof(strategies) / sizeof(strategies[0]))

typedef struct item {
  sh_msg hdr;
  uint32_t producer, seq;
} item;

static const sh_msg_type item_type = {"item", sizeof(item), SH_NOTICE, 0, NULL, NULL};

/* One run: the mailbox, what the producers did and what the consumer saw. */
typedef struct run {
  sh_mailboxes box;
  uint32_t finished; /* producers past their last put (fibers: one OS thread) */
  uint32_t next_seq[PRODUCERS];
  uint32_t handled, out_of_order, drains;
  bool no_memory;
} run;

typedef struct producer {
  run *r;
  uint32_t id;
} producer;

static void produce(void *arg) {
  producer *p = arg;
  for (uint32_t seq = 0; seq < PER_PRODUCER; seq++) {
    item *it = calloc(1, sizeof(*it));
    if (it == NULL) {
      p->r->no_memory = true;
      break;
    }
    *it = (item){.hdr = {.type = &item_type}, .producer = p->id, .seq = seq};
    sh_mailbox_push(&p->r->box, 0, &it->hdr);
    /* In chunks, so that the consumer empties the mailbox again and again. */
    if (seq % CHUNK == CHUNK - 1) sh_plat_yield_cpu();
  }
  p->r->finished++;
}

static void handle(run *r, item *it) {
  if (it->producer < PRODUCERS && it->seq == r->next_seq[it->producer])
    r->next_seq[it->producer]++;
  else
    r->out_of_order++;
  r->handled++;
  free(it);
}

/* Takes and handles items until the mailbox looks empty; whether it took
 * any. */
static bool drain(run *r) {
  sh_msg *m = sh_mailbox_take(&r->box, 0);
  if (m == NULL) return false;
  r->drains++;
  for (; m != NULL; m = sh_mailbox_take(&r->box, 0)) handle(r, (item *)m);
  return true;
}

/* The consumer: drains until every producer finished and a drain that began
 * after that found nothing (every put had returned: the mailbox is empty). */
static void consume(run *r) {
  for (;;) {
    bool all_put = r->finished == PRODUCERS;
    if (!drain(r) && all_put) return;
    sh_plat_yield_cpu();
  }
}

static void sim_failed(const char *kind, const char *detail) {
  fprintf(stderr, "simulation failed: %s: %s\n", kind, detail);
  fflush(NULL);
  _exit(1);
}

static void simulate(uint64_t seed, sh_sim_strategy strategy, run *r, sh_sim_report *rep) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  sh_sim_configure(&o);
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = 1; /* idle: thread fibers need a started system */
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(&cfg, &sys), 0);
  assert_int_equal(sh_system_start(sys), 0);

  memset(r, 0, sizeof(*r));
  sh_mailbox_init(&r->box);
  producer p[PRODUCERS];
  sh_plat_thread *t[PRODUCERS];
  for (uint32_t i = 0; i < PRODUCERS; i++) {
    p[i] = (producer){.r = r, .id = i};
    assert_int_equal(sh_plat_thread_start(produce, &p[i], &t[i]), 0);
  }
  consume(r);
  for (uint32_t i = 0; i < PRODUCERS; i++) sh_plat_thread_join(t[i]);

  assert_int_equal(sh_system_shutdown(sys), 0);
  sh_system_free(sys);
  sh_sim_report_get(rep);
}

static void check_run(run *r, uint64_t seed, sh_sim_strategy strategy) {
  if (r->handled != TOTAL || r->out_of_order != 0 || r->drains < 2)
    fprintf(stderr, "seed %llu, strategy %s: %u of %u handled, %u out of order, %u drains\n",
            (unsigned long long)seed, sh_sim_strategy_name(strategy), r->handled, TOTAL,
            r->out_of_order, r->drains);
  assert_false(r->no_memory);
  assert_int_equal(r->out_of_order, 0);
  assert_int_equal(r->handled, TOTAL);
  assert_true(r->drains >= 2); /* it ran empty between puts */
  assert_null(sh_mailbox_take(&r->box, 0));
  /* Empty, and the counts agree (the house's ready check and its run's look
   * at the mailboxes read the counts, not the links): each message was
   * taken once. */
  assert_int_equal(r->box.taken[0], atomic_load(&r->box.pushed[0]));
}

static void test_interleaved_puts_lose_nothing(void **state) {
  (void)state;
  for (size_t s = 0; s < NSTRATEGIES; s++) {
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
      run r;
      sh_sim_report rep;
      simulate(seed, strategies[s], &r, &rep);
      check_run(&r, seed, strategies[s]);
    }
  }
}

static void test_deterministic(void **state) {
  (void)state;
  for (size_t s = 0; s < NSTRATEGIES; s++) {
    run r;
    sh_sim_report a, b;
    simulate(7, strategies[s], &r, &a);
    simulate(7, strategies[s], &r, &b);
    assert_true(a.hash == b.hash);
    assert_true(a.steps == b.steps);
  }
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(sim_failed);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_interleaved_puts_lose_nothing),
      cmocka_unit_test(test_deterministic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
