/*
 * Addresses: what a sender names. One house (plain), one per worker
 * (asks go to the sender's own worker's instance), or K instances behind a
 * round-robin. An address lives as long as its system.
 */
#ifndef SH_ADDR_H
#define SH_ADDR_H

#include <stdatomic.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

struct sh_house;

typedef enum sh_addr_kind {
  SH_ADDR_PLAIN = 0,
  SH_ADDR_PER_WORKER = 1,
  SH_ADDR_ROBIN = 2,
} sh_addr_kind;

struct sh_addr {
  sh_addr_kind kind;
  uint32_t n;
  atomic_uint_fast32_t robin;
  sh_addr *all_next;           /* the system's addresses */
  struct sh_house *houses[];
};

/* The house an address sends to, from the calling worker (or thread). */
struct sh_house *sh_addr_pick(const sh_addr *a);

#endif
