/*
 * Intrusive MPSC queue after Dmitry Vyukov's design (also ponyc's messageq):
 * a push is one atomic exchange plus one store, wait-free for producers; the
 * consumer walks from the tail. The sentinel node is re-inserted when the last
 * message is taken so the consumer never has to race a producer on the
 * message it is about to hand out.
 */
#include "mailbox.h"

#include "check.h"
#include <stddef.h>

#include "plat.h"

void sh_mailbox_init(sh_mailbox *mb) {
  atomic_init(&mb->sentinel.next, NULL);
  atomic_init(&mb->head, &mb->sentinel);
  mb->tail = &mb->sentinel;
  atomic_init(&mb->pushed, 0);
  mb->taken = 0;
  atomic_init(&mb->taken_seen, 0);
}

static void link_last(sh_mailbox *mb, sh_msg *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  /* acq_rel: release publishes m's contents (and next = NULL) to whoever
   * links after us; acquire orders our store into prev->next after the
   * previous producer's initialisation of prev. */
  sh_msg *prev = atomic_exchange_explicit(&mb->head, m, memory_order_acq_rel);
  SH_YIELD("mailbox.push.link");
  /* release: the consumer's acquire load of prev->next sees m complete. */
  atomic_store_explicit(&prev->next, m, memory_order_release);
}

uint32_t sh_mailbox_push(sh_mailbox *mb, sh_msg *m) {
  SH_ASSERT(m != NULL && m != &mb->sentinel);
  link_last(mb, m);
  SH_YIELD("mailbox.push");
  /* seq_cst: the count is what the house's ready check reads (the store-load
   * handshake with the runner, house.c). After the link, so that a counted
   * message is always there to take: counted first, a producer paused
   * between count and link made the runner see work it could not take and
   * spin on the house until the producer ran again. A message taken before
   * it is counted makes the count run behind for a moment (nonempty() reads
   * that as empty; the count then arrives and the house is poked again). */
  uint32_t n = (uint32_t)atomic_fetch_add_explicit(&mb->pushed, 1, memory_order_seq_cst) + 1;
  /* relaxed: an estimate; the consumer publishes its takes now and then. It
   * may have published takes of messages pushed after ours: backlog clamps. */
  return sh_mailbox_backlog(n, (uint32_t)atomic_load_explicit(&mb->taken_seen, memory_order_relaxed));
}

static sh_msg *pop(sh_mailbox *mb, sh_msg *tail, sh_msg *next) {
  mb->tail = next;
  mb->taken++;
  return tail;
}

sh_msg *sh_mailbox_take(sh_mailbox *mb) {
  sh_msg *tail = mb->tail;
  /* acquire: pairs with the producer's release store of the link. */
  sh_msg *next = atomic_load_explicit(&tail->next, memory_order_acquire);
  if (tail == &mb->sentinel) {
    if (next == NULL) return NULL;
    mb->tail = next;
    tail = next;
    next = atomic_load_explicit(&next->next, memory_order_acquire);
  }
  if (next != NULL) return pop(mb, tail, next);
  /* tail is the last linked message. If a producer already swapped head
   * past it but has not linked yet, wait for a later look. */
  if (tail != atomic_load_explicit(&mb->head, memory_order_acquire)) return NULL;
  link_last(mb, &mb->sentinel);
  next = atomic_load_explicit(&tail->next, memory_order_acquire);
  if (next != NULL) return pop(mb, tail, next);
  return NULL;
}

void sh_mailbox_push_head(sh_mailbox *mb, sh_msg *m) {
  SH_ASSERT(m != NULL && m != &mb->sentinel);
  /* Only the consumer touches tail, so this is a plain list push. It must
   * work on an empty mailbox too (tail == sentinel): the old design forgot the
   * tail there and lost the message. */
  atomic_store_explicit(&m->next, mb->tail, memory_order_relaxed);
  mb->tail = m;
  mb->taken--;
}
