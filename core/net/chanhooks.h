/*
 * What stacks and futures tell the channels (channel.h) about the stacks
 * and futures of channel requests: declared apart, so that stack.c,
 * future.c and answer.c call into the channel layer without including it
 * (channel.c uses futures and stacks: including channel.h back would make
 * an include cycle).
 */
#ifndef SH_CHANHOOKS_H
#define SH_CHANHOOKS_H

#include <stackhouse/stackhouse.h>

struct sh_chrec;
struct sh_channel;

/* A connect's future timed out (future.c): the channel closes. */
void sh_tcp_connect_expired(struct sh_channel *ch);
/* Keep a channel allocated (a channel future holds it until it is freed),
 * and let it go: a closed channel is freed with its last hold. */
void sh_channel_hold(struct sh_channel *ch);
void sh_channel_unhold(struct sh_channel *ch);

#endif
