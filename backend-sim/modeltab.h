/*
 * The reference model's memory (modeltab.c): one open-addressing table of
 * fixed capacity, shared by the model's rules (model.c), each entry keyed
 * by what it is about (kind, a pointer or a number, a number).
 *
 * Bounded: SH_SIMMODELTAB_SLOTS entries, allocated once with the process
 * (static storage); no malloc per event. A run that would hold more than
 * SH_SIMMODELTAB_MAX live entries fails with kind "model", naming the bound,
 * instead of checking less. Reset per simulation in O(1): each entry
 * carries the run it belongs to (its epoch), and an entry of another run is
 * empty. A run uses the first SH_SIMMODELTAB_FIRST slots and doubles that
 * (a rehash, between two notes of the model: sh_simmodeltab_room) when
 * three quarters are live, so the few hundred entries of a typical run sit
 * in the cache instead of scattered over megabytes. The
 * table is walked only to rehash and to forget (keys, not order, decide),
 * and nothing is decided or printed in the order of addresses.
 */
#ifndef SH_SIM_MODELTAB_H
#define SH_SIM_MODELTAB_H

#include <stdbool.h>
#include <stdint.h>

#define SH_SIMMODELTAB_SLOTS (1u << 17)
/* The slots a run starts with (a power of two). */
#define SH_SIMMODELTAB_FIRST (1u << 10)
/* Live entries at most: three quarters of the slots keep probes short. */
#define SH_SIMMODELTAB_MAX (SH_SIMMODELTAB_SLOTS / 4u * 3u)

typedef struct sh_simmodel_entry {
  uint32_t epoch; /* the run it belongs to; another run's is empty */
  uint32_t kind;  /* what the key names (model.c), never 0 */
  uintptr_t a;
  uint64_t b;
  uint64_t v, w, x; /* the rule's values, 0 in a new entry */
  uint32_t y, z;
} sh_simmodel_entry;

/* Entries one model note makes, at most (the headroom a grow keeps). */
#define SH_SIMMODELTAB_NOTE_MAX 16u
/* Before each note, never inside one: a table that must grow grows now,
 * while no entry pointer is held (a grow moves every entry). */
void sh_simmodeltab_room(void);

/* Forgets everything: a new simulation begins. */
void sh_simmodeltab_reset(void);
/* The entry of (kind, a, b), or NULL. */
sh_simmodel_entry *sh_simmodeltab_find(uint32_t kind, uintptr_t a, uint64_t b);
/* The entry of (kind, a, b), made with zero values if it did not exist
 * (*made says which). Fails the run when the table holds its maximum. */
sh_simmodel_entry *sh_simmodeltab_get(uint32_t kind, uintptr_t a, uint64_t b, int *made);
/* Removes e (from find or get): pointers to other entries are stale after it. */
void sh_simmodeltab_del(sh_simmodel_entry *e);
/* Live entries. */
uint32_t sh_simmodeltab_count(void);
/* Deletes every entry whose address, or second key, dead() says is of
 * memory a crash freed. */
void sh_simmodeltab_forget(bool (*dead)(const void *ctx, uintptr_t a), const void *ctx);

#endif
