/*
 * Addresses: what a sender names. An address of one actor is a token, not
 * memory: the house's address and the actor's generation packed into a
 * pointer-sized value (low bit 1), so spawning one actor allocates no
 * address and an old token stays safe forever: its house is memory of the
 * system until sh_system_free, and a generation that moved on refuses the
 * send (house.h, "Generations"). An address of several instances (one per
 * worker, or K behind a round-robin) points at a group (low bit 0) that
 * lives as long as its system, holding its members' tokens.
 *
 * A token's layout (houses are SH_HOUSE_ALIGN-aligned, and user-space
 * addresses below 2^48 on every 64-bit platform we run on):
 *   bit 0       1: a token
 *   bits 1-7    the generation's low 7 bits
 *   bits 8-47   the house's address
 *   bits 48-63  the generation's high 16 bits
 */
#ifndef SH_ADDR_H
#define SH_ADDR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "actor/house.h"
#include "base/check.h"

_Static_assert(sizeof(uintptr_t) == 8, "address tokens need 64-bit pointers");
_Static_assert(SH_GEN_BITS == 7 + 16, "a token carries 23 bits of generation");

#define SH_HOUSE_ALIGN 256u
#define SH_TOKEN_HOUSE_MASK 0x0000ffffffffff00ull

typedef enum sh_addr_kind {
  SH_ADDR_PER_WORKER = 1,
  SH_ADDR_ROBIN = 2,
} sh_addr_kind;

/* A group of instances. */
struct sh_addr {
  sh_addr_kind kind;
  uint32_t n;
  atomic_uint_fast32_t robin;
  sh_addr *all_next;   /* the system's groups (reg_lock) */
  uintptr_t members[]; /* tokens */
};

static inline uintptr_t sh_token(const sh_house *h, uint32_t gen) {
  uintptr_t p = (uintptr_t)h;
  /* What the token's bits hold (the layout above). */
  SH_ASSERT(gen <= SH_GEN_MAX && (p & ~(uintptr_t)SH_TOKEN_HOUSE_MASK) == 0);
  return p | (uintptr_t)(gen & 0x7f) << 1 | (uintptr_t)(gen >> 7) << 48 | 1u;
}
static inline bool sh_addr_is_token(const sh_addr *a) { return ((uintptr_t)a & 1u) != 0; }
static inline sh_house *sh_token_house(uintptr_t t) {
  return (sh_house *)(t & SH_TOKEN_HOUSE_MASK);
}
static inline uint32_t sh_token_gen(uintptr_t t) {
  return (uint32_t)((t >> 1) & 0x7f) | (uint32_t)(t >> 48) << 7;
}

/* Instance i of an address (0 for a token): its house and, in *gen, the
 * generation the address names. i < sh_addr_count(a). */
sh_house *sh_addr_member(const sh_addr *a, uint32_t i, uint32_t *gen);

/* A group's pick (sh_addr_pick). */
sh_house *sh_addr_pick_group(const sh_addr *a, uint32_t *gen);

/* The house a send to a goes to, from the calling worker (or thread), and
 * the generation it names. Inline: a token, the common case, is two masks. */
static inline sh_house *sh_addr_pick(const sh_addr *a, uint32_t *gen) {
  SH_DEBUG_ASSERT(a != NULL); /* every send refuses a NULL address first */
  if (sh_addr_is_token(a)) {
    *gen = sh_token_gen((uintptr_t)a);
    return sh_token_house((uintptr_t)a);
  }
  return sh_addr_pick_group(a, gen);
}

#endif
