/*
 * What node code tells a checker (<stackhouse/cluster.h>: sh_node_listen,
 * sh_node_tell, sh_node_hear) in the simulator: the listener hears it at
 * once, on the teller's fiber, stamped with the true virtual time and the
 * teller's boot. Nothing is queued, so sh_node_hear has nothing to do.
 */
#include <errno.h>

#include <stackhouse/cluster.h>

#include "nodeint.h"

static sh_simrun *const S = &sh_simrun_state;
#define X sh_simnodes_state

/* The listener of this process's simulations: set from the simulation's
 * side before nodes boot, read from node fibers (one OS thread). */
static sh_node_listener listener;
static void *listener_ctx;

int sh_node_listen(sh_node_listener fn, void *ctx) {
  listener = fn;
  listener_ctx = ctx;
  return 0;
}

int sh_node_tell(const void *data, size_t len) {
  uint32_t n = sh_simnode_cur();
  if (n == 0 || n > X.n) return -ENOTSUP;
  if (len > SH_NODE_TELL_MAX || (data == NULL && len != 0)) return -EINVAL;
  if (listener == NULL) return 0;
  const sh_simnode *d = &X.node[n];
  sh_node_heard h = {.node = d->name, .boot = d->boots, .true_ns = S->now, .data = data,
                     .len = len};
  listener(&h, listener_ctx);
  return 0;
}

int sh_node_hear(void) { return 0; }
