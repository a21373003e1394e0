/*
 * The fake network and the nodes of a cluster simulation (node.h): which
 * address a node's socket has, what a cut between two nodes holds, and
 * what a crash leaves behind.
 *
 * Addresses. A node's socket binds its node's address (0.0.0.0 and
 * loopback mean it; another node's address is -EADDRNOTAVAIL) and
 * connects from it. A socket of the simulation's own (node 0) connects
 * from the address it goes to, as before there were nodes, except toward
 * a node, which sees it come from 127.0.0.1.
 *
 * Cuts. An arrival from node a to node b while a -> b is cut is held, in
 * order (TCP: segments, ends of stream, connects), as retransmissions
 * would bring it once the cut heals; a datagram is lost. The heal hands
 * the held ones over at once, in the order they came, before anything
 * sent later (which arrives later).
 *
 * Crashes. The crashed node's sockets are forgotten without a word (no
 * FIN, no RST, no TIME_WAIT: the machine is off); what reaches them while
 * the node is down is lost, and once it is booted again a segment or end
 * of stream that reaches one of them resets the sender's connection, as a
 * rebooted host answers a connection it never heard of.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "net.h"
#include "netsock.h"
#include "node.h"
#include "nodemem.h"
#include "run.h"

#define SH_SIMNET_LOOPBACK 0x7F000001u

static struct {
  sh_simnet_ev *held; /* in the order they arrived */
  uint32_t nheld, capheld;
  uint32_t *killed; /* by socket number: the node whose crash took it, or 0 */
  uint32_t capkilled;
  uint64_t lost; /* datagrams a cut lost */
} H;

/* ---- addresses ----------------------------------------------------------------- */

uint32_t sh_simnet_source_ip(const sh_simnet_sock *k, uint32_t to) {
  if (k->node != 0) return sh_simnode_ip(k->node);
  if (to == 0 || sh_simnode_by_ip(to) != 0) return SH_SIMNET_LOOPBACK;
  return to;
}

int sh_simnet_bind_ip(const sh_simnet_sock *k, uint32_t ip, uint32_t *out) {
  *out = ip;
  if (k->node == 0) return 0;
  uint32_t mine = sh_simnode_ip(k->node);
  if (ip == 0 || ip >> 24 == 127) ip = mine;
  if (ip != mine) return -EADDRNOTAVAIL;
  *out = ip;
  return 0;
}

/* ---- cuts ------------------------------------------------------------------------ */

/* The node ev goes to. */
static uint32_t dest_node(const sh_simnet_ev *ev) {
  switch (ev->kind) {
  case SH_SIMNET_EV_SEG:
  case SH_SIMNET_EV_FIN: {
    const sh_simnet_sock *k = sh_simnet_get(ev->dst, 0);
    if (k != NULL) return k->node;
    return ev->dst >= 0 && (uint32_t)ev->dst < H.capkilled ? H.killed[ev->dst] : 0;
  }
  case SH_SIMNET_EV_CONNECT: return sh_simnode_by_ip(ev->to.ip);
  case SH_SIMNET_EV_DGRAM: return ev->seg != NULL ? sh_simnode_by_ip(ev->seg->to.ip) : 0;
  default: return ev->from_node; /* a release: the sender's own bookkeeping */
  }
}

bool sh_simnet_cut_holds(sh_simnet_ev *ev) {
  ev->to_node = dest_node(ev);
  if (!sh_simnode_cut_now(ev->from_node, ev->to_node)) return false;
  if (ev->kind == SH_SIMNET_EV_DGRAM) {
    sh_simnet_seg_free(ev->seg);
    H.lost++;
    sh_simrun_mix(SH_SIMRUN_MIX_NET);
    sh_simrun_mix(ev->seq);
    return true;
  }
  if (sh_simnet_grow((void **)&H.held, &H.capheld, H.nheld + 1, sizeof(*H.held)) != 0) {
    /* Out of memory: it goes through the cut rather than vanish (a stream
     * must not lose bytes in the middle). */
    return false;
  }
  H.held[H.nheld++] = *ev;
  return true;
}

void sh_simnet_healed(uint32_t a, uint32_t b) {
  uint32_t keep = 0, n = H.nheld;
  /* Bounded by the held arrivals: a delivery never holds again (the cut
   * is healed) and appends nothing to this list for the pair. */
  for (uint32_t i = 0; i < n; i++) {
    sh_simnet_ev ev = H.held[i];
    if (ev.from_node == a && ev.to_node == b)
      sh_simnet_deliver_ev(&ev, sh_simrun_state.now);
    else
      H.held[keep++] = ev;
  }
  /* Deliveries may have held others (another pair): they came after. */
  if (H.nheld > n) memmove(&H.held[keep], &H.held[n], (H.nheld - n) * sizeof(*H.held));
  H.nheld = keep + (H.nheld - n);
}

/* ---- crashes ------------------------------------------------------------------------ */

void sh_simnet_node_down(uint32_t n) {
  SH_ASSERT(n != 0);
  uint32_t count = sh_simnet_count();
  for (uint32_t s = 0; s < count; s++) { /* bounded by the sockets made */
    sh_simnet_sock *k = sh_simnet_get((sh_sock)s, 0);
    if (k == NULL || k->node != n) continue;
    uint32_t old = H.capkilled;
    if (sh_simnet_grow((void **)&H.killed, &H.capkilled, s + 1, sizeof(*H.killed)) == 0) {
      memset(H.killed + old, 0, (H.capkilled - old) * sizeof(*H.killed));
      H.killed[s] = n;
    }
    k->reset = true; /* gone without a TIME_WAIT (netbind.c) */
    sh_simnet_sock_free(k);
  }
  /* What a cut held from it goes too: a host that is off retransmits
   * nothing. Its own datagrams held back are freed with its sockets;
   * arrivals on their way to it are lost when they come. */
  uint32_t keep = 0;
  for (uint32_t i = 0; i < H.nheld; i++) {
    if (H.held[i].from_node == n)
      sh_simnet_seg_free(H.held[i].seg);
    else
      H.held[keep++] = H.held[i];
  }
  H.nheld = keep;
}

void sh_simnet_dead_end(const sh_simnet_ev *ev) {
  if (ev->dst < 0 || (uint32_t)ev->dst >= H.capkilled) return;
  uint32_t n = H.killed[ev->dst];
  if (n == 0 || !sh_simnode_is_up(n)) return;
  sh_simnet_sock *k = sh_simnet_get(ev->src, SH_SIMNET_STREAM);
  if (k != NULL && !k->reset) sh_simnet_tcp_reset(k);
}

void sh_simnet_node_end(void) {
  for (uint32_t i = 0; i < H.nheld; i++) sh_simnet_seg_free(H.held[i].seg);
  sh_simraw_free(H.held);
  sh_simraw_free(H.killed);
  memset(&H, 0, sizeof(H));
}
