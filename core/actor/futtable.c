/*
 * The future table: bucket chaining through the entries themselves.
 * Index = id & mask: ids are sequential per actor, so consecutive asks land
 * in consecutive buckets and chains stay short without hashing.
 */
#include "actor/futtable.h"

#include <errno.h>
#include <fiu-local.h>

#include "base/faults.h"
#include <stdlib.h>

#include "base/check.h"

void sh_futtable_init(sh_futtable *d, uint32_t initial) {
  SH_ASSERT(initial >= 1 && (initial & (initial - 1)) == 0);
  d->buckets = NULL;
  d->mask = initial - 1;
  d->count = 0;
  d->initial = initial;
}

int sh_futtable_alloc(sh_futtable *d) {
  SH_ASSERT(d->buckets == NULL);
  sh_fault_return_on("sh/futtable/alloc", -ENOMEM);
  d->buckets = calloc(d->mask + 1, sizeof(*d->buckets));
  return d->buckets != NULL ? 0 : -ENOMEM;
}

void sh_futtable_destroy(sh_futtable *d) {
  SH_ASSERT(d->count == 0);
  free(d->buckets);
  d->buckets = NULL;
}

static void rehash(sh_futtable *d, uint32_t cap) {
  /* A power of two, never below the initial capacity (futtable.h). */
  SH_ASSERT(cap >= d->initial && (cap & (cap - 1)) == 0);
  fiu_do_on("sh/futtable/rehash", return);
  sh_ftnode **nb = calloc(cap, sizeof(*nb));
  /* Out of memory: keep the old table. It still works, with longer chains. */
  if (nb == NULL) return;
  uint32_t moved = 0;
  for (uint32_t i = 0; i <= d->mask; i++) {
    sh_ftnode *f = d->buckets[i];
    while (f != NULL) {
      SH_ASSERT(++moved <= d->count); /* the chains hold the entries counted */
      sh_ftnode *next = f->hnext;
      sh_ftnode **slot = &nb[f->id & (cap - 1)];
      f->hnext = *slot;
      *slot = f;
      f = next;
    }
  }
  SH_ASSERT(moved == d->count);
  free(d->buckets);
  d->buckets = nb;
  d->mask = cap - 1;
}

void sh_futtable_push(sh_futtable *d, sh_ftnode *f) {
  SH_ASSERT(d->buckets != NULL);
  uint32_t cap = d->mask + 1;
  if (d->count + 1 >= cap * SH_FUTTABLE_LOAD && cap < (1u << 30)) rehash(d, cap * 2);
  sh_ftnode **slot = &d->buckets[f->id & d->mask];
  f->hnext = *slot;
  *slot = f;
  d->count++;
}

static void maybe_shrink(sh_futtable *d) {
  uint32_t cap = d->mask + 1;
  SH_DEBUG_ASSERT(cap >= d->initial); /* rehash checks every change of it */
  /* Shrink only when at least 4x the initial size and under a quarter of
   * the grow threshold: the gap keeps a count that hovers around one size
   * from growing and shrinking (and calling malloc) on every ask. */
  if (cap >= d->initial * 4 && d->count * 4 < cap * SH_FUTTABLE_LOAD / 2) rehash(d, cap / 2);
}

static sh_ftnode *unlink_from(sh_futtable *d, sh_ftnode **slot) {
  sh_ftnode *f = *slot;
  *slot = f->hnext;
  f->hnext = NULL;
  SH_ASSERT(d->count > 0);
  d->count--;
  maybe_shrink(d);
  return f;
}

sh_ftnode *sh_futtable_find(const sh_futtable *d, uint64_t id) {
  if (d->count == 0) return NULL; /* also: no buckets yet */
  uint32_t steps = 0;
  for (sh_ftnode *f = d->buckets[id & d->mask]; f != NULL; f = f->hnext) {
    SH_ASSERT(++steps <= d->count); /* a chain holds distinct entries */
    if (f->id == id) return f;
  }
  return NULL;
}

sh_ftnode *sh_futtable_pop(sh_futtable *d, uint64_t id) {
  if (d->count == 0) return NULL; /* also: no buckets yet */
  uint32_t steps = 0;
  for (sh_ftnode **slot = &d->buckets[id & d->mask]; *slot != NULL; slot = &(*slot)->hnext) {
    SH_ASSERT(++steps <= d->count); /* a chain holds distinct entries */
    if ((*slot)->id == id) return unlink_from(d, slot);
  }
  return NULL;
}

sh_ftnode *sh_futtable_pop_any(sh_futtable *d) {
  if (d->count == 0) return NULL;
  /* Bounded by the table: every bucket, every chain once (counted). */
  uint32_t steps = 0;
  for (uint32_t i = 0; i <= d->mask; i++) {
    for (sh_ftnode **slot = &d->buckets[i]; *slot != NULL; slot = &(*slot)->hnext) {
      SH_ASSERT(++steps <= d->count);
      if (!(*slot)->kept) return unlink_from(d, slot);
    }
  }
  return NULL;
}
