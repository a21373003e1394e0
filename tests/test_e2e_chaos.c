/*
 * Chaos: a seeded random workload on the production backend (epoll,
 * pthreads) that uses every feature at once, to find what the focused tests
 * miss.
 *
 * Per seed: 2-4 workers, 24 actors placed with sh_spawn_on over five classes
 * (plain; batching notices and asks with a filter; a barrier predicate;
 * max_per_run 1; batching + barrier + max_per_run 2), plus one batching
 * class behind a per-worker address (SH_SPAWN_PER_WORKER) and one mixed
 * class behind a round-robin address of 3 instances. Every actor draws from
 * its own xorshift (seeded from the run's seed and its id); on each notice,
 * ask, batch or timer it handles it may: ask 1..4 random addresses (itself
 * included) with or without a 1..20 ms timeout and wait for all of them
 * (sh_suspend) or any (sh_suspend_any), over up to 3 rounds, moving between
 * two wait states or staying, sometimes walking away from asks still out;
 * send notices (some batchable, some barriers by flag or by type); start,
 * cancel and re-cancel one-shot and periodic timers; take a reply with
 * sh_future_take and free it later (or in its stop hook); rarely sh_stop a
 * random address (at most 3 per run, itself included). Ask handlers reply
 * or throw; batch ask handlers answer some asks one by one and the rest with
 * a copied reply or a throw. Barrier stacks ask only with timeouts: an ask
 * to itself (or a cycle of barriers) would otherwise wait forever by design.
 * A cap on live stacks keeps the load bounded; the test thread kicks random
 * actors every millisecond so the workload never dies out.
 *
 * A run spends a global budget of operations (sends, timer operations,
 * stops) in 4 phases. After each phase the workload pauses: no operation is
 * taken, periodic timers cancel themselves at their next tick, and every
 * stack must end, since a lost reply, timeout or wakeup shows as a stack
 * that never does (a minute's bound). Half the seeds end abruptly in the
 * last phase (the actor that spends the last operation calls
 * sh_system_exit, and shutdown meets everything in flight); the others end
 * after the last pause. The seed also decides the configuration: stealing made
 * easy (steal_floor 2), tight pools (32 cached objects, trimmed after 1 ms
 * idle), idle workers that park at once (spin_ns 0).
 *
 * Invariants, checked in the handlers (CHECK) and after shutdown:
 *   - every future a stack made is observed complete exactly once, or was
 *     left behind when its stack returned: asks made == observed + abandoned;
 *     every observed outcome is legal: a reply carrying the value computed
 *     from its ask's unique tag (or the batch's copied reply, for a
 *     batchable ask), the error thrown for that tag (or the batch's throw),
 *     -ETIMEDOUT only for an ask with a timeout, -ESHUTDOWN only when the
 *     target or the asker was stopped or the system is shutting down;
 *   - every ask is handled at most once; every handled ask is answered once;
 *   - every stack that started returned or threw (started == ended), and
 *     no handler ran concurrently with another on the same actor, before its
 *     mount hook, or after its stop hook;
 *   - no ask or notice stack starts while the actor is in a barrier; batches
 *     hold only messages that pass the filter, are no barriers, and are at
 *     most max_batch long;
 *   - a timer's handler never runs after sh_timer_cancel returned 0 or after
 *     its one-shot ran, and gets its own arg; cancelling such a timer again
 *     says -ENOENT;
 *   - mount and stop hooks ran exactly once per actor, the stop hook after
 *     the actor's last stack;
 *   - the runtime's counters agree: asks_timed_out == timeouts observed;
 *     dropped_stopped == notices sent - handled + asks made - handled;
 *     replies_unknown <= what could legitimately arrive late;
 *   - no CHECK failed, the pools got every object back (th_end), and no
 *     leak (ASan) or data race (TSan).
 *
 * A second test keeps the first bug the chaos run found (a timer node read
 * after another worker could free it) as a focused regression.
 *
 * Soak mode, for long runs (environment):
 *   CHAOS_SEEDS=A..B   run seeds A to B inclusive (or CHAOS_SEEDS=A: one seed)
 *   CHAOS_OPS=N        operations per seed (default 32000, 16000 under TSan)
 * e.g. CHAOS_SEEDS=1..500 CHAOS_OPS=50000 build/tsan/tests/test_e2e_chaos
 * Each seed prints a line (workers, ending, options) to stderr before it
 * runs, so a failure names its seed, and one with its counts after
 * shutdown. CHAOS_SEEDS=1..0 (an empty range) runs only the regression. A
 * run is not replayable (threads interleave differently every time); a seed
 * fixes the workload's shape.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define WATCHDOG_S 120
#define DEFAULT_OPS (TH_UNDER_TSAN ? 16000 : 32000)
static const uint64_t default_seeds[] = {10, 11, 14, 20}; /* 2-4 workers, every option */

/* The workload: its state and operations, then its stacks and hooks. */
#include "chaos_workload.h"
#include "chaos_stacks.h"

/* ---- the run ---------------------------------------------------------------- */

typedef struct run_cfg {
  uint64_t seed;
  long ops;
  uint32_t workers;
  bool abrupt;      /* else quiesced at the end too */
  bool steal_happy; /* steal_floor 2: houses change workers all the time */
  bool tight_pools; /* pools overflow to malloc and are trimmed while running */
  bool no_spin;     /* idle workers park at once: the park/wake handshake works hard */
} run_cfg;

static run_cfg derive(uint64_t seed, long ops) {
  uint64_t h = mix64(seed);
  return (run_cfg){.seed = seed,
                   .ops = ops,
                   .workers = 2 + (uint32_t)(h % 3),
                   .abrupt = (h >> 8) & 1,
                   .steal_happy = (h >> 9) & 1,
                   .tight_pools = (h >> 10) & 1,
                   .no_spin = ((h >> 11) & 3) == 0};
}

static sh_config config_of(const run_cfg *rc) {
  sh_config cfg = th_config(rc->workers);
  if (rc->steal_happy) {
    cfg.steal_floor = 2;
    cfg.steal_aggression = 4;
  }
  if (rc->tight_pools) {
    cfg.pool_max_cached = 32;
    cfg.pool_keep = 2;
    cfg.pool_idle_ns = 1000000;
  }
  if (rc->no_spin) cfg.spin_ns = 0;
  return cfg;
}

/* Fresh run state; the tag table only grows and stays reachable, so a failed
 * assertion leaks nothing. */
static void reset_run(const run_cfg *rc) {
  static atomic_uchar *handled;
  static long handled_len;
  if (handled_len < rc->ops) {
    free(handled);
    handled = malloc((size_t)rc->ops);
    assert_non_null(handled);
    handled_len = rc->ops;
  }
  memset(&g, 0, sizeof(g)); /* no system exists: nothing reads it */
  for (long i = 0; i < rc->ops; i++) atomic_init(&handled[i], 0);
  g.handled = handled;
  g.seed = rc->seed;
  g.budget = rc->ops;
  g.abrupt = rc->abrupt;
  for (int p = 0; p < P_COUNT; p++) classes[p] = class_of(&profiles[p]);
  th_reset(rc->abrupt ? 1 : 0); /* abrupt: the last operation ends the run */
}

static void spawn_all(sh_system *sys, const run_cfg *rc, uint64_t *rng) {
  static spawn_arg args[N_ADDRS];
  for (int i = 0; i < N_PLAIN; i++) {
    args[i] = (spawn_arg){&profiles[i % P_COUNT], i};
    uint32_t w = (uint32_t)i < rc->workers ? (uint32_t)i : (uint32_t)(th_xorshift(rng) % rc->workers);
    g.addr[i] = th_spawn_on(sys, &classes[i % P_COUNT], &args[i], w);
  }
  args[N_PLAIN] = (spawn_arg){&profiles[P_BATCH], N_PLAIN};
  assert_int_equal(sh_spawn(sys, &classes[P_BATCH], &args[N_PLAIN], SH_SPAWN_PER_WORKER,
                            &g.addr[N_PLAIN]),
                   0);
  args[N_PLAIN + 1] = (spawn_arg){&profiles[P_MIXED], N_PLAIN + 1};
  assert_int_equal(
      sh_spawn(sys, &classes[P_MIXED], &args[N_PLAIN + 1], ROBIN_K, &g.addr[N_PLAIN + 1]), 0);
  assert_int_equal(g.nactors, N_PLAIN + (int)rc->workers + ROBIN_K);
}

/* From the test thread: a notice that starts 1..MAX_ROUNDS rounds. */
static void kick(uint64_t *rng) {
  int to = (int)(th_xorshift(rng) % N_ADDRS);
  count(C_NOTICES_SENT);
  int rc = sh_notice(g.addr[to], new_msg(&chaos_note_type, 0, KICKER, F_KICK));
  if (rc != 0 && !(rc == -ESHUTDOWN && addr_stopped(to))) BAD("kick failed", rc);
}

/* Kicks (the workload never dies out) until the phase's operations are
 * spent; false when no operation was taken for a minute: the workload
 * stalled (stacks stuck above LIVE_CAP). */
static bool kick_until(long limit, uint64_t *rng) {
  long last = -1;
  for (int idle = 0; atomic_load(&g.ops) < limit; idle++) {
    long now = atomic_load(&g.ops);
    if (now != last) idle = 0;
    if (idle == 60000) return false;
    last = now;
    kick(rng);
    kick(rng);
    th_sleep_ms(1);
  }
  return true;
}

/* Polls until no stack is live (and none started) for three polls in a row;
 * false when that never happens: some stack waits for ever. */
static bool wait_quiet(void) {
  uint64_t last = UINT64_MAX;
  for (int i = 0, calm = 0; i < QUIET_POLLS; i++) {
    uint64_t ended = cval(C_ENDED), started = cval(C_STARTED);
    calm = started == ended && started == last ? calm + 1 : 0;
    if (calm == 3) return true;
    last = started;
    th_sleep_ms(2);
  }
  return false;
}

static void print_stuck(const run_cfg *rc, int phase) {
  fprintf(stderr, "chaos seed %" PRIu64 ", phase %d: live stacks:", rc->seed, phase);
  for (int i = 0; i < g.nactors; i++)
    if (atomic_load(&g.live[i]) != 0) fprintf(stderr, " actor %d: %d;", i, atomic_load(&g.live[i]));
  fprintf(stderr, "\n");
}

/* Spends the budget in PHASES phases, each followed by a pause in which no
 * operation is taken: every stack must then end, with nothing new arriving
 * to hide a message a house was left waiting with. An abrupt run ends in its
 * last phase instead (its last operation exits). False when a pause never
 * became quiet, or a phase stalled. */
static bool run_phases(const run_cfg *rc, uint64_t *rng) {
  for (int p = 1; p <= PHASES; p++) {
    atomic_store(&g.limit, g.budget / PHASES * p + (p == PHASES ? g.budget % PHASES : 0));
    bool spent = kick_until(atomic_load(&g.limit), rng);
    if (spent && p == PHASES && rc->abrupt) return true;
    if (!spent || !wait_quiet()) {
      print_stuck(rc, p);
      return false;
    }
  }
  return true;
}

/* Before the run, so that any failure that follows names its seed. */
static void print_start(const run_cfg *rc) {
  fprintf(stderr, "chaos seed %" PRIu64 ": %u workers, %s%s%s%s, %ld ops\n", rc->seed, rc->workers,
          rc->abrupt ? "abrupt" : "quiesced", rc->steal_happy ? ", steal-happy" : "",
          rc->tight_pools ? ", tight pools" : "", rc->no_spin ? ", no spin" : "", rc->ops);
}

static void print_run(const run_cfg *rc, const sh_stats *st) {
  fprintf(stderr,
          "chaos seed %" PRIu64 ": %" PRIu64 " stacks (%" PRIu64 " barrier, %" PRIu64
          " batch), %" PRIu64 " asks: %" PRIu64 " replies, %" PRIu64 " copied, %" PRIu64
          " thrown, %" PRIu64 " timeouts, %" PRIu64 " shutdown, %" PRIu64 " abandoned; %" PRIu64
          " notices, %" PRIu64 " timers, %" PRIu64 " ticks, %" PRIu64 " stops; steals %" PRIu64
          ", unknown replies %" PRIu64 "\n",
          rc->seed, cval(C_STARTED), cval(C_BARRIER_STACKS), cval(C_BATCH_STACKS),
          cval(C_ASKS_MADE), cval(C_GOT_REPLY), cval(C_GOT_COMMON),
          cval(C_GOT_THROWN) + cval(C_GOT_BATCH_THROWN), cval(C_GOT_TIMEOUT), cval(C_GOT_SHUTDOWN),
          cval(C_ABANDONED), cval(C_NOTICES_SENT), cval(C_TIMERS), cval(C_TICKS), cval(C_STOPS),
          st->steals, st->replies_unknown);
}

static void check_invariants(const sh_stats *st) {
  /* Every stack ended; every future was observed once or left behind. */
  assert_int_equal(cval(C_STARTED), cval(C_ENDED));
  assert_int_equal(cval(C_ASKS_MADE), cval(C_OBSERVED) + cval(C_ABANDONED));
  assert_int_equal(cval(C_OBSERVED), cval(C_GOT_REPLY) + cval(C_GOT_COMMON) + cval(C_GOT_THROWN) +
                                         cval(C_GOT_BATCH_THROWN) + cval(C_GOT_TIMEOUT) +
                                         cval(C_GOT_SHUTDOWN));
  /* Every handled ask was answered once; nothing arrived that was not sent. */
  assert_int_equal(cval(C_ASKS_HANDLED), cval(C_SENT_REPLY) + cval(C_SENT_THROW) +
                                             cval(C_SENT_COMMON) + cval(C_SENT_BATCH_THROW));
  assert_true(cval(C_ASKS_HANDLED) <= cval(C_ASKS_MADE));
  assert_true(cval(C_GOT_REPLY) <= cval(C_SENT_REPLY));
  assert_true(cval(C_GOT_THROWN) <= cval(C_SENT_THROW));
  assert_true(cval(C_GOT_COMMON) <= cval(C_SENT_COMMON));
  assert_true(cval(C_GOT_BATCH_THROWN) <= cval(C_SENT_BATCH_THROW));
  /* The runtime's own accounting agrees. */
  assert_int_equal(st->asks_timed_out, cval(C_GOT_TIMEOUT));
  assert_int_equal(st->dropped_stopped, cval(C_NOTICES_SENT) - cval(C_NOTICES_HANDLED) +
                                            cval(C_ASKS_MADE) - cval(C_ASKS_HANDLED));
  /* A reply finds no future only when its ask timed out, was left behind,
   * or was failed by a stop. */
  assert_true(st->replies_unknown <=
              cval(C_GOT_TIMEOUT) + cval(C_ABANDONED) + cval(C_GOT_SHUTDOWN));
  for (int i = 0; i < g.nactors; i++) {
    assert_int_equal(atomic_load(&g.mounts[i]), 1);
    assert_int_equal(atomic_load(&g.stop_hooks[i]), 1);
    assert_int_equal(atomic_load(&g.live[i]), 0);
  }
  assert_true(cval(C_STOPS) <= STOP_MAX);
  /* The mix happened: these depend on message flags only, not on timing. */
  assert_true(cval(C_GOT_REPLY) > 0);
  assert_true(cval(C_BATCH_STACKS) > 0);
  assert_true(cval(C_BARRIER_STACKS) > 0);
}

static void chaos_run(const run_cfg *rc) {
  alarm(WATCHDOG_S + (unsigned)(rc->ops / 1000));
  print_start(rc);
  reset_run(rc);
  sh_config cfg = config_of(rc);
  sh_system *sys = th_system_new(&cfg);
  uint64_t rng = mix64(rc->seed ^ 0x5eed) | 1;
  spawn_all(sys, rc, &rng);
  assert_int_equal(sh_system_start(sys), 0);
  bool quiet = run_phases(rc, &rng);
  if (!rc->abrupt || !quiet) sh_system_exit(sys, 0);
  assert_int_equal(sh_system_wait(sys), 0);
  atomic_store(&g.shutting_down, true);
  sh_stats st = th_end(sys); /* no CHECK failed; the pools got every object back */
  print_run(rc, &st);
  if (!quiet) fail_msg("seed %" PRIu64 ": stacks kept waiting, or the workload stalled", rc->seed);
  check_invariants(&st);
}

/* ---- regression: an ask's timeout cancelled from another worker ------------ */

/*
 * Found by the chaos run under TSan. An ask's timer lives in the wheel of the
 * worker that ran the asker when it asked; a stolen house answered on its
 * owner (or the reverse) cancels it from another worker. sh_timer_cancel_node
 * read the node's wheel_worker after its CAS to CANCELLED, when the wheel's
 * worker may already have freed the node and its pool handed it out again.
 * Here every client sits on worker 0 with stealing made easy, so houses move
 * between an ask and its reply all the time, and the 1 ms timeouts make the
 * wheels free cancelled nodes (for reuse by the next asks) at once. TSan
 * reported the read every run before the fix.
 */
#define XC_CLIENTS 64

static const sh_addr *xc_server;
static atomic_int xc_done, xc_replies;

static sh_yield xc_server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return th_reply_with(st, sh_stack_msg_as(st, num_ask)->v + 1);
}
static const sh_actor_class xc_server_class = {
    .name = "xc_server", .size = sizeof(sh_actor), .ask = xc_server_ask};

typedef struct xc_locals { sh_future *f; } xc_locals;

static sh_yield xc_client_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  xc_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, xc_server, th_new_ask(41), 1);
    CHECK(l->f != NULL);
    return sh_suspend(st, 1);
  }
  int err = sh_future_error(l->f);
  CHECK(err == 0 || err == -ETIMEDOUT); /* a loaded machine may be late */
  if (err == 0) {
    CHECK(sh_future_reply(l->f, num_reply)->v == 42);
    atomic_fetch_add(&xc_replies, 1);
  }
  atomic_fetch_add(&xc_done, 1);
  return sh_return(st, NULL);
}
static const sh_actor_class xc_client_class = {.name = "xc_client",
                                               .size = sizeof(sh_actor),
                                               .locals_size = sizeof(xc_locals),
                                               .notice = xc_client_notice};

static void test_ask_timeout_cancelled_across_workers(void **state) {
  (void)state;
  th_reset(0);
  sh_config cfg = th_config(2);
  cfg.steal_floor = 2;
  cfg.steal_aggression = 4;
  sh_system *sys = th_system_new(&cfg);
  xc_server = th_spawn_on(sys, &xc_server_class, NULL, 1);
  const sh_addr *clients[XC_CLIENTS];
  for (int i = 0; i < XC_CLIENTS; i++) clients[i] = th_spawn_on(sys, &xc_client_class, NULL, 0);
  atomic_store(&xc_done, 0);
  atomic_store(&xc_replies, 0);
  assert_int_equal(sh_system_start(sys), 0);
  int rounds = 150, sent = 0;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < XC_CLIENTS; i++, sent++)
      assert_int_equal(sh_notice(clients[i], &sh_msg_new(chaos_note)->hdr), 0);
    th_wait_for(&xc_done, sent - 2 * XC_CLIENTS); /* a bounded backlog */
  }
  th_wait_for(&xc_done, sent);
  sh_stats st = th_end(sys);
  assert_true(st.steals > 0); /* the race needs houses that change workers */
  assert_true(atomic_load(&xc_replies) > 0);
  assert_int_equal(st.asks_timed_out + (uint64_t)atomic_load(&xc_replies), (uint64_t)sent);
}

/* ---- seeds ------------------------------------------------------------------ */

static long env_ops(void) {
  const char *s = getenv("CHAOS_OPS");
  long n = s != NULL ? strtol(s, NULL, 10) : 0;
  return n > 0 ? n : DEFAULT_OPS;
}

/* CHAOS_SEEDS=A..B or A; false when unset. */
static bool env_seeds(uint64_t *lo, uint64_t *hi) {
  const char *s = getenv("CHAOS_SEEDS");
  if (s == NULL || *s == '\0') return false;
  char *end;
  *lo = strtoull(s, &end, 10);
  *hi = strncmp(end, "..", 2) == 0 ? strtoull(end + 2, NULL, 10) : *lo;
  return true;
}

static void test_chaos(void **state) {
  (void)state;
  long ops = env_ops();
  uint64_t lo, hi;
  if (env_seeds(&lo, &hi)) {
    for (uint64_t s = lo; s <= hi; s++) {
      run_cfg rc = derive(s, ops);
      chaos_run(&rc);
    }
    return;
  }
  for (size_t i = 0; i < sizeof(default_seeds) / sizeof(default_seeds[0]); i++) {
    run_cfg rc = derive(default_seeds[i], ops);
    chaos_run(&rc);
  }
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chaos),
      cmocka_unit_test(test_ask_timeout_cancelled_across_workers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
