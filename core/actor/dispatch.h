/*
 * A house run (dispatch.c): the messages of one scheduling of a house,
 * handed to their handlers in mailbox order, up to its budget.
 */
#ifndef SH_DISPATCH_H
#define SH_DISPATCH_H

#include "actor/house.h"
#include "sched/worker.h"

/* Runs house h on worker w (w may be a thief): handlers for up to
 * max_per_run messages, then requeue or wait. The house is SCHEDULED. */
void sh_dispatch_run(sh_worker *w, sh_house *h);

#endif
