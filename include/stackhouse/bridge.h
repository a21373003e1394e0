/*
 * stackhouse: threads that are not workers (a program's own) talk to the
 * actors through a bridge: notices and asks in, blocking while a bounded
 * mailbox is full, and the replies out. Part of the API of
 * <stackhouse/stackhouse.h>, which includes it (either may be included).
 */
#ifndef STACKHOUSE_BRIDGE_H
#define STACKHOUSE_BRIDGE_H

#include <stackhouse/stackhouse.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Outside threads: the bridge                                         */
/* ------------------------------------------------------------------ */

/*
 * A bridge lets a thread that is not a worker (a program's main, a legacy
 * library's callback thread) talk to actors: send notices and asks, block
 * while a bounded mailbox is full, and receive the replies. One thread uses
 * a bridge at a time; make one per thread. Free every bridge before the
 * system is freed. On the simulator the thread is a fiber like the others.
 *
 * The bridge's calls take timeouts by the convention at the top of this
 * file: SH_NOWAIT never blocks (-EAGAIN when it would), SH_FOREVER blocks
 * without limit, a positive value blocks at most that long (-ETIMEDOUT).
 * Its sends follow the one ownership rule: sh_bridge_notice and
 * sh_bridge_ask take the message (freed on an error), the _try forms
 * leave it the caller's on an error.
 */
typedef struct sh_bridge sh_bridge;

/* -EINVAL on a worker (an actor has stacks; every bridge call refuses a
 * worker), -ESHUTDOWN after shutdown. */
SH_API int sh_bridge_new(sh_system *sys, sh_bridge **out);
/* Asks still unanswered are forgotten (their late replies are dropped and
 * counted); replies not received are freed. NULL: no-op. */
SH_API void sh_bridge_free(sh_bridge *b);

/* Sends notice m, blocking up to timeout_ms while the mailbox is full. */
SH_API int sh_bridge_notice(sh_bridge *b, const sh_addr *to, sh_msg *m, int64_t timeout_ms);
/* Sends ask m, blocking up to timeout_ms while the mailbox is full;
 * *ticket (optional) identifies its reply. */
SH_API int sh_bridge_ask(sh_bridge *b, const sh_addr *to, sh_msg *m, int64_t timeout_ms,
                         uint64_t *ticket);
/* The same without blocking; on an error m is still the caller's. */
SH_API int sh_bridge_notice_try(sh_bridge *b, const sh_addr *to, sh_msg *m);
SH_API int sh_bridge_ask_try(sh_bridge *b, const sh_addr *to, sh_msg *m, uint64_t *ticket);

typedef struct sh_bridge_reply {
  uint64_t ticket; /* the ask it answers */
  int error;       /* 0, or the ask's failure (-ESHUTDOWN, what the actor threw) */
  sh_msg *msg;     /* the reply, the caller's to sh_msg_free; NULL on error */
} sh_bridge_reply;

/* Receives the next reply to any of this bridge's asks (blocking,
 * non-blocking, or with a timeout); replies come in the order they arrived, before
 * exception replies that wait with them. The reply's message is the
 * caller's. -EAGAIN (SH_NOWAIT, nothing there yet), -ETIMEDOUT, -ENOMSG (no
 * ask is pending: nothing can come), -ESHUTDOWN (the system shut down and
 * nothing is left). */
SH_API int sh_bridge_recv(sh_bridge *b, int64_t timeout_ms, sh_bridge_reply *out);
/* Asks sent and not yet received. */
SH_API uint32_t sh_bridge_pending(const sh_bridge *b);

#ifdef __cplusplus
}
#endif
#endif
