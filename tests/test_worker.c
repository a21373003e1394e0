/*
 * Unit tests of the worker (core/sched/worker.c).
 *
 * Single-threaded, on a 2-worker system that is never started (the test
 * thread acts as worker 0): sh_worker_enqueue routes IO actors to the
 * owner's IO queue and state actors to its state queue, high or normal
 * sub-queue by the house's flag, and spawns to the owner's mounting FIFO;
 * sh_worker_wake signals only a worker whose parked flag is set, clears the
 * flag, and counts one wakeup per sleep however many pushes follow; a state
 * backlog past the steal floor wakes a parked peer, an IO backlog never does.
 *
 * Then, on a started system (also built under TSan): IO actors are never
 * stolen. Worker 0 gets a backlog of CPU-heavy IO actors while worker 1 is
 * idle: no steal, every handler on worker 0. The same load of state actors
 * is stolen: each handler there waits (bounded) until some handler has run
 * on worker 1, so the steal is certain to come before the load is gone.
 * Nothing is timed: the spins only make work, the assertions count.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <unistd.h>

#include "actor/house.h"
#include "sched/housequeue.h"
#include "plat.h"
#include "support/manual.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "sched/worker.h"

typedef struct note { sh_msg hdr; } note;
SH_MSG_DEFINE(note, SH_NOTICE, 0);

#define STEAL_FLOOR 4
#define LOAD 24                       /* actors in the live test: > STEAL_FLOOR */
#define IO_SPIN_NS 300000ull          /* an IO handler's CPU work */
#define STEAL_WAIT_NS (20ull * 1000000000ull) /* bound on a state handler's wait */

/* ---- actors -------------------------------------------------------------- */

static atomic_int ran_on[2];      /* handlers run per worker */
static atomic_int handled;
static atomic_bool stolen;        /* some handler ran off its owner */
static bool live;                 /* handlers work only on the started system */
static uint64_t steal_deadline;

static void busy_until(uint64_t end, bool until_stolen) {
  while (sh_plat_now_ns() < end && !(until_stolen && atomic_load(&stolen))) sh_plat_relax();
}

/* CPU work, on the started system only: an IO handler spins a fixed while,
 * a state handler until a steal was seen (bounded). */
static void work(const sh_actor *self) {
  if (!live) return;
  if (self->house->cls->kind == SH_IO_ACTOR)
    busy_until(sh_plat_now_ns() + IO_SPIN_NS, false);
  else
    busy_until(steal_deadline, true);
}

static sh_yield busy_notice(sh_actor *self, sh_stack *st) {
  uint32_t me = sh_worker_current()->index;
  atomic_fetch_add(&ran_on[me], 1);
  if (me != sh_actor_worker(self)) atomic_store(&stolen, true);
  work(self);
  if (atomic_fetch_add(&handled, 1) + 1 == LOAD) sh_system_exit(sh_actor_system(self), 0);
  return sh_return(st, NULL);
}

static const sh_actor_class state_class = {.name = "state", .size = sizeof(sh_actor),
                                           .kind = SH_STATE_ACTOR, .notice = busy_notice};
static const sh_actor_class io_class = {.name = "io", .size = sizeof(sh_actor),
                                        .kind = SH_IO_ACTOR, .notice = busy_notice};

/* ---- harness ------------------------------------------------------------- */

static int reset(void **state) {
  (void)state;
  atomic_store(&ran_on[0], 0);
  atomic_store(&ran_on[1], 0);
  atomic_store(&handled, 0);
  atomic_store(&stolen, false);
  live = false;
  return 0;
}

static void sys_new(uint64_t spin_ns) {
  sh_config cfg = th_config(2);
  cfg.steal_floor = STEAL_FLOOR;
  cfg.steal_aggression = 2 * STEAL_FLOOR;
  cfg.spin_ns = spin_ns;
  th_sys = th_system_new(&cfg);
}

static sh_house *spawn_on(const sh_actor_class *c, uint32_t w) {
  uint32_t gen;
  return sh_addr_member(th_spawn(c, w), 0, &gen);
}

static void notify(sh_house *h) {
  assert_int_equal(sh_notice(sh_self(h->actor), &sh_msg_new(note)->hdr), 0);
}

/* Where h is queued: which queue of which worker, and which sub-queue. */
typedef struct place { const sh_house_queue *q; int sub; } place;

static place where(const sh_house *h) {
  for (uint32_t i = 0; i < 2; i++) {
    sh_worker *w = th_worker(i);
    const sh_house_queue *qs[] = {&w->mounting, &w->io, &w->state};
    for (int k = 0; k < 3; k++)
      for (int s = 0; s < 2; s++)
        for (const sh_hq_link *x = qs[k]->sub[s].head; x != NULL; x = x->next)
          if (x == &h->qlink) return (place){qs[k], s};
  }
  return (place){NULL, -1};
}

/* ---- routing ------------------------------------------------------------- */

static void test_spawn_goes_to_mounting(void **state) {
  (void)state;
  sys_new(0);
  sh_house *a = spawn_on(&io_class, 1), *b = spawn_on(&state_class, 0);
  assert_ptr_equal(where(a).q, &th_worker(1)->mounting);
  assert_ptr_equal(where(b).q, &th_worker(0)->mounting);
  th_sys_end();
}

/* A notice makes a waiting house ready: it goes to its owner's IO or state
 * queue by class kind, high or normal by its flag. */
static void check_route(const sh_actor_class *c, uint32_t owner, bool high) {
  sh_house *h = spawn_on(c, owner);
  th_mount_all();
  atomic_store(&h->high, high);
  notify(h);
  place p = where(h);
  sh_worker *w = th_worker(owner);
  assert_ptr_equal(p.q, c->kind == SH_IO_ACTOR ? &w->io : &w->state);
  assert_int_equal(p.sub, high ? 1 : 0);
  assert_int_equal(sh_hq_count(p.q), 1);
  assert_int_equal(atomic_load(&h->state), SH_READY);
  th_drain(owner);
  assert_null(where(h).q);
}

static void test_enqueue_routes_by_kind_and_priority(void **state) {
  (void)state;
  sys_new(0);
  for (uint32_t owner = 0; owner < 2; owner++) {
    for (int high = 0; high < 2; high++) {
      check_route(&io_class, owner, high);
      check_route(&state_class, owner, high);
    }
  }
  assert_int_equal(atomic_load(&ran_on[0]), 4);
  assert_int_equal(atomic_load(&ran_on[1]), 4);
  th_sys_end();
}

/* ---- waking -------------------------------------------------------------- */

static void test_wake_only_when_parked(void **state) {
  (void)state;
  sys_new(0);
  sh_worker *w = th_worker(1);
  sh_worker_wake(w);
  assert_int_equal(th_stats().wakeups, 0);
  atomic_store(&w->parked, 1);
  sh_worker_wake(w);
  assert_int_equal(atomic_load(&w->parked), 0);
  assert_int_equal(th_stats().wakeups, 1);
  sh_worker_wake(w); /* the flag is cleared: no second signal */
  assert_int_equal(th_stats().wakeups, 1);
  th_sys_end();
}

/* Pushes wake a parked owner once; a push to a worker that is awake, or
 * a put to a house already queued, sends nothing. */
static void test_enqueue_wakes_parked_owner_once(void **state) {
  (void)state;
  sys_new(0);
  sh_house *a = spawn_on(&state_class, 1), *b = spawn_on(&io_class, 1);
  th_mount_all();
  uint64_t base = th_stats().wakeups;
  atomic_store(&th_worker(1)->parked, 1);
  notify(a);
  assert_int_equal(atomic_load(&th_worker(1)->parked), 0);
  assert_int_equal(th_stats().wakeups, base + 1);
  notify(a); /* already queued: no enqueue */
  notify(b); /* queued, but the owner is already awake */
  assert_int_equal(th_stats().wakeups, base + 1);
  assert_int_equal(sh_hq_count(&th_worker(1)->state), 1);
  assert_int_equal(sh_hq_count(&th_worker(1)->io), 1);
  th_sys_end();
}

/* A state backlog just past the floor wakes a parked peer (it may steal);
 * an IO backlog is not stealable and wakes nobody. */
static void check_backlog_offer(const sh_actor_class *c, bool expect_wake) {
  sys_new(0);
  sh_house *hs[STEAL_FLOOR + 1];
  for (int i = 0; i <= STEAL_FLOOR; i++) hs[i] = spawn_on(c, 0);
  th_mount_all();
  atomic_store(&th_worker(1)->parked, 1);
  for (int i = 0; i < STEAL_FLOOR; i++) notify(hs[i]);
  assert_int_equal(atomic_load(&th_worker(1)->parked), 1); /* at the floor: nothing to steal */
  notify(hs[STEAL_FLOOR]);
  assert_int_equal(atomic_load(&th_worker(1)->parked), expect_wake ? 0 : 1);
  assert_int_equal(th_stats().wakeups, expect_wake ? 1 : 0);
  atomic_store(&th_worker(1)->parked, 0);
  th_sys_end();
}

static void test_state_backlog_wakes_peer(void **state) {
  (void)state;
  check_backlog_offer(&state_class, true);
}

static void test_io_backlog_wakes_nobody(void **state) {
  (void)state;
  check_backlog_offer(&io_class, false);
}

/* ---- stealing on a live system ------------------------------------------- */

/* LOAD actors of class c on worker 0, one notice each, on a started system
 * whose worker 1 has nothing of its own. Returns the steals counted. */
static uint64_t run_load(const sh_actor_class *c) {
  live = true;
  /* Worker 1 polls instead of parking for a while, so it is awake to look
   * at worker 0's backlog (a parked peer is also woken by the backlog). */
  sys_new(100000000ull);
  sh_house *hs[LOAD];
  for (int i = 0; i < LOAD; i++) hs[i] = spawn_on(c, 0);
  steal_deadline = sh_plat_now_ns() + STEAL_WAIT_NS;
  assert_int_equal(sh_system_start(th_sys), 0);
  for (int i = 0; i < LOAD; i++) notify(hs[i]);
  assert_int_equal(sh_system_wait(th_sys), 0);
  uint64_t steals = th_sys_end().steals;
  assert_int_equal(atomic_load(&handled), LOAD);
  assert_int_equal(atomic_load(&ran_on[1]), (int)steals);
  return steals;
}

static void test_io_actors_never_stolen(void **state) {
  (void)state;
  assert_int_equal(run_load(&io_class), 0);
  assert_int_equal(atomic_load(&ran_on[0]), LOAD);
}

static void test_state_actors_stolen(void **state) {
  (void)state;
  assert_true(run_load(&state_class) > 0);
  assert_true(atomic_load(&stolen));
}

int main(void) {
  alarm(120);
/* th_sys_teardown ends a system the test could not end itself (a failed
 * assertion). */
#define T(f) cmocka_unit_test_setup_teardown(f, reset, th_sys_teardown)
  const struct CMUnitTest tests[] = {
      T(test_spawn_goes_to_mounting),
      T(test_enqueue_routes_by_kind_and_priority),
      T(test_wake_only_when_parked),
      T(test_enqueue_wakes_parked_owner_once),
      T(test_state_backlog_wakes_peer),
      T(test_io_backlog_wakes_nobody),
      T(test_io_actors_never_stolen),
      T(test_state_actors_stolen),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
