/*
 * Memory of simulated nodes (nodemem.h): a table of the heap blocks each
 * node allocated, so that a power cut can free them all.
 *
 * Why our own: a crashed node runs no code again, not its actors' cleanup,
 * not the runtime's, and yet the process goes on with the next nodes and
 * the next runs, under LeakSanitizer. Everything the node allocated, the
 * user's actor code's mallocs included, must be freed by someone else, and
 * no libc allocator offers "free everything that this part of the program
 * allocated": glibc's arenas are per thread, not per owner, and all the
 * nodes run on one OS thread. So we keep the list ourselves, in front of
 * the allocator the program already has (glibc's, or the sanitizer's).
 *
 * How: the program is linked with GNU ld's --wrap for each allocation
 * call (SIM_WRAP_LDFLAGS in the Makefile). Its calls of malloc reach
 * __wrap_malloc here, which calls __real_malloc, the real one. The
 * __real_ symbols are weak: a program linked without the wraps still
 * links, sees them NULL, and tracks nothing (sh_simnodemem_available).
 * The C library's own internal calls, and other shared libraries', are not
 * wrapped: what they allocate is never tracked (docs/simulator.md).
 *
 * Who tracks: only the simulation thread (the first to set an owner other
 * than 0, until a reset), which runs every node as a fiber. Its owner says
 * whom new blocks are charged to. Other threads never touch the table: their
 * frees pass through without a lookup (they cannot hold node memory), and
 * reading the table from them would be a data race.
 *
 * The table: open addressing with linear probing, keyed by the block's
 * address through a multiplicative hash, a load of at most 1/2 (doubling
 * when it would pass it, halving below 1/8); deletion by backward shift, so
 * no tombstones. Its memory comes from the real allocator, never tracked,
 * and goes back at each reset (the table is empty then).
 *
 * Cost when nothing is tracked (owner 0, table empty): one thread-local
 * read and a branch per call. Tracked calls are O(1) on average.
 */
#include "nodemem.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"

/* The real calls: under --wrap=X the linker binds __real_X to X. Weak, so
 * that they are NULL in a program linked without the wraps. */
extern void *__real_malloc(size_t n) __attribute__((weak));
extern void *__real_calloc(size_t n, size_t sz) __attribute__((weak));
extern void *__real_realloc(void *p, size_t n) __attribute__((weak));
extern void __real_free(void *p) __attribute__((weak));
extern int __real_posix_memalign(void **p, size_t align, size_t n) __attribute__((weak));
extern void *__real_aligned_alloc(size_t align, size_t n) __attribute__((weak));

/* The wraps: the linker binds the program's calls of X to __wrap_X. */
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t sz);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void *__wrap_reallocarray(void *p, size_t n, size_t sz);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t max);

/* An entry's tag: the block's serial (the order of allocation, for a
 * deterministic release) above the owner's bits. */
#define OWNER_BITS 6
#define OWNER_MASK ((1u << OWNER_BITS) - 1)
#define MAX_SERIAL (UINT64_C(1) << (64 - OWNER_BITS))
static_assert(SH_SIMNODEMEM_MAX_OWNERS == 1u << OWNER_BITS, "an owner fits in a tag's low bits");

/* Slots: MIN_CAP at the first tracked block, at most MAX_CAP (two per
 * live block at the bound), always a power of two. */
#define MIN_CAP 64u
#define MAX_CAP (2u * SH_SIMNODEMEM_MAX_LIVE)
#define NONE UINT32_MAX
static_assert(MAX_CAP <= (UINT32_MAX >> 1) + 1, "slot indices and counts fit in 32 bits");

typedef struct entry {
  uintptr_t key; /* the block's address; 0: a free slot */
  uint64_t size; /* the bytes asked for */
  uint64_t tag;  /* serial << OWNER_BITS | owner */
} entry;

/* The table and the counts: read and written by the simulation thread only. */
static struct {
  entry *slot;    /* cap slots, or NULL (cap 0) */
  uint32_t cap;   /* 0, or a power of two in MIN_CAP..MAX_CAP */
  uint32_t shift; /* 64 - log2(cap): the hash keeps the product's top bits */
  uint32_t count; /* live entries, at most cap / 2 */
  uint64_t serial; /* the next tracked block's */
  uint64_t bytes[SH_SIMNODEMEM_MAX_OWNERS];
  uint64_t live[SH_SIMNODEMEM_MAX_OWNERS];
  uint64_t peak[SH_SIMNODEMEM_MAX_OWNERS];
} T;

/* The calling thread's state. initial-exec: a plain load from the thread
 * pointer, even in -fPIC code (the archive goes into executables). */
static __thread struct {
  uint32_t owner; /* whom its allocations are charged to (with the wraps, 0 but on the
                   * simulation thread) */
  bool sim;       /* it is the simulation thread */
  bool active;    /* it is, and the table is not empty: frees look up */
} tl __attribute__((tls_model("initial-exec")));

/* Some thread is the simulation thread (set by it at its first owner,
 * cleared by its reset). While clear, the table is empty. */
static atomic_bool claimed;

bool sh_simnodemem_available(void) { return __real_malloc != NULL; }

/* ------------------------------------------------------------------ raw -- */

/* Without the wraps (the __real_ symbols NULL), X is the C library's. */
void *sh_simraw_malloc(size_t n) { return __real_malloc ? __real_malloc(n) : malloc(n); }
void *sh_simraw_calloc(size_t n, size_t sz) {
  return __real_calloc ? __real_calloc(n, sz) : calloc(n, sz);
}

static void raw_free(void *p) {
  if (__real_free) __real_free(p);
  else free(p);
}

/* ---------------------------------------------------------------- table -- */

static uint32_t home(uintptr_t key) {
  return (uint32_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> T.shift);
}

/* The slot holding key, or NONE. */
static uint32_t find(uintptr_t key) {
  if (T.count == 0 || key == 0) return NONE; /* 0 marks a free slot, and is no block */
  uint32_t mask = T.cap - 1, i = home(key);
  for (uint32_t n = 0;; n++, i = (i + 1) & mask) {
    SH_ASSERT(n < T.cap); /* a load of at most 1/2: a free slot ends every run */
    if (T.slot[i].key == key) return i;
    if (T.slot[i].key == 0) return NONE;
  }
}

/* Puts e in the first free slot from its home (room is the caller's). */
static void place(entry e) {
  uint32_t mask = T.cap - 1, i = home(e.key);
  for (uint32_t n = 0;; n++, i = (i + 1) & mask) {
    SH_ASSERT(n < T.cap); /* as in find */
    if (T.slot[i].key == 0) {
      T.slot[i] = e;
      return;
    }
    /* The same address live twice: the block was freed where the wraps do
     * not reach (inside the C library, or on another thread), and the
     * allocator gave it out again. Releasing the stale entry would free the
     * new block behind its owner's back. */
    SH_ASSERT(T.slot[i].key != e.key);
  }
}

/* Moves every entry to cap slots of new memory; false (and no change)
 * when that memory cannot be had. */
static bool resize(uint32_t cap) {
  SH_ASSERT(cap >= MIN_CAP && cap <= MAX_CAP && (cap & (cap - 1)) == 0);
  SH_ASSERT(T.count <= cap / 2);
  entry *old = T.slot;
  uint32_t oldcap = T.cap;
  entry *s = sh_simraw_calloc(cap, sizeof(*s));
  if (s == NULL) return false;
  T.slot = s;
  T.cap = cap;
  T.shift = 64 - (uint32_t)__builtin_ctz(cap);
  for (uint32_t i = 0; i < oldcap; i++)
    if (old[i].key != 0) place(old[i]);
  raw_free(old);
  return true;
}

/* Empties slot i and closes the gap: each later entry of the run moves
 * back into the hole unless its home lies after the hole (cyclically). */
static void remove_at(uint32_t i) {
  SH_ASSERT(i < T.cap && T.slot[i].key != 0 && T.count > 0);
  uint32_t mask = T.cap - 1, hole = i;
  for (uint32_t n = 1; n < T.cap; n++) { /* a run is shorter than the table */
    uint32_t j = (i + n) & mask;
    if (T.slot[j].key == 0) break;
    uint32_t from_home = (j - home(T.slot[j].key)) & mask;
    if (from_home >= ((j - hole) & mask)) {
      T.slot[hole] = T.slot[j];
      hole = j;
    }
  }
  T.slot[hole] = (entry){0};
  T.count--;
}

static void uncharge(entry e) {
  uint32_t o = (uint32_t)(e.tag & OWNER_MASK);
  SH_ASSERT(T.live[o] > 0 && T.bytes[o] >= e.size);
  T.live[o]--;
  T.bytes[o] -= e.size;
}

/* Below a load of 1/8, halves the table until the load is at least 1/8
 * (or the table MIN_CAP), so at most 1/4: far from the next doubling, no
 * flapping. Without memory for it, the bigger table stays. */
static void maybe_shrink(void) {
  uint32_t cap = T.cap;
  for (int n = 0; n < 32 && cap > MIN_CAP && T.count < cap / 8; n++) cap /= 2; /* 32: cap's bits */
  if (cap != T.cap) (void)resize(cap);
}

/* Charges block p of size bytes to owner; false when the table cannot
 * grow for it (out of memory). */
static bool track(void *p, size_t size, uint32_t owner) {
  SH_ASSERT(tl.sim && owner != 0 && owner < SH_SIMNODEMEM_MAX_OWNERS && p != NULL);
  SH_ASSERT(T.count < SH_SIMNODEMEM_MAX_LIVE && T.serial < MAX_SERIAL);
  if ((T.count + 1) * 2 > T.cap && !resize(T.cap == 0 ? MIN_CAP : T.cap * 2)) return false;
  place((entry){(uintptr_t)p, size, T.serial++ << OWNER_BITS | owner});
  T.count++;
  T.bytes[owner] += size;
  T.live[owner]++;
  if (T.bytes[owner] > T.peak[owner]) T.peak[owner] = T.bytes[owner];
  tl.active = true;
  return true;
}

/* Forgets block p if it is tracked: its entry in *e, true. */
static bool untrack(const void *p, entry *e) {
  uint32_t i = find((uintptr_t)p);
  if (i == NONE) return false;
  *e = T.slot[i];
  remove_at(i);
  uncharge(*e);
  tl.active = T.count != 0;
  return true;
}

/* A block the real allocator just gave while an owner is set: tracked, or,
 * without room in the table, freed again and the call fails. */
static void *kept(void *p, size_t size) {
  if (p == NULL || track(p, size, tl.owner)) return p;
  __real_free(p);
  errno = ENOMEM;
  return NULL;
}

/* ---------------------------------------------------------------- wraps -- */

void *__wrap_malloc(size_t n) {
  void *p = __real_malloc(n);
  if (__builtin_expect(tl.owner == 0, 1)) return p;
  return kept(p, n);
}

/* One real calloc, tracked once: no malloc and memset through the wraps. */
void *__wrap_calloc(size_t n, size_t sz) {
  void *p = __real_calloc(n, sz);
  if (__builtin_expect(tl.owner == 0, 1)) return p;
  return kept(p, n * sz); /* no overflow: calloc succeeded, or p is NULL */
}

void __wrap_free(void *p) {
  entry e;
  if (__builtin_expect(tl.active, 0) && p != NULL && untrack(p, &e)) maybe_shrink();
  __real_free(p);
}

/* A tracked block moves with its owner, whichever owner is set now; an
 * untracked one stays untracked. */
void *__wrap_realloc(void *p, size_t n) {
  if (p == NULL) return __wrap_malloc(n);
  if (__builtin_expect(!tl.active, 1) || find((uintptr_t)p) == NONE) return __real_realloc(p, n);
  void *q = __real_realloc(p, n);
  if (q == NULL && n != 0) return NULL; /* failed: p is as it was, and still tracked */
  entry e;
  bool was = untrack(p, &e); /* p is gone: moved to q, or freed (n == 0) */
  SH_ASSERT(was);
  if (q == NULL) {
    maybe_shrink();
    return NULL;
  }
  /* One entry out, one in: the table needs no room, so this cannot fail. */
  bool in = track(q, n, (uint32_t)(e.tag & OWNER_MASK));
  SH_ASSERT(in);
  return q;
}

void *__wrap_reallocarray(void *p, size_t n, size_t sz) {
  size_t total;
  if (__builtin_mul_overflow(n, sz, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return __wrap_realloc(p, total);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n) {
  int rc = __real_posix_memalign(p, align, n);
  if (__builtin_expect(tl.owner == 0, 1) || rc != 0) return rc;
  *p = kept(*p, n);
  return *p != NULL ? 0 : ENOMEM;
}

void *__wrap_aligned_alloc(size_t align, size_t n) {
  void *p = __real_aligned_alloc(align, n);
  if (__builtin_expect(tl.owner == 0, 1)) return p;
  return kept(p, n);
}

/* Through the tracked malloc: the C library's strdup calls its own. */
char *__wrap_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = __wrap_malloc(n);
  if (p != NULL) memcpy(p, s, n);
  return p;
}

char *__wrap_strndup(const char *s, size_t max) {
  size_t n = strnlen(s, max);
  char *p = __wrap_malloc(n + 1);
  if (p == NULL) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

/* ------------------------------------------------------------------ raw -- */

/* A raw block is never in the table: a tracked one freed here would leave
 * its entry behind, to be freed again at its owner's release. */
void *sh_simraw_realloc(void *p, size_t n) {
  SH_INVARIANT(p == NULL || !tl.active || find((uintptr_t)p) == NONE);
  return __real_realloc ? __real_realloc(p, n) : realloc(p, n);
}

void sh_simraw_free(void *p) {
  SH_INVARIANT(p == NULL || !tl.active || find((uintptr_t)p) == NONE);
  raw_free(p);
}

/* ------------------------------------------------------------- owners -- */

/* The table may be read here: this is the simulation thread, or there is
 * none (and then the table is empty). */
static void check_thread(void) {
  SH_ASSERT(tl.sim || !atomic_load_explicit(&claimed, memory_order_acquire));
}

void sh_simnodemem_set_owner(uint32_t owner) {
  SH_ASSERT(owner < SH_SIMNODEMEM_MAX_OWNERS);
  if (owner != 0 && !tl.sim && sh_simnodemem_available()) {
    /* Another thread is the simulation thread until its reset: two
     * simulations at once, or an owner set off the simulation thread. */
    bool was = false;
    bool mine = atomic_compare_exchange_strong_explicit(&claimed, &was, true,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire);
    SH_ASSERT(mine);
    tl.sim = true;
  }
  tl.owner = owner;
}

uint32_t sh_simnodemem_owner(void) { return tl.owner; }

uint64_t sh_simnodemem_bytes(uint32_t owner) {
  SH_ASSERT(owner < SH_SIMNODEMEM_MAX_OWNERS);
  check_thread();
  return T.bytes[owner];
}

uint64_t sh_simnodemem_count(uint32_t owner) {
  SH_ASSERT(owner < SH_SIMNODEMEM_MAX_OWNERS);
  check_thread();
  return T.live[owner];
}

uint64_t sh_simnodemem_peak(uint32_t owner) {
  SH_ASSERT(owner < SH_SIMNODEMEM_MAX_OWNERS);
  check_thread();
  return T.peak[owner];
}

uint32_t sh_simnodemem_slots(void) {
  check_thread();
  return T.cap;
}

/* Moves owner's entries out of the table into out (room for max), in slot
 * order; returns how many. */
static size_t collect(uint32_t owner, entry *out, size_t max) {
  size_t k = 0, steps = 0;
  for (uint32_t i = 0; i < T.cap;) {
    SH_ASSERT(steps++ <= (size_t)T.cap + max); /* each slot once, again after each removal */
    if (T.slot[i].key == 0 || (T.slot[i].tag & OWNER_MASK) != owner) {
      i++;
      continue;
    }
    SH_ASSERT(k < max);
    out[k++] = T.slot[i];
    uncharge(T.slot[i]);
    /* Look at slot i again: the backward shift may have moved a later
     * entry into it. Only a shift that wraps past the end moves entries
     * into slots before i, and those were all looked at and kept. */
    remove_at(i);
  }
  tl.active = T.count != 0;
  return k;
}

static int by_serial(const void *a, const void *b) {
  uint64_t x = ((const entry *)a)->tag >> OWNER_BITS, y = ((const entry *)b)->tag >> OWNER_BITS;
  return (x > y) - (x < y);
}

size_t sh_simnodemem_release(uint32_t owner, void (*each)(void *ptr, size_t size, void *ctx),
                             void *ctx) {
  SH_ASSERT(owner != 0 && owner < SH_SIMNODEMEM_MAX_OWNERS);
  check_thread();
  size_t n = T.live[owner];
  if (n == 0) return 0;
  entry *got = sh_simraw_malloc(n * sizeof(*got)); /* n < MAX_LIVE: no overflow */
  SH_ASSERT(got != NULL); /* out of memory in the simulator itself: nothing sane is left */
  size_t k = collect(owner, got, n);
  SH_ASSERT(k == n && T.live[owner] == 0 && T.bytes[owner] == 0);
  /* The table is whole again before the first call of each, which may
   * allocate and free. The order of allocation, not of addresses: the same
   * for the same run, whatever the allocator's addresses. */
  qsort(got, n, sizeof(*got), by_serial);
  for (size_t i = 0; i < n; i++) {
    if (each != NULL) each((void *)got[i].key, (size_t)got[i].size, ctx);
    __real_free((void *)got[i].key);
  }
  raw_free(got);
  maybe_shrink();
  return n;
}

void sh_simnodemem_reset(void) {
  check_thread();
  for (uint32_t o = 0; o < SH_SIMNODEMEM_MAX_OWNERS; o++) {
    SH_ASSERT(T.live[o] == 0 && T.bytes[o] == 0); /* release every node first */
    T.peak[o] = 0;
  }
  SH_ASSERT(T.count == 0);
  raw_free(T.slot);
  T.slot = NULL;
  T.cap = 0;
  T.shift = 0;
  T.serial = 0;
  tl.active = false;
  if (tl.sim && tl.owner == 0) { /* the role is free for the next simulation's thread */
    tl.sim = false;
    atomic_store_explicit(&claimed, false, memory_order_release);
  }
}
