/*
 * A channel's pipeline (net.h): its handlers, head (network) to tail
 * (actor), each with its per-channel state, and the two ends. Pure: it
 * knows buffers and messages, not sockets or houses; the channel gives it
 * its two sinks. Inbound, the head hands the read buffer to the first
 * handler's decode (or, without one, wraps every byte in an sh_bytes
 * message); messages travel toward the tail through each handler's
 * inbound and leave through `to_tail`. Outbound, messages enter at the tail,
 * travel through each handler's outbound toward the head, and leave through
 * `to_head`.
 */
#ifndef SH_PIPELINE_H
#define SH_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/net.h>

/* An end of the pipeline: takes m (frees it on an error). */
typedef int (*sh_pipeline_sink)(void *owner, sh_msg *m);

struct sh_pctx {
  struct sh_pipeline *pl;
  uint32_t index; /* the handler's place, 0 next to the head */
  void *state;
};

typedef struct sh_pipeline {
  const sh_handler *h[SH_PIPELINE_MAX];
  sh_pctx ctx[SH_PIPELINE_MAX];
  uint32_t n;
  void *states;          /* every handler's state, one allocation */
  sh_buf *in, *out;      /* the channel's read and write buffers */
  sh_pipeline_sink to_tail, to_head;
  void *owner;           /* passed to the sinks */
  sh_channel *ch;        /* sh_pctx_channel */
  bool closed;           /* the closed callbacks ran */
} sh_pipeline;

/* Sets up the pipeline of o's handlers (-EINVAL: more than SH_PIPELINE_MAX,
 * a NULL handler, or a decode on a handler other than the first; -ENOMEM). */
int sh_pipeline_init(sh_pipeline *pl, const sh_channel_opts *o, sh_buf *in, sh_buf *out,
                     sh_pipeline_sink to_tail, sh_pipeline_sink to_head, void *owner,
                     sh_channel *ch);
/* Frees the handlers' state (after sh_pipeline_closed). */
void sh_pipeline_fini(sh_pipeline *pl);
/* Bytes arrived in *in: decodes (or wraps) them and sends the messages
 * toward the tail. 0, or the first error a handler or a sink returned. */
int sh_pipeline_read(sh_pipeline *pl);
/* A message that enters at the head (a datagram): through every handler's
 * inbound to the tail. Takes m. */
int sh_pipeline_inbound(sh_pipeline *pl, sh_msg *m);
/* A message from the actor: through every handler's outbound, tail to
 * head, to `to_head`. Takes m. */
int sh_pipeline_write(sh_pipeline *pl, sh_msg *m);
/* Calls every handler's closed(error), tail first, once. */
void sh_pipeline_closed(sh_pipeline *pl, int error);

#endif
