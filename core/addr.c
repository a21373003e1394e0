/*
 * Addresses: picking the house a send goes to, stopping what an address
 * names, and reading its mailboxes' figures.
 */
#include "addr.h"

#include <string.h>

#include "check.h"
#include "house.h"
#include "worker.h"

uint32_t sh_addr_count(const sh_addr *a) { return a != NULL ? a->n : 0; }
uint32_t sh_actor_worker(const sh_actor *a) { return a->house->owner; }

sh_house *sh_addr_pick(const sh_addr *a) {
  SH_ASSERT(a->n >= 1);
  if (a->kind == SH_ADDR_PLAIN) return a->houses[0];
  if (a->kind == SH_ADDR_PER_WORKER) {
    sh_worker *w = sh_worker_current();
    if (w != NULL && w->sys == a->houses[0]->sys) return a->houses[w->index];
  }
  sh_addr *m = (sh_addr *)a;
  /* relaxed: round-robin only needs to spread. */
  uint32_t i = (uint32_t)atomic_fetch_add_explicit(&m->robin, 1, memory_order_relaxed);
  return a->houses[i % a->n];
}

int sh_stop(const sh_addr *a) {
  if (a == NULL) return -EINVAL;
  for (uint32_t i = 0; i < a->n; i++) sh_house_stop(a->houses[i]);
  return 0;
}

int sh_mailbox_stats_get(const sh_addr *a, uint32_t i, sh_msg_kind kind, sh_mailbox_stats *out) {
  if (a == NULL || out == NULL || i >= a->n || (kind != SH_ASK && kind != SH_NOTICE))
    return -EINVAL;
  const sh_house *h = a->houses[i];
  sh_box box = kind == SH_ASK ? SH_BOX_ASK : SH_BOX_NOTICE;
  const sh_mailbox *mb = &h->mb[box];
  memset(out, 0, sizeof(*out));
  /* relaxed: figures for a report. Unbounded: the takes as last published
   * by the actor's runner (once a run). */
  out->depth = sh_mailbox_backlog((uint32_t)atomic_load_explicit(&mb->pushed, memory_order_relaxed),
                                  (uint32_t)atomic_load_explicit(&mb->taken_seen,
                                                                 memory_order_relaxed));
  out->high_water = atomic_load_explicit(&h->high_water[box], memory_order_relaxed);
  if (h->gate[box] != NULL) sh_gate_stats(h->gate[box], out);
  return 0;
}
