/*
 * Clusters of processes at their edges (<stackhouse/cluster.h> on the
 * production backend), through the public API, with the node and the
 * listener of test_e2e_cluster_proc.c (cluster_proc_node.h,
 * cluster_proc_hear.h). Each case is a bug a review found:
 *   - a cluster's end while another thread restarts a node: no node may
 *     be up, or left unreaped (a zombie), after sh_node_stop_all;
 *   - the end with the act queue full: still every node stopped;
 *   - two threads ending the cluster at once: both return, one end;
 *   - a program that ignores SIGCHLD (the kernel reaps its children): a
 *     crash and a restart still work, the node is seen down;
 *   - a node's connect to an address beyond loopback is not refused
 *     (-EINVAL) for the node's loopback source;
 *   - an empty persisted state recalls as 0 bytes, not an error;
 *   - sh_node_is_cut from node code knows the cluster's names.
 * Expect lines on stderr from the library. An alarm fails a hang.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "cluster_proc_hear.h"

#define WATCHDOG_S 240

/* No child of this process has ended unreaped. */
static void assert_no_zombie(void) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  int r = waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT);
  assert_true(r < 0 || si.si_pid == 0);
}

/* ---- the end against a restarter -------------------------------------------------------- */

static atomic_int ending;

static void *restarter(void *arg) {
  (void)arg;
  /* Bounded: until the end began and a call said so, or 100000 calls. */
  for (int i = 0; i < 100000; i++) {
    int rc = sh_node_restart("a", 0, 0);
    if (rc == -ENOTSUP && atomic_load(&ending)) break;
    if (rc == 0) (void)sh_node_crash("a");
  }
  return NULL;
}

static void test_end_against_restarts(void **state) {
  (void)state;
  for (int round = 0; round < 20; round++) {
    log_reset();
    assert_int_equal(add_node("a", IP_A, ""), 0);
    atomic_store(&ending, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, restarter, NULL), 0);
    th_sleep_ms(5);
    atomic_store(&ending, 1);
    assert_int_equal(sh_node_stop_all(), 0);
    pthread_join(t, NULL);
    assert_int_equal(sh_node_up("a"), 0);
    assert_no_zombie();
    assert_int_equal(sh_node_listen(NULL, NULL), 0);
  }
}

/* ---- the end with a full queue ------------------------------------------------------------ */

static void test_end_with_full_queue(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, ""), 0);
  sh_node_act act = {.kind = SH_ACT_CRASH, .node = "a"};
  for (int i = 0; i < SH_NODE_MAX_ACTS; i++) assert_int_equal(sh_node_act_at(1000000, &act), 0);
  assert_int_equal(sh_node_act_at(1000000, &act), -ENOSPC);
  assert_int_equal(sh_node_up("a"), 1);
  assert_int_equal(sh_node_calm(), 0); /* drops the queue, a node up stays up */
  for (int i = 0; i < SH_NODE_MAX_ACTS; i++) assert_int_equal(sh_node_act_at(1000000, &act), 0);
  cluster_end(0);
  assert_int_equal(sh_node_up("a"), 0);
  sh_node_stats st;
  assert_int_equal(sh_node_stats_get("a", &st), 0);
  assert_int_equal(st.stops, 1);
  assert_no_zombie();
}

/* ---- two ends at once -------------------------------------------------------------------- */

static atomic_int end_rc[2];

static void *ender(void *arg) {
  int *slot = arg;
  atomic_store(&end_rc[*slot], sh_node_stop_all());
  return NULL;
}

static void test_two_ends_at_once(void **state) {
  (void)state;
  for (int round = 0; round < 10; round++) {
    log_reset();
    assert_int_equal(add_node("a", IP_A, ""), 0);
    assert_int_equal(add_node("b", IP_B, ""), 0);
    pthread_t t[2];
    int ids[2] = {0, 1};
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, ender, &ids[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&end_rc[0]), 0);
    assert_int_equal(atomic_load(&end_rc[1]), 0);
    assert_int_equal(sh_node_up("a"), 0);
    assert_int_equal(sh_node_up("b"), 0);
    assert_no_zombie();
    assert_int_equal(sh_node_listen(NULL, NULL), 0);
  }
}

/* ---- SIGCHLD ignored --------------------------------------------------------------------- */

static void test_sigchld_ignored(void **state) {
  (void)state;
  log_reset();
  struct sigaction ign = {.sa_handler = SIG_IGN}, old;
  assert_int_equal(sigaction(SIGCHLD, &ign, &old), 0);
  assert_int_equal(add_node("a", IP_A, ""), 0);
  await("a", CP_BOOT, 0);
  assert_int_equal(sh_node_crash("a"), 0);
  assert_int_equal(sh_node_up("a"), 0);
  assert_int_equal(sh_node_restart("a", 0, 0), 0);
  int i = await("a", CP_BOOT, 0);
  i = await("a", CP_BOOT, i + 1);
  assert_int_equal(g.ev[i].r.counter, 2);
  assert_int_equal(sh_node_up("a"), 1);
  cluster_end(0);
  assert_int_equal(sh_node_up("a"), 0);
  assert_int_equal(sigaction(SIGCHLD, &old, NULL), 0);
}

/* ---- beyond loopback, an empty state, is_cut from a node ------------------------------- */

static void test_connect_beyond_loopback(void **state) {
  (void)state;
  log_reset();
  /* TEST-NET-1: nobody answers; a timeout or no route, never -EINVAL. */
  assert_int_equal(add_node("a", IP_A, "--connect 192.0.2.1:80 --connect-ms 300"), 0);
  const cp_report *r = &g.ev[await("a", CP_CONNECTED, 0)].r;
  assert_int_not_equal(r->error, -EINVAL);
  assert_int_not_equal(r->error, 0);
  cluster_end(0);
}

static void test_recall_of_empty_state(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, "--persist-empty"), 0);
  int i = await("a", CP_BOOT, 0);
  assert_int_equal(g.ev[i].r.error, 0);
  assert_int_equal(sh_node_crash("a"), 0);
  assert_int_equal(sh_node_restart("a", 0, 0), 0);
  i = await("a", CP_BOOT, i + 1);
  assert_int_equal(g.ev[i].r.error, 0); /* recall said 0 bytes */
  assert_int_equal(g.ev[i].r.counter, 1);
  cluster_end(0);
}

static void test_is_cut_from_a_node(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, "--is-cut"), 0);
  const cp_report *r = &g.ev[await("a", CP_BOOT, 0)].r;
  assert_int_equal(r->error, 0);
  assert_int_equal(r->aux, 0);
  cluster_end(0);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_end_against_restarts, teardown),
      cmocka_unit_test_teardown(test_end_with_full_queue, teardown),
      cmocka_unit_test_teardown(test_two_ends_at_once, teardown),
      cmocka_unit_test_teardown(test_sigchld_ignored, teardown),
      cmocka_unit_test_teardown(test_connect_beyond_loopback, teardown),
      cmocka_unit_test_teardown(test_recall_of_empty_state, teardown),
      cmocka_unit_test_teardown(test_is_cut_from_a_node, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
