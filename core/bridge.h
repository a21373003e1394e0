/*
 * The outside-thread bridge (seed 004's blocking put and get): a thread that
 * is not a worker sends notices and asks into the system, blocks while a
 * bounded mailbox is full, and receives replies.
 *
 * A bridge is a house that is never scheduled (state SH_OUTSIDE): asks name
 * it as their sender, so replies and exceptions reach its mailboxes by the
 * same path as an actor's, and a put to it wakes its thread instead of
 * queueing it. Its thread is the mailboxes' one consumer.
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

#include "gate.h"
#include "house.h"
#include "plat.h"

struct sh_bridge {
  sh_house house;            /* first: a bridge is reached through its house */
  sh_plat_event *ev;
  /* The thread may be asleep on ev: a waker takes it from 1 to 0 and sets
   * ev (one wake per sleep). */
  _Alignas(64) atomic_int sleeping;
  sh_waiter w;               /* its one send waiting for room */
  uint32_t pending;          /* asks sent and not yet received */
  uint64_t id_floor;
  bool open;
  struct sh_bridge *all_next;  /* the system's bridges (reg_lock) */
  struct sh_bridge *free_next; /* closed ones, for reuse (reg_lock) */
};

/* Something the bridge's thread waits for happened (a reply arrived, its
 * waiter was popped, the system shut down): wakes it if it sleeps. Any thread. */
void sh_bridge_wake(sh_bridge *b);
/* The end of sh_system_shutdown: replies that reached closed bridges are
 * counted as dropped, and every bridge thread still waiting is woken. */
void sh_bridge_shutdown(sh_system *sys);
/* sh_system_free: frees every bridge. */
void sh_bridge_destroy_all(sh_system *sys);

#endif
