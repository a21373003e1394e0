/*
 * What the reference model's rule files share (model.c: mailboxes, runs,
 * asks, timers, generations; modelgate.c: bounded mailboxes; modelifl.c:
 * channels' inflight queues; modeltimer.c: the wheels' timing): the table's
 * look-up that makes an entry, the failure of a rule, and the kinds of key
 * each file owns.
 */
#ifndef SH_SIM_MODELRULES_H
#define SH_SIM_MODELRULES_H

#include <stdint.h>

#include "base/model.h"
#include "modeltab.h"

/* modelgate.c's kinds of key, after model.c's. */
enum {
  SH_SIMMODEL_K_GATE = 6, /* (gate, 0): v slots taken, w first place in the queue,
                           * x next place, y senders entering (waiting, not queued) */
  SH_SIMMODEL_K_WAITER,   /* (waiter, 0): v its gate, w its place */
  SH_SIMMODEL_K_WAITQ,    /* (gate, place): v the waiter */
  SH_SIMMODEL_K_TRY,      /* (fiber + 1, 0): v the stale reads when its last _try began */
  /* modelifl.c's */
  SH_SIMMODEL_K_IFLQ,     /* (queue, 0): v max_inflight, w head_of_line, x inflight,
                           * y barriers inflight; (queue, 1): v the first pending
                           * place to look at, w the oldest inflight's, x next place */
  SH_SIMMODEL_K_IFLI,     /* (queue, seq): v PENDING, INFLIGHT or DONE, w a barrier */
  /* modeltimer.c's */
  SH_SIMMODEL_K_ARMED,    /* (timer node, 0): v its expiry in ns */
};

/* The entry of (kind, a, b), made (zeroed) if there was none. */
sh_simmodel_entry *sh_simmodel_get(uint32_t kind, uintptr_t a, uint64_t b);
/* A rule is broken: fails the run (kind "model") with the detail. */
__attribute__((noreturn, format(printf, 1, 2))) void sh_simmodel_violation(const char *fmt, ...);
/* The bounded mailboxes' events (gate.* rules). */
void sh_simmodel_gate(sh_model_event ev, uintptr_t g, uintptr_t b, uint64_t c);
/* A channel's inflight queues' events (inflight.* rules). */
void sh_simmodel_ifl(sh_model_event ev, uintptr_t q, uintptr_t b, uint64_t c);
/* Timer nodes entering and leaving the wheels (timer.early, timer.armed). */
void sh_simmodel_timer(sh_model_event ev, uintptr_t t, uint64_t c);

#endif
