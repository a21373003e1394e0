/*
 * Classification and printing of results (report.h).
 */
#include "report.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* The most telling line of the child's last stderr output: the last one naming
 * a failed assertion or a sanitizer report, else the last non-empty one. */
static void tail_pick(const pool_end *e, char *out, size_t cap) {
  static const char *const keys[] = {"Assertion", "runtime error:", "SUMMARY: ", "ERROR: "};
  char text[POOL_TAIL_BYTES + 1];
  memcpy(text, e->err_tail, e->err_len);
  text[e->err_len] = '\0';
  const char *best = NULL;
  for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]) && best == NULL; k++) {
    for (const char *h = strstr(text, keys[k]); h != NULL; h = strstr(h + 1, keys[k])) best = h;
  }
  size_t end = e->err_len;
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) end--;
  text[end] = '\0';
  if (best == NULL || best >= text + end) best = text + end;
  /* Back to the start of the line it is in. */
  while (best > text && best[-1] != '\n') best--;
  size_t len = strcspn(best, "\n");
  snprintf(out, cap, "%.*s", (int)len, best);
}

static const char *signal_name(int sig) {
  const char *n = sigabbrev_np(sig);
  return n != NULL ? n : "?";
}

/* out = a, or "a: b", or b; truncated to cap. */
static void join(char *out, size_t cap, const char *a, const char *b) {
  size_t n = 0;
  const char *parts[3] = {a, a[0] != '\0' && b[0] != '\0' ? ": " : "", b};
  for (size_t i = 0; i < 3; i++) {
    size_t len = strnlen(parts[i], cap - 1 - n);
    memcpy(out + n, parts[i], len);
    n += len;
  }
  out[n] = '\0';
}

/* A sanitizer report in the child's last stderr output. */
static bool tail_has_sanitizer_report(const pool_end *e) {
  static const char *const marks[] = {"Sanitizer", "runtime error:"};
  for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++)
    if (memmem(e->err_tail, e->err_len, marks[k], strlen(marks[k])) != NULL) return true;
  return false;
}

/* The kind of a death no handler reported, from the wait status. */
static const char *death_kind(const pool_end *e, uint64_t timeout_s, char *why, size_t cap) {
  if (e->timed_out) {
    snprintf(why, cap, "no result after %llu s of real time: killed",
             (unsigned long long)timeout_s);
    return "hang";
  }
  /* gcc links UBSan's runtime apart from ASan's, and its deaths do not call
   * the callback ASan's runtime holds: the report itself tells. */
  bool sanitizer = tail_has_sanitizer_report(e);
  if (WIFSIGNALED(e->status)) {
    int sig = WTERMSIG(e->status);
    snprintf(why, cap, "SIG%s (%s)", signal_name(sig), strsignal(sig));
    return sanitizer ? "sanitizer" : sig == SIGABRT ? "assert" : "crash";
  }
  snprintf(why, cap, "exited with status %d before reporting", WEXITSTATUS(e->status));
  return sanitizer ? "sanitizer" : "exit";
}

void report_classify(const unit_rec *held, uint64_t unit, uint64_t timeout_s, const pool_end *end,
                     unit_rec *r) {
  if (held != NULL && held->type == UNIT_REC_LAST) {
    /* Its last record said what happened; a sanitizer's detail is on stderr. */
    *r = *held;
    if (r->detail[0] == '\0') tail_pick(end, r->detail, sizeof(r->detail));
    return;
  }
  unit_rec_init(r, unit, UNIT_REC_RESULT);
  if (held != NULL) {
    r->rep = held->rep;
    r->real_ns = held->real_ns;
  }
  char why[96], line[200] = "";
  snprintf(r->kind, sizeof(r->kind), "%s", death_kind(end, timeout_s, why, sizeof(why)));
  if (!end->timed_out) tail_pick(end, line, sizeof(line));
  join(r->detail, sizeof(r->detail), why, line);
}

/* 1234567 -> "1.23M", 1.5 -> "1.5": figures span orders of magnitude. */
static void fmt_si(double v, char *out, size_t cap) {
  static const char suffix[] = " kMGT";
  size_t k = 0;
  while (v >= 1000.0 && k + 1 < sizeof(suffix) - 1) {
    v /= 1000.0;
    k++;
  }
  if (k > 0) snprintf(out, cap, "%.2f%c", v, suffix[k]);
  else snprintf(out, cap, v < 100.0 ? "%.3g" : "%.0f", v);
}

static void tally_add(report_tally *sum, const report_tally *t) {
  sum->runs += t->runs;
  sum->fails += t->fails;
  sum->msgs += t->msgs;
  sum->real_ns += t->real_ns;
  sum->vtime_ns += t->vtime_ns;
}

/* msgs/s: messages delivered per second of real time; virt:real: virtual
 * time simulated per unit of real time. */
static void table_row(const char *name, int w, const report_tally *t) {
  double real_s = (double)t->real_ns / 1e9;
  char rate[32] = "-", ratio[32] = "-", msgs[32];
  fmt_si((double)t->msgs, msgs, sizeof(msgs));
  if (real_s > 0) {
    fmt_si((double)t->msgs / real_s, rate, sizeof(rate));
    fmt_si((double)t->vtime_ns / (double)t->real_ns, ratio, sizeof(ratio));
  }
  printf("%-*s %8llu %8llu %10s %10s %11.1f %10s\n", w, name, (unsigned long long)t->runs,
         (unsigned long long)t->fails, msgs, rate, t->runs ? real_s * 1e3 / (double)t->runs : 0.0,
         ratio);
}

void report_sweep_table(const args *a, const unit_plan *p, size_t nslots, uint64_t real_ns,
                        const report_tally *per) {
  printf("strategy %s, seeds %llu..%llu", sh_sim_strategy_name(a->sim.strategy),
         (unsigned long long)p->seeds.lo, (unsigned long long)p->seeds.hi);
  if (a->shard_n > 1)
    printf(", shard %llu/%llu", (unsigned long long)a->shard_i, (unsigned long long)a->shard_n);
  printf(", %zu job%s, %.2f s\n", nslots, nslots == 1 ? "" : "s", (double)real_ns / 1e9);
  int w = 8;
  for (size_t i = 0; i < p->nscs; i++) {
    int len = (int)strlen(p->scs[i]->name);
    if (len > w) w = len;
  }
  printf("%-*s %8s %8s %10s %10s %11s %10s\n", w, "scenario", "seeds", "failed", "msgs", "msgs/s",
         "ms/run", "virt:real");
  report_tally total = {0};
  for (size_t i = 0; i < p->nscs; i++) {
    table_row(p->scs[i]->name, w, &per[i]);
    tally_add(&total, &per[i]);
  }
  if (p->nscs > 1) table_row("total", w, &total);
}

static int by_scenario_seed(const void *x, const void *y) {
  const report_failure *f = x, *g = y;
  if (f->scn != g->scn) return f->scn < g->scn ? -1 : 1;
  return (f->seed > g->seed) - (f->seed < g->seed);
}

/* The command that replays a failed run: the options that shape a run. */
static void print_replay(const args *a, const unit_plan *p, const report_failure *f) {
  const char *name = p->scs[f->scn]->name;
  args_print_command(a, "run", name, f->seed, ARGS_CMD_RUN);
  printf("\n    FAIL:%s: %s\n    to shrink its schedule: ", f->kind, f->detail);
  args_print_command(a, "shrink", name, f->seed, ARGS_CMD_SHRINK);
  printf("\n");
}

void report_failures(const args *a, const unit_plan *p, report_failure *fails, size_t nkept,
                     uint64_t nfails) {
  if (nfails == 0) return;
  qsort(fails, nkept, sizeof(report_failure), by_scenario_seed);
  printf("\n%llu failed run%s (replay each with the command shown):\n", (unsigned long long)nfails,
         nfails == 1 ? "" : "s");
  for (size_t i = 0; i < nkept; i++) print_replay(a, p, &fails[i]);
  if (nfails > nkept) printf("(%llu more not listed)\n", (unsigned long long)(nfails - nkept));
}

void report_run_line(const sh_scenario *sc, uint64_t seed, const unit_rec *r) {
  printf("scenario=%s seed=%llu result=%s%s hash=0x%016llx steps=%llu vtime_ns=%llu msgs=%llu\n",
         sc->name, (unsigned long long)seed, r->ok ? "ok" : "FAIL:", r->ok ? "" : r->kind,
         (unsigned long long)r->rep.hash, (unsigned long long)r->rep.steps,
         (unsigned long long)r->rep.vtime_ns, (unsigned long long)r->msgs);
}
