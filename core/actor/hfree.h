/*
 * A FIFO of retired houses (hstore.h), linked through the houses: a
 * worker's own, or the system's spare one. A leaf, so that the worker and
 * the system can hold one without knowing what a house is.
 */
#ifndef SH_HFREE_H
#define SH_HFREE_H

#include <stdint.h>

struct sh_house;

typedef struct sh_hfree {
  struct sh_house *head, *tail;
  uint32_t n;
} sh_hfree;

#endif
