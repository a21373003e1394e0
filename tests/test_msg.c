/*
 * Unit tests of messages (core/mem/msg.c) on a system that is never started
 * (system_fixture.h): allocation (zeroed, typed, bad types refused),
 * sh_msg_new, and the drop hook called exactly once however a message
 * ends.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "mem/msg.h"
#include "support/manual.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "sched/worker.h"
#include "system_fixture.h"

typedef struct owned { sh_msg hdr; int *counter; } owned;
static void owned_drop(sh_msg *m) { (*((owned *)m)->counter)++; }
SH_MSG_DEFINE_DROP(owned, SH_NOTICE, 0, owned_drop);

/* ---- messages ------------------------------------------------------------ */

static void test_msg_alloc(void **state) {
  (void)state;
  th_act_as(0); /* pooled: a freed message comes back dirty */
  note *n = (note *)sh_msg_alloc(&note_type);
  assert_non_null(n);
  memset(n, 0x5a, sizeof(*n));
  n->hdr.type = &note_type;
  sh_msg_free(&n->hdr);
  note *m = (note *)sh_msg_alloc(&note_type);
  assert_ptr_equal(m, n); /* the same memory again, so zeroing is tested */
  assert_ptr_equal(m->hdr.type, &note_type);
  assert_true(sh_msg_is(&m->hdr, &note_type));
  assert_ptr_equal(sh_msg_type_of(&m->hdr), &note_type);
  note zero;
  memset(&zero, 0, sizeof(zero));
  zero.hdr.type = &note_type;
  assert_memory_equal(m, &zero, sizeof(zero));
  sh_msg_free(&m->hdr);

  assert_null(sh_msg_alloc(NULL));
  const sh_msg_type tiny = {"tiny", sizeof(sh_msg) - 1, SH_NOTICE, 0, NULL, NULL};
  assert_null(sh_msg_alloc(&tiny));
  const sh_msg_type bare = {"bare", sizeof(sh_msg), SH_NOTICE, 0, NULL, NULL};
  sh_msg *b = sh_msg_alloc(&bare);
  assert_non_null(b);
  sh_msg_free(b);
  sh_msg_free(NULL);
  assert_null(sh_msg_fill(NULL, &zero, sizeof(zero)));
}

static void test_msg_new_fills(void **state) {
  (void)state;
  note *n = sh_msg_new(note, .a = -3, .b = 1234567890123L, .c = "stack");
  assert_non_null(n);
  assert_ptr_equal(n->hdr.type, &note_type);
  assert_null(atomic_load(&n->hdr.next));
  assert_null(n->hdr.sender);
  assert_int_equal(n->hdr.id, 0);
  assert_int_equal(n->hdr.error, 0);
  assert_int_equal(n->hdr.internal, 0);
  assert_int_equal(n->a, -3);
  assert_int_equal(n->b, 1234567890123L);
  assert_string_equal(n->c, "stack");
  sh_msg_free(&n->hdr);
}

/* The drop hook runs exactly once however the message ends: freed by its
 * owner, handled, or refused by a stopped actor. */
static void test_msg_drop_once(void **state) {
  (void)state;
  int drops = 0;
  sh_msg_free(&sh_msg_new(owned, .counter = &drops)->hdr);
  assert_int_equal(drops, 1);

  const sh_addr *a, *b;
  assert_int_equal(sh_spawn_on(th_sys, &plain_class, NULL, 0, &a), 0);
  assert_int_equal(sh_spawn_on(th_sys, &plain_class, NULL, 0, &b), 0);
  assert_int_equal(sh_notice(a, &sh_msg_new(owned, .counter = &drops)->hdr), 0);
  th_act_as(0);
  while (sh_loop_drain(th_worker(0))) {
  }
  assert_int_equal(handled, 1);
  assert_int_equal(drops, 2);
  sh_stop(b);
  assert_int_equal(sh_notice(b, &sh_msg_new(owned, .counter = &drops)->hdr), -ESHUTDOWN);
  assert_int_equal(drops, 3);
  /* Not a notice type for sh_notice: refused and freed. */
  const sh_msg_type wrong = {"wrong", sizeof(owned), SH_ASK, 0, owned_drop, NULL};
  owned *w = (owned *)sh_msg_alloc(&wrong);
  w->counter = &drops;
  assert_int_equal(sh_notice(a, &w->hdr), -EINVAL);
  assert_int_equal(drops, 4);
  assert_int_equal(sh_notice(NULL, &sh_msg_new(owned, .counter = &drops)->hdr), -EINVAL);
  assert_int_equal(drops, 5);
  while (sh_loop_drain(th_worker(0))) {
  }
  assert_int_equal(drops, 5);
}

int main(void) {
  alarm(120);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_msg_alloc),
      T(test_msg_new_fills),
      T(test_msg_drop_once),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
