/*
 * A hierarchical timer wheel: the pure data structure behind a worker's
 * timers. Owner-only (no locking): the worker that owns a wheel is the only
 * one that adds, removes or advances. O(1) add and remove; advance costs the
 * slots crossed plus the entries that expire or cascade; the next expiry is
 * found without visiting every entry.
 *
 * Time is in nanoseconds on the caller's clock, rounded up to ticks of
 * SH_WHEEL_TICK_NS. An entry never fires before its expiry time.
 */
#ifndef SH_WHEEL_H
#define SH_WHEEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/list.h"

#define SH_WHEEL_TICK_NS 1000000ull /* 1 ms */
#define SH_WHEEL_LEVELS 4
#define SH_WHEEL_SLOTS 64 /* per level: 64^4 ticks ~ 4.6 h, beyond that an overflow list */

typedef struct sh_wheel_link {
  sh_list node;
  uint64_t expire_tick;
} sh_wheel_link;

typedef struct sh_wheel {
  sh_list slots[SH_WHEEL_LEVELS][SH_WHEEL_SLOTS]; /* list heads (sentinels) */
  /* Per level, a bit per slot that may hold entries (every non-empty slot's
   * bit is set; a cancel may leave one set on an empty slot, cleared when
   * its boundary comes): the next event is a count of trailing zeros away,
   * not a scan of slot heads, which an idle worker's every poll pays. */
  uint64_t occupied[SH_WHEEL_LEVELS];
  sh_list overflow;
  sh_list due;          /* expired, waiting for advance to fire them (past adds, `max` leftovers) */
  sh_list fire_mark;    /* closes the batch being fired inside due; linked only during advance */
  uint64_t now_tick;    /* ticks up to this one have been processed */
  uint64_t overflow_min_tick; /* <= every overflow expiry when overflow is non-empty */
  uint64_t count;       /* entries in the wheel */
  uint64_t steps;       /* stats: ticks advance stopped at; empty stretches are skipped */
} sh_wheel;

void sh_wheel_init(sh_wheel *w, uint64_t now_ns);
/* Adds l (unlinked: links start zeroed) to expire at expire_ns, rounded up
 * to a tick. An expiry already past fires at the next advance. */
void sh_wheel_add(sh_wheel *w, sh_wheel_link *l, uint64_t expire_ns);
/* Removes l; l must be in w. */
void sh_wheel_remove(sh_wheel *w, sh_wheel_link *l);
static inline bool sh_wheel_linked(const sh_wheel_link *l) { return sh_list_linked(&l->node); }
/* Advances to now_ns, which never decreases: every entry whose expiry is
 * <= now_ns is unlinked and passed to fire(l, ctx), in expiry order across
 * ticks. fire may add or remove entries (including re-adding l) but must not
 * advance. Returns how many fired. At most `max` fire per call (the rest stay
 * due); max 0 means no limit. */
uint32_t sh_wheel_advance(sh_wheel *w, uint64_t now_ns, uint32_t max,
                          void (*fire)(sh_wheel_link *l, void *ctx), void *ctx);
/* The earliest time (ns) at which some entry is due (its expiry rounded up to
 * a tick), or UINT64_MAX when empty. May be earlier than the true expiry (a
 * cascade point; 0 when something is already due), never later. */
uint64_t sh_wheel_next_ns(const sh_wheel *w);
static inline uint64_t sh_wheel_count(const sh_wheel *w) { return w->count; }

#endif
