/*
 * Unit tests of stacks and futures (core/actor/stack.c), driven single-threaded
 * (stack_fixture.h).
 *
 * Covered: state transitions and locals (zeroed on a new stack, kept across
 * suspends); sh_suspend resumes only when every future completed,
 * sh_suspend_any on the first and, in the same state, keeps the completed
 * ones; futures made by the current invocation survive a state change while
 * seen ones are recycled (their untaken replies freed, taken ones kept); a
 * notice stack returning a reply frees it; replies to asks of a stack that
 * already returned are counted as unknown. How a stack ends, re-entry and
 * deferral are test_stack_endings.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "actor/house.h"
#include "actor/futtable.h"
#include "actor/future.h"
#include "actor/stack.h"
#include "support/manual.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "sched/worker.h"

#include "stack_fixture.h"

/* ---- states and locals --------------------------------------------------- */

static bool all_zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0) return false;
  return true;
}

static void fill(subject_locals *l, uint32_t seed) {
  for (uint32_t i = 0; i < 8; i++) l->pattern[i] = seed * 0x01000193u + i;
}

static bool filled(const subject_locals *l, uint32_t seed) {
  for (uint32_t i = 0; i < 8; i++)
    if (l->pattern[i] != seed * 0x01000193u + i) return false;
  return true;
}

/* fact[0]: stacks that started with zeroed locals; fact[1]: resumes that
 * found the locals as left. */
static sh_yield locals_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case S0:
    fact[0] += all_zero(l, sizeof(*l));
    fill(l, 1);
    l->f[0] = ask_v(st, resp[0], 0);
    return sh_suspend(st, S1);
  case S1:
    fact[1] += filled(l, 1);
    fill(l, 2);
    l->f[0] = ask_v(st, resp[0], 0);
    return sh_suspend(st, S2);
  default:
    fact[1] += filled(l, 2);
    return sh_return(st, NULL);
  }
}

static void test_states_and_locals(void **state) {
  (void)state;
  subject_notice_fn = locals_fn;
  /* Two stacks one after the other: the second gets the first's memory
   * back from the pool, so its locals are zero only if they were cleared. */
  for (int round = 1; round <= 2; round++) {
    poke_subject();
    th_drain(1);
    th_drain(0);
    th_drain(1);
    th_drain(0);
    assert_int_equal(calls, 3 * round);
  }
  assert_int_equal(fact[0], 2);
  assert_int_equal(fact[1], 4);
  const int want[] = {S0, S1, S2, S0, S1, S2};
  assert_memory_equal(states, want, sizeof(want));
  assert_true(sh_list_empty(&subject_house()->stacks));
}

/* ---- suspend: all, any --------------------------------------------------- */

/* Asks resp[0] and resp[1]; fact[0..1]: whether each future was done when
 * the stack resumed in S1. */
static sh_yield all_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == S0) {
    for (int i = 0; i < 2; i++) futs[i] = l->f[i] = ask_v(st, resp[i], 10 * i);
    return sh_suspend(st, S1);
  }
  fact[0] = sh_future_done(l->f[0]);
  fact[1] = sh_future_done(l->f[1]);
  fact[2] = sh_future_reply(l->f[0], pong)->v + sh_future_reply(l->f[1], pong)->v;
  return sh_return(st, NULL);
}

static void test_suspend_waits_for_all(void **state) {
  (void)state;
  subject_notice_fn = all_fn;
  poke_subject();
  assert_int_equal(calls, 1);
  step(1); /* resp[0] answers */
  th_drain(0);
  assert_int_equal(calls, 1); /* one of two: still waiting */
  assert_true(sh_future_done(futs[0]));
  assert_false(sh_future_done(futs[1]));
  assert_int_equal(sh_stack_state(SH_LIST_ENTRY(sh_list_first(&subject_house()->stacks), sh_stack, link)), S1);
  step(1); /* resp[1] answers */
  th_drain(0);
  assert_int_equal(calls, 2);
  assert_true(fact[0] && fact[1]);
  assert_int_equal(fact[2], 1 + 11);
  assert_true(sh_list_empty(&subject_house()->stacks));
}

/* Asks three responders and waits for any; counts completions in S1 (same
 * state: the completed futures must stay valid), then returns when all three
 * are in. fact[0]: completions seen at the last resume; fact[1]: sum of the
 * reply values then; fact[2]: pongs freed before that resume. */
static sh_yield any_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == S0) {
    for (int i = 0; i < 3; i++) l->f[i] = ask_v(st, resp[i], 10 * i);
    return sh_suspend_any(st, S1);
  }
  int done = 0, sum = 0;
  for (int i = 0; i < 3; i++)
    if (sh_future_done(l->f[i])) {
      done++;
      sum += sh_future_reply(l->f[i], pong)->v;
    }
  fact[0] = done;
  fact[1] = sum;
  fact[2] = drops;
  if (done < 3) return sh_suspend_any(st, S1);
  return sh_return(st, NULL);
}

static void test_suspend_any_resumes_on_each(void **state) {
  (void)state;
  subject_notice_fn = any_fn;
  poke_subject();
  for (int i = 1; i <= 3; i++) {
    step(1);
    th_drain(0);
    assert_int_equal(calls, 1 + i);
    assert_int_equal(fact[0], i);
  }
  assert_int_equal(fact[1], 1 + 11 + 21);
  assert_int_equal(fact[2], 0); /* nothing recycled while it stayed in S1 */
  assert_int_equal(drops, 3);   /* all freed when it returned */
}

/* sh_suspend_any, then sh_suspend in another state on the rest. */
static sh_yield any_then_all_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case S0:
    for (int i = 0; i < 2; i++) l->f[i] = ask_v(st, resp[i], 0);
    return sh_suspend_any(st, S1);
  case S1:
    fact[0] = sh_future_done(l->f[0]) + 2 * sh_future_done(l->f[1]);
    return sh_suspend(st, S2);
  default:
    fact[1] = sh_future_done(l->f[1]);
    return sh_return(st, NULL);
  }
}

static void test_suspend_any_then_all(void **state) {
  (void)state;
  subject_notice_fn = any_then_all_fn;
  poke_subject();
  step(1);
  th_drain(0);
  assert_int_equal(calls, 2);
  assert_int_equal(fact[0], 1); /* only the first */
  assert_int_equal(drops, 1);   /* S1 -> S2 recycled the seen future and its reply */
  step(1);
  th_drain(0);
  assert_int_equal(calls, 3);
  assert_int_equal(fact[1], 1);
  assert_true(sh_list_empty(&subject_house()->stacks));
}

/* ---- future lifetime ----------------------------------------------------- */

/* S0: ask resp[0]. S1: leave its reply; ask the dead actor (fails at once)
 * and move on: the seen future goes (its reply freed), the new one stays.
 * S2: the new one is readable; ask resp[0] again. S3: take the reply, ask
 * the dead one, move on. S4: the taken reply is intact. */
static sh_yield lifetime_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case S0:
    l->f[0] = ask_v(st, resp[0], 1);
    return sh_suspend(st, S1);
  case S1:
    fact[0] = drops;
    l->f[1] = ask_v(st, dead, 0);
    fact[6] = (int)outstanding();
    return sh_suspend(st, S2);
  case S2:
    fact[1] = drops;
    fact[7] = fact[6] - (int)outstanding();
    fact[2] = sh_future_done(l->f[1]) && sh_future_error(l->f[1]) == -ESHUTDOWN;
    l->f[0] = ask_v(st, resp[0], 5);
    return sh_suspend(st, S3);
  case S3:
    taken = sh_future_take(l->f[0]);
    fact[3] = sh_future_msg(l->f[0]) == NULL;
    l->f[1] = ask_v(st, dead, 0);
    return sh_suspend(st, S4);
  default:
    fact[4] = drops;
    fact[5] = sh_msg_is(taken, &pong_type) && ((pong *)taken)->v == 6;
    return sh_return(st, NULL);
  }
}

static void test_future_lifetime(void **state) {
  (void)state;
  subject_notice_fn = lifetime_fn;
  uint64_t before = outstanding();
  poke_subject();
  th_drain(1);
  th_drain(0); /* S1, then S2 at once */
  assert_int_equal(calls, 3);
  assert_int_equal(fact[0], 0);
  assert_int_equal(fact[1], 1); /* the untaken reply of S0's future was freed */
  assert_true(fact[2]);         /* S1's future outlived the move to S2... */
  assert_int_equal(fact[7], 2); /* ...only S0's future and its reply were freed */
  th_drain(1);
  th_drain(0); /* S3, then S4 at once */
  assert_int_equal(calls, 5);
  assert_true(fact[3]);
  assert_int_equal(fact[4], 1); /* the taken reply was not freed with its future */
  assert_true(fact[5]);
  assert_true(sh_list_empty(&subject_house()->stacks));
  assert_non_null(taken);
  sh_msg_free(taken);
  assert_int_equal(drops, 2);
  assert_int_equal(outstanding(), before);
}

/* ---- what is freed ------------------------------------------------------- */

static sh_yield notice_returns_reply_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, &sh_msg_new(pong, .v = 0)->hdr);
}

static void test_notice_return_frees_reply(void **state) {
  (void)state;
  subject_notice_fn = notice_returns_reply_fn;
  uint64_t before = outstanding();
  poke_subject();
  assert_int_equal(drops, 1);
  assert_int_equal(outstanding(), before);
}

/* Returns at once with an ask still out. */
static sh_yield return_pending_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  ask_v(st, resp[0], 0);
  return sh_return(st, NULL);
}

static void test_late_reply_is_unknown(void **state) {
  (void)state;
  subject_notice_fn = return_pending_fn;
  uint64_t unknown = th_stats().replies_unknown;
  poke_subject();
  assert_true(sh_list_empty(&subject_house()->stacks));
  assert_int_equal(sh_futtable_count(&subject_house()->futures), 0);
  th_drain(1);
  assert_int_equal(drops, 0);
  th_drain(0);
  assert_int_equal(th_stats().replies_unknown, unknown + 1);
  assert_int_equal(drops, 1); /* the late reply was freed */
  /* Given up with its stack, the ask still counts as resolved, once. */
  sh_stats st = th_stats();
  assert_int_equal(st.asks, st.asks_resolved);
}

int main(void) {
  alarm(120);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_sys_teardown)
  const struct CMUnitTest tests[] = {
      T(test_states_and_locals),
      T(test_suspend_waits_for_all),
      T(test_suspend_any_resumes_on_each),
      T(test_suspend_any_then_all),
      T(test_future_lifetime),
      T(test_notice_return_frees_reply),
      T(test_late_reply_is_unknown),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
