/*
 * The reference model's hook: what the runtime tells the simulator's model
 * of its promised semantics (backend-sim/model.c, docs/simulator.md "The
 * reference model"), which checks each event as the run goes and fails
 * the run at the first one that breaks a rule.
 *
 * In simulation builds (SH_SIM) SH_MODEL_NOTE calls sh_plat_model_note,
 * which the simulator's backend implements like the rest of the platform
 * seam (plat.h); in every other build it is nothing, and its arguments are
 * not evaluated: production pays nothing.
 *
 * Where a note goes. The simulator switches fibers only at scheduling
 * points (SH_YIELD, and an atomic write with options.atomic_points), so a
 * note made in the same stretch without one as the action's linearization
 * point (an MPSC push's exchange, a CAS that decides) is exact. A note never
 * adds a scheduling point, draws nothing from the simulator's streams and
 * reads no clock: a run's trace hash is the same with the model as without.
 */
#ifndef SH_MODEL_H
#define SH_MODEL_H

#include <stdint.h>

typedef enum sh_model_event {
  /* Mailboxes (actor/mailbox.c). box: a mailbox's key (&mb->head[i]). */
  SH_MODEL_BOX_NEW = 1, /* (box, 0, i): the mailbox begins a life, empty */
  SH_MODEL_PUSH,        /* (box, msg, i): msg enters the queue (the exchange) */
  SH_MODEL_TAKE,        /* (box, msg, i): the consumer takes msg out */
  SH_MODEL_LINK,        /* (box, msg, i): msg is linked behind the one before it */
  SH_MODEL_COUNT,       /* (box, 0, i): a push is counted (what the runner looks at) */
  /* A house's run (actor/dispatch.c). house: &mb->head[0] of its mailboxes. */
  SH_MODEL_RUN,       /* (house, max_per_run, 0): a run begins */
  SH_MODEL_LOOK,      /* (house, end, box): the walk takes from box next (SH_BOX_EVENT:
                       * none), looking at the mailboxes below end (a barrier's) */
  SH_MODEL_STUCK,     /* (box, 0, i): a take found the counted message out of reach */
  SH_MODEL_READY_RAN, /* (house, stacks, 0): deferred stacks ran, counted in the budget */
  SH_MODEL_RUN_END,   /* (house, 0, 0): the run ends */
  /* Generations and sh_stop (actor/spawn.c, house.c, dispatch.c). */
  SH_MODEL_LIVE,   /* (house, gen, 0): generation gen's life begins */
  SH_MODEL_STOP,   /* (house, gen, 0): generation gen is stopped (the CAS) */
  SH_MODEL_DECIDE, /* (house, tag, how): having read the stop flag, a run hands a
                    * request (tag: its generation; SH_MODEL_BATCH: a batch's, at
                    * its hand-over) to its handler (how 0) or refuses it
                    * (SH_MODEL_REFUSED) */
  /* Asks (actor/send.c, bridge.c, house.c, future.c). */
  SH_MODEL_ASK,       /* (asker house, id, 0): an ask is made */
  SH_MODEL_ANSWER,    /* (asker house, id, 0): its reply or exception is sent */
  SH_MODEL_ANSWER_IN, /* (asker house, id, handed): it reached the asker,
                       * handed to its future (1) or dropped as late (0) */
  SH_MODEL_ASK_WITHDRAWN, /* (asker house, id, 0): its message never reached the
                           * target (the send failed, or a gate refused its
                           * waiting sender): no answer will come */
  /* Actor timers (time/timer.c). */
  SH_MODEL_TIMER_START,  /* (house, id, periodic) */
  SH_MODEL_TIMER_CANCEL, /* (house, id, 0): sh_timer_cancel succeeded */
  SH_MODEL_TIMER_CALL,   /* (house, id, 0): the timeout handler is called */
  SH_MODEL_TIMER_GONE,   /* (house, id, actor's): a timer node is freed, its event
                          * handled or never to come (actor's: an actor timer's) */
  /* Every timer node in a wheel (time/timer.c): actor timers, ask and sleep
   * timeouts. node: the sh_timer. */
  SH_MODEL_TIMER_ARM,    /* (node, 0, expiry ns): it enters its worker's wheel */
  SH_MODEL_TIMER_FIRE,   /* (node, 0, 0): the wheel hands it over (due, or cancelled) */
  SH_MODEL_TIMER_DISARM, /* (node, 0, 0): its cancel takes it out of the wheel */
  /* Bounded mailboxes (actor/gate.c). */
  SH_MODEL_GATE_NEW,    /* (gate, 0, cap): a gate is made */
  SH_MODEL_SLOT_TAKE,   /* (gate, 0, cap): a slot is taken (the CAS) */
  SH_MODEL_SLOT_GIVE,   /* (gate, 0, 0): a slot is given back */
  SH_MODEL_WAIT_QUEUE,  /* (gate, waiter, 0): a sender queues */
  SH_MODEL_WAIT_POP,    /* (gate, waiter, 0): the gate pops it (admitted or refused) */
  SH_MODEL_WAIT_CANCEL, /* (gate, waiter, 0): its sender takes it back */
  SH_MODEL_WAIT_ENTER,  /* (gate, 0, 0): a sender counts itself as waiting (sh_gate_enter) */
  SH_MODEL_WAIT_ADMIT,  /* (gate, 0, 0): ...and was admitted at once, waiting no more */
  SH_MODEL_TRY,         /* (gate, 0, 0): a _try begins (it will look at waiters, slots) */
  SH_MODEL_TRY_REFUSED, /* (gate, 0, cap): ...and is refused with -EAGAIN */
  /* A channel's inflight queues (net/inflight.c). q: the queue; seq: an
   * item's place in the order of sh_ifl_add. */
  SH_MODEL_IFL_INIT,    /* (q, max_inflight, head_of_line): the queue begins a life, empty */
  SH_MODEL_IFL_ADD,     /* (q, seq, barrier): an item joins the pending FIFO */
  SH_MODEL_IFL_START,   /* (q, seq, 0): it starts (moves inflight) */
  SH_MODEL_IFL_FINISH,  /* (q, seq, 0): its stack finished, its result held */
  SH_MODEL_IFL_RELEASE, /* (q, seq, 0): its result is released; it leaves */
  SH_MODEL_IFL_MATCH,   /* (q, seq, by_id): a response answers it; it leaves */
  SH_MODEL_IFL_GONE,    /* (q, seq, 0): it leaves otherwise (removed, or the channel closes) */
} sh_model_event;

/* SH_MODEL_DECIDE's tag and how. */
#define SH_MODEL_BATCH UINT64_MAX
#define SH_MODEL_REFUSED 1u

#ifdef SH_SIM
void sh_plat_model_note(sh_model_event e, const volatile void *a, uintptr_t b, uint64_t c);
#define SH_MODEL_NOTE(e, a, b, c) sh_plat_model_note((e), (a), (uintptr_t)(b), (uint64_t)(c))
#else
#define SH_MODEL_NOTE(e, a, b, c) ((void)0)
#endif

#endif
