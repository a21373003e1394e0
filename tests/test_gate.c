/*
 * Unit tests of a gate's decisions on a waiting sender (core/actor/gate.c),
 * single-threaded: admitted at once, queued, refused by a closed gate, and
 * refused by a gate reset for a later generation than the sender's (its
 * target stopped and another actor took the house since the sender looked).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "actor/gate.h"

static sh_waiter waiter_of(uint32_t gen) {
  sh_waiter w;
  memset(&w, 0, sizeof(w));
  w.gen = gen;
  return w;
}

static void test_enter_admits_then_queues(void **state) {
  (void)state;
  sh_gate *g = sh_gate_new(1, 3);
  assert_non_null(g);
  sh_waiter a = waiter_of(3), b = waiter_of(3);
  assert_int_equal(sh_gate_enter(g, &a), 0);
  assert_int_equal(sh_gate_enter(g, &b), -EINPROGRESS);
  assert_int_equal(sh_gate_queued(g), 1);
  assert_true(sh_gate_cancel(g, &b));
  sh_gate_free(g);
}

static void test_enter_closed_refuses(void **state) {
  (void)state;
  sh_gate *g = sh_gate_new(1, 3);
  assert_non_null(g);
  sh_gate_close(g, 3);
  sh_waiter a = waiter_of(3);
  assert_int_equal(sh_gate_enter(g, &a), -ESHUTDOWN);
  assert_int_equal(sh_gate_queued(g), 0);
  sh_mailbox_stats st;
  memset(&st, 0, sizeof(st));
  sh_gate_stats(g, &st);
  assert_int_equal(st.depth, 0); /* no slot taken */
  sh_gate_free(g);
}

/* The sender of generation 3 looked at its target before the stop; the
 * gate was closed and reset for generation 4 meanwhile: refused, neither
 * admitted into the newer actor's mailbox nor queued for its room. */
static void test_enter_older_generation_refused(void **state) {
  (void)state;
  sh_gate *g = sh_gate_new(1, 3);
  assert_non_null(g);
  sh_gate_close(g, 3);
  sh_gate_reset(g, 1, 4);
  sh_waiter old = waiter_of(3), now = waiter_of(4), next = waiter_of(4);
  assert_int_equal(sh_gate_enter(g, &old), -ESHUTDOWN);
  assert_int_equal(sh_gate_enter(g, &now), 0);
  assert_int_equal(sh_gate_enter(g, &old), -ESHUTDOWN); /* full: still not queued */
  assert_int_equal(sh_gate_queued(g), 0);
  assert_int_equal(sh_gate_enter(g, &next), -EINPROGRESS);
  assert_true(sh_gate_cancel(g, &next));
  sh_gate_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_enter_admits_then_queues),
      cmocka_unit_test(test_enter_closed_refuses),
      cmocka_unit_test(test_enter_older_generation_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
