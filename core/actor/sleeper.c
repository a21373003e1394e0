/*
 * The outside thread's sleep (the handshake is in sleeper.h).
 */
#include "actor/sleeper.h"

#include "base/atomic.h"
#include "base/check.h"

int sh_sleeper_init(sh_sleeper *s) {
  sh_atomic_init(&s->sleeping, 0);
  return sh_plat_event_new(&s->ev) != 0 ? -ENOMEM : 0;
}

void sh_sleeper_destroy(sh_sleeper *s) { sh_plat_event_free(s->ev); }

/* seq_cst: the load half of the waker's side (sleeper.h); loading before
 * the exchange keeps a wake of a thread that is not asleep free of writes. */
void sh_sleeper_wake(sh_sleeper *s) {
  SH_ASSERT(s->ev != NULL);
  if (sh_atomic_load(&s->sleeping, memory_order_seq_cst) == 0) return;
  if (sh_atomic_exchange(&s->sleeping, 0, memory_order_seq_cst) == 0) return;
  sh_plat_event_set(s->ev);
}

int sh_sleeper_sleep(sh_sleeper *s, uint64_t deadline, bool (*ready)(void *ctx), void *ctx) {
  SH_ASSERT(s->ev != NULL && ready != NULL); /* sh_sleeper_init made its event */
  sh_plat_event_reset(s->ev);
  /* seq_cst: the store half of the thread's side (sleeper.h). */
  sh_atomic_store(&s->sleeping, 1, memory_order_seq_cst);
  SH_YIELD("bridge.sleep"); /* a waker may publish here */
  if (ready(ctx)) {
    /* relaxed: nobody was asked to wake us; a waker that already took the
     * flag only sets the event, which the next reset clears. */
    sh_atomic_store(&s->sleeping, 0, memory_order_relaxed);
    /* What is ready may be a message the mailbox cannot hand out yet: a
     * later producer swapped the head but has not linked (mailbox.c). Let
     * it finish. */
    sh_plat_yield_cpu();
    return 0;
  }
  int rc = sh_plat_event_wait_until(s->ev, deadline);
  sh_atomic_store(&s->sleeping, 0, memory_order_relaxed);
  return rc;
}
