/*
 * A house run (dispatch.c): the messages of one scheduling of a house,
 * handed to their handlers in mailbox order, up to its budget.
 */
#ifndef SH_DISPATCH_H
#define SH_DISPATCH_H

#include "actor/house.h"
#include "sched/worker.h"

/* Runs house h on worker w (w may be a thief): handlers for up to
 * max_per_run answers, deferred stacks, asks and notices (checked as the
 * walk through them ends), then for as many events as that budget has
 * left, and at least SH_EVENT_SHARE (16); then requeue or wait. A retired
 * house's run refuses or drops up to max_per_run of each mailbox. The
 * house is SCHEDULED. */
void sh_dispatch_run(sh_worker *w, sh_house *h);

#endif
