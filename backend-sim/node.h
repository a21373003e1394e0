/*
 * Nodes (node.c): the systems of a cluster simulation. Node 0 is the
 * simulation's own (the first system, its outside fiber and its threads);
 * nodes 1.. are booted by the scenario (<stackhouse/cluster.h>), each a
 * whole system of its own on its own main fiber, with an address on the
 * fake network and a clock of its own.
 */
#ifndef SH_SIM_NODE_H
#define SH_SIM_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "run.h"

/* Nodes per simulation, node 0 included. */
#define SH_SIMNODE_MAX 64

/* Node n's clock at true virtual time t (node 0's is the true clock). */
uint64_t sh_simnode_local(uint32_t n, uint64_t t);
/* The true time at which node n's clock reads `local` (the earliest; now
 * or earlier for a reading already passed); SH_PLAT_NO_DEADLINE stays so. */
uint64_t sh_simnode_true(uint32_t n, uint64_t local);

/* Node n's system, once its main made it (platsys.c), else NULL. */
sh_plat *sh_simnode_plat(uint32_t n);
void sh_simnode_plat_set(uint32_t n, sh_plat *p);
/* Node p->node's system started its workers. */
void sh_simnode_started(sh_plat *p);

/* Node n's IPv4 address (host order); 0 for node 0. */
uint32_t sh_simnode_ip(uint32_t n);
/* Node n's name ("main" for node 0). */
const char *sh_simnode_name(uint32_t n);
/* The node at address ip (0: none). */
uint32_t sh_simnode_by_ip(uint32_t ip);
/* The node of the running fiber (0 without a fiber table). */
uint32_t sh_simnode_cur(void);

/* Whether what node `from` sends to node `to` is held (a cut). */
bool sh_simnode_cut_now(uint32_t from, uint32_t to);
/* Whether node n is booted (node 0 always is). */
bool sh_simnode_is_up(uint32_t n);

/* The first system is being freed: every node must be down by now. */
void sh_simnode_end(void);
/* A new simulation: no node. */
void sh_simnode_reset(void);

#endif
