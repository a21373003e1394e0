/*
 * How a thread that is not a worker (a bridge's thread) sleeps until
 * something it waits for happens, without missing a wake: an event plus a
 * `sleeping` flag.
 *
 * The handshake. The thread resets its event, stores sleeping = 1
 * (seq_cst) and then looks (seq_cst) for what it waits for. A waker first
 * makes that visible (each a seq_cst store: a mailbox count, a waiter's
 * verdict, a flag) and then reads `sleeping` (seq_cst). One of the two sees
 * the other: the thread does not sleep, or the waker sets the event. The
 * event stays set until the next reset, so a set that lands between the
 * look and the wait is not lost.
 */
#ifndef SH_SLEEPER_H
#define SH_SLEEPER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "plat.h"

typedef struct sh_sleeper {
  sh_plat_event *ev;
  /* A waker takes it from 1 to 0 and sets ev: one wake per sleep. */
  _Alignas(64) atomic_int sleeping;
} sh_sleeper;

/* -ENOMEM when the event cannot be made. */
int sh_sleeper_init(sh_sleeper *s);
void sh_sleeper_destroy(sh_sleeper *s);
/* What the sleeper waits for may have happened: wakes it if it sleeps. Any
 * thread, after publishing the change with a seq_cst store. */
void sh_sleeper_wake(sh_sleeper *s);
/* The sleeper's own thread: sleeps until ready(ctx) may have become true,
 * or the deadline (sh_plat_now_ns clock; SH_PLAT_NO_DEADLINE: none). 0 or
 * -ETIMEDOUT; the caller looks again either way. ready must read what it
 * waits for with seq_cst loads. */
int sh_sleeper_sleep(sh_sleeper *s, uint64_t deadline, bool (*ready)(void *ctx), void *ctx);

#endif
