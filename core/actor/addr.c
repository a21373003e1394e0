/*
 * Addresses (addr.h): picking the house a send goes to, stopping what an
 * address names, and reading its mailboxes' figures.
 */
#include "actor/addr.h"

#include "base/atomic.h"

#include <string.h>

#include "base/check.h"
#include "actor/house.h"
#include "sched/system.h"
#include "sched/worker.h"

uint32_t sh_addr_count(const sh_addr *a) {
  SH_FROM_USER();
  if (a == NULL) return 0;
  return sh_addr_is_token(a) ? 1 : a->n;
}

uint32_t sh_actor_worker(const sh_actor *a) { return a->house->owner; }

sh_house *sh_addr_member(const sh_addr *a, uint32_t i, uint32_t *gen) {
  uintptr_t t = (uintptr_t)a;
  if (!sh_addr_is_token(a)) {
    SH_ASSERT(i < a->n);
    t = a->members[i];
  }
  *gen = sh_token_gen(t);
  return sh_token_house(t);
}

sh_house *sh_addr_pick_group(const sh_addr *a, uint32_t *gen) {
  SH_ASSERT(a->n >= 1);
  if (a->kind == SH_ADDR_PER_WORKER) {
    sh_worker *w = sh_worker_current();
    if (w != NULL && w->sys == sh_token_house(a->members[0])->sys)
      return sh_addr_member(a, w->index, gen);
  }
  sh_addr *m = (sh_addr *)a;
  /* relaxed: round-robin only needs to spread. */
  uint32_t i = (uint32_t)sh_atomic_fetch_add(&m->robin, 1, memory_order_relaxed);
  return sh_addr_member(a, i % a->n, gen);
}

int sh_stop(const sh_addr *a) {
  SH_FROM_USER();
  if (a == NULL) return -EINVAL;
  uint32_t gen;
  sh_system *sys = sh_addr_member(a, 0, &gen)->sys;
  /* From another thread, as a send: shutdown waits for it (send.h); once
   * shutdown began, it stops every actor itself. */
  bool outside = sh_worker_current() == NULL;
  if (outside && !sh_system_outside_begin(sys)) return 0;
  for (uint32_t i = 0; i < sh_addr_count(a); i++) {
    sh_house *h = sh_addr_member(a, i, &gen);
    SH_ASSERT(h->sys == sys); /* a group's instances are of one system */
    sh_house_stop(h, gen);
  }
  if (outside) sh_system_outside_end(sys);
  return 0;
}

int sh_mailbox_stats_get(const sh_addr *a, uint32_t i, sh_msg_kind kind, sh_mailbox_stats *out) {
  SH_FROM_USER();
  if (a == NULL || out == NULL || i >= sh_addr_count(a) || (kind != SH_ASK && kind != SH_NOTICE))
    return -EINVAL;
  uint32_t gen;
  const sh_house *h = sh_addr_member(a, i, &gen);
  /* A stopped actor's figures stay until its house is taken by another
   * spawn (and after shutdown until the system is freed). acquire: as a
   * sender's look at `life`. */
  uint32_t life = sh_atomic_load(&h->life, memory_order_acquire);
  bool vacant = life == (sh_life(gen + 1, true) | SH_LIFE_VACANT);
  if (sh_life_gen(life) != gen && !vacant) return -ESHUTDOWN;
  /* An ordered class has one request mailbox (the ask one), reported for
   * either kind. */
  sh_box box = kind == SH_ASK ? SH_BOX_ASK
                              : (sh_box)sh_atomic_load(&h->notice_box, memory_order_relaxed);
  SH_ASSERT(box == SH_BOX_ASK || box == SH_BOX_NOTICE);
  const sh_mailboxes *mb = &h->mb;
  memset(out, 0, sizeof(*out));
  /* relaxed: figures for a report. Unbounded: the takes as last published
   * by the actor's runner (once a run). */
  out->depth = sh_mailbox_backlog(sh_atomic_load(&mb->pushed[box], memory_order_relaxed),
                                  sh_atomic_load(&mb->taken_seen[box], memory_order_relaxed));
  /* acquire: a reset by a spawn that took the house (spawn.c). */
  out->high_water = sh_atomic_load(&h->high_water[sh_req(box)], memory_order_acquire);
  sh_gate *g = sh_house_gate(h, box);
  if (g != NULL) sh_gate_stats(g, out);
  /* A spawn that took the house meanwhile may have reset what was read;
   * if a figure read was a reset (acquire), its store of `life` before
   * the resets is seen here. */
  if (vacant && sh_atomic_load(&h->life, memory_order_relaxed) != life) return -ESHUTDOWN;
  return 0;
}
