/*
 * The probes of <stackhouse/probe.h>: thin public faces of the platform's
 * threads and scheduling points and of a few core figures, so that tests
 * of a program's own actors need no core header.
 */
#include <stackhouse/probe.h>

#include <fiu-local.h>

#include "base/atomic.h"
#include "base/check.h"
#include "base/faults.h"

#include "actor/house.h"
#include "actor/hstore.h"
#include "plat.h"
#include "actor/futtable.h"
#include "sched/system.h"
#include "sched/worker.h"

/* sh_thread is never defined: a handle is the platform's thread itself. */
int sh_thread_start(void (*fn)(void *arg), void *arg, sh_thread **out) {
  SH_FROM_USER();
  sh_fault_return_on("sh/thread/start", -EAGAIN);
  sh_plat_thread *t = NULL;
  int rc = sh_plat_thread_start(fn, arg, &t);
  SH_ASSERT(rc != 0 || t != NULL);
  if (rc == 0) *out = (sh_thread *)t;
  return rc;
}

void sh_thread_join(sh_thread *t) { sh_plat_thread_join((sh_plat_thread *)t); }

/* Production builds compile SH_YIELD to nothing. */
void sh_yield_point(const char *where) {
  SH_FROM_USER();
  (void)where;
  SH_YIELD(where);
}

void sh_yield_cpu(void) { sh_plat_yield_cpu(); }

void sh_actor_probe_get(const sh_actor *self, sh_actor_probe *out) {
  SH_FROM_USER();
  const sh_futtable *d = &self->house->futures;
  out->asks_pending = sh_futtable_count(d);
  out->ask_buckets = sh_futtable_capacity(d);
  SH_ASSERT((out->ask_buckets & (out->ask_buckets - 1)) == 0); /* a power of two */
  out->ask_load = SH_FUTTABLE_LOAD;
}

static void count_busy(sh_house *h, void *arg) {
  /* relaxed: the workers are joined (the caller's contract). */
  int s = sh_atomic_load(&h->state, memory_order_relaxed);
  if (s == SH_READY || s == SH_SCHEDULED || s == SH_RUNNING) (*(uint32_t *)arg)++;
}

uint32_t sh_system_busy(const sh_system *sys) {
  SH_FROM_USER();
  uint32_t n = 0;
  /* Only while no worker runs (probe.h): never from one. */
  SH_ASSERT(sh_worker_current() == NULL);
  sh_hstore_each((sh_system *)sys, count_busy, &n);
  return n;
}

