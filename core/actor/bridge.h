/*
 * The outside-thread bridge: a thread that is not a worker sends notices
 * and asks into the system, blocks while a bounded mailbox is full, and
 * receives replies.
 *
 * A bridge is a house that is never scheduled (state SH_OUTSIDE): asks name
 * it as their sender, so replies and exceptions reach its mailboxes by the
 * same path as an actor's, and a push to it wakes its thread (its sleeper)
 * instead of queueing it. Its thread is the mailboxes' one consumer.
 *
 * Bridges live as long as the system: sh_bridge_free closes one and keeps
 * it for the next sh_bridge_new, so a late reply or a late wake always finds
 * valid memory. A reused bridge drops replies to its earlier user's asks
 * (ids at or below `id_floor`).
 */
#ifndef SH_BRIDGE_H
#define SH_BRIDGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "actor/gate.h"
#include "actor/house.h"
#include "actor/sleeper.h"

struct sh_bridge {
  sh_house house;            /* first: a bridge is reached through its house */
  sh_sleeper sleeper;        /* its thread, asleep in a blocking call */
  sh_waiter w;               /* its one send waiting for room */
  uint32_t pending;          /* asks sent and not yet received */
  uint64_t id_floor;
  bool open;
  struct sh_bridge *all_next;  /* the system's bridges (reg_lock) */
  struct sh_bridge *free_next; /* closed ones, for reuse (reg_lock) */
};

/* The end of sh_system_shutdown: replies that reached closed bridges are
 * counted as dropped, and every bridge thread still waiting is woken. */
void sh_bridge_shutdown(sh_system *sys);
/* sh_system_free: frees every bridge. */
void sh_bridge_destroy_all(sh_system *sys);

#endif
