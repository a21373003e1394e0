/*
 * failover: a lease-based primary/backup service over TCP, written on the
 * public API of stackhouse (<stackhouse/stackhouse.h>, <stackhouse/net.h>)
 * as a user writes it. README.md beside this file has the protocol, its
 * safety argument and the flags.
 *
 * Why a header: a program boots a node or a client from the same entry a
 * process uses, an actor class and its argv, exactly what sh_run takes
 * (node_main.c, client_main.c); a test or a simulator boots several of
 * them in one process the same way (sh_system_new, sh_spawn of the class,
 * an sh_args notice with the argv). Everything a node or a client knows
 * comes from its argv and lives in its actors: the only process-wide
 * state is the observer below, which a harness sets before it boots
 * anything.
 */
#ifndef EXAMPLES_FAILOVER_H
#define EXAMPLES_FAILOVER_H

#include <stdint.h>

#include <stackhouse/stackhouse.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A node of the cluster: the entry actor of a node process. Its sh_args:
 *   --id N                 this node's id, 1..7
 *   --listen IP:PORT       where it serves peers and clients
 *   --peer ID=IP:PORT      another node (repeat: once per other node, at most 6)
 *   --lease-ms L           the lease [1000]; the same on every node
 *   --heartbeat-ms H       the primary renews its lease every H ms [50]
 *   --drift-ppm D          the bound on this node's clock rate error [1000: 0.1 %]
 *   --verbose              a line on stderr at each change of role
 * A bad argv prints the usage and exits its system with 2; a listen that
 * fails exits it with 1. Otherwise the node runs until its system exits.
 */
extern const sh_actor_class failover_node_class;

/*
 * A client: the entry actor of a client process. Its sh_args:
 *   --server IP:PORT       a node (repeat: once per node, at most 7)
 *   --requests N           how many requests must be served [10]
 *   --interval-ms I        pause after each served request [10]
 *   --timeout-ms T         a request (or a connect) without an answer by
 *                          then is given up and another node tried [500]
 *   --max-ms M             give up after M ms in all [0: never]
 *   --verbose              a line on stderr per refusal, timeout, failure
 * Exit codes (sh_system_exit): 0 once N requests were served; 1 on a
 * fencing violation (an answer whose epoch is lower than one seen
 * before); 2 for a bad argv; 3 when --max-ms passed first.
 */
extern const sh_actor_class failover_client_class;

/* What a node reports to the observer. */
typedef enum failover_event_kind {
  FO_SERVE_BEGIN = 1, /* the node starts serving (a majority granted its lease) */
  FO_SERVE_END = 2,   /* it stopped serving: its lease lapsed, or its actor stopped */
  FO_SERVED = 3,      /* it served one request, now */
} failover_event_kind;

typedef struct failover_event {
  int node;                 /* the node's --id */
  failover_event_kind kind;
  uint64_t epoch;           /* the serving epoch */
  /* The node's monotonic clock (sh_clock_ms) at the event. For
   * FO_SERVE_END after a lapse, the exact end of the lease: the event
   * itself comes from a timer set for that instant, so it may be observed
   * a little later; the node served nothing at or after local_ms. */
  int64_t local_ms;
} failover_event;

typedef void (*failover_observer)(const failover_event *ev, void *ctx);

/* Sets the one process-wide observer (NULL: none). Call it before any
 * node boots (the write is not synchronised with the nodes' threads;
 * starting a system after it orders it). fn is called on the node's
 * worker thread, from its handlers: it must return quickly, must not
 * block on the node, and must be thread-safe when several nodes run in
 * one process. A crashed node emits nothing. */
void failover_set_observer(failover_observer fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
