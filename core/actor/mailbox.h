/*
 * A house's intrusive MPSC mailboxes (Vyukov's queue with a sentinel node):
 * any thread pushes, only the house's current runner takes. Messages link
 * through their header's `next`, so a push allocates nothing.
 *
 * The SH_MAILBOXES queues of a house are kept field by field, not queue by
 * queue: all producers' fields share one cache line, all the consumer's
 * another, the sentinels and the published takes a third. Three lines for
 * five queues instead of three per queue keep an idle house small; the
 * producers of one house (usually its one peer) sharing a line costs little,
 * and taking still writes only the consumer's line.
 */
#ifndef SH_MAILBOX_H
#define SH_MAILBOX_H

#include "base/atomic.h"
#include "base/check.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#define SH_MAILBOXES 5

/* A queue node is named by its link: a message's `next`, or a sentinel. A
 * link holds the next node's link, stored as the sh_msg * the header
 * declares (converted, never dereferenced as a message). So the sentinel
 * needs only its link, not a whole message header. */
typedef sh_msg *_Atomic sh_mlink;

typedef struct sh_mailboxes {
  /* Producers' line: a push exchanges a head and counts. */
  _Alignas(64) sh_mlink *_Atomic head[SH_MAILBOXES]; /* the last node pushed */
  _Atomic uint32_t pushed[SH_MAILBOXES]; /* messages ever pushed (wraps; differences count) */
  /* Consumer's line: taking a message writes only here, so a busy mailbox
   * does not bounce a shared counter between cores per message. */
  _Alignas(64) sh_mlink *tail[SH_MAILBOXES];
  uint32_t taken[SH_MAILBOXES];          /* messages ever taken (wraps) */
  /* Both sides, rarely: producers link a sentinel when its queue ran empty,
   * the consumer re-links it and publishes its takes once per run. */
  _Alignas(64) sh_mlink sentinel[SH_MAILBOXES]; /* keep the queues non-empty for the protocol */
  _Atomic uint32_t taken_seen[SH_MAILBOXES];    /* `taken` as last published for producers */
} sh_mailboxes;

void sh_mailbox_init(sh_mailboxes *mb);
/* Any thread. Pushes m into queue i. Returns an estimate of the size after
 * the push, for priority hints (it counts takes only as of the consumer's
 * last publish). */
uint32_t sh_mailbox_push(sh_mailboxes *mb, unsigned i, sh_msg *m);
/* Consumer only. NULL when empty, or when a push is half-way (it will be seen
 * by the consumer's next look: a push always ends by making the house ready). */
sh_msg *sh_mailbox_take(sh_mailboxes *mb, unsigned i);
/* Consumer only: lets producers' size estimates catch up with the takes. */
static inline void sh_mailbox_publish(sh_mailboxes *mb, unsigned i) {
  /* relaxed: an estimate for the producers' priority hint, nothing more. */
  sh_atomic_store(&mb->taken_seen[i], mb->taken[i], memory_order_relaxed);
}
/* Messages counted and not yet taken, from the two counters. A message is
 * linked before it is counted, so the consumer may have taken it already:
 * the difference is then briefly negative, which means empty. */
static inline uint32_t sh_mailbox_backlog(uint32_t pushed, uint32_t taken) {
  return (int32_t)(pushed - taken) > 0 ? pushed - taken : 0;
}
/* Consumer only: whether a counted message waits in queue i. */
static inline bool sh_mailbox_nonempty(const sh_mailboxes *mb, unsigned i) {
  SH_DEBUG_ASSERT(i < SH_MAILBOXES);
  /* seq_cst: part of the producer/consumer store-load handshake on the house
   * state (see house.c) and on a bridge's sleep (bridge.c): neither side may
   * miss the other's write. */
  return sh_mailbox_backlog(sh_atomic_load(&mb->pushed[i], memory_order_seq_cst),
                            mb->taken[i]) > 0;
}
/* Consumer only: counted messages in queue i. */
static inline uint32_t sh_mailbox_size(const sh_mailboxes *mb, unsigned i) {
  return sh_mailbox_backlog(sh_atomic_load(&mb->pushed[i], memory_order_relaxed),
                            mb->taken[i]);
}

#endif
