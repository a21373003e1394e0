/*
 * The scenario framework's nemesis drawn from the seed (<stackhouse/
 * scenario.h>, sh_scn_nemesis_draw): crashes with their restarts, cuts
 * with their heals, clock drifts, within the bounds a scenario declares.
 *
 * Every value is a draw of sh_scn_below, so each is a decision of the run:
 * replayed, and shrunk toward 0. 0 is always the simplest answer: a kind
 * switched off, no act, the first node, the start of the window, the
 * shortest outage, a cut both ways, a restart with what it persisted. The
 * acts are queued with sh_node_act_at and run by the simulator's nemesis
 * fiber at their times, so where the nodes stand when one lands is the
 * schedule's decision. Off the simulator (a cluster of processes) the
 * crashes and restarts are drawn the same way, from sh_scn_rand's stream,
 * and the launcher runs them at their times on the real clock.
 */
#include <errno.h>
#include <string.h>

#include <stackhouse/cluster.h>
#include <stackhouse/scenario.h>

/* Crash windows remembered to keep max_down, at most. */
#define SH_SCN_NEMESIS_WINDOWS 64

typedef struct window {
  uint64_t from, to; /* [from, to): down */
} window;

typedef struct plan {
  sh_scn *s;
  const sh_scn_nemesis *b;
  uint64_t span, outage;
  window down[SH_SCN_NEMESIS_WINDOWS];
  uint32_t ndown;
  int acts;
  int rc;
} plan;

static void queue(plan *p, uint64_t at, sh_node_act_kind kind, const char *node, const char *peer,
                  int64_t value) {
  if (p->rc != 0) return;
  sh_node_act a = {.kind = kind, .node = node, .peer = peer, .value = value};
  int rc = sh_node_act_at((int64_t)at, &a);
  if (rc != 0) p->rc = rc;
  else p->acts++;
}

/* Nodes down at some moment of [from, to) with a new window, at most. */
static uint32_t overlap(const plan *p, uint64_t from, uint64_t to, const char *node,
                        const char *const *who) {
  uint32_t most = 0;
  /* The count is highest at some window's start (or at `from`). */
  for (uint32_t i = 0; i <= p->ndown; i++) {
    uint64_t t = i < p->ndown ? p->down[i].from : from;
    if (t < from || t >= to) continue;
    uint32_t n = 1;
    for (uint32_t j = 0; j < p->ndown; j++) {
      if (p->down[j].from <= t && t < p->down[j].to) n++;
      if (p->down[j].from < to && from < p->down[j].to && who[j] == node) return UINT32_MAX;
    }
    if (n > most) most = n;
  }
  return most;
}

static void crashes(plan *p) {
  const sh_scn_nemesis *b = p->b;
  const char *who[SH_SCN_NEMESIS_WINDOWS];
  uint32_t k = (uint32_t)sh_scn_below(p->s, b->max_acts + 1u);
  for (uint32_t i = 0; i < k && p->ndown < SH_SCN_NEMESIS_WINDOWS; i++) {
    const char *node = b->nodes[sh_scn_below(p->s, b->n)];
    uint64_t at = b->start_ms + sh_scn_below(p->s, p->span);
    uint64_t delay = 1 + sh_scn_below(p->s, p->outage);
    bool wiped = b->wiped && sh_scn_below(p->s, 4) == 3;
    /* A crash that would take more than max_down down (or the same node
     * twice) is left out: the draws are taken all the same, so that the
     * next act's draws do not shift when this one is shrunk. */
    if (overlap(p, at, at + delay, node, who) > b->max_down) continue;
    who[p->ndown] = node;
    p->down[p->ndown++] = (window){at, at + delay};
    queue(p, at, SH_ACT_CRASH, node, NULL, 0);
    queue(p, at, wiped ? SH_ACT_RESTART_WIPED : SH_ACT_RESTART, node, NULL, (int64_t)delay);
  }
}

static void cuts(plan *p) {
  const sh_scn_nemesis *b = p->b;
  uint32_t k = (uint32_t)sh_scn_below(p->s, b->max_acts + 1u);
  for (uint32_t i = 0; i < k; i++) {
    /* Sides: a node, and a node or "main" (index n). */
    const char *from = b->nodes[sh_scn_below(p->s, b->n)];
    uint64_t j = sh_scn_below(p->s, b->n + 1u);
    const char *to = j < b->n ? b->nodes[j] : "main";
    uint64_t at = b->start_ms + sh_scn_below(p->s, p->span);
    uint64_t heal = at + 1 + sh_scn_below(p->s, p->outage);
    bool one_way = b->one_way && sh_scn_below(p->s, 2) == 1;
    bool backward = one_way && sh_scn_below(p->s, 2) == 1;
    if (from == to) continue;
    if (!one_way || !backward) {
      queue(p, at, SH_ACT_CUT, from, to, 0);
      queue(p, heal, SH_ACT_HEAL, from, to, 0);
    }
    if (!one_way || backward) {
      queue(p, at, SH_ACT_CUT, to, from, 0);
      queue(p, heal, SH_ACT_HEAL, to, from, 0);
    }
  }
}

static void drifts(plan *p) {
  const sh_scn_nemesis *b = p->b;
  uint32_t k = (uint32_t)sh_scn_below(p->s, b->max_acts + 1u);
  for (uint32_t i = 0; i < k; i++) {
    const char *node = b->nodes[sh_scn_below(p->s, b->n)];
    uint64_t at = b->start_ms + sh_scn_below(p->s, p->span);
    uint64_t m = (uint64_t)b->max_drift_ppm;
    /* 0, 1, 2, ... alternate around 0: +1, -1, +2, ... so 0 is no drift. */
    uint64_t d = sh_scn_below(p->s, 2 * m + 1);
    int64_t ppm = d % 2 == 1 ? (int64_t)(d + 1) / 2 : -(int64_t)(d / 2);
    queue(p, at, SH_ACT_DRIFT, node, NULL, ppm);
  }
}

int sh_scn_nemesis_draw(sh_scn *s, const sh_scn_nemesis *b) {
  if (s == NULL || b == NULL || b->nodes == NULL || b->n == 0 || b->end_ms <= b->start_ms ||
      b->max_drift_ppm < 0)
    return -EINVAL;
  plan p = {.s = s, .b = b, .span = b->end_ms - b->start_ms};
  sh_scn_nemesis bb = *b;
  if (bb.max_acts == 0) bb.max_acts = 8;
  p.b = &bb;
  p.outage = b->max_outage_ms != 0 ? b->max_outage_ms : 2000;
  /* Swarm: each kind on or off for the whole run, then its acts. */
  bool crash_on = b->max_down > 0 && sh_scn_below(s, 2) == 1;
  /* Off the simulator, crashes and restarts only: cuts and drift need its
   * network and clocks (a cluster of processes answers -ENOTSUP). */
  bool sim = sh_scn_simulated(s);
  bool cut_on = sim && b->cuts && sh_scn_below(s, 2) == 1;
  bool drift_on = sim && b->max_drift_ppm > 0 && sh_scn_below(s, 2) == 1;
  if (crash_on) crashes(&p);
  if (cut_on) cuts(&p);
  if (drift_on) drifts(&p);
  return p.rc != 0 ? p.rc : p.acts;
}
