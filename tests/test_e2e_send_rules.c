/*
 * The rules stated at the top of stackhouse.h, checked call by call on the
 * production backend (epoll), through the public API only:
 *
 *   - who owns a message after a send: a _try send takes it only when it
 *     returns 0, every other send always takes it and frees it on an error
 *     (sh_put: its failed future holds the notice until taken back). Every
 *     message here has a drop hook that counts its frees, so "freed exactly
 *     once" and "not freed, still the caller's" are exact counts;
 *   - one timeout convention: SH_NOWAIT, SH_FOREVER, a positive bound, any
 *     other negative value -EINVAL (and SH_NOWAIT -EINVAL for an ask);
 *   - shutdown's final drain is bounded, and reaching the bound is reported
 *     (-EBUSY, sh_stats.drain_overruns), forced by the fault point
 *     sh/system/drain.
 *
 * The rig. Each send case needs a target whose mailboxes are both full and
 * stay full, and a stopped target. C is a holder (th_hold) with room for one
 * ask and one notice: the bridge's ask becomes its barrier, whose self-ask
 * fills the ask mailbox; the bridge then puts one notice in. C takes nothing
 * more until shutdown. S is an actor stopped with sh_stop. D, the driver,
 * makes the sends that need a stack; main makes the others. Failed checks
 * print their line (CHECK, on any thread); each case ends with the system's
 * exact accounting.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fiu-control.h>
#include <fiu.h>
#include <stackhouse/stackhouse.h>
#include <stdatomic.h>
#include <unistd.h>

#include "support/harness.h"

#define WATCHDOG_S 120
#define TAG 4242         /* what a kept message must still hold */
#define BAD_TIMEOUT (-2) /* negative, and not SH_FOREVER */
#define SHORT_MS 5       /* a timeout meant to pass */

/* ---- messages that count their frees ------------------------------------- */

typedef struct tagged { sh_msg hdr; int tag; } tagged;
typedef tagged rn; /* a notice */
typedef tagged ra; /* an ask */
typedef struct go { sh_msg hdr; } go;

static atomic_int g_drops;
static void count_drop(sh_msg *m) {
  (void)m;
  atomic_fetch_add(&g_drops, 1);
}
static SH_MSG_DEFINE_DROP(rn, SH_NOTICE, 0, count_drop);
static SH_MSG_DEFINE_DROP(ra, SH_ASK, 0, count_drop);
static SH_MSG_DEFINE(go, SH_NOTICE, 0);

static int drops(void) { return atomic_load(&g_drops); }
static sh_msg *new_rn(void) { return &sh_msg_new(rn, .tag = TAG)->hdr; }
static sh_msg *new_ra(void) { return &sh_msg_new(ra, .tag = TAG)->hdr; }
static int tag_of(const sh_msg *m) { return ((const tagged *)m)->tag; }

/* A send that takes its message: `call` is `want` and freed it once. */
#define TAKES(want, call)                                                          \
  do {                                                                             \
    int d0_ = drops();                                                             \
    CHECK((call) == (want));                                                       \
    CHECK(drops() == d0_ + 1);                                                     \
  } while (0)

/* A send that must leave m the caller's: `call` is `want`, m not freed and
 * still as it was. */
#define KEEPS(want, call, m)                                                       \
  do {                                                                             \
    int d0_ = drops();                                                             \
    CHECK((call) == (want));                                                       \
    CHECK(drops() == d0_ && tag_of(m) == TAG);                                     \
  } while (0)

/* The caller frees a message it kept: this is its one free. */
static void free_kept(sh_msg *m) {
  int d0 = drops();
  sh_msg_free(m);
  CHECK(drops() == d0 + 1);
}

/* ---- the rig ------------------------------------------------------------- */

typedef struct rig {
  sh_system *sys;
  sh_bridge *b;
  const sh_addr *c, *s, *d;
} rig;
static rig R; /* written by main before D gets its go */
static atomic_int g_held;

typedef struct holder { sh_actor base; bool locked; } holder;
static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  return th_hold(self, st, &((holder *)self)->locked, &g_held);
}
static bool holder_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((holder *)self)->locked;
}
static sh_yield ignore(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}
static const sh_actor_class holder_class = {
    .name = "rules_full", .size = sizeof(holder), .locals_size = sizeof(th_hold_locals),
    .ask = holder_ask, .notice = ignore, .barrier = holder_barrier,
    .ask_capacity = 1, .notice_capacity = 1};
static const sh_actor_class sink_class = {.name = "rules_sink", .size = sizeof(sh_actor),
                                          .notice = ignore};

static void assert_full(const sh_addr *a, sh_msg_kind kind) {
  sh_mailbox_stats ms;
  assert_int_equal(sh_mailbox_stats_get(a, 0, kind, &ms), 0);
  assert_int_equal(ms.depth, ms.capacity);
}

static const sh_actor_class driver_class;

/* C held with both mailboxes full, S stopped, D waiting for its go. */
static void rig_up(int goal) {
  atomic_store(&g_held, 0);
  R.sys = th_env(2, goal);
  R.c = th_spawn_on(R.sys, &holder_class, NULL, 0);
  R.s = th_spawn_on(R.sys, &sink_class, NULL, 1);
  R.d = th_spawn_on(R.sys, &driver_class, NULL, 1);
  assert_int_equal(sh_system_start(R.sys), 0);
  assert_int_equal(sh_bridge_new(R.sys, &R.b), 0);
  assert_int_equal(sh_bridge_ask(R.b, R.c, new_ra(), SH_FOREVER, NULL), 0);
  th_wait_for(&g_held, 1); /* its self-ask was sent before: the ask box is full */
  assert_int_equal(sh_bridge_notice(R.b, R.c, new_rn(), SH_NOWAIT), 0);
  assert_full(R.c, SH_ASK);
  assert_full(R.c, SH_NOTICE);
  assert_int_equal(sh_stop(R.s), 0);
}

static void rig_down(void) {
  sh_bridge_free(R.b);
  th_end_exact(R.sys);
}

/* ---- the driver: the sends a stack makes --------------------------------- */

typedef struct d_locals { sh_future *f[2]; int d0; } d_locals;
enum { D_SENDS = SH_START, D_STEP, D_AFTER, D_END };

/* A stack send refused with NULL: m freed once. */
#define TAKES_NULL(call) TAKES(NULL, (call))

/* A future that failed at once with `err`. */
static bool failed_now(const sh_future *f, int err) {
  return f != NULL && sh_future_done(f) && sh_future_error(f) == err;
}

static void d_asks(sh_stack *st) {
  TAKES_NULL(sh_ask(st, NULL, new_ra(), SH_FOREVER));
  TAKES_NULL(sh_ask(st, R.c, new_rn(), SH_FOREVER)); /* not an ask */
  TAKES_NULL(sh_ask(st, R.c, new_ra(), BAD_TIMEOUT));
  TAKES_NULL(sh_ask(st, R.c, new_ra(), INT64_MIN));
  TAKES_NULL(sh_ask(st, R.c, new_ra(), SH_NOWAIT)); /* an ask waits for its reply */
  int d0 = drops();
  CHECK(failed_now(sh_ask(st, R.s, new_ra(), SH_FOREVER), -ESHUTDOWN));
  CHECK(drops() == d0 + 1);
}

static void d_ask_tries(sh_stack *st) {
  sh_future *f = NULL;
  sh_msg *m = new_ra(), *n = new_rn();
  KEEPS(-EINVAL, sh_ask_try(st, NULL, m, SH_FOREVER, &f), m);
  KEEPS(-EINVAL, sh_ask_try(st, R.c, n, SH_FOREVER, &f), n); /* not an ask */
  KEEPS(-EINVAL, sh_ask_try(st, R.c, m, BAD_TIMEOUT, &f), m);
  KEEPS(-EINVAL, sh_ask_try(st, R.c, m, INT64_MIN, &f), m);
  KEEPS(-EINVAL, sh_ask_try(st, R.c, m, SH_NOWAIT, &f), m);
  KEEPS(-EINVAL, sh_ask_try(st, R.c, m, SH_FOREVER, NULL), m);
  KEEPS(-EAGAIN, sh_ask_try(st, R.c, m, SH_FOREVER, &f), m); /* full */
  free_kept(m);
  free_kept(n);
  /* A stopped target: the try succeeds, its future failed; m was taken. */
  int d0 = drops();
  CHECK(sh_ask_try(st, R.s, new_ra(), SH_FOREVER, &f) == 0 && failed_now(f, -ESHUTDOWN));
  CHECK(drops() == d0 + 1);
}

/* A put that failed at once with err: its future holds m until taken. */
static void put_handed_back(sh_stack *st, const sh_addr *to, int64_t timeout_ms, int err) {
  sh_msg *m = new_rn();
  int d0 = drops();
  sh_future *f = sh_put(st, to, m, timeout_ms);
  CHECK(failed_now(f, err));
  CHECK(f != NULL && sh_future_msg(f) == m && sh_future_take(f) == m);
  CHECK(drops() == d0);
  free_kept(m);
}

static void d_puts(sh_stack *st, d_locals *l) {
  TAKES_NULL(sh_put(st, NULL, new_rn(), SH_FOREVER));
  TAKES_NULL(sh_put(st, R.c, new_ra(), SH_FOREVER)); /* not a notice */
  TAKES_NULL(sh_put(st, R.c, new_rn(), BAD_TIMEOUT));
  TAKES_NULL(sh_put(st, R.c, new_rn(), INT64_MIN));
  put_handed_back(st, R.s, SH_FOREVER, -ESHUTDOWN);
  put_handed_back(st, R.c, SH_NOWAIT, -EAGAIN); /* full: at once */
  /* Not taken back: freed with their futures, when the stack moves on. */
  l->d0 = drops();
  l->f[0] = sh_put(st, R.s, new_rn(), SH_FOREVER);
  l->f[1] = sh_put(st, R.c, new_rn(), SH_NOWAIT);
  CHECK(failed_now(l->f[0], -ESHUTDOWN) && failed_now(l->f[1], -EAGAIN));
  CHECK(drops() == l->d0);
}

static void d_timers(sh_actor *self) {
  uint64_t id;
  CHECK(sh_timer_start(self, -1, 0, NULL, &id) == -EINVAL);
  CHECK(sh_timer_start(self, BAD_TIMEOUT, 0, NULL, &id) == -EINVAL);
  CHECK(sh_timer_start(self, 1000, -1, NULL, &id) == -EINVAL);
}

/* A stack frees the futures an invocation made once the next invocation
 * has seen them: one more step (a put failed at once) before counting. */
static sh_yield d_step(sh_stack *st) {
  CHECK(sh_put(st, R.s, new_rn(), SH_FOREVER) != NULL);
  return sh_suspend(st, D_AFTER);
}

/* sh_put(SH_FOREVER) to the full mailbox waits; shutdown ends it. */
static sh_yield d_forever(sh_actor *self, sh_stack *st, d_locals *l) {
  CHECK(drops() == l->d0 + 2);
  l->f[0] = sh_put(st, R.c, new_rn(), SH_FOREVER);
  sh_mailbox_stats ms;
  CHECK(sh_mailbox_stats_get(R.c, 0, SH_NOTICE, &ms) == 0 && ms.waiting == 1);
  CHECK(l->f[0] != NULL && !sh_future_done(l->f[0]));
  th_done(self);
  return sh_suspend(st, D_END);
}

static sh_yield driver_notice(sh_actor *self, sh_stack *st) {
  d_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case D_SENDS:
    d_asks(st);
    d_ask_tries(st);
    d_puts(st, l);
    d_timers(self);
    return sh_suspend(st, D_STEP);
  case D_STEP:
    return d_step(st);
  case D_AFTER:
    return d_forever(self, st, l);
  default:
    CHECK(sh_future_error(l->f[0]) == -ESHUTDOWN);
    return sh_return(st, NULL);
  }
}

static void driver_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)self, (void)id, (void)arg;
  CHECK(!"no timer starts");
}

static const sh_actor_class driver_class = {
    .name = "rules_driver", .size = sizeof(sh_actor), .locals_size = sizeof(d_locals),
    .notice = driver_notice, .timeout = driver_timeout};

/* ---- the cases ------------------------------------------------------------ */

static void test_stack_sends(void **state) {
  (void)state;
  rig_up(1);
  assert_int_equal(sh_bridge_notice(R.b, R.d, &sh_msg_new(go)->hdr, SH_FOREVER), 0);
  assert_int_equal(sh_system_wait(R.sys), 0);
  rig_down();
}

static void test_notice_sends(void **state) {
  (void)state;
  rig_up(0);
  TAKES(-EINVAL, sh_notice(NULL, new_rn()));
  TAKES(-EINVAL, sh_notice(R.c, new_ra())); /* not a notice */
  TAKES(-ESHUTDOWN, sh_notice(R.s, new_rn()));
  TAKES(-EAGAIN, sh_notice(R.c, new_rn())); /* full */
  sh_msg *m = new_rn(), *a = new_ra();
  KEEPS(-EINVAL, sh_notice_try(NULL, m), m);
  KEEPS(-EINVAL, sh_notice_try(R.c, a), a);
  KEEPS(-ESHUTDOWN, sh_notice_try(R.s, m), m);
  KEEPS(-EAGAIN, sh_notice_try(R.c, m), m);
  free_kept(m);
  free_kept(a);
  rig_down();
}

/* sh_bridge_notice or sh_bridge_ask (kind), each error it can hit. */
static void bridge_takes(sh_bridge *b, sh_msg_kind kind) {
  bool ask = kind == SH_ASK;
  sh_msg *(*mine)(void) = ask ? new_ra : new_rn;
  sh_msg *(*other)(void) = ask ? new_rn : new_ra;
#define BSEND(bb, to, m, t) (ask ? sh_bridge_ask(bb, to, m, t, NULL) : sh_bridge_notice(bb, to, m, t))
  TAKES(-EINVAL, BSEND(NULL, R.c, mine(), SH_FOREVER));
  TAKES(-EINVAL, BSEND(b, NULL, mine(), SH_FOREVER));
  TAKES(-EINVAL, BSEND(b, R.c, other(), SH_FOREVER));
  TAKES(-EINVAL, BSEND(b, R.c, mine(), BAD_TIMEOUT));
  TAKES(-EINVAL, BSEND(b, R.c, mine(), INT64_MIN));
  TAKES(-ESHUTDOWN, BSEND(b, R.s, mine(), SH_FOREVER));
  TAKES(-EAGAIN, BSEND(b, R.c, mine(), SH_NOWAIT));
  TAKES(-ETIMEDOUT, BSEND(b, R.c, mine(), SHORT_MS));
#undef BSEND
}

/* sh_bridge_notice_try or sh_bridge_ask_try (kind): m stays the caller's. */
static void bridge_keeps(sh_bridge *b, sh_msg_kind kind) {
  bool ask = kind == SH_ASK;
  sh_msg *m = ask ? new_ra() : new_rn(), *o = ask ? new_rn() : new_ra();
#define BTRY(bb, to, x) (ask ? sh_bridge_ask_try(bb, to, x, NULL) : sh_bridge_notice_try(bb, to, x))
  KEEPS(-EINVAL, BTRY(NULL, R.c, m), m);
  KEEPS(-EINVAL, BTRY(b, NULL, m), m);
  KEEPS(-EINVAL, BTRY(b, R.c, o), o);
  KEEPS(-ESHUTDOWN, BTRY(b, R.s, m), m);
  KEEPS(-EAGAIN, BTRY(b, R.c, m), m);
#undef BTRY
  free_kept(m);
  free_kept(o);
}

static void test_bridge_sends(void **state) {
  (void)state;
  rig_up(0);
  bridge_takes(R.b, SH_NOTICE);
  bridge_takes(R.b, SH_ASK);
  bridge_keeps(R.b, SH_NOTICE);
  bridge_keeps(R.b, SH_ASK);
  rig_down();
}

/* The bridge's ask to C stays unanswered: recv has something pending. */
static void test_bridge_recv_timeouts(void **state) {
  (void)state;
  rig_up(0);
  sh_bridge_reply out;
  assert_int_equal(sh_bridge_pending(R.b), 1);
  assert_int_equal(sh_bridge_recv(R.b, BAD_TIMEOUT, &out), -EINVAL);
  assert_int_equal(sh_bridge_recv(R.b, INT64_MIN, &out), -EINVAL);
  assert_int_equal(sh_bridge_recv(R.b, SH_NOWAIT, &out), -EAGAIN);
  assert_int_equal(sh_bridge_recv(R.b, SHORT_MS, &out), -ETIMEDOUT);
  rig_down();
}

/* Every drain pass reports work: the bound is reached, and said so. */
static void test_drain_bound_reported(void **state) {
  (void)state;
  sh_system *sys = th_env(2, 0);
  th_spawn_on(sys, &sink_class, NULL, 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(fiu_enable("sh/system/drain", 1, NULL, 0), 0);
  int rc = sh_system_shutdown(sys);
  fiu_disable("sh/system/drain");
  assert_int_equal(rc, -EBUSY);
  sh_stats st;
  sh_system_stats(sys, &st);
  assert_int_equal(st.drain_overruns, 1);
  th_end_exact(sys); /* shut already: 0, and nothing leaked */
}

static void test_drain_within_bound(void **state) {
  (void)state;
  sh_system *sys = th_env(2, 0);
  th_spawn_on(sys, &sink_class, NULL, 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_system_shutdown(sys), 0);
  sh_stats st;
  sh_system_stats(sys, &st);
  assert_int_equal(st.drain_overruns, 0);
  th_end_exact(sys);
}

int main(void) {
  alarm(WATCHDOG_S);
  fiu_init(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_notice_sends),
      cmocka_unit_test(test_stack_sends),
      cmocka_unit_test(test_bridge_sends),
      cmocka_unit_test(test_bridge_recv_timeouts),
      cmocka_unit_test(test_drain_bound_reported),
      cmocka_unit_test(test_drain_within_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
