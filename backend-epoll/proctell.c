/*
 * What node processes tell a checker (<stackhouse/cluster.h>:
 * sh_node_tell, sh_node_listen, sh_node_hear) off the simulator: a ring in
 * the cluster's shared mapping (proc.h). A teller stamps its event with
 * CLOCK_MONOTONIC (one clock for every process of the machine: the true
 * clock of sh_scn_true_ns) under the ring's lock, so the ring's order is
 * the order of the stamps across all nodes; the listener's side drains it
 * in that order on the thread that calls sh_node_hear. A full ring drops
 * the event (counted): a checker that never hears must not stall its
 * nodes.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "base/check.h"
#include "proc.h"

/* The launcher's listener, set and called from its own threads. */
static pthread_mutex_t listen_mu = PTHREAD_MUTEX_INITIALIZER;
static sh_node_listener listener;
static void *listener_ctx;

int sh_node_listen(sh_node_listener fn, void *ctx) {
  pthread_mutex_lock(&listen_mu);
  listener = fn;
  listener_ctx = ctx;
  pthread_mutex_unlock(&listen_mu);
  return 0;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int sh_node_tell(const void *data, size_t len) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  if (m == NULL || sh_proc_self == 0) return -ENOTSUP;
  if (len > SH_NODE_TELL_MAX || (data == NULL && len != 0)) return -EINVAL;
  int rc = 0;
  sh_proc_ring_lock(m);
  if (m->tail - m->head == SH_PROC_EVENTS) {
    m->lost++;
    rc = -ENOBUFS;
  } else {
    sh_proc_ev *e = &m->ev[m->tail % SH_PROC_EVENTS];
    e->node = sh_proc_self;
    e->boot = atomic_load_explicit(&m->node[sh_proc_self].boot, memory_order_relaxed);
    e->len = (uint32_t)len;
    e->true_ns = mono_ns();
    if (len != 0) memcpy(e->data, data, len);
    /* Last, and kept last by the compiler: a teller killed before this
     * store told nothing. */
    atomic_signal_fence(memory_order_release);
    m->tail++;
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

/* One event out of the ring, or false; *lost takes the losses. */
static bool take(sh_proc_shm *m, sh_proc_ev *out, uint64_t *lost) {
  sh_proc_ring_lock(m);
  bool got = m->head != m->tail;
  if (got) *out = m->ev[m->head++ % SH_PROC_EVENTS];
  *lost += m->lost;
  m->lost = 0;
  pthread_mutex_unlock(&m->mu);
  return got;
}

int sh_node_hear(void) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  if (m == NULL || sh_proc_self != 0) return 0;
  uint64_t lost = 0;
  int heard = 0;
  sh_proc_ev e;
  pthread_mutex_lock(&listen_mu);
  /* Bounded: four rings' worth a call, so nodes that keep telling cannot
   * hold the caller for ever. */
  for (int i = 0; i < 4 * SH_PROC_EVENTS && take(m, &e, &lost); i++) {
    if (listener == NULL || e.node == 0 || e.node > SH_NODE_MAX) continue;
    /* Clamped: a node can write anywhere in the mapping. */
    sh_node_heard h = {.node = m->node[e.node].name, .boot = e.boot, .true_ns = e.true_ns,
                       .data = e.data, .len = e.len < SH_NODE_TELL_MAX ? e.len : SH_NODE_TELL_MAX};
    listener(&h, listener_ctx);
    heard++;
  }
  pthread_mutex_unlock(&listen_mu);
  return lost != 0 ? -ENOBUFS : heard;
}
