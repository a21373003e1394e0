/*
 * The future dispatcher: bucket chaining through the promises themselves.
 * Index = id & mask: ids are sequential per actor, so consecutive asks land
 * in consecutive buckets and chains stay short without hashing.
 */
#include "promise.h"

#include <assert.h>
#include <fiu-local.h>
#include <stdlib.h>

int sh_dispatcher_init(sh_dispatcher *d, uint32_t initial) {
  assert(initial >= 1 && (initial & (initial - 1)) == 0);
  d->buckets = calloc(initial, sizeof(*d->buckets));
  if (d->buckets == NULL) return -ENOMEM;
  d->mask = initial - 1;
  d->count = 0;
  d->initial = initial;
  return 0;
}

void sh_dispatcher_destroy(sh_dispatcher *d) {
  assert(d->count == 0);
  free(d->buckets);
  d->buckets = NULL;
}

static void rehash(sh_dispatcher *d, uint32_t cap) {
  fiu_do_on("sh/promise/rehash", return);
  sh_future **nb = calloc(cap, sizeof(*nb));
  /* Out of memory: keep the old table. It still works, with longer chains. */
  if (nb == NULL) return;
  for (uint32_t i = 0; i <= d->mask; i++) {
    sh_future *f = d->buckets[i];
    while (f != NULL) {
      sh_future *next = f->hnext;
      sh_future **slot = &nb[f->id & (cap - 1)];
      f->hnext = *slot;
      *slot = f;
      f = next;
    }
  }
  free(d->buckets);
  d->buckets = nb;
  d->mask = cap - 1;
}

void sh_dispatcher_push(sh_dispatcher *d, sh_future *f) {
  uint32_t cap = d->mask + 1;
  if (d->count + 1 >= cap * SH_DISPATCHER_LOAD && cap < (1u << 30)) rehash(d, cap * 2);
  sh_future **slot = &d->buckets[f->id & d->mask];
  f->hnext = *slot;
  *slot = f;
  d->count++;
}

static void maybe_shrink(sh_dispatcher *d) {
  uint32_t cap = d->mask + 1;
  /* Shrink only when at least 4x the initial size and under a quarter of
   * the grow threshold: the gap keeps a count that hovers around one size
   * from growing and shrinking (and calling malloc) on every ask. */
  if (cap >= d->initial * 4 && d->count * 4 < cap * SH_DISPATCHER_LOAD / 2) rehash(d, cap / 2);
}

static sh_future *unlink_from(sh_dispatcher *d, sh_future **slot) {
  sh_future *f = *slot;
  *slot = f->hnext;
  f->hnext = NULL;
  d->count--;
  maybe_shrink(d);
  return f;
}

sh_future *sh_dispatcher_find(const sh_dispatcher *d, uint64_t id) {
  /* Bounded by count, as in pop. */
  for (sh_future *f = d->buckets[id & d->mask]; f != NULL; f = f->hnext)
    if (f->id == id) return f;
  return NULL;
}

sh_future *sh_dispatcher_pop(sh_dispatcher *d, uint64_t id) {
  /* The chain is bounded by count: every node is a distinct pending promise. */
  for (sh_future **slot = &d->buckets[id & d->mask]; *slot != NULL; slot = &(*slot)->hnext) {
    if ((*slot)->id == id) return unlink_from(d, slot);
  }
  return NULL;
}

sh_future *sh_dispatcher_pop_any(sh_dispatcher *d) {
  if (d->count == 0) return NULL;
  /* Bounded by the table: every bucket, every chain once. */
  for (uint32_t i = 0; i <= d->mask; i++) {
    for (sh_future **slot = &d->buckets[i]; *slot != NULL; slot = &(*slot)->hnext)
      if (!(*slot)->kept) return unlink_from(d, slot);
  }
  return NULL;
}
