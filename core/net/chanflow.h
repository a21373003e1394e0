/*
 * The inflight system of a channel (chanflow.c): what moves its requests
 * between its queues (inflight.h) and the rest of the runtime, in both
 * directions: the actor's requests to the network are channel futures, the
 * network's requests to the actor channel stacks. Above the channel's life
 * (channel.h), which reaches it only through its ops: sh_chanflow_to_tail,
 * sh_chanflow_fail_all and sh_chanflow_pump are put there by the modules
 * that make channels (tcp.c, tcpserver.c, udp.c).
 */
#ifndef SH_CHANFLOW_H
#define SH_CHANFLOW_H

#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/net.h>

#include "actor/stack.h"
#include "net/channel.h"
#include "net/inflight.h"

/* A request of either direction in an inflight queue (pooled). */
typedef struct sh_chrec {
  sh_ifl_item it;
  struct sh_channel *ch;
  sh_stack_sink sink; /* stacks: where the stack reports its end (stack.h) */
  sh_msg *msg;      /* the request, until it is written (futures) or a stack takes it */
  sh_msg *reply;    /* stacks: the result, held for its turn */
  uint64_t fid;     /* futures, sends: the future's ask id in its house's table */
  int error;        /* stacks: what the stack threw */
  bool failed;      /* stacks: the channel closed while it ran */
  bool ended;       /* stacks: its stack finished */
} sh_chrec;

/* The pipeline's tail: a response completes its future, a request waits
 * for a stack. */
int sh_chanflow_to_tail(void *owner, sh_msg *m);
/* Starts what the rules let start: requests written, stacks run. */
void sh_chanflow_pump(sh_channel *ch);
/* Whether no request is waiting or being handled. */
bool sh_chanflow_idle(const sh_channel *ch);
/* Fails every future with `error` (no response can come any more). */
void sh_chanflow_fail_futures(sh_channel *ch, int error);
/* Fails every item with `error`, once (the channel closes). */
void sh_chanflow_fail_all(sh_channel *ch, int error);
/* The write buffer fell below its low watermark: waiting sends complete. */
void sh_chanflow_writable(sh_channel *ch);

#endif
