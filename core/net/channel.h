/*
 * Channels (net.h): one socket of one IO actor, its pipeline, its buffers,
 * its four inflight queues and its lifecycle bits. Everything here runs on
 * the owning actor's worker: the readiness function runs in that worker's
 * IO phase, and the actor (an IO actor never leaves its worker, house.c)
 * runs there too, so a channel needs no atomics.
 *
 * Readiness reaches the actor as an event: the channel's own header `ev`
 * is pushed into the house's event mailbox, at most once at a time
 * (SH_CHS_EVENT), with the readiness bits gathered meanwhile in `ready`.
 * Work that must go on later (a read stopped at its page budget) queues
 * the same event again, so one busy channel cannot hold the actor.
 *
 * Life. A channel is freed once it is closed, its event ran after the
 * close (the close queues it: never inside the call that closed it, which
 * a handler still holding the channel may have made) and no stack of its
 * requests runs or future of it is left (`refs`). A channel is
 * attached to its house (house.h: its `attached` list), which is not
 * retired while one is left; its stop closes them (the house's
 * close_attached, which sh_channel_new sets).
 *
 * Entry points nest (a stack that a read started writes a reply, which
 * may close the channel): `busy` counts them, and what must not happen
 * inside one (flushing, starting queued work, tearing down) happens when
 * the outermost returns (sh_channel_leave).
 *
 * Kinds. What a channel of a kind does (its readiness, the work of the
 * outermost leave, its pipeline's ends, what fails when it closes) is its
 * ops (sh_channel_ops), set by the module that made it: tcp.c (a connect),
 * tcpserver.c (a listener, an accepted connection), udp.c. This file calls
 * them, and nothing of those modules or of the inflight system
 * (chanflow.c) by name: they sit above it.
 */
#ifndef SH_CHANNEL_H
#define SH_CHANNEL_H

#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/net.h>

#include "actor/future.h"
#include "net/inflight.h"
#include "base/list.h"
#include "netplat.h"
#include "net/pipeline.h"
#include "sched/worker.h"

struct sh_house;
struct sh_tcp_server;

typedef enum sh_channel_kind {
  SH_CH_TCP = 1,      /* a connection (accepted or connected) */
  SH_CH_LISTENER = 2, /* a TCP server's listening socket (its acceptor) */
  SH_CH_UDP = 3,
} sh_channel_kind;

/* Lifecycle bits, in one word. */
enum {
  SH_CHS_OPEN = 1u << 0,       /* the actor heard SH_CHANNEL_OPEN */
  SH_CHS_CONNECTING = 1u << 1, /* a connect is under way */
  SH_CHS_READABLE = 1u << 2,   /* more may be there to read (no -EAGAIN since the edge) */
  SH_CHS_WRITABLE = 1u << 3,   /* the socket took all it was offered last time */
  SH_CHS_EOF = 1u << 4,        /* the peer's end of stream was read */
  SH_CHS_EOF_TOLD = 1u << 5,   /* the actor heard SH_CHANNEL_EOF */
  SH_CHS_SHUT = 1u << 6,       /* shut the write side once flushed */
  SH_CHS_SHUT_DONE = 1u << 7,  /* the write side is shut */
  SH_CHS_CLOSE_FLUSH = 1u << 8, /* close once flushed */
  SH_CHS_CLOSING = 1u << 9,    /* a close waits for the outermost entry to leave */
  SH_CHS_CLOSED = 1u << 10,    /* closed: the socket is gone, every item failed */
  SH_CHS_EVENT = 1u << 11,     /* `ev` is in the house's event mailbox */
  SH_CHS_HIGH = 1u << 12,      /* the write buffer passed its high watermark */
  SH_CHS_WATCHED = 1u << 13,   /* counted in its worker's watched sockets */
  SH_CHS_FREE_DUE = 1u << 14,  /* closed and told: free once its event ran and nothing holds it */
  SH_CHS_HUP = 1u << 15,       /* the peer's end (or an error) was reported: read to the end */
};

/* What a channel of a kind does: set by the module that makes it, called
 * by the channel's life (this file). */
typedef struct sh_channel_ops {
  sh_channel_kind kind;
  /* The readiness event, with the bits gathered since it was queued (not
   * once the channel is closed). */
  void (*on_ready)(sh_channel *ch, uint32_t bits);
  /* One round of the outermost leave's work (starting queued requests:
   * sh_chanflow_pump; a stream's end and flush). */
  void (*deferred)(sh_channel *ch);
  /* The pipeline's ends: what leaves its head goes to the socket, what
   * leaves its tail to the inflight system (sh_chanflow_to_tail). */
  sh_pipeline_sink to_head, to_tail;
  /* The channel closes: every item fails with `error`, once
   * (sh_chanflow_fail_all). */
  void (*fail_all)(sh_channel *ch, int error);
  /* Torn down (its socket closed, the actor not told yet), or NULL. */
  void (*closed)(sh_channel *ch);
} sh_channel_ops;

struct sh_channel {
  sh_msg ev; /* the readiness event: first, so that the event is the channel */
  sh_list link; /* the house's attached list (house.h) */
  struct sh_house *house;
  const sh_channel_ops *ops;
  sh_channel_kind kind; /* ops->kind */
  uint32_t state; /* SH_CHS_* */
  uint32_t ready; /* readiness bits gathered since the event was queued */
  uint32_t busy;  /* entry points under way (the file comment) */
  bool dirty;     /* an entry nested in the outermost one did something */
  uint32_t refs;  /* stacks of its requests still running, and holds (sh_channel_hold) */
  uint32_t worker;
  sh_sock sock;
  sh_io_watch watch; /* its socket's token: readiness goes to the channel */
  int error; /* why it closed */
  sh_netaddr peer, local;
  sh_buf in, out;
  sh_pipeline pl;
  sh_channel_opts o;
  sh_ifl_queue futs, stacks;
  sh_list sends;        /* sh_channel_send futures waiting for the low watermark */
  uint32_t nsends;      /* how many: what bounds the walk that ends them */
  uint64_t connect_fid; /* the connect's future, 0 when none */
  /* What its futures hold (future.h): an ask's or send's (sh_channel_hold),
   * and its connect's, whose timeout closes it (tcp.c). */
  sh_future_owner holder, connector;
  void *data;
  struct sh_tcp_server *server; /* an accepted connection's server */
};

/* A new channel of house h for socket s (what its kind does, options:
 * NULL for the defaults), watched by the house's worker. On an error the
 * socket is closed. */
int sh_channel_new(struct sh_house *h, const sh_channel_ops *ops, sh_sock s,
                   const sh_channel_opts *o, sh_channel **out);
/* The channel is live: tells the actor SH_CHANNEL_OPEN (an internal
 * actor without the hook hears nothing) and looks for bytes at once. */
void sh_channel_open(sh_channel *ch);
/* Queues the readiness event (if not queued): more work for a later run. */
void sh_channel_poke(sh_channel *ch);
/* Keeps the channel allocated (a stack of its requests runs, a future of
 * it is not freed yet), and lets it go: a closed channel whose event ran
 * is freed with its last hold. */
void sh_channel_hold(sh_channel *ch);
void sh_channel_unhold(sh_channel *ch);
/* Closes with `error` (0: orderly): now, or when the outermost entry leaves. */
void sh_channel_close_with(sh_channel *ch, int error);

/* Tells the actor (its channel_event hook, if any). */
void sh_channel_tell(sh_channel *ch, sh_channel_event ev, int error);

/* Entering and leaving an entry point (the file comment). */
static inline void sh_channel_enter(sh_channel *ch) { ch->busy++; }
void sh_channel_leave(sh_channel *ch);

/* Whether the channel holds as many waiting requests as it may (its
 * reads wait). */
static inline bool sh_channel_full(const sh_channel *ch) {
  return ch->stacks.npending >= ch->o.max_pending_stacks;
}

#endif
