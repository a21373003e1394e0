/*
 * Intrusive MPSC queue after Dmitry Vyukov's design (also ponyc's messageq):
 * a push is one atomic exchange plus one store, wait-free for producers; the
 * consumer walks from the tail. The sentinel node is re-inserted when the last
 * message is taken so the consumer never has to race a producer on the
 * message it is about to hand out.
 *
 * The queue works on links (mailbox.h): a message is found from its link only
 * when it is handed out, and a link's content goes back to a link by the
 * conversion that stored it.
 */
#include "actor/mailbox.h"

#include "base/atomic.h"
#include "base/check.h"
#include "base/model.h"
#include <stddef.h>

#include "plat.h"

static sh_mlink *link_of(sh_msg *m) { return &m->next; }

static sh_msg *msg_of(sh_mlink *l) {
  return (sh_msg *)(void *)((char *)l - offsetof(sh_msg, next));
}

/* The node after l, or NULL. acquire: pairs with the producer's release
 * store of the link, so the node is seen complete. */
static sh_mlink *next_of(sh_mlink *l) {
  SH_DEBUG_ASSERT(l != NULL); /* a node of the queue: the tail, or a message after it */
  sh_mlink *n = (sh_mlink *)(void *)sh_atomic_load(l, memory_order_acquire);
  /* The link is what hands the node over (the sentinel was never handed off). */
  SH_MEM_RECEIVE(n, "a message linked into a mailbox");
  return n;
}

void sh_mailbox_init(sh_mailboxes *mb) {
  /* Three cache lines for the five queues (mailbox.h): the producers', the
   * consumer's, the sentinels' and published takes'. */
  _Static_assert(offsetof(sh_mailboxes, tail) == 64 && offsetof(sh_mailboxes, sentinel) == 128 &&
                     sizeof(sh_mailboxes) == 192,
                 "a mailbox's fields fill three cache lines");
  for (unsigned i = 0; i < SH_MAILBOXES; i++) {
    sh_atomic_init(&mb->sentinel[i], NULL);
    sh_atomic_init(&mb->head[i], &mb->sentinel[i]);
    mb->tail[i] = &mb->sentinel[i];
    sh_atomic_init(&mb->pushed[i], 0);
    mb->taken[i] = 0;
    sh_atomic_init(&mb->taken_seen[i], 0);
    SH_MODEL_NOTE(SH_MODEL_BOX_NEW, &mb->head[i], 0, i);
  }
}

static void link_last(sh_mailboxes *mb, unsigned i, sh_mlink *l) {
  sh_atomic_store(l, NULL, memory_order_relaxed);
  /* acq_rel: release publishes the node's contents (and its NULL link) to
   * whoever links after us; acquire orders our store into the previous link
   * after the previous producer's initialisation of it. */
  sh_mlink *prev = sh_atomic_exchange(&mb->head[i], l, memory_order_acq_rel);
  SH_DEBUG_ASSERT(prev != l); /* a node already last is not pushed again */
  /* The queue's order is the exchanges' (the sentinel, put back by a take,
   * is no message): the model hears of it before the yield below. */
  SH_MODEL_NOTE(SH_MODEL_PUSH, &mb->head[i], l == &mb->sentinel[i] ? NULL : msg_of(l), i);
  SH_YIELD("mailbox.push.link");
  /* release: the consumer's acquire load of the previous link sees the node complete. */
  sh_atomic_store(prev, (sh_msg *)(void *)l, memory_order_release);
  SH_MODEL_NOTE(SH_MODEL_LINK, &mb->head[i], l == &mb->sentinel[i] ? NULL : msg_of(l), i);
}

uint32_t sh_mailbox_push(sh_mailboxes *mb, unsigned i, sh_msg *m) {
  SH_ASSERT(m != NULL && i < SH_MAILBOXES);
  SH_MEM_HANDOFF(link_of(m)); /* written: the link hands it to the consumer */
  link_last(mb, i, link_of(m));
  SH_YIELD("mailbox.push");
  /* seq_cst: the count is what the house's ready check reads (the store-load
   * handshake with the runner, house.c). After the link, so that a counted
   * message is always there to take: counted first, a producer paused
   * between count and link made the runner see work it could not take and
   * spin on the house until the producer ran again. A message taken before
   * it is counted makes the count run behind for a moment (nonempty() reads
   * that as empty; the count then arrives and the house is poked again). */
  uint32_t n = sh_atomic_fetch_add(&mb->pushed[i], 1, memory_order_seq_cst) + 1;
  SH_MODEL_NOTE(SH_MODEL_COUNT, &mb->head[i], 0, i);
  /* relaxed: an estimate; the consumer publishes its takes now and then. It
   * may have published takes of messages pushed after ours: backlog clamps. */
  return sh_mailbox_backlog(n, sh_atomic_load(&mb->taken_seen[i], memory_order_relaxed));
}

static sh_msg *pop(sh_mailboxes *mb, unsigned i, sh_mlink *tail, sh_mlink *next) {
  /* A message, never the sentinel, and the node after it is linked. */
  SH_DEBUG_ASSERT(tail != &mb->sentinel[i] && next != NULL);
  mb->tail[i] = next;
  mb->taken[i]++;
  SH_MODEL_NOTE(SH_MODEL_TAKE, &mb->head[i], msg_of(tail), i);
  return msg_of(tail);
}

sh_msg *sh_mailbox_take(sh_mailboxes *mb, unsigned i) {
  SH_DEBUG_ASSERT(i < SH_MAILBOXES);
  sh_mlink *tail = mb->tail[i];
  sh_mlink *next = next_of(tail);
  if (tail == &mb->sentinel[i]) {
    if (next == NULL) return NULL;
    mb->tail[i] = next;
    tail = next;
    next = next_of(next);
  }
  if (next != NULL) return pop(mb, i, tail, next);
  /* tail is the last linked message. If a producer already swapped head
   * past it but has not linked yet, wait for a later look. */
  if (tail != sh_atomic_load(&mb->head[i], memory_order_acquire)) return NULL;
  link_last(mb, i, &mb->sentinel[i]);
  next = next_of(tail);
  if (next != NULL) return pop(mb, i, tail, next);
  return NULL;
}
