/*
 * An intrusive MPSC mailbox (Vyukov's queue with a stub node): any thread
 * puts, only the house's current runner takes. Messages link through their
 * header's `next`, so a put allocates nothing. The runner may also put a
 * message back at the head (a message it took but must hand over later).
 */
#ifndef SH_MAILBOX_H
#define SH_MAILBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

typedef struct sh_mailbox {
  sh_msg *_Atomic head; /* producers' end: the last message put */
  sh_msg *tail;         /* consumer's end */
  sh_msg stub;          /* keeps the queue non-empty for the link protocol */
  atomic_uint_fast32_t size; /* exact after quiescence; read racily for priority */
} sh_mailbox;

void sh_mailbox_init(sh_mailbox *mb);
/* Any thread. Returns the size after the put. */
uint32_t sh_mailbox_put(sh_mailbox *mb, sh_msg *m);
/* Consumer only. NULL when empty, or when a put is half-way (it will be seen
 * by the consumer's next look: a put always ends by making the house ready). */
sh_msg *sh_mailbox_take(sh_mailbox *mb);
/* Consumer only: puts m back so that it is the next message taken. */
void sh_mailbox_put_head(sh_mailbox *mb, sh_msg *m);
/* Any thread: whether a message is (or is about to be) in the mailbox. */
static inline bool sh_mailbox_nonempty(const sh_mailbox *mb) {
  /* seq_cst: part of the producer/consumer store-load handshake on the house
   * state (see house.c): neither side may miss the other's write. */
  return atomic_load_explicit(&mb->size, memory_order_seq_cst) != 0;
}
static inline uint32_t sh_mailbox_size(const sh_mailbox *mb) {
  return (uint32_t)atomic_load_explicit(&mb->size, memory_order_relaxed);
}

#endif
