/*
 * Message memory and the runtime's own message types. Messages come from
 * the calling worker's pool (mem.h); freeing returns them to their
 * creator's pool.
 */
#ifndef SH_MSG_H
#define SH_MSG_H

#include <stackhouse/stackhouse.h>

struct sh_house;

/* The runtime's own message types (a timer, a tick, a sender's waiter
 * coming back, a channel's readiness, an accepted connection): each
 * carries the function that handles a message of it when its house takes
 * it, so that a run calls it without knowing what it is. The event
 * mailbox holds nothing else; in a notice mailbox such a message is told
 * apart by its type's SH_MSG_RUNTIME. */
typedef struct sh_event_type {
  sh_msg_type msg;                            /* first: what a message's type points to */
  void (*run)(struct sh_house *h, sh_msg *m); /* the house's runner; takes m */
} sh_event_type;

/* A flag only the runtime's own types carry (stackhouse.h leaves it to
 * the runtime): the type is an sh_event_type. */
#define SH_MSG_RUNTIME (1u << 31)

/* House h takes m, a message of the runtime's own type. */
static inline void sh_event_run(struct sh_house *h, sh_msg *m) {
  ((const sh_event_type *)(const void *)m->type)->run(h, m);
}

/* An exception reply: the asker's future fails with hdr.error. */
typedef struct sh_exception {
  sh_msg hdr;
} sh_exception;
extern const sh_msg_type sh_exception_type;

#endif
