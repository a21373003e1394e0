/*
 * The per-actor table of pending futures: ask id -> future. A future is its
 * own hash node (an sh_ftnode embedded in it), so tracking an ask allocates
 * nothing besides the pooled future. The table keeps an exact count (it
 * feeds the "no pending future" priority rule), grows at load factor 2 and
 * shrinks when mostly empty. It knows nothing of futures but their node.
 * Its buckets are allocated on the first entry, not before: most actors
 * never ask, and keep no table.
 */
#ifndef SH_FUTTABLE_H
#define SH_FUTTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A table entry, embedded in what the table holds. */
typedef struct sh_ftnode {
  struct sh_ftnode *hnext; /* the bucket's chain */
  uint64_t id;            /* the key: unique among the table's entries */
  bool kept;              /* skipped by sh_futtable_pop_any */
} sh_ftnode;

typedef struct sh_futtable {
  sh_ftnode **buckets; /* NULL until the first sh_futtable_reserve */
  uint32_t mask;      /* buckets - 1, a power of two minus one */
  uint32_t count;     /* entries in the table: exact */
  uint32_t initial;   /* the capacity it starts with and never shrinks below */
} sh_futtable;

#define SH_FUTTABLE_INITIAL 8
#define SH_FUTTABLE_LOAD 2

/* An empty table of capacity `initial` that allocates nothing yet. */
void sh_futtable_init(sh_futtable *d, uint32_t initial);
void sh_futtable_destroy(sh_futtable *d);
int sh_futtable_alloc(sh_futtable *d);
/* Makes sure the buckets exist, before a push (the one step that can fail
 * for want of memory, so that a push never has to); -ENOMEM when out of
 * memory. Inline: on every ask's path. */
static inline int sh_futtable_reserve(sh_futtable *d) {
  return d->buckets != NULL ? 0 : sh_futtable_alloc(d);
}
/* Adds n (keyed by n->id), after a reserve. Growing may fail to allocate:
 * the table then stays as it is (longer chains), never loses n. */
void sh_futtable_push(sh_futtable *d, sh_ftnode *n);
/* The entry for id, left in the table; NULL when unknown. */
sh_ftnode *sh_futtable_find(const sh_futtable *d, uint64_t id);
/* Removes and returns the entry for id; NULL when unknown. */
sh_ftnode *sh_futtable_pop(sh_futtable *d, uint64_t id);
/* Removes and returns some entry not marked `kept`, the lowest bucket
 * first (deterministic: ids are per-actor counters, never addresses). NULL
 * when there is none. */
sh_ftnode *sh_futtable_pop_any(sh_futtable *d);
static inline uint32_t sh_futtable_count(const sh_futtable *d) { return d->count; }
static inline uint32_t sh_futtable_capacity(const sh_futtable *d) { return d->mask + 1; }

#endif
