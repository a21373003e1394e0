/*
 * Nodes (node.h, <stackhouse/cluster.h>): declaring one (sh_node_add: its
 * spec checked, its argv copied, its first boot) and what it persists
 * across crashes (sh_node_persist, sh_node_recall: a blob the simulator
 * keeps for it until disks come).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stackhouse/cluster.h>

#include "base/check.h"
#include "nodeint.h"
#include "nodemem.h"
#include "nodespec.h"

static sh_simrun *const S = &sh_simrun_state;
#define X sh_simnodes_state

/* ---- persisted state --------------------------------------------------------------- */

int sh_node_persist(const void *data, size_t len) {
  uint32_t n = sh_simnode_cur();
  if (n == 0 || n > X.n) return -ENOTSUP;
  if (len > SH_NODE_PERSIST_MAX || (data == NULL && len != 0)) return -EINVAL;
  sh_simnode *d = &X.node[n];
  void *copy = NULL;
  if (len != 0) {
    copy = sh_simraw_malloc(len);
    if (copy == NULL) return -ENOMEM;
    memcpy(copy, data, len);
  }
  sh_simraw_free(d->blob);
  d->blob = copy;
  d->blob_len = len;
  return 0;
}

int64_t sh_node_recall(void *buf, size_t cap) {
  uint32_t n = sh_simnode_cur();
  if (n == 0 || n > X.n) return -ENOTSUP;
  const sh_simnode *d = &X.node[n];
  if (buf == NULL && cap != 0) return -EINVAL;
  size_t k = d->blob_len < cap ? d->blob_len : cap;
  if (k != 0) memcpy(buf, d->blob, k);
  return (int64_t)d->blob_len;
}

const char *sh_node_self(void) {
  uint32_t n = sh_simnode_cur();
  return n >= 1 && n <= X.n ? X.node[n].name : "";
}

/* ---- declaring a node ---------------------------------------------------------------- */

static int spec_check(const sh_node_spec *sp) {
  if (!sh_nodespec_ok(sp, SH_SIM_MAX_WORKERS)) return -EINVAL;
  if (sh_simnode_find(sp->name) != 0 || sh_simnode_by_ip(sp->ip) != 0) return -EEXIST;
  return X.n + 1 >= SH_SIMNODE_MAX ? -ENOSPC : 0;
}

/* d's copy of argv (NULL-terminated, as main's). */
static int argv_copy(sh_simnode *d, int argc, char *const *argv) {
  d->argv = sh_simraw_calloc((size_t)argc + 1, sizeof(char *));
  if (d->argv == NULL) return -ENOMEM;
  for (int i = 0; i < argc; i++) {
    size_t n = strlen(argv[i]) + 1;
    d->argv[i] = sh_simraw_malloc(n);
    if (d->argv[i] == NULL) return -ENOMEM;
    memcpy(d->argv[i], argv[i], n);
    d->argc = i + 1;
  }
  return 0;
}

int sh_node_add(const sh_node_spec *sp) {
  sh_simtab *t = sh_simrun_active();
  if (t == NULL) return -ENOTSUP;
  if (t->f[t->cur].node != 0) return -EPERM;
  int rc = spec_check(sp);
  if (rc != 0) return rc;
  uint32_t n = X.n + 1;
  sh_simnode *d = &X.node[n];
  memset(d, 0, sizeof(*d));
  snprintf(d->name, sizeof(d->name), "%s", sp->name);
  d->ip = sp->ip;
  d->workers = sp->workers != 0 ? sp->workers : 2;
  d->entry = sp->entry;
  d->init = sp->init;
  d->main = SH_SIMRUN_NO_FIBER;
  d->max_drift_ppm = sp->max_drift_ppm != 0 ? sp->max_drift_ppm : 1000;
  d->base_true = d->base_local = S->now;
  if (sp->config != NULL) {
    d->config = *sp->config;
    d->has_config = true;
  }
  X.n = n; /* before the copy: node_free undoes a half-made one */
  rc = argv_copy(d, sp->argc, sp->argv);
  if (rc == 0) rc = sh_simnode_boot(n);
  if (rc != 0) {
    sh_simnode_free(d);
    X.n = n - 1;
  }
  return rc;
}
