/*
 * Reclaimed actors, checked on the public API only and written once for
 * both backends: tests/test_e2e_reclaim.c (epoll) and
 * tests/test_sim_reclaim.c (the simulator, several seeds and strategies).
 *
 * A stopped actor that has nothing left is reclaimed: its house takes the
 * next spawn on the worker that retired it (first in, first out). Its old
 * address must stay a safe handle: every send to it is refused with
 * -ESHUTDOWN, the message freed by the send rule, and nothing meant for it
 * ever reaches the actor living in its house now.
 *
 *   - refused: every kind of send to a reclaimed actor, from actors on
 *     both workers and from an outside thread, after each worker spawned
 *     more actors than it keeps free houses;
 *   - reuse: 2,200 spawns and stops (houses come in slabs of 64), then a
 *     send to every old address while actors live in the reused houses;
 *   - stop_sending: senders on both workers and an outside thread send to
 *     an actor that stops itself in the middle of the stream; after the
 *     refusal they spawn into the freed houses and go on sending to it;
 *   - stop_asked: an actor stopped with an ask of its own pending and asks
 *     to it running and queued; the answer to its ask comes once its house
 *     holds another actor that waits for an answer of its own;
 *   - memory: spawn + ask + stop from inside handlers in 64 lanes, in two
 *     waves: the second takes almost nothing new from the pools' malloc,
 *     nor from the system (resident memory).
 *
 * After every run: the runtime's accounting (th_end_exact: sent ==
 * delivered + replies_unknown + dropped_stopped, asks == asks_resolved,
 * the pools empty), every message the test made freed exactly once, and
 * each message handled freed once after it.
 *
 * The includer defines, before it includes this one:
 *   RC_RUNS, RC_MEM_RUNS   runs of every case, of the memory case;
 *   RC_MEM_CYCLES          spawn + ask + stop cycles of one memory wave;
 *   RC_CHECK_RSS           1: the memory case bounds the growth of resident
 *                          memory too (the simulator's own bookkeeping
 *                          grows with the steps of a run: 0 there);
 *   static void run_configure(unsigned run)     before each run's system;
 *   static const char *run_name(unsigned run)   names a run, for a failure;
 *   static void rc_pause(void)   one step of the test thread's polling;
 * and lists the tests with RC_CASES.
 */
#ifndef TESTS_RECLAIM_CASES_H
#define TESTS_RECLAIM_CASES_H

#include <stdio.h>
#include <unistd.h>

#include "reclaim_actors.h"

#define RC_SETTLE_STEPS 100
#define RC_MAX_STREAM 10000000u
#define RC_LOCK_UNKNOWN 1 /* see case_stop_asked */
/* Slack for what a wave's end leaves in flight: its last children, stacks. */
#define RC_MEM_SLACK (4 * RC_LANES)
/* A house takes about 1.5 KiB: a wave that leaked its houses would grow
 * resident memory by some 75 MiB. */
#define RC_RSS_SLACK (16u << 20)

static unsigned run_current;

static sh_system *rc_system(void) {
  memset(&G, 0, sizeof(G));
  atomic_store(&rc_lock_held, 0);
  th_reset(0);
  sh_config cfg = th_config(RC_WORKERS);
  return th_system_new(&cfg);
}

static void rc_wait_left(void) {
  while (atomic_load(&G.left) != 0) rc_pause();
}
static void rc_wait_int(atomic_int *v, int want) {
  while (atomic_load(v) < want) rc_pause();
}

static sh_bridge *rc_start(sh_system *sys) {
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *b = NULL;
  assert_int_equal(sh_bridge_new(sys, &b), 0);
  return b;
}

static sh_stats rc_finish(sh_system *sys, sh_bridge *b) {
  sh_bridge_free(b);
  sh_stats st = th_end_exact(sys);
  assert_int_equal(atomic_load(&G.freed), atomic_load(&G.made));
  assert_int_equal(atomic_load(&G.freed_handled), atomic_load(&G.handled));
  return st;
}

/* Every kind of bridge send to an address known to be reclaimed: refused,
 * the message freed (sh_bridge_notice, sh_bridge_ask) or still ours (_try). */
static void rc_bridge_refused(sh_bridge *b, const sh_addr *to, uint64_t id) {
  atomic_uint freed = 0;
  uint32_t pending = sh_bridge_pending(b);
  int rc = sh_bridge_notice(b, to, rc_probe(&rc_note_type, id, &freed), SH_FOREVER);
  assert_int_equal(rc, -ESHUTDOWN);
  assert_int_equal(atomic_load(&freed), 1);
  sh_msg *m = rc_probe(&rc_note_type, id, &freed);
  assert_int_equal(sh_bridge_notice_try(b, to, m), -ESHUTDOWN);
  assert_int_equal(atomic_load(&freed), 1);
  sh_msg_free(m);
  rc = sh_bridge_ask(b, to, rc_probe(&rc_ask_type, id, &freed), SH_FOREVER, NULL);
  assert_int_equal(rc, -ESHUTDOWN);
  assert_int_equal(atomic_load(&freed), 3);
  m = rc_probe(&rc_ask_type, id, &freed);
  assert_int_equal(sh_bridge_ask_try(b, to, m, NULL), -ESHUTDOWN);
  assert_int_equal(atomic_load(&freed), 3);
  sh_msg_free(m);
  assert_int_equal(sh_bridge_pending(b), pending);
}

/* The next reply of the bridge, to an ask to actor `id`: counted. */
static void rc_bridge_answered(sh_bridge *b, uint64_t id) {
  sh_bridge_reply r;
  assert_int_equal(sh_bridge_recv(b, SH_FOREVER, &r), 0);
  if (r.error == 0) {
    assert_int_equal(((num_reply *)r.msg)->v, (long)id);
    atomic_fetch_add(&G.asks_ok, 1);
  } else {
    assert_int_equal(r.error, -ESHUTDOWN);
    atomic_fetch_add(&G.asks_failed, 1);
  }
  sh_msg_free(r.msg);
}

static const sh_addr *rc_drivers(sh_system *sys, drv_cfg cfg, uint32_t n, const sh_addr **out) {
  for (uint32_t i = 0; i < n; i++) {
    cfg.index = i;
    out[i] = rc_driver(sys, cfg, i % RC_WORKERS);
  }
  return out[0];
}
static void rc_kick_all(const sh_addr **to, uint32_t n, uint32_t arg) {
  for (uint32_t i = 0; i < n; i++) rc_kick(to[i], arg);
}

/* ---- refused ----------------------------------------------------------------- */

static void case_refused(void) {
  sh_system *sys = rc_system();
  G.victim = rc_spawn(sys, (rc_cfg){0}, &G.victim_id);
  const sh_addr *churn[RC_WORKERS];
  rc_drivers(sys, (drv_cfg){.role = ROLE_CHURN}, RC_WORKERS, churn);
  sh_bridge *b = rc_start(sys);
  /* Alive, it answers. */
  assert_int_equal(sh_bridge_ask(b, G.victim, rc_ask_new(G.victim_id), SH_FOREVER, NULL), 0);
  rc_bridge_answered(b, G.victim_id);
  assert_int_equal(atomic_load(&G.asks_ok), 1);
  assert_int_equal(sh_stop(G.victim), 0);
  rc_wait_int(&G.stopped, 1);
  /* Its runner retires it right after its stop hook; then each worker
   * spawns more actors than it keeps free houses, and sends to it. */
  atomic_store(&G.left, RC_WORKERS);
  rc_kick_all(churn, RC_WORKERS, 0);
  rc_wait_left();
  rc_bridge_refused(b, G.victim, G.victim_id);
  rc_finish(sys, b);
}

/* ---- reuse ------------------------------------------------------------------- */

static void case_reuse(void) {
  sh_system *sys = rc_system();
  const sh_addr *reuse[2];
  rc_drivers(sys, (drv_cfg){.role = ROLE_REUSE}, 2, reuse);
  sh_bridge *b = rc_start(sys);
  atomic_store(&G.left, 2 * (1 + RC_REUSE_LIVE));
  rc_kick_all(reuse, 2, 0);
  rc_wait_left();
  for (uint32_t k = 0; k < 2 * RC_REUSE; k++) {
    int rc = sh_bridge_notice(b, G.old[k], rc_note_new(G.old_id[k]), SH_NOWAIT);
    assert_int_equal(rc, -ESHUTDOWN);
    if (k % 64 == 0) rc_bridge_refused(b, G.old[k], G.old_id[k]);
  }
  rc_finish(sys, b);
  /* One refused send per cycle, and one to each old address at the end. */
  assert_int_equal(atomic_load(&G.refused), 2 * 2 * RC_REUSE);
}

/* ---- stop while sending -------------------------------------------------------- */

/* The outside thread's part: notices and asks until the target refuses,
 * then every kind of send, refused. The workers get the CPU between
 * bursts, else the stream could outrun them all (the bound is never met). */
static void rc_bridge_stream(sh_bridge *b, const sh_addr *to, uint64_t id) {
  uint32_t asks = 0;
  int rc = 0;
  for (uint32_t i = 0; rc == 0 && i < RC_MAX_STREAM; i++) {
    rc = rc_sent(sh_bridge_notice(b, to, rc_note_new(id), SH_FOREVER));
    if (rc != 0 || i % RC_BURST != 0) continue;
    if (rc_sent(sh_bridge_ask(b, to, rc_ask_new(id), SH_FOREVER, NULL)) == 0) asks++;
    sh_yield_cpu();
  }
  assert_int_equal(rc, -ESHUTDOWN);
  rc_bridge_refused(b, to, id);
  for (uint32_t i = 0; i < asks; i++) rc_bridge_answered(b, id);
  assert_int_equal(sh_bridge_pending(b), 0);
}

static void case_stop_sending(void) {
  sh_system *sys = rc_system();
  uint64_t id;
  const sh_addr *t = rc_spawn(sys, (rc_cfg){.stop_at = RC_STOP_AT}, &id);
  const sh_addr *senders[RC_SENDERS];
  rc_drivers(sys, (drv_cfg){.role = ROLE_SEND, .target = t, .target_id = id}, RC_SENDERS,
             senders);
  sh_bridge *b = rc_start(sys);
  atomic_store(&G.left, RC_SENDERS);
  rc_kick_all(senders, RC_SENDERS, 0);
  rc_bridge_stream(b, t, id);
  rc_wait_left();
  rc_finish(sys, b);
  /* The handler that stopped it was its last. */
  assert_int_equal(atomic_load(&G.seen_at_stop), RC_STOP_AT);
  assert_true(atomic_load(&G.refused) >= RC_SENDERS * RC_AFTER);
}

/* ---- stop while asked ---------------------------------------------------------- */

static void case_stop_asked(void) {
  sh_system *sys = rc_system();
  const sh_addr *lock = th_spawn_on(sys, &lock_class, NULL, 0);
  const sh_addr *gate = th_spawn_on(sys, &gate_class, &lock, 1);
  uint64_t id;
  const sh_addr *m = rc_spawn_as(sys, &vic_barrier_class, (rc_cfg){.gate = gate}, &id);
  const sh_addr *askers[RC_ASKERS], *churn[RC_WORKERS];
  rc_drivers(sys, (drv_cfg){.role = ROLE_ASKER, .target = m, .target_id = id}, RC_ASKERS,
             askers);
  rc_drivers(sys, (drv_cfg){.role = ROLE_CHURN, .target = gate}, RC_WORKERS, churn);
  sh_bridge *b = rc_start(sys);
  atomic_store(&G.left, RC_ASKERS);
  rc_kick_all(askers, RC_ASKERS, 0);
  /* One ask runs (it waits on the gate), the others queue behind it. */
  rc_wait_int(&G.asked, RC_ASKERS);
  rc_wait_int(&G.held, 1);
  assert_int_equal(sh_stop(m), 0);
  rc_wait_left();
  rc_wait_int(&G.stopped, 1);
  /* Its house is reused by actors that wait on the gate, as it did. */
  atomic_store(&G.left, RC_WORKERS * (RC_CHURN + 1));
  rc_kick_all(churn, RC_WORKERS, 0);
  rc_wait_int(&G.held, 1 + (int)(RC_WORKERS * RC_CHURN));
  assert_int_equal(sh_stop(lock), 0);
  rc_wait_left();
  sh_stats st = rc_finish(sys, b);
  /* The askers' asks, and its own to the gate, failed; the gate's answer to
   * it found nobody; every newcomer got its own. The lock may add one: a
   * stop that lands while it runs (the gate's asks keep it busy) gives up
   * its self-ask before that ask's refusal comes back to it. */
  assert_int_equal(atomic_load(&G.asks_failed), RC_ASKERS + 1);
  assert_int_equal(atomic_load(&G.asks_ok), RC_WORKERS * RC_CHURN);
  assert_true(st.replies_unknown == 1 || st.replies_unknown == 1 + RC_LOCK_UNKNOWN);
}

/* ---- memory -------------------------------------------------------------------- */

static uint64_t rc_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (f != NULL) {
    if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* One wave of RC_MEM_CYCLES cycles; then the system's figures once idle. */
static sh_stats rc_wave(sh_system *sys, const sh_addr **lanes) {
  atomic_store(&G.left, RC_LANES);
  rc_kick_all(lanes, RC_LANES, RC_MEM_CYCLES / RC_LANES);
  rc_wait_left();
  for (int i = 0; i < RC_SETTLE_STEPS; i++) rc_pause();
  sh_stats st;
  sh_system_stats(sys, &st);
  return st;
}

static void case_memory(void) {
  sh_system *sys = rc_system();
  const sh_addr *lanes[RC_LANES];
  rc_drivers(sys, (drv_cfg){.role = ROLE_LANE}, RC_LANES, lanes);
  sh_bridge *b = rc_start(sys);
  sh_stats first = rc_wave(sys, lanes);
  uint64_t rss = rc_rss_bytes();
  sh_stats second = rc_wave(sys, lanes);
  uint64_t now = rc_rss_bytes();
  uint64_t grew = now > rss ? now - rss : 0;
  if (grew > RC_RSS_SLACK || second.pool_outstanding > first.pool_outstanding + RC_MEM_SLACK)
    fprintf(stderr, "run %u (%s): rss grew %llu, pool outstanding %llu then %llu\n",
            run_current, run_name(run_current), (unsigned long long)grew,
            (unsigned long long)first.pool_outstanding,
            (unsigned long long)second.pool_outstanding);
  assert_true(second.pool_outstanding <= first.pool_outstanding + RC_MEM_SLACK);
  assert_true(second.pool_mallocs - first.pool_mallocs <= RC_MEM_SLACK);
  assert_true(!RC_CHECK_RSS || rss == 0 || grew <= RC_RSS_SLACK);
  rc_finish(sys, b);
  assert_int_equal(atomic_load(&G.asks_ok), 2 * (RC_MEM_CYCLES / RC_LANES) * RC_LANES);
}

#define RC_TEST(name, runs)                             \
  static void test_##name(void **state) {               \
    (void)state;                                        \
    for (unsigned run = 0; run < (runs); run++) {       \
      run_current = run;                                \
      run_configure(run);                               \
      case_##name();                                    \
    }                                                   \
  }

RC_TEST(refused, RC_RUNS)
RC_TEST(reuse, RC_RUNS)
RC_TEST(stop_sending, RC_RUNS)
RC_TEST(stop_asked, RC_RUNS)
RC_TEST(memory, RC_MEM_RUNS)

#define RC_CASES                                                                  \
  cmocka_unit_test(test_refused), cmocka_unit_test(test_reuse),                   \
      cmocka_unit_test(test_stop_sending), cmocka_unit_test(test_stop_asked),     \
      cmocka_unit_test(test_memory)

#endif
