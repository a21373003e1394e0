/*
 * The reference model's table (modeltab.h): linear probing, deletion by
 * backward shift (no tombstones, so probes stay short however many entries
 * come and go), emptiness by epoch (a reset costs one increment), the
 * slots in use growing by doubling from SH_SIMMODELTAB_FIRST.
 */
#include "modeltab.h"

#include <stdio.h>

#include "base/check.h"
#include "run.h"

static sh_simmodel_entry slots[SH_SIMMODELTAB_SLOTS];
/* Static slots have epoch 0: empty in the first run, which is 1. */
static uint32_t epoch = 1;
static uint32_t live;
/* Slots [0, cap) are the table now; those past it hold nothing of this
 * run (each use of a slot is of this epoch's table). */
static uint32_t cap = SH_SIMMODELTAB_FIRST;
#define MASK (cap - 1u)

_Static_assert((SH_SIMMODELTAB_FIRST & (SH_SIMMODELTAB_FIRST - 1u)) == 0 &&
                   SH_SIMMODELTAB_FIRST <= SH_SIMMODELTAB_SLOTS,
               "the first table is a power of two within the slots");

void sh_simmodeltab_reset(void) {
  /* A wrap would revive entries of a run 2^32 runs ago: start over. */
  if (++epoch == 0) {
    for (uint32_t i = 0; i < SH_SIMMODELTAB_SLOTS; i++) slots[i].epoch = 0;
    epoch = 1;
  }
  live = 0;
  cap = SH_SIMMODELTAB_FIRST;
}

uint32_t sh_simmodeltab_count(void) { return live; }

static uint32_t home(uint32_t kind, uintptr_t a, uint64_t b) {
  uint64_t h = ((uint64_t)a ^ (b * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)kind << 56)) *
               0xBF58476D1CE4E5B9ull;
  return (uint32_t)(h >> 40) & MASK;
}

static int used(const sh_simmodel_entry *e) { return e->epoch == epoch; }

static int same(const sh_simmodel_entry *e, uint32_t kind, uintptr_t a, uint64_t b) {
  return e->kind == kind && e->a == a && e->b == b;
}

/* The slot of (kind, a, b), or the empty slot where it would go. Bounded:
 * the table is never full (SH_SIMMODELTAB_MAX < SH_SIMMODELTAB_SLOTS). */
static sh_simmodel_entry *probe(uint32_t kind, uintptr_t a, uint64_t b) {
  uint32_t i = home(kind, a, b);
  for (uint32_t n = 0; n < cap; n++, i = (i + 1) & MASK) {
    sh_simmodel_entry *e = &slots[i];
    if (!used(e) || same(e, kind, a, b)) return e;
  }
  SH_ASSERT(0 && "the model's table has no empty slot");
  return NULL;
}

sh_simmodel_entry *sh_simmodeltab_find(uint32_t kind, uintptr_t a, uint64_t b) {
  sh_simmodel_entry *e = probe(kind, a, b);
  return used(e) ? e : NULL;
}

/* Doubles the table: its live entries set aside, then put back by their
 * homes in the larger one. The slots it grows into hold only entries of
 * other epochs (a reset shrank it, or it never grew this far): empty. */
static void grow(void) {
  static sh_simmodel_entry aside[SH_SIMMODELTAB_MAX];
  uint32_t n = 0;
  for (uint32_t i = 0; i < cap; i++)
    if (used(&slots[i])) {
      SH_ASSERT(n < SH_SIMMODELTAB_MAX);
      aside[n++] = slots[i];
      slots[i].epoch = 0;
    }
  for (uint32_t i = cap; i < 2 * cap; i++) slots[i].epoch = 0;
  cap *= 2;
  for (uint32_t k = 0; k < n; k++) *probe(aside[k].kind, aside[k].a, aside[k].b) = aside[k];
}

void sh_simmodeltab_room(void) {
  /* Three quarters live, with the headroom of one note: a larger table,
   * while the slots allow. */
  if (live + SH_SIMMODELTAB_NOTE_MAX >= cap / 4u * 3u && cap < SH_SIMMODELTAB_SLOTS) grow();
}

sh_simmodel_entry *sh_simmodeltab_get(uint32_t kind, uintptr_t a, uint64_t b, int *made) {
  SH_ASSERT(kind != 0);
  sh_simmodel_entry *e = probe(kind, a, b);
  *made = !used(e);
  if (!*made) return e;
  if (live >= SH_SIMMODELTAB_MAX) {
    char d[160];
    snprintf(d, sizeof(d), "model.bound: the model's table holds its maximum, %u entries "
             "(SH_SIMMODELTAB_MAX, backend-sim/modeltab.h): the run cannot be checked",
             (unsigned)SH_SIMMODELTAB_MAX);
    sh_simrun_fail("model", d);
  }
  /* sh_simmodeltab_room left room for every entry one note makes. */
  SH_ASSERT(live + 1 < cap);
  *e = (sh_simmodel_entry){.epoch = epoch, .kind = kind, .a = a, .b = b};
  live++;
  return e;
}

/* Whether slot j's entry, whose home is k, may move back to the hole at i:
 * k is not cyclically in (i, j]. */
static int may_fill(uint32_t i, uint32_t j, uint32_t k) {
  return i <= j ? (k <= i || k > j) : (k <= i && k > j);
}

void sh_simmodeltab_del(sh_simmodel_entry *e) {
  SH_ASSERT(e >= slots && e < slots + cap && used(e) && live > 0);
  uint32_t i = (uint32_t)(e - slots), j = i;
  live--;
  /* Bounded: a run of used slots ends, the table is never full. */
  for (uint32_t n = 0; n < cap; n++) {
    j = (j + 1) & MASK;
    if (!used(&slots[j])) break;
    if (may_fill(i, j, home(slots[j].kind, slots[j].a, slots[j].b))) {
      slots[i] = slots[j];
      i = j;
    }
  }
  slots[i].epoch = 0;
}

void sh_simmodeltab_forget(bool (*dead)(const void *ctx, uintptr_t a), const void *ctx) {
  /* The dead entries' keys first, then each deleted by key: a deletion
   * moves entries back, which a walk that deletes as it goes could skip.
   * Bounded by the table (at most SH_SIMMODELTAB_MAX keys). */
  static struct key {
    uint32_t kind;
    uintptr_t a;
    uint64_t b;
  } keys[SH_SIMMODELTAB_MAX];
  uint32_t n = 0;
  for (uint32_t i = 0; i < cap && n < SH_SIMMODELTAB_MAX; i++) {
    const sh_simmodel_entry *e = &slots[i];
    if (used(e) && (dead(ctx, e->a) || dead(ctx, (uintptr_t)e->b)))
      keys[n++] = (struct key){e->kind, e->a, e->b};
  }
  for (uint32_t k = 0; k < n; k++) {
    sh_simmodel_entry *e = sh_simmodeltab_find(keys[k].kind, keys[k].a, keys[k].b);
    if (e != NULL) sh_simmodeltab_del(e);
  }
}
