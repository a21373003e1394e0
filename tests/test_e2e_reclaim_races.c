/*
 * Reclaimed houses against threads that are not workers, for
 * ThreadSanitizer (the cases check little else: what they look for is a
 * data race between a worker filling a reclaimed house and another thread
 * that reads it).
 *
 *   - stats_while_reused: an outside thread reads the mailbox figures of
 *     reclaimed actors' addresses while a worker spawns new actors into
 *     their houses (sh_mailbox_stats_get reads the class of the house);
 *   - shutdown_while_spawning: an outside thread spawns actors in a loop
 *     while the main thread shuts the system down (the shutdown walks the
 *     store's slabs and the houses while a spawn from outside may still be
 *     taking and filling one).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stackhouse/stackhouse.h>
#include <stdatomic.h>
#include <unistd.h>

#include "support/harness.h"

#define CHURN 2000u /* spawns and stops of the churning actor */
#define STEP 16u

static atomic_uint made;
static atomic_uint stopped_n;
static atomic_int reading;
static const sh_addr *old[CHURN];
static const sh_addr *churner;

typedef struct go { sh_msg hdr; } go;
SH_MSG_DEFINE(go, SH_NOTICE, 0);

static void kick(const sh_addr *to) { assert_int_equal(sh_notice(to, &sh_msg_new(go)->hdr), 0); }

static sh_yield quiet_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static void victim_stop(sh_actor *self) {
  (void)self;
  /* The round's last stop starts the next round (its houses reclaimed). */
  if ((atomic_fetch_add(&stopped_n, 1) + 1) % STEP == 0 && churner != NULL) kick(churner);
}

static const sh_actor_class victim_class = {
    .name = "victim", .size = sizeof(sh_actor), .notice = quiet_notice, .stop = victim_stop,
    .notice_capacity = 4};

static sh_yield churn_notice(sh_actor *self, sh_stack *st) {
  uint32_t base = atomic_load(&made);
  for (uint32_t i = base; i < base + STEP && i < CHURN; i++) {
    const sh_addr *a = NULL;
    if (sh_spawn(sh_actor_system(self), &victim_class, NULL, 1, &a) != 0) break;
    old[i] = a;
    atomic_store(&made, i + 1); /* after old[i]: the reader reads it */
    sh_stop(a);
  }
  if (atomic_load(&made) >= CHURN) th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class churn_class = {
    .name = "churn", .size = sizeof(sh_actor), .notice = churn_notice};

static void *read_figures(void *arg) {
  (void)arg;
  while (atomic_load(&reading)) {
    uint32_t n = atomic_load(&made);
    for (uint32_t j = 0; j < n; j++) {
      sh_mailbox_stats ms;
      (void)sh_mailbox_stats_get(old[j], 0, SH_NOTICE, &ms);
    }
  }
  return NULL;
}

static void test_stats_while_reused(void **state) {
  (void)state;
  atomic_store(&made, 0);
  atomic_store(&stopped_n, 0);
  atomic_store(&reading, 1);
  sh_system *sys = th_env(1, 1);
  churner = th_spawn_on(sys, &churn_class, NULL, 0);
  kick(churner);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, read_figures, NULL), 0);
  th_run(sys);
  atomic_store(&reading, 0);
  pthread_join(t, NULL);
  th_end(sys);
}

static atomic_int spawning;

static void *spawn_loop(void *arg) {
  sh_system *sys = arg;
  while (atomic_load(&spawning)) {
    const sh_addr *a = NULL;
    int rc = sh_spawn(sys, &victim_class, NULL, 1, &a);
    if (rc == -ESHUTDOWN) break;
    assert_int_equal(rc, 0);
  }
  return NULL;
}

static void test_shutdown_while_spawning(void **state) {
  (void)state;
  atomic_store(&spawning, 1);
  sh_system *sys = th_env(2, 1);
  churner = NULL;
  assert_int_equal(sh_system_start(sys), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, spawn_loop, sys), 0);
  th_sleep_ms(20);
  assert_int_equal(sh_system_shutdown(sys), 0);
  atomic_store(&spawning, 0);
  pthread_join(t, NULL);
  sh_system_free(sys);
  th_assert_checks();
}

int main(void) {
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stats_while_reused),
      cmocka_unit_test(test_shutdown_while_spawning),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
