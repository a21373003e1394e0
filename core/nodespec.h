/*
 * What both platforms' clusters (<stackhouse/cluster.h>: the simulator's
 * nodes in backend-sim/, the processes of backend-epoll/) check of a node
 * spec alone, before they look at the nodes they have: one rule, so a
 * scenario's specs are good or bad alike on both backends. The core
 * itself knows no nodes; this header is the platforms' shared contract.
 */
#ifndef SH_NODESPEC_H
#define SH_NODESPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <stackhouse/cluster.h>
#include <stackhouse/system.h>

/* [a-z0-9_-], 1..31 characters, and not "main" (node 0's name in cuts). */
static inline bool sh_nodespec_name_ok(const char *s) {
  size_t n = s != NULL ? strnlen(s, 32) : 0;
  if (n == 0 || n > 31 || strcmp(s, "main") == 0) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
          s[i] == '-'))
      return false;
  return true;
}

/* The spec's own shape (cluster.h's sh_node_spec): a name, an address
 * that is neither 0.0.0.0, loopback nor broadcast, an entry, an argv for
 * its argc, at most max_workers workers, a drift bound within the limit. */
static inline bool sh_nodespec_ok(const sh_node_spec *sp, uint32_t max_workers) {
  return sp != NULL && sh_nodespec_name_ok(sp->name) && sp->ip != 0 && sp->ip >> 24 != 127 &&
         sp->ip != UINT32_MAX && sp->entry != NULL && sp->argc >= 0 &&
         (sp->argc == 0 || sp->argv != NULL) && sp->workers <= max_workers &&
         sp->max_drift_ppm >= 0 && sp->max_drift_ppm <= SH_NODE_DRIFT_LIMIT_PPM;
}

/* A node's system configuration at each boot: its spec's (copied, or
 * the defaults when it gave none), with the node's worker count. */
static inline sh_config sh_nodespec_config(const sh_config *given, uint32_t workers) {
  sh_config cfg;
  if (given != NULL)
    cfg = *given;
  else
    sh_config_default(&cfg);
  cfg.workers = workers;
  return cfg;
}

#endif
