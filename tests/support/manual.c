/*
 * The single-threaded driving of manual.h: acting as a worker, draining and
 * stepping its queues, ending the driven system.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>

#include "sched/housequeue.h"
#include "manual.h"
#include "actor/dispatch.h"
#include "sched/loop.h"
#include "plat.h"

sh_system *th_sys;

sh_worker *th_worker(uint32_t i) { return &th_sys->workers[i]; }

void th_act_as(uint32_t i) { sh_worker_enter(th_worker(i)); }

const sh_addr *th_spawn(const sh_actor_class *c, uint32_t worker) {
  return th_spawn_on(th_sys, c, NULL, worker);
}

void th_drain(uint32_t i) {
  th_act_as(i);
  /* Bounded: a pass that ran nothing ends it. */
  while (sh_loop_drain(th_worker(i))) {
  }
  th_act_as(0);
}

sh_house *th_step(uint32_t i) {
  sh_worker *w = th_worker(i);
  th_act_as(i);
  sh_hq_link *l = sh_hq_pop(&w->io);
  if (l == NULL) l = sh_hq_pop(&w->state);
  sh_house *h = l != NULL ? sh_house_of_link(l) : NULL;
  if (h != NULL) {
    int s = SH_READY;
    assert_true(atomic_compare_exchange_strong(&h->state, &s, SH_SCHEDULED));
    sh_dispatch_run(w, h);
  }
  th_act_as(0);
  return h;
}

void th_mount_all(void) {
  for (uint32_t i = 0; i < th_sys->nworkers; i++) th_drain(i);
}

sh_stats th_stats(void) {
  sh_stats s;
  sh_system_stats(th_sys, &s);
  return s;
}

sh_stats th_sys_end(void) {
  sh_worker_enter(NULL);
  sh_system *sys = th_sys;
  th_sys = NULL; /* th_end frees it: the teardown must not again */
  return th_end(sys);
}

int th_sys_teardown(void **state) {
  (void)state;
  sh_worker_enter(NULL);
  if (th_sys == NULL) return 0;
  sh_system_shutdown(th_sys);
  sh_stats s = th_stats();
  sh_system_free(th_sys);
  th_sys = NULL;
  return s.pool_outstanding == 0 ? 0 : -1;
}
