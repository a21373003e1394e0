/*
 * Tests for a channel's inflight queues (core/net/inflight.c): the start rules
 * (at most max_inflight inflight, for 1 and 3; a barrier waits for the
 * inflight items, starts alone and holds back the later ones; a pending
 * head that may not start holds back those behind it), matching responses
 * to futures (oldest first, or by id, an unknown id matching nothing),
 * releasing stacks' results (arrival order with head-of-line ordering,
 * completion order without), removal from either list, closing with
 * pop_any (every item once, pending first), and the misuse checks firing.
 *
 * Items come from zeroed memory, as they do embedded in a channel's
 * records; an item is named by its index in the test's array. What starts
 * or comes out is written as a string of indices ("0 1 2") so that a test
 * states whole sequences.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/inflight.h"
#include "support/child.h"

enum { NITEMS = 8 };

static sh_ifl_queue q;
static sh_ifl_item items[NITEMS];

static void setup_queue(uint32_t max_inflight, bool head_of_line) {
  memset(items, 0, sizeof items);
  sh_ifl_init(&q, max_inflight, head_of_line);
}

static int index_of(const sh_ifl_item *it) { return (int)(it - items); }

/* Adds items first .. last (inclusive) as normal items, in that order. */
static void add_range(int first, int last) {
  for (int i = first; i <= last; i++) sh_ifl_add(&q, &items[i], false);
}

/* Appends item it's index to a space-separated list in buf. */
static void append(char *buf, size_t size, const sh_ifl_item *it) {
  size_t len = strlen(buf);
  snprintf(buf + len, size - len, "%s%d", len ? " " : "", index_of(it));
}

/* Calls `next` until NULL; the indices of what it gave, in order. */
static const char *drain(sh_ifl_item *(*next)(sh_ifl_queue *)) {
  static char buf[128];
  buf[0] = '\0';
  for (sh_ifl_item *it; (it = next(&q)) != NULL;) append(buf, sizeof buf, it);
  return buf;
}

static const char *start_all(void) { return drain(sh_ifl_start); }
static const char *release_all(void) { return drain(sh_ifl_release); }
static const char *pop_all(void) { return drain(sh_ifl_pop_any); }

/* The oldest inflight item answered: it must be item i. */
static void match_fifo(int i) {
  sh_ifl_item *it = sh_ifl_match(&q, false, 0);
  assert_non_null(it);
  assert_int_equal(index_of(it), i);
  assert_int_equal(it->where, SH_IFL_NONE);
}

static void expect_counts(uint32_t npending, uint32_t ninflight) {
  assert_int_equal(q.npending, npending);
  assert_int_equal(q.ninflight, ninflight);
}

/* ----------------------------------------------------- starting --- */

static void test_empty(void **state) {
  (void)state;
  setup_queue(3, false);
  assert_null(sh_ifl_start(&q));
  assert_null(sh_ifl_match(&q, false, 0));
  assert_null(sh_ifl_match(&q, true, 0));
  assert_null(sh_ifl_release(&q));
  assert_null(sh_ifl_pop_any(&q));
  expect_counts(0, 0);
}

static void test_add_numbers_in_order(void **state) {
  (void)state;
  setup_queue(1, false);
  add_range(0, 3);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(items[i].seq, i);
    assert_int_equal(items[i].where, SH_IFL_PENDING);
  }
  expect_counts(4, 0);
}

/* max_inflight 1: one at a time, each starting when the previous one is
 * answered, in the order they were added. */
static void test_max_one(void **state) {
  (void)state;
  setup_queue(1, false);
  add_range(0, 2);
  assert_string_equal(start_all(), "0");
  expect_counts(2, 1);
  assert_int_equal(items[0].where, SH_IFL_INFLIGHT);
  match_fifo(0);
  assert_string_equal(start_all(), "1");
  match_fifo(1);
  assert_string_equal(start_all(), "2");
  match_fifo(2);
  assert_string_equal(start_all(), "");
  expect_counts(0, 0);
}

/* max_inflight 3: three start at once; one more per answer. */
static void test_max_three(void **state) {
  (void)state;
  setup_queue(3, false);
  add_range(0, 4);
  assert_string_equal(start_all(), "0 1 2");
  expect_counts(2, 3);
  match_fifo(0);
  assert_string_equal(start_all(), "3");
  assert_string_equal(start_all(), "");
  match_fifo(1);
  match_fifo(2);
  assert_string_equal(start_all(), "4");
  expect_counts(0, 2);
}

/* A barrier waits for the inflight ones, starts alone, and holds back the
 * later ones while there is room for them (the pending head rule). */
static void test_barrier_waits_and_blocks(void **state) {
  (void)state;
  setup_queue(3, false);
  add_range(0, 1);
  sh_ifl_add(&q, &items[2], true);
  add_range(3, 4);
  assert_string_equal(start_all(), "0 1"); /* room for one more: 3 held back */
  match_fifo(0);
  assert_string_equal(start_all(), "");    /* 1 still inflight */
  match_fifo(1);
  assert_string_equal(start_all(), "2");   /* alone */
  assert_int_equal(q.barriers_inflight, 1);
  expect_counts(2, 1);
  match_fifo(2);
  assert_int_equal(q.barriers_inflight, 0);
  assert_string_equal(start_all(), "3 4");
}

/* A barrier at the head of an idle queue starts at once, alone; barriers in
 * a row each run alone. */
static void test_barriers_in_a_row(void **state) {
  (void)state;
  setup_queue(3, false);
  sh_ifl_add(&q, &items[0], true);
  sh_ifl_add(&q, &items[1], true);
  add_range(2, 3);
  assert_string_equal(start_all(), "0");
  match_fifo(0);
  assert_string_equal(start_all(), "1");
  match_fifo(1);
  assert_string_equal(start_all(), "2 3");
}

/* With max_inflight 1 a barrier is one more item in line. */
static void test_barrier_max_one(void **state) {
  (void)state;
  setup_queue(1, false);
  add_range(0, 0);
  sh_ifl_add(&q, &items[1], true);
  add_range(2, 2);
  assert_string_equal(start_all(), "0");
  match_fifo(0);
  assert_string_equal(start_all(), "1");
  match_fifo(1);
  assert_string_equal(start_all(), "2");
}

/* ----------------------------------------------------- matching --- */

static void test_match_by_id(void **state) {
  (void)state;
  setup_queue(3, false);
  for (int i = 0; i < 4; i++) items[i].id = 10 * (uint64_t)(i + 1);
  add_range(0, 3);
  assert_string_equal(start_all(), "0 1 2");
  assert_null(sh_ifl_match(&q, true, 99)); /* unknown */
  assert_null(sh_ifl_match(&q, true, 40)); /* pending, not inflight */
  expect_counts(1, 3);
  sh_ifl_item *it = sh_ifl_match(&q, true, 20);
  assert_ptr_equal(it, &items[1]);
  assert_int_equal(it->where, SH_IFL_NONE);
  assert_null(sh_ifl_match(&q, true, 20)); /* answered once only */
  assert_ptr_equal(sh_ifl_match(&q, true, 30), &items[2]);
  assert_string_equal(start_all(), "3");
  match_fifo(0); /* the oldest still inflight */
  match_fifo(3);
  assert_null(sh_ifl_match(&q, false, 0));
}

/* --------------------------------------------------- releasing --- */

/* Head-of-line: results finishing 2, 1, 0 come out 0, 1, 2 once 0 is done;
 * finished but unreleased stacks still take their inflight places. */
static void test_release_head_of_line(void **state) {
  (void)state;
  setup_queue(3, true);
  add_range(0, 3);
  assert_string_equal(start_all(), "0 1 2");
  sh_ifl_finish(&q, &items[2]);
  assert_true(items[2].done);
  assert_string_equal(release_all(), "");
  sh_ifl_finish(&q, &items[1]);
  assert_string_equal(release_all(), "");
  assert_string_equal(start_all(), ""); /* 1 and 2 are held, not gone */
  sh_ifl_finish(&q, &items[0]);
  assert_string_equal(release_all(), "0 1 2");
  expect_counts(1, 0);
  assert_string_equal(start_all(), "3");
}

/* Head-of-line with a gap: what finished before the unfinished head waits,
 * what finished after it is released with it. */
static void test_release_head_of_line_partial(void **state) {
  (void)state;
  setup_queue(3, true);
  add_range(0, 2);
  assert_string_equal(start_all(), "0 1 2");
  sh_ifl_finish(&q, &items[0]);
  sh_ifl_finish(&q, &items[2]);
  assert_string_equal(release_all(), "0"); /* 1 not finished: 2 waits */
  sh_ifl_finish(&q, &items[1]);
  assert_string_equal(release_all(), "1 2");
}

/* Without head-of-line: each result as soon as it finished, the oldest
 * finished first when several are ready. */
static void test_release_completion_order(void **state) {
  (void)state;
  setup_queue(3, false);
  add_range(0, 3);
  assert_string_equal(start_all(), "0 1 2");
  sh_ifl_finish(&q, &items[2]);
  assert_string_equal(release_all(), "2");
  assert_string_equal(start_all(), "3");
  sh_ifl_finish(&q, &items[3]);
  sh_ifl_finish(&q, &items[1]);
  assert_string_equal(release_all(), "1 3");
  assert_string_equal(release_all(), "");
  sh_ifl_finish(&q, &items[0]);
  assert_string_equal(release_all(), "0");
  expect_counts(0, 0);
}

/* A barrier among stacks waits for every result to be released. */
static void test_barrier_waits_for_release(void **state) {
  (void)state;
  setup_queue(3, true);
  add_range(0, 1);
  sh_ifl_add(&q, &items[2], true);
  assert_string_equal(start_all(), "0 1");
  sh_ifl_finish(&q, &items[1]);
  assert_string_equal(release_all(), "");
  assert_string_equal(start_all(), "");
  sh_ifl_finish(&q, &items[0]);
  assert_string_equal(release_all(), "0 1");
  assert_string_equal(start_all(), "2");
}

/* ------------------------------------------------------ removing --- */

static void test_remove_pending(void **state) {
  (void)state;
  setup_queue(1, false);
  add_range(0, 3);
  assert_string_equal(start_all(), "0");
  sh_ifl_remove(&q, &items[2]);
  assert_int_equal(items[2].where, SH_IFL_NONE);
  expect_counts(2, 1);
  match_fifo(0);
  assert_string_equal(start_all(), "1");
  match_fifo(1);
  assert_string_equal(start_all(), "3");
}

/* Removing an inflight item frees its place; removing an inflight barrier
 * lets the others start. */
static void test_remove_inflight(void **state) {
  (void)state;
  setup_queue(2, false);
  add_range(0, 1);
  sh_ifl_add(&q, &items[2], true);
  add_range(3, 4);
  assert_string_equal(start_all(), "0 1");
  sh_ifl_remove(&q, &items[1]);
  expect_counts(3, 1);
  assert_string_equal(start_all(), "");
  match_fifo(0);
  assert_string_equal(start_all(), "2");
  sh_ifl_remove(&q, &items[2]);
  assert_int_equal(q.barriers_inflight, 0);
  assert_string_equal(start_all(), "3 4");
}

/* A removed item may be added again, as a new arrival. */
static void test_remove_then_add_again(void **state) {
  (void)state;
  setup_queue(3, false);
  add_range(0, 1);
  sh_ifl_remove(&q, &items[0]);
  sh_ifl_add(&q, &items[0], false);
  assert_int_equal(items[0].seq, 2);
  assert_string_equal(start_all(), "1 0");
}

/* ------------------------------------------------------- closing --- */

static void test_pop_any(void **state) {
  (void)state;
  setup_queue(2, true);
  add_range(0, 4);
  assert_string_equal(start_all(), "0 1");
  sh_ifl_finish(&q, &items[1]);
  assert_string_equal(pop_all(), "2 3 4 0 1");
  expect_counts(0, 0);
  for (int i = 0; i < 5; i++) assert_int_equal(items[i].where, SH_IFL_NONE);
  assert_null(sh_ifl_pop_any(&q));
  assert_null(sh_ifl_start(&q));
}

/* ------------------------------------------------------- misuse --- */

/* A failed check aborts the child, after its message on stderr. */
static void expect_check_fails(void (*body)(const void *arg)) {
  char out[8];
  assert_int_equal(th_in_child(body, NULL, 10, out, sizeof(out)), 128 + SIGABRT);
}

/* A queue of one place with item 0 inflight, items 1 .. last pending. */
static void one_inflight(int last) {
  setup_queue(1, false);
  add_range(0, last);
  sh_ifl_start(&q);
}

static void max_zero_body(const void *arg) {
  (void)arg;
  sh_ifl_init(&q, 0, false);
  _exit(0);
}

static void add_twice_body(const void *arg) {
  (void)arg;
  one_inflight(1);
  sh_ifl_add(&q, &items[1], false);
  _exit(0);
}

static void add_inflight_body(const void *arg) {
  (void)arg;
  one_inflight(0);
  sh_ifl_add(&q, &items[0], false);
  _exit(0);
}

static void finish_pending_body(const void *arg) {
  (void)arg;
  one_inflight(1);
  sh_ifl_finish(&q, &items[1]);
  _exit(0);
}

/* Finishes item 0 once more after `between` (NULL: at once). */
static void finish_again(sh_ifl_item *(*between)(sh_ifl_queue *)) {
  one_inflight(0);
  sh_ifl_finish(&q, &items[0]);
  if (between != NULL) between(&q);
  sh_ifl_finish(&q, &items[0]);
  _exit(0);
}

static void finish_twice_body(const void *arg) {
  (void)arg;
  finish_again(NULL);
}

static void finish_released_body(const void *arg) {
  (void)arg;
  finish_again(sh_ifl_release);
}

static void remove_unqueued_body(const void *arg) {
  (void)arg;
  setup_queue(1, false);
  sh_ifl_remove(&q, &items[0]);
  _exit(0);
}

/* The body that breaks no rule: the checks above fail for their misuse,
 * not for the way the children run. */
static void correct_body(const void *arg) {
  (void)arg;
  one_inflight(0);
  sh_ifl_finish(&q, &items[0]);
  sh_ifl_release(&q);
  sh_ifl_add(&q, &items[0], false);
  sh_ifl_remove(&q, &items[0]);
  _exit(0);
}

static void test_misuse_checks_fire(void **state) {
  (void)state;
  char out[8];
  assert_int_equal(th_in_child(correct_body, NULL, 10, out, sizeof(out)), 0);
  expect_check_fails(max_zero_body);
  expect_check_fails(add_twice_body);
  expect_check_fails(add_inflight_body);
  expect_check_fails(finish_pending_body);
  expect_check_fails(finish_released_body);
  expect_check_fails(finish_twice_body);
  expect_check_fails(remove_unqueued_body);
}

#ifdef SH_DEBUG
/* The test builds also check that an item belongs to the queue it is
 * given to (a walk of that queue's list). */
static void other_queue_body(const void *arg) {
  (void)arg;
  sh_ifl_queue other;
  setup_queue(1, false);
  sh_ifl_init(&other, 1, false);
  sh_ifl_add(&other, &items[0], false);
  sh_ifl_start(&other);
  sh_ifl_finish(&q, &items[0]);
  _exit(0);
}

static void test_wrong_queue_check_fires(void **state) {
  (void)state;
  expect_check_fails(other_queue_body);
}
#else
static void test_wrong_queue_check_fires(void **state) { skip(); (void)state; }
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_add_numbers_in_order),
      cmocka_unit_test(test_max_one),
      cmocka_unit_test(test_max_three),
      cmocka_unit_test(test_barrier_waits_and_blocks),
      cmocka_unit_test(test_barriers_in_a_row),
      cmocka_unit_test(test_barrier_max_one),
      cmocka_unit_test(test_match_by_id),
      cmocka_unit_test(test_release_head_of_line),
      cmocka_unit_test(test_release_head_of_line_partial),
      cmocka_unit_test(test_release_completion_order),
      cmocka_unit_test(test_barrier_waits_for_release),
      cmocka_unit_test(test_remove_pending),
      cmocka_unit_test(test_remove_inflight),
      cmocka_unit_test(test_remove_then_add_again),
      cmocka_unit_test(test_pop_any),
      cmocka_unit_test(test_misuse_checks_fire),
      cmocka_unit_test(test_wrong_queue_check_fires),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
