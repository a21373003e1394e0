/*
 * failover's internals, shared by its .c files (not for harnesses: they
 * use failover.h): the configurations argv gives, the wire frame and its
 * two codecs, and the node's brain class.
 *
 * One frame format for everything (wire.c): fixed 40 bytes, so a decoder
 * needs no length field and a garbled stream fails at once on the magic.
 * The same message struct, fo_frame, travels both ways under two types: a
 * notice (a request: handled by the receiver in a channel stack) and a
 * reply (a response: completes a channel future). Nodes talk
 * asynchronously (every frame a request, answered by timers and state,
 * never waited for), the client waits for each answer (a channel ask).
 */
#ifndef EXAMPLES_FAILOVER_INT_H
#define EXAMPLES_FAILOVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <stackhouse/net.h>
#include <stackhouse/stackhouse.h>

#include "failover.h"

/* Bounds: ids are 1..FO_MAX_NODES (an epoch keeps the id in its low 3 bits). */
#define FO_MAX_NODES 7
#define FO_MAX_PEERS (FO_MAX_NODES - 1)
#define FO_ID_BITS 3
_Static_assert(FO_MAX_NODES < (1 << FO_ID_BITS), "an id fits in an epoch's low bits");

/* Always on (a release build too): a broken bound is a bug, not an input. */
#define FO_ASSERT(c)                                                                   \
  ((c) ? (void)0                                                                       \
       : (fprintf(stderr, "failover: %s:%d: assertion %s failed\n", __FILE__, __LINE__, \
                  #c),                                                                 \
          abort()))

/* ---- configurations (args.c) ------------------------------------------------- */

typedef struct fo_peer {
  int id;
  sh_netaddr addr;
} fo_peer;

typedef struct fo_node_cfg {
  int id;
  sh_netaddr listen;
  fo_peer peers[FO_MAX_PEERS];
  int npeers;
  int64_t lease_ms, heartbeat_ms, drift_ppm;
  bool verbose;
} fo_node_cfg;

typedef struct fo_client_cfg {
  sh_netaddr servers[FO_MAX_NODES];
  int nservers;
  int64_t requests, interval_ms, timeout_ms, max_ms;
  bool verbose;
} fo_client_cfg;

/* Parse argv (argv[0] is the program); 0, or -EINVAL with the reason in
 * err. Reentrant: no getopt, no static state. */
int fo_parse_node(int argc, char **argv, fo_node_cfg *out, char *err, size_t errlen);
int fo_parse_client(int argc, char **argv, fo_client_cfg *out, char *err, size_t errlen);
extern const char fo_node_usage[], fo_client_usage[];

/* ---- the wire (wire.c) ----------------------------------------------------- */

enum fo_kind {
  FO_LEASE_REQ = 1,   /* node -> node: grant me epoch `epoch` (round `seq`) */
  FO_LEASE_ACK = 2,   /* the answer: status, `epoch` echoed, `value` the grantor's max */
  FO_CLIENT_REQ = 3,  /* client -> node: request `seq` */
  FO_CLIENT_RESP = 4, /* the answer: status, `epoch` served in, `hint` the primary */
  FO_PING = 5,        /* node -> node, on a connection idle for a while: still there? */
  FO_PONG = 6,        /* the answer */
};
enum fo_status { FO_OK = 0, FO_DENIED = 1 };

typedef struct fo_frame {
  sh_msg hdr;
  uint8_t kind, from, status, holder; /* holder: an ack's promise holder, 0: none */
  uint64_t epoch, seq, value;
  sh_netaddr hint; /* a refusal's: where the node believes the primary is */
} fo_frame;

#define FO_FRAME_BYTES 40u

typedef fo_frame fo_note;  /* a request */
typedef fo_frame fo_reply; /* a response */
extern const sh_msg_type fo_note_type, fo_reply_type;

/* A new frame of `kind` (a reply type for the answers), fields from f;
 * NULL when out of memory. */
fo_frame *fo_frame_new(const fo_frame *f);

/* Nodes: every frame decodes as a request (fo_note). The client: answers
 * decode as replies (fo_reply), for its channel asks. */
extern const sh_handler fo_codec_async, fo_codec_rpc;

/* ---- the node's brain (node.c, lease.c, links.c) ------------------------------- */

/* The actor that owns a node's sockets and state: the one connection actor
 * of the node's TCP server, spawned with a fo_node_cfg. */
extern const sh_actor_class fo_brain_class;

/* Milliseconds of slack on each side of a lease, for a clock read in
 * whole milliseconds (README.md, "Safety"). */
#define FO_MARGIN_MS 2
/* Rounds whose answers still count: a renewal answered up to this many
 * heartbeats late still extends the lease. */
#define FO_ROUNDS 8
/* Incoming channels (peers and clients) a node tracks for idleness; one
 * more evicts the one idle longest. */
#define FO_MAX_INCOMING 32

/* A channel of the brain: to a peer (peer >= 0: an index of cfg.peers, the
 * node's own connection, kept up and reconnected) or from anyone (peer -1:
 * accepted, closed once idle too long). The channel's data points here. */
typedef struct fo_conn {
  sh_channel *ch; /* NULL: none now */
  int peer;
  bool connecting; /* outgoing: a connect stack is on its way */
  bool waiting;    /* outgoing: a request is unanswered since since_ms */
  int64_t since_ms; /* outgoing: that request's time; incoming: the last frame's */
  int64_t sent_ms;  /* outgoing: the last frame sent */
  int64_t retry_ms; /* outgoing: no connect before this */
  /* Outgoing: the connect under way is number `gen`; past connect_until_ms
   * it is taken for lost (its notice dropped) and a later one may start. */
  uint32_t gen;
  int64_t connect_until_ms;
} fo_conn;

/* One round of lease requests (a candidacy's or a renewal's). */
typedef struct fo_round {
  uint64_t id;       /* 0: unused */
  int64_t start_ms;  /* read before the requests went out */
  uint32_t granted, denied; /* bit i: peer i said so */
} fo_round;

typedef struct fo_node {
  sh_actor base;
  fo_node_cfg cfg;
  int64_t serve_ms;   /* a granted round lets its node serve this long (L less drift, margin) */
  int64_t promise_ms; /* a grant binds its grantor this long (L plus drift, margin) */
  int majority;       /* of 1 + npeers */
  fo_conn out[FO_MAX_PEERS];
  fo_conn in[FO_MAX_INCOMING];
  bool started, ticking, lease_armed;
  uint64_t tick_timer, lease_timer;
  int64_t quiet_until_ms; /* a node just booted grants nothing before this */
  /* The grantor: its promise, and the epochs it knows. */
  int promise_to;          /* a node id (its own: a candidate's self-grant); 0: none */
  int64_t promise_until_ms;
  uint64_t max_granted, max_seen;
  /* The candidate, and the primary it becomes. */
  bool candidate, serving;
  bool won;       /* this candidacy served at some point */
  uint64_t epoch; /* while a candidate */
  uint64_t granted_before; /* max_granted when it stood */
  int64_t cand_since_ms, backoff_until_ms, lease_end_ms;
  uint64_t next_round;
  fo_round rounds[FO_ROUNDS];
  uint64_t served, rng;
} fo_node;

/* The entry's ask that starts the brain (and its answer), and the brain's
 * notice to itself that makes a connection. Either may be lost (a stack
 * that cannot be made refuses its message), so both are retried. */
typedef struct fo_start {
  sh_msg hdr;
} fo_start;
typedef struct fo_started {
  sh_msg hdr;
} fo_started;
typedef struct fo_connect {
  sh_msg hdr;
  int peer;
  uint32_t gen;
} fo_connect;
extern const sh_msg_type fo_start_type, fo_started_type, fo_connect_type;
/* The locals of the brain's stacks (a fo_connect's: links.c). */
typedef struct fo_connect_locals {
  sh_future *f;
  int peer;
  uint32_t gen;
} fo_connect_locals;

/* lease.c: the protocol. Each takes the node's clock, read once. */
void fo_lease_boot(fo_node *n, int64_t now);
void fo_lease_tick(fo_node *n, int64_t now);
void fo_lease_timer(fo_node *n, int64_t now);
void fo_lease_stop(fo_node *n, int64_t now);
/* Answers (new frames, NULL when out of memory) to a peer's lease request
 * and to a client's request; takes a peer's answer, which came on the
 * node's own connection to peer `peer`. */
fo_frame *fo_lease_on_request(fo_node *n, const fo_frame *req, int64_t now);
fo_frame *fo_lease_on_client(fo_node *n, const fo_frame *req, int64_t now);
void fo_lease_on_ack(fo_node *n, const fo_frame *ack, int peer, int64_t now);

/* links.c: the channels. */
void fo_links_init(fo_node *n);
void fo_links_tick(fo_node *n, int64_t now);
/* Writes f to every peer with a connection now. */
void fo_links_send(fo_node *n, const fo_frame *f, int64_t now);
/* A frame arrived on ch: its fo_conn (an incoming channel seen for the
 * first time is tracked now). */
fo_conn *fo_links_heard(fo_node *n, sh_channel *ch, int64_t now);
sh_yield fo_links_connect(fo_node *n, sh_stack *st);
void fo_links_event(fo_node *n, sh_channel *ch, int event, int error);
/* A peer's listen address by id; NULL when unknown. */
const sh_netaddr *fo_peer_addr(const fo_node *n, int id);

/* Calls the process's observer, if one is set. */
void fo_observe(int node, failover_event_kind kind, uint64_t epoch, int64_t local_ms);

#endif
