/*
 * The simulator's fake network (net.c, nettcp.c, netudp.c) as the rest of
 * the simulator sees it: one per simulation, reset by sh_sim_configure,
 * freed at the end of the run. Its arrivals are events on the virtual
 * clock, like a park's deadline: run.c delivers them before it wakes
 * fibers, and jumps the clock to the next one when every fiber sleeps.
 */
#ifndef SH_SIM_NET_H
#define SH_SIM_NET_H

#include <stackhouse/sim.h>
#include <stdbool.h>
#include <stdint.h>

#include "plat.h"

/* A new simulation: the last one's sockets and arrivals are freed and the
 * network's stream is seeded from *x (which advances). */
void sh_simnet_configure(const sh_sim_options *o, uint64_t *x);

/* The system is freed: a socket still open fails the run (FAIL:socket,
 * naming it). */
void sh_simnet_check_closed(void);

/* Node n's program ended: a socket of its still open fails the run
 * (FAIL:socket, naming it). */
void sh_simnet_check_node_closed(uint32_t n);

/* The run is over: every socket and arrival still there is freed. */
void sh_simnet_end(void);

/* The time of the next arrival, or SH_PLAT_NO_DEADLINE. */
uint64_t sh_simnet_next(void);

/* Delivers every arrival due at `now`: sockets change state, their
 * watching workers get readiness and, if parked, become runnable. */
void sh_simnet_deliver(uint64_t now);

/* Worker w has readiness not reported yet: its wait returns at once, as
 * for a pending wake. */
bool sh_simnet_ready(uint32_t w);

/* Reports worker w's pending readiness to the readiness function, at most
 * `max` reports; how many (sh_plat_wait's reports). */
uint32_t sh_simnet_report(uint32_t w, uint32_t max);

/* Node n crashed: its sockets are forgotten without a word to their peers
 * (no FIN, no RST); what reaches them is lost while it is down, and once
 * it is booted again (sh_simnode_is_up) answered with a reset. */
void sh_simnet_node_down(uint32_t n);
/* The cut from node a to node b healed: what it held goes on, in order. */
void sh_simnet_healed(uint32_t a, uint32_t b);

#endif
