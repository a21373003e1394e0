/*
 * End-to-end test of clusters of processes (<stackhouse/cluster.h> on the
 * production backend), as a user runs one, through the public API only:
 * each node is a fresh exec of this very program, turned into the node
 * before main (its entry and init: cluster_proc_node.h); it reports to
 * the test through sh_node_tell, which the test hears with sh_node_listen
 * and sh_node_hear (cluster_proc_hear.h). Why: a cluster is the thing a
 * service's failover is tested on, so what it promises must hold on real
 * processes as it does in the simulator:
 *   - boots and addresses: nodes listen on 0.0.0.0 and see their DECLARED
 *     address (not loopback); two nodes share a port; a node reaches
 *     another at its declared address and is seen from it; so does a
 *     system of the test's own; in a node 127.0.0.1 is its own address and
 *     another node's cannot be bound;
 *   - a crash is a SIGKILL (no stop hook), a restart boots with what the
 *     node persisted (after its delay), a wiped one with nothing;
 *   - a graceful stop runs the stop hooks, also right after a boot; one
 *     past the launcher's bound (10 s: this case takes that long) is
 *     forced and counted a stop still;
 *   - the errors of the calls;
 *   - a node that aborts or exits with a status of its own is a fault, and
 *     the cluster's end says so (-EIO);
 *   - acts queued at times run then; a calm boots every node that is down;
 *   - what nodes tell is heard in one order of time across nodes, with the
 *     boot it was told in, and a ring that fills says so once;
 *   - a new cluster hears nothing of the last one.
 * Every event heard is checked as it is heard (cluster_proc_hear.h).
 * Expect lines on stderr from the library: the faults it reports.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cluster_proc_hear.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* The report kept at index i (one that was found: i >= 0). */
static const cp_report *ev_at(int i) {
  assert_true(i >= 0 && i < g.n);
  return &g.ev[i].r;
}

static void assert_addr(const sh_netaddr *a, uint32_t ip, uint16_t port) {
  assert_int_equal(a->ip, ip);
  assert_int_equal(a->port, port);
}

/* Node `name`'s boot report, heard at or after index from: boot `boot`,
 * the persisted counter `counter`, its init run; its index. */
static int await_boot(const char *name, int from, uint32_t boot, uint32_t counter) {
  int i = await(name, CP_BOOT, from);
  const cp_report *r = ev_at(i);
  assert_int_equal(r->error, 0);
  assert_int_equal(r->inited, 1);
  assert_int_equal(g.ev[i].boot, boot);
  assert_int_equal(r->counter, counter);
  return i;
}

/* ---- 1. boots and addresses ------------------------------------------------------------------ */

/* Two nodes listen on 0.0.0.0 at the same port: each sees its listener at
 * its declared address; b reaches a at a's declared address, and a sees b
 * at b's; the test's own system reaches each at its declared address (the
 * one that answers says its name). Catches a map that is not applied (a
 * listener at 0.0.0.0 or 127.x, the second bind refused, a connect that
 * finds nobody or the wrong node), a node seen at its loopback address,
 * and a spec's init that does not run in the node. */
static void test_boot_and_addresses(void **state) {
  (void)state;
  log_reset();
  uint16_t port = free_port();
  char args[96];
  snprintf(args, sizeof args, "--port %u", port);
  assert_int_equal(add_node("a", IP_A, args), 0);
  assert_addr(&ev_at(await_boot("a", 0, 1, 1))->local, IP_A, port);
  snprintf(args, sizeof args, "--port %u --connect 10.9.0.1:%u", port, port);
  assert_int_equal(add_node("b", IP_B, args), 0);
  assert_addr(&ev_at(await_boot("b", 0, 1, 1))->local, IP_B, port);
  assert_string_equal(ev_at(find("a", CP_BOOT, 0))->self, "a");
  assert_string_equal(ev_at(find("b", CP_BOOT, 0))->self, "b");
  assert_int_equal(sh_node_up("a"), 1);
  assert_int_equal(sh_node_up("b"), 1);
  /* Node to node. */
  const cp_report *con = ev_at(await("b", CP_CONNECTED, 0));
  assert_int_equal(con->error, 0);
  assert_addr(&con->peer, IP_A, port);
  assert_int_equal(con->local.ip, IP_B);
  int ia = await("a", CP_ACCEPTED, 0);
  const cp_report *acc = ev_at(ia);
  assert_addr(&acc->peer, IP_B, con->local.port);
  assert_addr(&acc->local, IP_A, port);
  const cp_report *greet = ev_at(await("b", CP_GREETED, 0));
  assert_int_equal(greet->error, 0);
  assert_string_equal(greet->text, "a");
  /* From the test's own system. */
  probe_result res;
  probe(&(sh_netaddr){IP_A, port}, &res);
  assert_int_equal(res.error, 0);
  assert_addr(&res.peer, IP_A, port);
  assert_string_equal(res.text, "a");
  probe(&(sh_netaddr){IP_B, port}, &res);
  assert_int_equal(res.error, 0);
  assert_string_equal(res.text, "b");
  acc = ev_at(await("a", CP_ACCEPTED, ia + 1));
  assert_int_equal(acc->peer.ip >> 24, 127); /* the test's process is no node */
  assert_addr(&acc->local, IP_A, port);
  cluster_end(0);
  assert_true(find("a", CP_STOPPED, 0) >= 0);
  assert_true(find("b", CP_STOPPED, 0) >= 0);
}

/* In a node, 127.0.0.1 is the node's own address and another node's
 * address is not its to bind; without a cluster a calm or an end has
 * nothing to do. Catches a node's loopback left the machine's (shared by
 * every node) and a bind to a peer's address let through. */
static void test_node_loopback_and_foreign_bind(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(sh_node_calm(), 0);
  assert_int_equal(sh_node_stop_all(), 0);
  uint16_t port = free_port();
  char args[96];
  snprintf(args, sizeof args, "--listen 127.0.0.1:%u", port);
  assert_int_equal(add_node("a", IP_A, args), 0);
  assert_addr(&ev_at(await_boot("a", 0, 1, 1))->local, IP_A, port);
  snprintf(args, sizeof args, "--listen 10.9.0.1:%u", port);
  assert_int_equal(add_node("b", IP_B, args), 0);
  assert_int_equal(ev_at(await("b", CP_BOOT, 0))->error, -EADDRNOTAVAIL);
  assert_int_equal(sh_node_is_cut("*", "a"), -EINVAL);
  assert_int_equal(sh_node_is_cut("a", "b"), 0);
  cluster_end(0);
}

/* ---- 2. crash and restart -------------------------------------------------------------------- */

/* A crash ends the node without its stop hook and is counted; a restart
 * boots after its delay with the counter it persisted; a wiped restart
 * boots with nothing. Catches a crash that runs the stop hook (a SIGTERM),
 * state lost by a crash or kept by a wipe, a delay not honoured, and
 * counts or lives not kept. */
static void test_crash_and_restart(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, "--port 0"), 0);
  int i = await_boot("a", 0, 1, 1);
  assert_int_equal(sh_node_crash("a"), 0);
  assert_int_equal(sh_node_up("a"), 0);
  sh_node_stats st = stats("a");
  assert_int_equal(st.crashes, 1);
  assert_int_equal(st.boots, 1);
  assert_int_equal(st.stops + st.faults, 0);
  uint64_t began1, ended1;
  assert_int_equal(sh_node_life("a", 1, &began1, &ended1), 0);
  assert_true(began1 != 0 && ended1 >= began1);
  uint64_t before = mono_ns();
  assert_int_equal(sh_node_restart("a", 100, 0), 0);
  assert_int_equal(sh_node_restart("a", 100, 0), -EBUSY); /* its boot is on the way */
  i = await_boot("a", i + 1, 2, 2);
  assert_int_equal(stats("a").boots, 2);
  uint64_t began2;
  assert_int_equal(sh_node_life("a", 2, &began2, NULL), 0);
  assert_true(began2 >= before + 100 * 1000000u);
  assert_int_equal(sh_node_crash("a"), 0);
  assert_int_equal(sh_node_restart("a", 0, SH_NODE_WIPED), 0);
  assert_int_equal(sh_node_up("a"), 1); /* no delay: booted by the call */
  await_boot("a", i + 1, 3, 1);
  st = stats("a");
  assert_int_equal(st.boots, 3);
  assert_int_equal(st.crashes, 2);
  hear_now();
  assert_int_equal(find("a", CP_STOPPED, 0), -1); /* a SIGKILL runs no stop hook */
  cluster_end(0);
  assert_true(find("a", CP_STOPPED, 0) >= 0);
}

/* ---- 3. graceful stops ----------------------------------------------------------------------- */

/* A stop runs the node's stop hooks and is counted; a node stopped at
 * once after its boot (its process still starting) is a stop too, not a
 * fault. Catches a stop that kills, a stop hook that does not run, and a
 * stop early in a node's start counted as a fault. */
static void test_graceful_stop(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, "--port 0"), 0);
  assert_int_equal(add_node("b", IP_B, "--port 0"), 0);
  await_boot("a", 0, 1, 1);
  await_boot("b", 0, 1, 1);
  assert_int_equal(sh_node_stop("b"), 0);
  assert_int_equal(sh_node_up("b"), 0);
  hear_now();
  assert_true(find("b", CP_STOPPED, 0) >= 0);
  assert_int_equal(find("a", CP_STOPPED, 0), -1);
  sh_node_stats st = stats("b");
  assert_int_equal(st.stops, 1);
  assert_int_equal(st.crashes + st.faults, 0);
  uint64_t ended;
  assert_int_equal(sh_node_life("b", 1, NULL, &ended), 0);
  assert_true(ended != 0);
  assert_int_equal(sh_node_life("a", 1, NULL, &ended), 0);
  assert_true(ended == 0);
  assert_int_equal(sh_node_stop("b"), -EALREADY);
  /* Stopped while its process starts. */
  assert_int_equal(add_node("c", IP_C, "--port 0"), 0);
  assert_int_equal(sh_node_stop("c"), 0);
  hear_now();
  assert_true(find("c", CP_STOPPED, 0) >= 0); /* it booted, then stopped gracefully */
  st = stats("c");
  assert_int_equal(st.stops, 1);
  assert_int_equal(st.faults, 0);
  cluster_end(0);
}

/* A node whose stop does not end within the launcher's bound (10 s: its
 * stop hook sleeps) is killed: the stop says -ETIMEDOUT, and it counts as
 * a stop (what was asked), not a crash nor a fault. Catches a stop that
 * waits for ever, and a forced stop counted as a crash. */
static void test_stop_past_its_bound(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, "--port 0 --stall-stop"), 0);
  await_boot("a", 0, 1, 1);
  assert_int_equal(sh_node_stop("a"), -ETIMEDOUT);
  assert_int_equal(sh_node_up("a"), 0);
  hear_now();
  assert_true(find("a", CP_STOPPED, 0) >= 0); /* its hook began */
  sh_node_stats st = stats("a");
  assert_int_equal(st.stops, 1);
  assert_int_equal(st.crashes + st.faults, 0);
  cluster_end(0);
}

/* ---- 4. errors ------------------------------------------------------------------------------- */

static void assert_bad_adds(void) {
  assert_int_equal(add_node("a", IP_B, ""), -EEXIST);
  assert_int_equal(add_node("b", IP_A, ""), -EEXIST);
  assert_int_equal(add_node("Bad!", IP_B, ""), -EINVAL);
  assert_int_equal(add_node("", IP_B, ""), -EINVAL);
  assert_int_equal(add_node("b", SH_IPV4(127, 0, 0, 5), ""), -EINVAL);
  assert_int_equal(add_node("b", 0, ""), -EINVAL);
  sh_node_spec sp = {.name = "b", .ip = IP_B}; /* no entry */
  assert_int_equal(sh_node_add(&sp), -EINVAL);
}

static void assert_unknown(const char *name) {
  sh_node_stats st;
  assert_int_equal(sh_node_crash(name), -ENOENT);
  assert_int_equal(sh_node_stop(name), -ENOENT);
  assert_int_equal(sh_node_restart(name, 0, 0), -ENOENT);
  assert_int_equal(sh_node_up(name), -ENOENT);
  assert_int_equal(sh_node_stats_get(name, &st), -ENOENT);
  assert_int_equal(sh_node_life(name, 1, NULL, NULL), -ENOENT);
  sh_node_act act = {.kind = SH_ACT_CRASH, .node = name};
  assert_int_equal(sh_node_act_at(1000, &act), -ENOENT);
}

/* Each call's errors, as the header promises them. Catches a check
 * missing (a node declared twice, a bad name or address taken), an act on
 * nobody, and node-only calls that act in the test's own process. */
static void test_errors(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, "--port 0"), 0);
  await_boot("a", 0, 1, 1);
  assert_int_equal(sh_node_restart("a", 0, 0), -EBUSY);
  assert_int_equal(sh_node_restart("a", 0, 4), -EINVAL);
  assert_unknown("zz");
  assert_bad_adds();
  assert_int_equal(sh_node_life("a", 0, NULL, NULL), -ENOENT);
  assert_int_equal(sh_node_life("a", 2, NULL, NULL), -ENOENT);
  /* The simulator's only. */
  assert_int_equal(sh_node_cut("a", "main"), -ENOTSUP);
  assert_int_equal(sh_node_heal("a", "main"), -ENOTSUP);
  assert_int_equal(sh_node_drift("a", 10), -ENOTSUP);
  assert_int_equal(sh_node_jump("a", 10), -ENOTSUP);
  assert_int_equal(sh_node_is_cut("a", "main"), 0);
  sh_node_act act = {.kind = SH_ACT_CUT, .node = "a", .peer = "main"};
  assert_int_equal(sh_node_act_now(&act), -ENOTSUP);
  act = (sh_node_act){.kind = SH_ACT_CRASH, .node = "a"};
  assert_int_equal(sh_node_act_at(-1, &act), -EINVAL);
  /* Node code's calls, from the test's own thread. */
  uint32_t v = 1;
  assert_int_equal(sh_node_tell(&v, sizeof v), -ENOTSUP);
  assert_int_equal(sh_node_persist(&v, sizeof v), -ENOTSUP);
  assert_int_equal(sh_node_recall(&v, sizeof v), -ENOTSUP);
  /* Down. */
  assert_int_equal(sh_node_crash("a"), 0);
  assert_int_equal(sh_node_crash("a"), -EALREADY);
  assert_int_equal(sh_node_stop("a"), -EALREADY);
  assert_int_equal(sh_node_restart("a", -1, 0), -EINVAL);
  cluster_end(0);
  /* The counts of a cluster that ended stay readable. */
  sh_node_stats st = stats("a");
  assert_int_equal(st.boots, 1);
  assert_int_equal(st.crashes, 1);
}

/* ---- 5. faults ------------------------------------------------------------------------------- */

/* A node that aborts after its boot, and one that ends its system with 3,
 * each count a fault, and the cluster's end fails (-EIO); one that ends
 * with 0 is no fault. Catches an abort taken for a crash or a stop, a
 * failing status not looked at, and an end that says all went well. */
static void test_faults(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("f", IP_A, "--port 0 --abort"), 0);
  await_boot("f", 0, 1, 1);
  assert_true(wait_up("f", 0));
  sh_node_stats st = stats("f");
  assert_int_equal(st.faults, 1);
  assert_int_equal(st.crashes + st.stops, 0);
  cluster_end(-EIO);
  assert_int_equal(find("f", CP_STOPPED, 0), -1);

  log_reset();
  assert_int_equal(add_node("g", IP_A, "--port 0 --exit 3"), 0);
  await_boot("g", 0, 1, 1);
  assert_true(await("g", CP_STOPPED, 0) >= 0); /* its own end runs its stop hooks */
  assert_true(wait_up("g", 0));
  st = stats("g");
  assert_int_equal(st.faults, 1);
  assert_int_equal(st.crashes + st.stops, 0);
  cluster_end(-EIO);

  log_reset();
  assert_int_equal(add_node("h", IP_A, "--port 0 --exit 0"), 0);
  await_boot("h", 0, 1, 1);
  assert_true(wait_up("h", 0));
  assert_int_equal(stats("h").faults, 0);
  cluster_end(0);
}

/* ---- 6. acts at times, calm ------------------------------------------------------------------ */

/* Acts queued for later (a crash, then a restart) run at their times, not
 * before; a calm drops what is queued and boots every node that is down at
 * once (a pending delayed restart included). Catches acts run at once or
 * never, a calm that leaves nodes down or waits for their delays. */
static void test_acts_at_times(void **state) {
  (void)state;
  log_reset();
  uint64_t t0 = mono_ns(); /* at or before the cluster's start */
  assert_int_equal(add_node("a", IP_A, "--port 0"), 0);
  assert_int_equal(add_node("b", IP_B, "--port 0"), 0);
  int ia = await_boot("a", 0, 1, 1);
  int ib = await_boot("b", 0, 1, 1);
  int64_t now_ms = (int64_t)((mono_ns() - t0) / 1000000u);
  sh_node_act crash = {.kind = SH_ACT_CRASH, .node = "a"};
  sh_node_act restart = {.kind = SH_ACT_RESTART, .node = "a", .value = 0};
  assert_int_equal(sh_node_act_at(now_ms + 200, &crash), 0);
  assert_int_equal(sh_node_act_at(now_ms + 400, &restart), 0);
  for (int waited = 0; stats("a").boots < 2 && waited < WAIT_MS; waited += 5) th_sleep_ms(5);
  sh_node_stats st = stats("a");
  assert_int_equal(st.boots, 2);
  assert_int_equal(st.crashes, 1);
  ia = await_boot("a", ia + 1, 2, 2);
  uint64_t ended1, began2;
  assert_int_equal(sh_node_life("a", 1, NULL, &ended1), 0);
  assert_int_equal(sh_node_life("a", 2, &began2, NULL), 0);
  assert_true(ended1 >= t0 + (uint64_t)(now_ms + 200) * 1000000u);
  assert_true(began2 >= t0 + (uint64_t)(now_ms + 400) * 1000000u);
  /* A calm: a down with a restart 60 s away, b down, a crash queued. */
  assert_int_equal(sh_node_crash("a"), 0);
  assert_int_equal(sh_node_restart("a", 60000, 0), 0);
  assert_int_equal(sh_node_crash("b"), 0);
  assert_int_equal(sh_node_act_at(now_ms + 60000, &crash), 0);
  assert_int_equal(sh_node_calm(), 0);
  assert_int_equal(sh_node_up("a"), 1);
  assert_int_equal(sh_node_up("b"), 1);
  await_boot("a", ia + 1, 3, 3);
  await_boot("b", ib + 1, 2, 2);
  cluster_end(0);
}

/* ---- 7. the order of telling ----------------------------------------------------------------- */

/* Ticks 1..n of node `name`, heard in order, each once. */
static void assert_ticks(const char *name, uint32_t boot, uint32_t n) {
  uint32_t next = 1;
  for (int i = 0; i < g.n; i++) {
    const heard_ev *e = &g.ev[i];
    if (e->r.kind != CP_TICK || strcmp(e->node, name) != 0 || e->boot != boot) continue;
    assert_int_equal(e->r.counter, next);
    next++;
  }
  assert_int_equal(next - 1, n);
}

static void await_tick(const char *name, uint32_t boot, uint32_t n) {
  for (int i = await(name, CP_TICK, 0); i >= 0; i = await(name, CP_TICK, i + 1))
    if (g.ev[i].boot == boot && g.ev[i].r.counter == n) return;
  fail_msg("tick %u of %s's boot %u never heard", n, name, boot);
}

/* Two nodes tell at once, then one again after a restart: everything is
 * heard in one order of its stamps across nodes (the listener checks each
 * against the last), each node's ticks in order, each event with the boot
 * it was told in. Catches per-node queues heard node by node, events
 * lost or doubled, a boot number from the wrong life. */
static void test_order_of_telling(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, "--port 0 --ticks 1500"), 0);
  assert_int_equal(add_node("b", IP_B, "--port 0 --ticks 1500"), 0);
  await_tick("a", 1, 1500);
  await_tick("b", 1, 1500);
  assert_int_equal(sh_node_crash("a"), 0);
  assert_int_equal(sh_node_restart("a", 0, 0), 0);
  await_boot("a", find("a", CP_BOOT, 0) + 1, 2, 2);
  await_tick("a", 2, 1500);
  assert_ticks("a", 1, 1500);
  assert_ticks("a", 2, 1500);
  assert_ticks("b", 1, 1500);
  for (int i = 1; i < g.n; i++) assert_true(g.ev[i].ns >= g.ev[i - 1].ns);
  cluster_end(0);
}

/* A node tells more than the ring holds while nobody hears: the first
 * hearing delivers the ring's worth, in order, and says -ENOBUFS; the
 * next says nothing was lost. Catches a ring that overwrites what was not
 * heard, or a loss never reported. */
static void test_ring_full(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("a", IP_A, "--port 0 --ticks 9000 --exit 0"), 0);
  assert_true(wait_up("a", 0)); /* all told: its end came after */
  assert_int_equal(sh_node_hear(), -ENOBUFS);
  assert_int_equal(g.total, 8192);
  assert_int_equal(g.ev[0].r.kind, CP_BOOT);
  assert_ticks("a", 1, 8191);
  assert_int_equal(sh_node_hear(), 0);
  cluster_end(0);
}

/* ---- 8. clusters one after another ----------------------------------------------------------- */

/* A cluster ends with what its node told unheard; the next cluster's
 * first node has the same slot: nothing the last one told is heard as
 * the new node's (the listener checks the teller's own name). Catches
 * stale events misnamed after the new cluster's nodes. */
static void test_next_cluster_hears_none_of_the_last(void **state) {
  (void)state;
  log_reset();
  assert_int_equal(add_node("x", IP_C, "--port 0 --exit 0"), 0);
  assert_true(wait_up("x", 0));
  assert_int_equal(sh_node_stop_all(), 0);
  assert_int_equal(add_node("a", IP_A, "--port 0"), 0);
  await_boot("a", 0, 1, 1);
  assert_int_equal(find("a", CP_STOPPED, 0), -1);
  cluster_end(0);
  assert_int_equal(g.bad_self, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_boot_and_addresses, teardown),
      cmocka_unit_test_teardown(test_node_loopback_and_foreign_bind, teardown),
      cmocka_unit_test_teardown(test_crash_and_restart, teardown),
      cmocka_unit_test_teardown(test_graceful_stop, teardown),
      cmocka_unit_test_teardown(test_stop_past_its_bound, teardown),
      cmocka_unit_test_teardown(test_errors, teardown),
      cmocka_unit_test_teardown(test_faults, teardown),
      cmocka_unit_test_teardown(test_acts_at_times, teardown),
      cmocka_unit_test_teardown(test_order_of_telling, teardown),
      cmocka_unit_test_teardown(test_ring_full, teardown),
      cmocka_unit_test_teardown(test_next_cluster_hears_none_of_the_last, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
