/*
 * Unit tests of actor timers and ask timeouts (core/time/timer.c), without
 * threads: a 2-worker system that is never started; the test thread acts as
 * worker 0 and moves the wheel itself with sh_timer_advance(w, now), `now`
 * chosen far enough ahead of the real clock (the wheel only needs
 * now >= expiry). Nothing here depends on how long anything takes.
 *
 * Covered: who frees a node (cancel on the wheel's own worker frees at
 * once; cancel from another worker, or off-worker, leaves it to the wheel,
 * which frees it when it comes due); a fired one-shot travels to its actor
 * as one event and runs the timeout handler once; a cancel after the fire
 * marks it dead so the handler never runs; periodic timers post sh_tick
 * events and stay in the wheel until cancelled, and a tick that arrives
 * after the cancel is ignored; ask timeouts fail the future with -ETIMEDOUT
 * (a late reply is then unknown), a reply that comes first removes the
 * timeout from the wheel at once; sh_timer_discard_all empties the wheel.
 * Pool outstanding counts show every node freed exactly when expected.
 *
 * Handlers never call cmocka: they record into globals.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "actor/future.h"
#include "actor/house.h"
#include "plat.h"
#include "support/manual.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "time/timer.h"
#include "time/wheel.h"
#include "sched/worker.h"

#define SEC 1000000000ull

typedef struct go { sh_msg hdr; uint32_t timeout_ms; } go;
typedef struct req { sh_msg hdr; } req;
typedef struct pong { sh_msg hdr; } pong;
SH_MSG_DEFINE(go, SH_NOTICE, 0);
SH_MSG_DEFINE(req, SH_ASK, 0);
SH_MSG_DEFINE(pong, SH_REPLY, 0);

/* ---- recorded by the handlers -------------------------------------------- */

static const sh_addr *timed;     /* worker 0: owns the timers */
static const sh_addr *responder; /* worker 1: answers when the test drains it */
static int fires;                /* timeout handler calls */
static uint64_t fired_id;
static void *fired_arg;
static int ask_err;              /* how the timed actor's ask ended */
static int ask_resumes;
static uint64_t wheel_at_resume; /* timers in the wheel when that stack resumed */

/* ---- actors -------------------------------------------------------------- */

static void timed_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)self;
  fires++;
  fired_id = id;
  fired_arg = arg;
}

/* Asks the responder with go.timeout_ms and records how it ended. */
typedef struct timed_locals { sh_future *f; } timed_locals;
static sh_yield timed_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  timed_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, responder, &sh_msg_new(req)->hdr, sh_stack_msg_as(st, go)->timeout_ms);
    return sh_suspend(st, 1);
  }
  ask_resumes++;
  ask_err = sh_future_error(l->f);
  wheel_at_resume = sh_wheel_count(&sh_worker_current()->wheel);
  return sh_return(st, NULL);
}
static const sh_actor_class timed_class = {.name = "timed", .size = sizeof(sh_actor),
                                           .locals_size = sizeof(timed_locals),
                                           .notice = timed_notice, .timeout = timed_timeout};

static sh_yield responder_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, &sh_msg_new(pong)->hdr);
}
static const sh_actor_class responder_class = {.name = "responder", .size = sizeof(sh_actor),
                                               .ask = responder_ask};

/* ---- harness ------------------------------------------------------------- */

static sh_house *house(void) {
  uint32_t gen;
  return sh_addr_member(timed, 0, &gen);
}
static sh_actor *actor(void) { return house()->actor; }
static uint64_t in_wheel(void) { return sh_wheel_count(&th_worker(0)->wheel); }
static uint32_t events(void) { return sh_mailbox_size(&house()->mb, SH_BOX_EVENT); }
static int state_of(const sh_timer *t) { return atomic_load(&t->state); }

/* Moves worker 0's wheel to `ahead` past the real clock: every timer
 * started with a shorter delay is due. Returns how many fired. Within a
 * test `ahead` only grows, so the wheel's time never goes back. */
static uint32_t advance(uint64_t ahead) {
  return sh_timer_advance(th_worker(0), sh_plat_now_ns() + ahead);
}

static uint64_t outstanding(void) { return th_stats().pool_outstanding; }

static int setup(void **state) {
  (void)state;
  fires = ask_err = ask_resumes = 0;
  wheel_at_resume = UINT64_MAX;
  fired_id = 0;
  fired_arg = NULL;
  th_sys = th_system(2);
  th_act_as(0);
  timed = th_spawn(&timed_class, 0);
  responder = th_spawn(&responder_class, 1);
  th_mount_all();
  return 0;
}

/* ---- who frees a node ---------------------------------------------------- */

static void test_cancel_on_own_worker_frees_at_once(void **state) {
  (void)state;
  uint64_t before = outstanding();
  sh_timer *t = sh_timer_ask(th_worker(0), house(), 7, 10 * SEC, &sh_future_timeout_type);
  assert_non_null(t);
  assert_int_equal(in_wheel(), 1);
  assert_int_equal(outstanding(), before + 1);
  assert_int_equal(state_of(t), SH_TIMER_PENDING);
  sh_timer_cancel_node(th_worker(0), t);
  assert_int_equal(in_wheel(), 0);
  assert_int_equal(outstanding(), before);
  assert_int_equal(advance(100 * SEC), 0);
}

/* From another worker (or a thread that is no worker) the node is not
 * ours to unlink: it stays in the wheel, cancelled, and the wheel frees it
 * when it comes due, without delivering anything. */
static void check_cancel_left_to_wheel(sh_worker *canceller) {
  uint64_t before = outstanding();
  sh_timer *t = sh_timer_ask(th_worker(0), house(), 7, 10 * SEC, &sh_future_timeout_type);
  sh_timer_cancel_node(canceller, t);
  assert_int_equal(state_of(t), SH_TIMER_CANCELLED);
  assert_int_equal(in_wheel(), 1);
  assert_int_equal(outstanding(), before + 1);
  assert_int_equal(advance(1 * SEC), 0); /* not due yet */
  assert_int_equal(in_wheel(), 1);
  assert_int_equal(advance(100 * SEC), 1);
  assert_int_equal(in_wheel(), 0);
  assert_int_equal(outstanding(), before);
  assert_int_equal(events(), 0);
  assert_int_equal(atomic_load(&house()->state), SH_WAITING);
}

static void test_cancel_from_other_worker(void **state) {
  (void)state;
  check_cancel_left_to_wheel(th_worker(1));
}

static void test_cancel_off_worker(void **state) {
  (void)state;
  check_cancel_left_to_wheel(NULL);
}

/* ---- one-shot timers ----------------------------------------------------- */

static int arg_cell;

static uint64_t start(uint64_t delay_ms, uint64_t period_ms) {
  uint64_t id = 0;
  assert_int_equal(sh_timer_start(actor(), delay_ms, period_ms, &arg_cell, &id), 0);
  assert_int_not_equal(id, 0);
  return id;
}

static void test_one_shot_fires_as_event(void **state) {
  (void)state;
  uint64_t before = outstanding();
  uint64_t id = start(5, 0);
  assert_int_equal(in_wheel(), 1);
  sh_timer *t = SH_LIST_ENTRY(sh_list_first(&house()->timers), sh_timer, actor_link);
  assert_non_null(t);
  assert_int_equal(advance(1 * SEC), 1);
  assert_int_equal(in_wheel(), 0);
  assert_int_equal(state_of(t), SH_TIMER_FIRED);
  assert_int_equal(events(), 1);
  assert_int_equal(atomic_load(&house()->state), SH_READY);
  assert_int_equal(fires, 0);
  th_drain(0);
  assert_int_equal(fires, 1);
  assert_int_equal(fired_id, id);
  assert_ptr_equal(fired_arg, &arg_cell);
  assert_int_equal(events(), 0);
  assert_true(sh_list_empty(&house()->timers));
  assert_int_equal(outstanding(), before); /* the event was the node: freed */
  assert_int_equal(sh_timer_cancel(actor(), id), -ENOENT);
  assert_int_equal(advance(100 * SEC), 0);
  assert_int_equal(fires, 1);
}

static void test_cancel_after_fire_is_silent(void **state) {
  (void)state;
  uint64_t before = outstanding();
  uint64_t id = start(5, 0);
  sh_timer *t = SH_LIST_ENTRY(sh_list_first(&house()->timers), sh_timer, actor_link);
  assert_int_equal(advance(1 * SEC), 1);
  assert_int_equal(events(), 1);
  assert_int_equal(sh_timer_cancel(actor(), id), 0);
  assert_true(t->dead);
  assert_true(sh_list_empty(&house()->timers));
  assert_int_equal(sh_timer_cancel(actor(), id), -ENOENT);
  th_drain(0);
  assert_int_equal(fires, 0);
  assert_int_equal(events(), 0);
  assert_int_equal(outstanding(), before);
}

static void test_cancel_before_fire(void **state) {
  (void)state;
  uint64_t before = outstanding();
  uint64_t id = start(5, 0);
  assert_int_equal(sh_timer_cancel(actor(), id), 0);
  assert_int_equal(in_wheel(), 0); /* cancelled on its own worker */
  assert_int_equal(outstanding(), before);
  assert_int_equal(advance(1 * SEC), 0);
  th_drain(0);
  assert_int_equal(fires, 0);
  assert_int_equal(sh_timer_cancel(actor(), 12345), -ENOENT);
}

/* ---- periodic timers ----------------------------------------------------- */

/* A periodic timer re-arms from the real clock while the test moves the
 * wheel far ahead, so one advance may fire it more than once: the test
 * counts what was posted instead of assuming one tick per advance. */
static uint32_t advance_periodic(uint64_t ahead, sh_timer *t) {
  assert_int_equal(events(), 0);
  uint32_t n = advance(ahead);
  assert_true(n >= 1);
  assert_int_equal(events(), n);    /* one sh_tick event per fire */
  assert_int_equal(in_wheel(), 1);  /* the node is re-armed, not handed over */
  assert_int_equal(state_of(t), SH_TIMER_PENDING);
  return n;
}

static void test_periodic_posts_ticks(void **state) {
  (void)state;
  uint64_t before = outstanding();
  uint64_t id = start(1, 1);
  sh_timer *t = SH_LIST_ENTRY(sh_list_first(&house()->timers), sh_timer, actor_link);
  uint32_t posted = advance_periodic(1 * SEC, t);
  th_drain(0);
  assert_int_equal(fires, posted);
  posted += advance_periodic(2 * SEC, t);
  th_drain(0);
  assert_int_equal(fires, posted);
  assert_int_equal(fired_id, id);
  assert_ptr_equal(fired_arg, &arg_cell);
  assert_ptr_equal(sh_list_first(&house()->timers), &t->actor_link);

  /* Ticks already posted when the timer is cancelled are ignored. */
  advance_periodic(3 * SEC, t);
  assert_int_equal(sh_timer_cancel(actor(), id), 0);
  assert_int_equal(in_wheel(), 0);
  th_drain(0);
  assert_int_equal(fires, posted);
  assert_int_equal(advance(100 * SEC), 0);
  assert_int_equal(outstanding(), before);
}

/* ---- ask timeouts -------------------------------------------------------- */

static void ask_with_timeout(uint32_t timeout_ms) {
  assert_int_equal(sh_notice(timed, &sh_msg_new(go, .timeout_ms = timeout_ms)->hdr), 0);
  th_drain(0);
  assert_int_equal(in_wheel(), 1);
}

static void test_ask_timeout(void **state) {
  (void)state;
  sh_stats s0 = th_stats();
  ask_with_timeout(5);
  assert_int_equal(advance(1 * SEC), 1);
  assert_int_equal(events(), 1);
  th_drain(0);
  assert_int_equal(ask_resumes, 1);
  assert_int_equal(ask_err, -ETIMEDOUT);
  assert_int_equal(wheel_at_resume, 0);
  assert_int_equal(th_stats().asks_timed_out, s0.asks_timed_out + 1);
  assert_int_equal(in_wheel(), 0);
  th_drain(1); /* the responder answers, too late */
  th_drain(0);
  assert_int_equal(ask_resumes, 1);
  assert_int_equal(th_stats().replies_unknown, s0.replies_unknown + 1);
  assert_int_equal(outstanding(), s0.pool_outstanding);
}

/* The reply comes first: its timeout leaves the wheel at once (same worker). */
static void test_reply_cancels_timeout(void **state) {
  (void)state;
  sh_stats s0 = th_stats();
  ask_with_timeout(10000);
  th_drain(1);
  th_drain(0);
  assert_int_equal(ask_resumes, 1);
  assert_int_equal(ask_err, 0);
  assert_int_equal(wheel_at_resume, 0); /* gone before the stack even resumed */
  assert_int_equal(in_wheel(), 0);
  assert_int_equal(advance(100 * SEC), 0);
  th_drain(0);
  assert_int_equal(th_stats().asks_timed_out, s0.asks_timed_out);
  assert_int_equal(outstanding(), s0.pool_outstanding);
}

/* ---- discard ------------------------------------------------------------- */

static void test_discard_all(void **state) {
  (void)state;
  uint64_t before = outstanding();
  for (uint64_t i = 0; i < 5; i++)
    sh_timer_ask(th_worker(0), house(), 100 + i, (i + 1) * SEC, &sh_future_timeout_type);
  /* Past the wheel's levels. */
  sh_timer *far = sh_timer_ask(th_worker(0), house(), 200, 1000000 * SEC, &sh_future_timeout_type);
  sh_timer_cancel_node(th_worker(1), far); /* cancelled elsewhere: still in the wheel */
  assert_int_equal(in_wheel(), 6);
  assert_int_equal(outstanding(), before + 6);
  sh_timer_discard_all(th_worker(0));
  assert_int_equal(in_wheel(), 0);
  assert_int_equal(outstanding(), before);
  assert_int_equal(events(), 0);
}

int main(void) {
  alarm(120);
/* th_sys_teardown: shutdown must leave no pooled object outstanding (timer
 * nodes included). */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_sys_teardown)
  const struct CMUnitTest tests[] = {
      T(test_cancel_on_own_worker_frees_at_once),
      T(test_cancel_from_other_worker),
      T(test_cancel_off_worker),
      T(test_one_shot_fires_as_event),
      T(test_cancel_after_fire_is_silent),
      T(test_cancel_before_fire),
      T(test_periodic_posts_ticks),
      T(test_ask_timeout),
      T(test_reply_cancels_timeout),
      T(test_discard_all),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
