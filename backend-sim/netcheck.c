/*
 * What a run leaves open on the fake network: a socket still open when
 * the system that made it is gone is a descriptor a real process leaks,
 * and a peer that waits for ever. The run fails, naming the first one: at
 * the simulation's end (every socket), and when a node's program ends
 * (the node's own).
 */
#include <stdio.h>

#include "base/check.h"
#include "net.h"
#include "netsock.h"
#include "node.h"
#include "run.h"

static void addr_text(const sh_netaddr *a, char *buf, size_t n) {
  snprintf(buf, n, "%u.%u.%u.%u:%u", a->ip >> 24, (a->ip >> 16) & 255u, (a->ip >> 8) & 255u,
           a->ip & 255u, a->port);
}

/* Socket k in words, for a failure's detail. */
static void sock_text(const sh_simnet_sock *k, char *buf, size_t n) {
  static const char *const states[] = {"idle", "connecting", "connected", "refused"};
  char local[24], peer[24];
  addr_text(&k->local, local, sizeof(local));
  addr_text(&k->peer, peer, sizeof(peer));
  const char *what = k->kind == SH_SIMNET_LISTENER ? "listener"
                     : k->kind == SH_SIMNET_UDP    ? "udp socket"
                                                   : "tcp connection";
  const char *state = k->kind == SH_SIMNET_STREAM && k->state <= SH_SIMNET_REFUSED
                          ? states[k->state] : "";
  char watch[24] = "unwatched";
  if (k->watcher != SH_SIMNET_NO_WORKER) snprintf(watch, sizeof(watch), "fiber %u", k->watcher);
  snprintf(buf, n, "socket %d (%s %s %s, peer %s, %s)", (int)k->id, what, state, local, peer,
           watch);
}

/*
 * The system is freed: every socket the network handed out must be closed
 * by now (a connection the acceptor could not hand over, a connect that
 * failed, a channel's at its teardown, a server's listener at the system's
 * teardown). One left open is a descriptor a real process leaks, and a
 * peer that waits for ever: the run fails, naming the first one.
 */
void sh_simnet_check_closed(void) {
  uint32_t open = 0;
  const sh_simnet_sock *first = NULL;
  uint32_t made = sh_simnet_count();
  for (uint32_t i = 0; i < made; i++) { /* bounded by the sockets made */
    const sh_simnet_sock *k = sh_simnet_get((sh_sock)i, 0);
    if (k != NULL && open++ == 0) first = k;
  }
  if (open == 0) return;
  SH_ASSERT(first != NULL);
  char what[160], d[256];
  sock_text(first, what, sizeof(what));
  snprintf(d, sizeof(d), "%u of %u sockets left open after the system was freed; first %s",
           open, made, what);
  sh_simrun_fail("socket", d);
}

void sh_simnet_check_node_closed(uint32_t n) {
  uint32_t open = 0, made = sh_simnet_count();
  const sh_simnet_sock *first = NULL;
  for (uint32_t i = 0; i < made; i++) { /* bounded by the sockets made */
    const sh_simnet_sock *k = sh_simnet_get((sh_sock)i, 0);
    if (k != NULL && k->node == n && open++ == 0) first = k;
  }
  if (open == 0) return;
  char what[160], d[256];
  sock_text(first, what, sizeof(what));
  snprintf(d, sizeof(d), "%u sockets of node %s left open when its program ended; first %s", open,
           sh_simnode_name(n), what);
  sh_simrun_fail("socket", d);
}
