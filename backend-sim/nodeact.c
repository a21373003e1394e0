/*
 * Acts on the nodes of a cluster simulation (<stackhouse/cluster.h>): the
 * public calls, the cuts between nodes, and the nemesis: a thread fiber of
 * the simulation's own that runs sh_simnode_queued acts at their virtual times, so
 * that where the nodes stand when an act lands is a decision of the
 * schedule, recorded and replayed with the rest.
 *
 * Node 0, the simulation's own system (the scenario's clients and
 * checkers), is named "main" in cuts; it cannot be crashed or stopped
 * here (the scenario's end does that).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stackhouse/cluster.h>

#include "base/check.h"
#include "misuse.h"
#include "net.h"
#include "nodeint.h"
#include "nodemem.h"

static sh_simrun *const S = &sh_simrun_state;
#define X sh_simnodes_state

/* The name of node 0 in cuts. */
#define SH_SIMNODE_MAIN "main"
/* Every node: "*" in cuts. */
#define SH_SIMNODE_ALL UINT32_MAX

static struct {
  sh_simnode_queued q[SH_NODE_MAX_ACTS]; /* by (at, seq) */
  uint32_t n;
  uint64_t seq;
  uint32_t fiber; /* the nemesis, or SH_SIMRUN_NO_FIBER */
  bool pending_boot[SH_SIMNODE_MAX];
  /* The cuts asked for, pair by pair, as the acts named them: what
   * sh_node_is_cut answers, apart from the network's own table. */
  bool asked[SH_SIMNODE_MAX][SH_SIMNODE_MAX];
} A = {.fiber = SH_SIMRUN_NO_FIBER};

void sh_simnode_note(uint32_t n, const char *what) {
  sh_simrun_mix(SH_SIMRUN_MIX_NODE);
  sh_simrun_mix(((uint64_t)n << 32) ^ sh_simrun_str_hash_slow(what));
  if (S->trace == NULL) return;
  char name[64];
  snprintf(name, sizeof(name), "%s %s", n == 0 ? SH_SIMNODE_MAIN : X.node[n].name, what);
  sh_simtrace_mark(S->trace, S->now, sh_simrun_cur(), "node", name, NULL);
}

/* Where acts may come from: a fiber of the simulation's own. */
static int caller_ok(void) {
  sh_simmisuse_check_thread("sh_node");
  sh_simtab *t = sh_simrun_active();
  if (t == NULL) return -ENOTSUP;
  return t->f[t->cur].node == 0 ? 0 : -EPERM;
}

/* A node (1..) by name: its number, or -ENOENT / -EINVAL. */
static int node_of(const char *name) {
  if (name == NULL) return -EINVAL;
  uint32_t n = sh_simnode_find(name);
  return n != 0 ? (int)n : -ENOENT;
}

/* A side of a cut: a node, "main" (0) or "*" (every one). */
static int side_of(const char *name, uint32_t *out) {
  if (name == NULL) return -EINVAL;
  if (strcmp(name, "*") == 0) {
    *out = SH_SIMNODE_ALL;
    return 0;
  }
  if (strcmp(name, SH_SIMNODE_MAIN) == 0) {
    *out = 0;
    return 0;
  }
  int n = node_of(name);
  if (n < 0) return n;
  *out = (uint32_t)n;
  return 0;
}

/* ---- cuts ------------------------------------------------------------------------ */

bool sh_simnode_cut_now(uint32_t from, uint32_t to) {
  return X.ncuts != 0 && from < SH_SIMNODE_MAX && to < SH_SIMNODE_MAX && X.cut[from][to];
}

static void cut_set(uint32_t a, uint32_t b, bool on) {
  if (a == b || X.cut[a][b] == on) return;
  X.cut[a][b] = on;
  X.ncuts += on ? 1 : (uint32_t)-1;
  char what[48];
  snprintf(what, sizeof(what), "%s -> %s", on ? "cut" : "heal",
           b == 0 ? SH_SIMNODE_MAIN : X.node[b].name);
  sh_simnode_note(a, what);
  if (S->trace != NULL) {
    char name[80];
    snprintf(name, sizeof(name), "cut %s -> %s", a == 0 ? SH_SIMNODE_MAIN : X.node[a].name,
             b == 0 ? SH_SIMNODE_MAIN : X.node[b].name);
    sh_simtrace_span(S->trace, S->now, sh_simrun_cur(), on, 0x4355540000000000ull | a << 8 | b,
                     "cut", name);
  }
  if (!on) sh_simnet_healed(a, b);
}

/* Every pair (a, b) the two sides name. */
static int cut_sides(uint32_t from, uint32_t to, bool on) {
  if (from == to) return -EINVAL; /* names nobody: a node is never cut from itself */
  for (uint32_t a = 0; a <= X.n; a++)
    for (uint32_t b = 0; b <= X.n; b++)
      if ((from == SH_SIMNODE_ALL || from == a) && (to == SH_SIMNODE_ALL || to == b)) {
        A.asked[a][b] = on && a != b;
        cut_set(a, b, on);
      }
  return 0;
}

static void heal_everything(void) {
  for (uint32_t a = 0; a <= X.n; a++)
    for (uint32_t b = 0; b <= X.n; b++) cut_set(a, b, false);
  memset(A.asked, 0, sizeof(A.asked));
}

void sh_node_heal_all(void) {
  if (caller_ok() == 0) heal_everything();
}

int sh_node_is_cut(const char *from, const char *to) {
  uint32_t a, b;
  int rc = side_of(from, &a);
  if (rc == 0) rc = side_of(to, &b);
  if (rc != 0) return rc;
  if (a == SH_SIMNODE_ALL || b == SH_SIMNODE_ALL) return -EINVAL;
  return A.asked[a][b] ? 1 : 0;
}

/* ---- one act ----------------------------------------------------------------------- */

static int restart(uint32_t n, int64_t delay_ms, bool wiped) {
  sh_simnode_reap_all();
  if (X.node[n].main != SH_SIMRUN_NO_FIBER || A.pending_boot[n]) return -EBUSY;
  if (delay_ms < 0) return -EINVAL;
  sh_simnode *d = &X.node[n];
  if (wiped) {
    sh_simraw_free(d->blob);
    d->blob = NULL;
    d->blob_len = 0;
  }
  if (delay_ms == 0) return sh_simnode_boot(n);
  sh_simnode_queued b = {.kind = SH_SIMNODE_ACT_BOOT, .node = n};
  int rc = sh_simnode_queue(S->now + (uint64_t)delay_ms * 1000000u, &b);
  if (rc == 0) A.pending_boot[n] = true;
  return rc;
}

/* Runs a resolved act. */
static int run_act(int kind, uint32_t node, uint32_t peer, int64_t value) {
  switch (kind) {
  case SH_ACT_CRASH: return sh_simnode_crash(node);
  case SH_ACT_STOP: return sh_simnode_stop(node);
  case SH_ACT_RESTART: return restart(node, value, false);
  case SH_ACT_RESTART_WIPED: return restart(node, value, true);
  case SH_ACT_CUT: return cut_sides(node, peer, true);
  case SH_ACT_HEAL: return cut_sides(node, peer, false);
  case SH_ACT_HEAL_ALL: heal_everything(); return 0;
  case SH_ACT_DRIFT:
    if (value > INT32_MAX || value < INT32_MIN) return -ERANGE;
    return sh_simnode_drift(node, (int32_t)value);
  case SH_ACT_JUMP:
    if (value > INT64_MAX / 1000000 || value < INT64_MIN / 1000000) return -ERANGE;
    return sh_simnode_jump(node, value * 1000000);
  case SH_SIMNODE_ACT_BOOT: A.pending_boot[node] = false; return sh_simnode_boot(node);
  default: return -EINVAL;
  }
}

/* act's names, resolved as its kind wants them. */
static int resolve(const sh_node_act *act, sh_simnode_queued *out) {
  if (act == NULL) return -EINVAL;
  *out = (sh_simnode_queued){.kind = (int)act->kind, .value = act->value};
  switch (act->kind) {
  case SH_ACT_HEAL_ALL: return 0;
  case SH_ACT_CUT:
  case SH_ACT_HEAL: {
    int rc = side_of(act->node, &out->node);
    return rc != 0 ? rc : side_of(act->peer, &out->peer);
  }
  case SH_ACT_CRASH:
  case SH_ACT_STOP:
  case SH_ACT_RESTART:
  case SH_ACT_RESTART_WIPED:
  case SH_ACT_DRIFT:
  case SH_ACT_JUMP: {
    int n = node_of(act->node);
    if (n < 0) return n;
    out->node = (uint32_t)n;
    return 0;
  }
  }
  return -EINVAL;
}

int sh_node_act_now(const sh_node_act *act) {
  int rc = caller_ok();
  sh_simnode_queued q;
  if (rc == 0) rc = resolve(act, &q);
  return rc != 0 ? rc : run_act(q.kind, q.node, q.peer, q.value);
}

/* ---- the nemesis ------------------------------------------------------------------- */

static void nemesis_main(void *arg) {
  (void)arg;
  sh_simtab *t = S->tab;
  /* Bounded by the run: the fiber ends with the simulation (acts_end),
   * each pass runs an act or sleeps until the next one is due or sh_simnode_queued. */
  for (;;) {
    if (A.n != 0 && A.q[0].at <= S->now) {
      sh_simnode_queued q = A.q[0];
      memmove(&A.q[0], &A.q[1], (A.n - 1) * sizeof(A.q[0]));
      A.n--;
      int rc = run_act(q.kind, q.node, q.peer, q.value);
      /* An act whose moment found the node so already is no error of the
       * script: a restart of a node a crash never took down, say. */
      (void)rc;
      continue;
    }
    sh_simrun_block(t, A.n != 0 ? A.q[0].at : SH_PLAT_NO_DEADLINE);
    sh_simrun_give_way("nemesis");
  }
}

int sh_simnode_queue(uint64_t at, const sh_simnode_queued *q) {
  if (A.n == SH_NODE_MAX_ACTS) return -ENOSPC;
  sh_simtab *t = S->tab;
  if (A.fiber == SH_SIMRUN_NO_FIBER) {
    int rc = sh_simplat_thread_new(0, nemesis_main, NULL, &A.fiber);
    if (rc != 0) {
      A.fiber = SH_SIMRUN_NO_FIBER;
      return rc;
    }
  }
  uint32_t i = A.n;
  while (i > 0 && A.q[i - 1].at > at) i--;
  memmove(&A.q[i + 1], &A.q[i], (A.n - i) * sizeof(A.q[0]));
  A.q[i] = *q;
  A.q[i].at = at;
  A.q[i].seq = A.seq++;
  A.n++;
  /* The nemesis sleeps until its earliest act: that may be this one. */
  sh_simrun_fiber *f = &t->f[A.fiber];
  if (f->state == SH_SIMRUN_BLOCKED && at < f->deadline) sh_simrun_unblock(t, f);
  return 0;
}

int sh_node_act_at(int64_t at_ms, const sh_node_act *act) {
  int rc = caller_ok();
  sh_simnode_queued q;
  if (rc == 0) rc = resolve(act, &q);
  if (rc != 0) return rc;
  if (at_ms < 0 || (uint64_t)at_ms > UINT64_MAX / 2000000u) return -EINVAL;
  return sh_simnode_queue((uint64_t)at_ms * 1000000u, &q);
}

void sh_simnode_acts_end(void) {
  sh_simtab *t = S->tab;
  if (A.fiber != SH_SIMRUN_NO_FIBER && t != NULL) {
    /* It waits in its loop, holding nothing: its stack can go. */
    sh_fiber_destroy(&t->f[A.fiber].ctx);
    sh_simplat_slot_free(t, A.fiber);
  }
  memset(&A, 0, sizeof(A));
  A.fiber = SH_SIMRUN_NO_FIBER;
}

int sh_node_calm(void) {
  int rc = caller_ok();
  if (rc != 0) return rc;
  A.n = 0;
  memset(A.pending_boot, 0, sizeof(A.pending_boot));
  X.calms++;
  sh_simnode_note(0, "calm");
  heal_everything();
  sh_simnode_reap_all();
  for (uint32_t n = 1; n <= X.n; n++) {
    if (X.node[n].ppm != 0) (void)sh_simnode_drift(n, 0);
    if (X.node[n].main != SH_SIMRUN_NO_FIBER) continue;
    int b = sh_simnode_boot(n);
    if (b != 0 && rc == 0) rc = b;
  }
  return rc;
}

int sh_node_stop_all(void) {
  int rc = caller_ok();
  if (rc != 0) return rc;
  A.n = 0;
  memset(A.pending_boot, 0, sizeof(A.pending_boot));
  heal_everything();
  for (uint32_t n = 1; n <= X.n; n++) {
    int s = sh_simnode_stop(n);
    if (s != 0 && s != -EALREADY && rc == 0) rc = s;
  }
  return rc;
}

/* ---- the calls ------------------------------------------------------------------------ */

static int act1(sh_node_act_kind kind, const char *name, const char *peer, int64_t value) {
  sh_node_act a = {.kind = kind, .node = name, .peer = peer, .value = value};
  return sh_node_act_now(&a);
}

int sh_node_crash(const char *name) { return act1(SH_ACT_CRASH, name, NULL, 0); }
int sh_node_stop(const char *name) { return act1(SH_ACT_STOP, name, NULL, 0); }
int sh_node_restart(const char *name, int64_t delay_ms, unsigned flags) {
  if ((flags & ~SH_NODE_WIPED) != 0) return -EINVAL;
  return act1((flags & SH_NODE_WIPED) != 0 ? SH_ACT_RESTART_WIPED : SH_ACT_RESTART, name, NULL,
              delay_ms);
}
int sh_node_cut(const char *from, const char *to) { return act1(SH_ACT_CUT, from, to, 0); }
int sh_node_heal(const char *from, const char *to) { return act1(SH_ACT_HEAL, from, to, 0); }
int sh_node_drift(const char *name, int32_t ppm) { return act1(SH_ACT_DRIFT, name, NULL, ppm); }
int sh_node_jump(const char *name, int64_t delta_ms) {
  return act1(SH_ACT_JUMP, name, NULL, delta_ms);
}

int sh_node_up(const char *name) {
  int rc = caller_ok();
  int n = rc == 0 ? node_of(name) : rc;
  if (n < 0) return n;
  sh_simnode_reap_all();
  return X.node[n].main != SH_SIMRUN_NO_FIBER;
}

/* The last simulation's nodes, as it ended (sh_simnode_end): their
 * stats stay readable until the next one adds a node. */
static struct {
  char name[32];
  sh_node_stats st;
} last[SH_SIMNODE_MAX];
static uint32_t nlast;

void sh_simnode_keep_stats(void) {
  nlast = 0;
  for (uint32_t n = 1; n <= X.n && nlast < SH_SIMNODE_MAX; n++, nlast++) {
    snprintf(last[nlast].name, sizeof(last[nlast].name), "%s", X.node[n].name);
    (void)sh_node_stats_get(X.node[n].name, &last[nlast].st);
  }
}

int sh_node_stats_get(const char *name, sh_node_stats *out) {
  if (name == NULL || out == NULL) return -EINVAL;
  if (X.n == 0) {
    for (uint32_t i = 0; i < nlast; i++)
      if (strcmp(last[i].name, name) == 0) {
        *out = last[i].st;
        return 0;
      }
    return -ENOENT;
  }
  int n = node_of(name);
  if (n < 0) return n;
  const sh_simnode *d = &X.node[n];
  *out = (sh_node_stats){.boots = d->boots, .crashes = d->crashes, .stops = d->stops,
                         .mem_peak = sh_simnodemem_peak((uint32_t)n)};
  return 0;
}
