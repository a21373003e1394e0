/*
 * An intrusive MPSC mailbox (Vyukov's queue with a sentinel node): any thread
* pushes, only the house's current runner takes. Messages link through their
 * header's `next`, so a push allocates nothing. The runner may also push a
 * message back at the head (a message it took but must hand over later).
 */
#ifndef SH_MAILBOX_H
#define SH_MAILBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

typedef struct sh_mailbox {
  /* Producers' cache line (the consumer writes taken_seen once per run). */
  _Alignas(64) sh_msg *_Atomic head; /* the last message pushed */
  atomic_uint_fast32_t pushed;        /* messages ever pushed (wraps; differences count) */
  atomic_uint_fast32_t taken_seen;   /* `taken` as last published for producers */
  /* Consumer's cache line: taking a message writes only here, so a busy
   * mailbox does not bounce a shared counter between cores per message. */
  _Alignas(64) sh_msg *tail;
  uint32_t taken;                    /* messages ever taken, less those pushed back */
  /* The sentinel is linked by producers when the queue runs empty: a line of its own. */
  _Alignas(64) sh_msg sentinel;          /* keeps the queue non-empty for the link protocol */
} sh_mailbox;

void sh_mailbox_init(sh_mailbox *mb);
/* Any thread. Returns an estimate of the size after the push, for priority
 * hints (it counts takes only as of the consumer's last publish). */
uint32_t sh_mailbox_push(sh_mailbox *mb, sh_msg *m);
/* Consumer only. NULL when empty, or when a push is half-way (it will be seen
 * by the consumer's next look: a push always ends by making the house ready). */
sh_msg *sh_mailbox_take(sh_mailbox *mb);
/* Consumer only: pushes m back so that it is the next message taken. */
void sh_mailbox_push_head(sh_mailbox *mb, sh_msg *m);
/* Consumer only: lets producers' size estimates catch up with the takes. */
static inline void sh_mailbox_publish(sh_mailbox *mb) {
  /* relaxed: an estimate for the producers' priority hint, nothing more. */
  atomic_store_explicit(&mb->taken_seen, mb->taken, memory_order_relaxed);
}
/* Messages counted and not yet taken, from the two counters. A message is
 * linked before it is counted, so the consumer may have taken it already:
 * the difference is then briefly negative, which means empty. */
static inline uint32_t sh_mailbox_backlog(uint32_t pushed, uint32_t taken) {
  return (int32_t)(pushed - taken) > 0 ? pushed - taken : 0;
}
/* Consumer only: whether a counted message waits in the mailbox. */
static inline bool sh_mailbox_nonempty(const sh_mailbox *mb) {
  /* seq_cst: part of the producer/consumer store-load handshake on the house
   * state (see house.c): neither side may miss the other's write. */
  return sh_mailbox_backlog((uint32_t)atomic_load_explicit(&mb->pushed, memory_order_seq_cst),
                            mb->taken) > 0;
}
/* Consumer only: counted messages in the mailbox. */
static inline uint32_t sh_mailbox_size(const sh_mailbox *mb) {
  return sh_mailbox_backlog((uint32_t)atomic_load_explicit(&mb->pushed, memory_order_relaxed),
                            mb->taken);
}

#endif
