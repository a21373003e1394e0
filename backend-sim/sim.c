/*
 * The deterministic simulator: core/plat.h on fibers and a virtual clock.
 *
 * Fibers. Worker w is fiber w; the thread that created the system (the
 * scenario's "outside" thread: it runs setup, sh_system_wait, shutdown) is
 * fiber `workers`, on its own stack. Each sh_plat_thread_start adds a thread
 * fiber, `workers` + 1, + 2, ... in the order of the calls (a program's own
 * thread: not a worker, sh_plat_local NULL), scheduled like the others. Its
 * slot is never reused: a system starts at most SH_PLAT_MAX_THREADS of them
 * in all (then -EAGAIN), which keeps the numbering, and so every schedule,
 * a function of the run alone. Exactly one fiber runs at a time.
 *
 * Steps. Every scheduling point the core passes (SH_YIELD, sh_plat_relax,
 * sh_plat_yield_cpu, a park) is a step: the clock advances step_ns (a lone
 * poller's idle_step_ns), bounds are checked (max_steps: livelock;
 * vtime_limit_ns), sleepers whose deadline passed become runnable, and the
 * strategy decides whether to switch:
 *   random  switch with probability switch_permille/1000 (at a polling step
 *           at least 1/2) to a runnable fiber chosen uniformly;
 *   pct     run the runnable fiber of highest priority (PCT: random distinct
 *           initial priorities, pct_depth - 1 change points among the first
 *           pct_steps yield points, each dropping the running fiber below all);
 *   none    never switch at a step.
 * A thread fiber created under pct gets a priority of a random rank among
 * the live fibers still at their initial priorities (those above every change
 * point), drawn from the schedule's generator.
 * A fiber that parks or blocks always gives way; one that yields its CPU
 * (a spin wait) gives way to another runnable fiber under every strategy, and
 * under pct drops to the lowest priority so that the fiber it waits for runs.
 * A fiber that ran SH_SIM_QUANTUM_STEPS without giving way is preempted.
 *
 * Schedules. Every switch is logged (step, fiber, forced or a preemption).
 * With options.schedule set, the choices come from that list instead of the
 * strategy (replay; shrink.c cuts failing schedules down).
 *
 * Time. When no fiber can run, the clock jumps to the earliest deadline of
 * a park or of a timed event wait; if there is none, nothing can ever run
 * again: FAIL:deadlock.
 *
 * Events. A fiber that is not a worker (the outside fiber, a thread fiber)
 * blocks on an event until a set (from any fiber) makes it runnable, or its
 * deadline expires like a park's. A timed wait whose deadline has already
 * passed is a polling step instead, so that a loop of such polls advances
 * the clock and lets the others run.
 *
 * Randomness. Two xoshiro256** generators per simulation, seeded with
 * splitmix64 outputs of the seed: one decides switches and PCT's priorities
 * and change points, the other serves sh_plat_random (the core's steal
 * order), so that a replay, which draws no schedule, leaves the core's
 * stream as it was.
 *
 * Trace hash. 64 bits, mixed (see mix()) with every switch (from, to, the
 * yield point's name), every time jump (new time), every thread fiber's
 * creation (its index), every core trace point (fiber, kind, house number,
 * name, flow id) and the final step count and clock. Names are hashed by
 * content, never by address.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/sim.h>

#include "fiber.h"
#include "plat.h"
#include "trace.h"

/* Logical workers per simulation. */
#define SH_SIM_MAX_WORKERS 64
/* Fibers per simulation: the workers, the outside fiber and the thread
 * fibers. Every per-fiber scan is bounded by the live count, p->nfibers. */
#define SH_SIM_MAX_FIBERS (SH_SIM_MAX_WORKERS + 1 + SH_PLAT_MAX_THREADS)
/* sh_plat_cpu_count in the simulator: a fixed answer keeps runs alike everywhere. */
#define SH_SIM_CPUS 4
/* Switches recorded per run, at most (16 bytes each). */
#define SH_SIM_MAX_LOG (1u << 22)
/* Steps a fiber may run without giving way before it is preempted: a real
 * machine runs woken peers on other CPUs, or preempts; without this a worker
 * that always has work would starve them under `none` and `pct`. */
#define SH_SIM_QUANTUM_STEPS 10000
/* PCT change points, at most (pct_depth is clamped to this + 1). */
#define SH_SIM_MAX_CHANGES 16

typedef enum fiber_state {
  F_RUNNABLE,
  F_PARKED,  /* sh_plat_park: until a wake or its deadline */
  F_BLOCKED, /* not a worker: in an event wait (until a set or its deadline),
              * sh_plat_join or sh_plat_thread_join */
  F_DONE,
} fiber_state;

/* No fiber (an event nobody waits on, a thread nobody joins yet). */
#define NO_FIBER UINT32_MAX

typedef struct sim_fiber {
  sh_fiber ctx;
  uint32_t index;
  fiber_state state;
  bool wake_pending; /* a wake that came while not parked */
  uint64_t deadline; /* parked or blocked: wake time, or SH_PLAT_NO_DEADLINE */
  void *local;
  int64_t prio; /* pct */
  /* Thread fibers only: */
  void (*fn)(void *arg);
  void *arg;
  uint32_t joiner; /* the fiber blocked in sh_plat_thread_join on it, or NO_FIBER */
  bool joined;     /* its stack was freed: sh_plat_free may go */
} sim_fiber;

struct sh_plat {
  uint32_t nworkers;
  uint32_t nfibers; /* workers + the outside fiber + the thread fibers started */
  sh_plat_entry entry;
  void *ctx;
  bool started;
  uint32_t ndone;
  uint32_t cur;          /* the running fiber */
  uint64_t next_deadline; /* earliest deadline of a parked or blocked fiber */
  sim_fiber f[];           /* room for SH_PLAT_MAX_THREADS thread fibers */
};

struct sh_plat_event {
  bool set;
  uint32_t waiter; /* the fiber in a wait on it, or NO_FIBER */
};

struct sh_plat_thread {
  uint32_t fiber;
};

/* The simulation: one per process at a time, driven from one thread. */
static struct {
  sh_sim_options opt;
  bool configured;
  uint64_t rng[4];      /* the schedule's choices */
  uint64_t core_rng[4]; /* sh_plat_random: a stream of its own, so that a replayed
                         * schedule (which draws nothing) leaves it as it was */
  sh_sim_choice *log;   /* the switches of this run, in order */
  size_t nlog, caplog;
  bool log_full;
  size_t replay_i;      /* the next choice of opt.schedule */
  uint64_t points;      /* yield points passed (pct's change points count these) */
  uint64_t slice;       /* steps since the running fiber got the CPU */
  bool used;            /* a system ran since the last configure */
  bool failing;         /* sim_fail is running its handler */
  uint64_t now, steps, hash, switches, jumps;
  sh_plat *plat;
  void *outside_local; /* sh_plat_local of the outside fiber */
  sh_simtrace *trace;
  int64_t prio_floor;
  uint64_t changes[SH_SIM_MAX_CHANGES];
  uint32_t nchanges, next_change;
  sh_sim_fail_fn on_fail;
} S;

/* ---- generator and hash ------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman and Vigna). */
static uint64_t xoshiro(uint64_t *s) {
  uint64_t r = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return r;
}

static uint64_t rng_next(void) { return xoshiro(S.rng); }

/* Uniform in [0, n), n > 0 (the modulo bias is below 2^-40 for our n). */
static uint64_t rng_below(uint64_t n) { return rng_next() % n; }

static void mix(uint64_t v) {
  S.hash = rotl((S.hash ^ v) * 0x100000001B3ull, 29) + 0x9E3779B97F4A7C15ull;
}

static uint64_t str_hash(const char *s) {
  uint64_t h = 0xCBF29CE484222325ull;
  /* Names are short static strings; the bound only guards a missing NUL. */
  for (int i = 0; s != NULL && s[i] != '\0' && i < 256; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
  return h;
}

enum { MIX_SWITCH = 1, MIX_JUMP, MIX_TRACE, MIX_END, MIX_THREAD };

/* ---- options ------------------------------------------------------------- */

void sh_sim_options_default(sh_sim_options *o) {
  memset(o, 0, sizeof(*o));
  o->seed = 1;
  o->strategy = SH_SIM_RANDOM;
  o->switch_permille = 100;
  o->pct_depth = 3;
  o->pct_steps = 10000;
  o->step_ns = 100;
  o->idle_step_ns = 2000;
  o->max_steps = 100000000;
}

static const char *const strategy_names[] = {"random", "pct", "none"};

int sh_sim_strategy_parse(const char *name, sh_sim_strategy *out) {
  for (int i = 0; i < 3; i++) {
    if (name != NULL && strcmp(name, strategy_names[i]) == 0) {
      *out = (sh_sim_strategy)i;
      return 0;
    }
  }
  return -EINVAL;
}

const char *sh_sim_strategy_name(sh_sim_strategy s) {
  return (unsigned)s < 3 ? strategy_names[s] : "?";
}

static void default_fail(const char *kind, const char *detail) {
  fprintf(stderr, "simulation failed: %s: %s\n", kind, detail);
  fflush(NULL);
  _exit(1);
}

void sh_sim_on_failure(sh_sim_fail_fn fn) { S.on_fail = fn; }

void sh_sim_configure(const sh_sim_options *o) {
  assert(S.plat == NULL);
  sh_sim_fail_fn keep = S.on_fail;
  free(S.log);
  memset(&S, 0, sizeof(S));
  S.on_fail = keep;
  S.opt = *o;
  if (S.opt.step_ns == 0) S.opt.step_ns = 1;
  if (S.opt.pct_depth == 0) S.opt.pct_depth = 1;
  if (S.opt.pct_depth > SH_SIM_MAX_CHANGES + 1) S.opt.pct_depth = SH_SIM_MAX_CHANGES + 1;
  if (S.opt.pct_steps == 0) S.opt.pct_steps = 1;
  uint64_t x = o->seed;
  for (int i = 0; i < 4; i++) S.rng[i] = splitmix64(&x);
  for (int i = 0; i < 4; i++) S.core_rng[i] = splitmix64(&x);
  S.hash = 0x5348534D00000000ull ^ o->seed;
  S.configured = true;
}

static void ensure_configured(void) {
  if (S.configured) return;
  sh_sim_options o;
  sh_sim_options_default(&o);
  sh_sim_configure(&o);
}

size_t sh_sim_schedule(const sh_sim_choice **out) {
  *out = S.log;
  return S.log_full ? 0 : S.nlog;
}

void sh_sim_report_get(sh_sim_report *r) {
  r->hash = S.hash;
  r->steps = S.steps;
  r->vtime_ns = S.now;
  r->switches = S.switches;
  r->jumps = S.jumps;
}

/* ---- failures -------------------------------------------------------------- */

static uint32_t cur_index(void) { return S.plat != NULL ? S.plat->cur : 0; }

/* A trace that could not be written is worth a warning, not a failed run. */
static void trace_close(void) {
  if (S.trace == NULL) return;
  int rc = sh_simtrace_close(S.trace, S.now);
  S.trace = NULL;
  if (rc != 0) fprintf(stderr, "shsim: writing the trace failed: %s\n", strerror(-rc));
}

__attribute__((noreturn)) static void sim_fail(const char *kind, const char *detail) {
  /* A handler that passes a scheduling point fails the same bound again. */
  if (S.failing) default_fail(kind, detail);
  S.failing = true;
  if (S.trace != NULL) {
    char name[64];
    snprintf(name, sizeof(name), "FAIL: %s", kind);
    sh_simtrace_instant(S.trace, S.now, cur_index(), name);
    trace_close();
  }
  (S.on_fail != NULL ? S.on_fail : default_fail)(kind, detail);
  default_fail(kind, detail); /* a handler that returned */
  abort();
}

void sh_sim_trace_abandon(const char *why) {
  if (S.trace == NULL) return;
  char name[64];
  snprintf(name, sizeof(name), "FAIL: %s", why);
  sh_simtrace_instant(S.trace, S.now, cur_index(), name);
  trace_close();
}

/* ---- scheduling -------------------------------------------------------------- */

/* Parked, or blocked: a deadline (if not SH_PLAT_NO_DEADLINE) wakes it. A
 * fiber blocked without one has SH_PLAT_NO_DEADLINE there. */
static bool sleeping(const sim_fiber *f) { return f->state == F_PARKED || f->state == F_BLOCKED; }

static void recompute_deadline(sh_plat *p) {
  uint64_t d = SH_PLAT_NO_DEADLINE;
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (sleeping(&p->f[i]) && p->f[i].deadline < d) d = p->f[i].deadline;
  p->next_deadline = d;
}

static void make_runnable(sim_fiber *f) {
  f->state = F_RUNNABLE;
  f->deadline = SH_PLAT_NO_DEADLINE;
}

/* A blocked fiber's reason to wait is over: it runs again (and re-checks). */
static void unblock(sh_plat *p, sim_fiber *f) {
  if (f->state != F_BLOCKED) return;
  bool timed = f->deadline != SH_PLAT_NO_DEADLINE;
  make_runnable(f);
  if (timed) recompute_deadline(p);
}

/* The running fiber blocks until unblock() or (if not SH_PLAT_NO_DEADLINE)
 * the deadline; the caller gives way next. */
static void block(sh_plat *p, uint64_t deadline_ns) {
  sim_fiber *f = &p->f[p->cur];
  f->state = F_BLOCKED;
  f->deadline = deadline_ns;
  if (deadline_ns < p->next_deadline) p->next_deadline = deadline_ns;
}

/* Sleeping fibers whose deadline has come become runnable. */
static void expire(sh_plat *p) {
  if (S.now < p->next_deadline) return;
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (sleeping(&p->f[i]) && p->f[i].deadline <= S.now) make_runnable(&p->f[i]);
  recompute_deadline(p);
}

/* A runnable fiber other than `skip` (UINT32_MAX: none skipped), uniformly,
 * or UINT32_MAX if there is none. */
static uint32_t pick_uniform(sh_plat *p, uint32_t skip) {
  uint32_t cand[SH_SIM_MAX_FIBERS];
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (i != skip && p->f[i].state == F_RUNNABLE) cand[n++] = i;
  return n == 0 ? UINT32_MAX : cand[rng_below(n)];
}

/* The runnable fiber of highest priority (ties: lowest index), or UINT32_MAX. */
static uint32_t pick_highest(sh_plat *p) {
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < p->nfibers; i++) {
    if (p->f[i].state != F_RUNNABLE) continue;
    if (best == UINT32_MAX || p->f[i].prio > p->f[best].prio) best = i;
  }
  return best;
}

static bool replaying(void) { return S.opt.schedule != NULL; }

/* Replay: the fiber the schedule names for this step, if it names one that
 * can run; entries for steps already passed (the run went another way) are
 * dropped. */
static uint32_t replay_choice(const sh_plat *p, bool forced) {
  const sh_sim_choice *s = S.opt.schedule;
  size_t n = S.opt.schedule_len;
  while (S.replay_i < n && s[S.replay_i].step < S.steps) S.replay_i++;
  /* A preemption and a forced switch can share a step (a yield point, then
   * a park before the next step): each entry is for its own kind. */
  if (S.replay_i == n || s[S.replay_i].step != S.steps || s[S.replay_i].forced != forced)
    return UINT32_MAX;
  uint32_t to = s[S.replay_i++].to;
  return to < p->nfibers && p->f[to].state == F_RUNNABLE ? to : UINT32_MAX;
}

/* Replay, where a switch is due: the scheduled fiber, else the runnable one
 * of lowest index (a choice that needs no entry). */
static uint32_t pick_replay(sh_plat *p, uint32_t skip) {
  uint32_t c = replay_choice(p, true);
  if (c != UINT32_MAX && c != skip) return c;
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (i != skip && p->f[i].state == F_RUNNABLE) return i;
  return UINT32_MAX;
}

static uint32_t pick_next(sh_plat *p, uint32_t skip) {
  if (replaying()) return pick_replay(p, skip);
  if (S.opt.strategy == SH_SIM_PCT) {
    uint32_t b = pick_highest(p);
    if (b != skip || b == UINT32_MAX) return b;
    /* skip is the highest: the next highest below it. */
    int64_t keep = p->f[skip].prio;
    p->f[skip].prio = INT64_MIN;
    b = pick_highest(p);
    p->f[skip].prio = keep;
    return b == skip ? UINT32_MAX : b;
  }
  return pick_uniform(p, skip);
}

/* Appends a switch to the run's schedule. Bounded: past SH_SIM_MAX_LOG the
 * schedule is incomplete (log_full) and cannot be replayed or shrunk. */
static void log_switch(uint32_t to, bool forced) {
  if (S.nlog == S.caplog) {
    size_t cap = S.caplog == 0 ? 1024 : S.caplog * 2;
    sh_sim_choice *n = cap <= SH_SIM_MAX_LOG ? realloc(S.log, cap * sizeof(*n)) : NULL;
    if (n == NULL) {
      S.log_full = true;
      return;
    }
    S.log = n;
    S.caplog = cap;
  }
  S.log[S.nlog++] = (sh_sim_choice){.step = S.steps, .to = to, .forced = forced};
}

/* forced: the running fiber could not go on (or had to give way), as
 * opposed to a preemption the strategy chose at a scheduling point. */
static void switch_to(sh_plat *p, uint32_t next, const char *where, bool forced) {
  uint32_t from = p->cur;
  if (next == from) return;
  S.switches++;
  S.slice = 0;
  log_switch(next, forced);
  mix(MIX_SWITCH);
  mix(((uint64_t)from << 32) | next);
  mix(str_hash(where));
  p->cur = next;
  if (p->f[from].state == F_DONE)
    sh_fiber_exit_to(&p->f[from].ctx, &p->f[next].ctx);
  sh_fiber_switch(&p->f[from].ctx, &p->f[next].ctx);
}

/* The clock moves to `t` (if later) because nothing could run before it. */
static void clock_jump(uint64_t t) {
  if (t > S.now) S.now = t;
  S.jumps++;
  mix(MIX_JUMP);
  mix(S.now);
  if (S.trace != NULL) sh_simtrace_instant(S.trace, S.now, cur_index(), "time jump");
}

/* No fiber can run: jump the clock to the earliest deadline. */
static void jump(sh_plat *p) {
  if (p->next_deadline == SH_PLAT_NO_DEADLINE) {
    char d[200];
    uint32_t threads = p->nfibers - p->nworkers - 1;
    snprintf(d, sizeof(d),
             "every fiber is parked or blocked with no deadline (vtime %llu ns, %u of %u workers "
             "finished, %u thread fibers started)",
             (unsigned long long)S.now, p->ndone, p->nworkers, threads);
    sim_fail("deadlock", d);
  }
  clock_jump(p->next_deadline);
  expire(p);
}

/* The running fiber cannot go on (parked, blocked, done): run another. */
static void give_way(const char *where) {
  sh_plat *p = S.plat;
  /* Bounded: every jump makes at least one sleeping fiber runnable. */
  for (;;) {
    uint32_t next = pick_next(p, UINT32_MAX);
    if (next != UINT32_MAX) {
      switch_to(p, next, where, true);
      return;
    }
    jump(p);
  }
}

static void pct_change_point(sh_plat *p) {
  if (S.next_change >= S.nchanges || S.points != S.changes[S.next_change]) return;
  /* Change point i drops the running fiber to priority d - i: below every
   * initial priority, and below the earlier change points. */
  S.next_change++;
  p->f[p->cur].prio = (int64_t)S.opt.pct_depth - (int64_t)S.next_change;
}

/* Whether a fiber other than the running one could run now. */
static bool others_runnable(const sh_plat *p) {
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (i != p->cur && p->f[i].state == F_RUNNABLE) return true;
  return false;
}

/* Whether nothing but time can happen while the running fiber polls: no
 * other fiber can run, or the strategy would not switch to one at a
 * polling step anyway (none; pct while the poller has the highest
 * priority). */
static bool polls_alone(sh_plat *p) {
  switch (S.opt.strategy) {
  case SH_SIM_NONE:
    return true;
  case SH_SIM_PCT:
    return pick_highest(p) == p->cur;
  case SH_SIM_RANDOM:
    break;
  }
  return !others_runnable(p);
}

/* The clock's advance for this step. A fiber polling alone waits for
 * nothing but time (its own timers, a sleeper's deadline): its steps advance
 * idle_step_ns, so an idle poll costs tens of steps instead of hundreds
 * (the core's poll thresholds are in nanoseconds), but never past a
 * sleeper's deadline. */
static uint64_t advance(sh_plat *p, bool polling) {
  if (!polling || S.opt.idle_step_ns <= S.opt.step_ns || !polls_alone(p)) return S.opt.step_ns;
  uint64_t d = S.opt.idle_step_ns;
  if (p->next_deadline > S.now && p->next_deadline - S.now < d) d = p->next_deadline - S.now;
  return d > S.opt.step_ns ? d : S.opt.step_ns;
}

static void step(sh_plat *p, bool polling) {
  S.steps++;
  S.now += advance(p, polling);
  if (S.steps > S.opt.max_steps) {
    char d[96];
    snprintf(d, sizeof(d), "more than %llu steps (vtime %llu ns)",
             (unsigned long long)S.opt.max_steps, (unsigned long long)S.now);
    sim_fail("livelock", d);
  }
  if (S.opt.vtime_limit_ns != 0 && S.now > S.opt.vtime_limit_ns) {
    char d[96];
    snprintf(d, sizeof(d), "virtual time passed its limit of %llu ns",
             (unsigned long long)S.opt.vtime_limit_ns);
    sim_fail("vtime", d);
  }
  S.slice++;
  expire(p);
}

/* Only once workers exist is there anyone to switch to. */
static sh_plat *active(void) { return S.plat != NULL && S.plat->started ? S.plat : NULL; }

/* random: a poll touches nothing another fiber could race with, so where it
 * gives way matters little; it gives way at least this often (permille), as
 * a spinning thread and its producer would both run on a real machine. */
#define SH_SIM_POLL_SWITCH_PERMILLE 500u

/* The strategy's choice at a scheduling point (UINT32_MAX: stay). */
static uint32_t decide(sh_plat *p, bool polling) {
  if (replaying()) return replay_choice(p, false);
  uint32_t permille = S.opt.switch_permille;
  if (polling && permille < SH_SIM_POLL_SWITCH_PERMILLE) permille = SH_SIM_POLL_SWITCH_PERMILLE;
  switch (S.opt.strategy) {
  case SH_SIM_RANDOM:
    return rng_below(1000) < permille ? pick_uniform(p, p->cur) : UINT32_MAX;
  case SH_SIM_PCT:
    return pick_highest(p);
  case SH_SIM_NONE:
    break;
  }
  return UINT32_MAX;
}

/* A scheduling point: the strategy may switch. */
static void point(const char *where, bool polling) {
  sh_plat *p = active();
  if (p == NULL) return;
  step(p, polling);
  if (!polling) {
    S.points++;
    if (S.opt.strategy == SH_SIM_PCT) pct_change_point(p);
  }
  uint32_t next = decide(p, polling);
  if (next != UINT32_MAX && next != p->cur) {
    switch_to(p, next, where, false);
    return;
  }
  if (S.slice < SH_SIM_QUANTUM_STEPS) return;
  /* The quantum is over: give way as a preempted thread would. */
  S.slice = 0;
  if (S.opt.strategy == SH_SIM_PCT) p->f[p->cur].prio = --S.prio_floor;
  next = pick_next(p, p->cur);
  if (next != UINT32_MAX) switch_to(p, next, "preempt", true);
}

void sh_plat_yield(const char *where) { point(where, false); }
void sh_plat_relax(void) { point("relax", true); }

void sh_plat_yield_cpu(void) {
  sh_plat *p = active();
  if (p == NULL) return;
  step(p, true);
  if (S.opt.strategy == SH_SIM_PCT) p->f[p->cur].prio = --S.prio_floor;
  uint32_t next = pick_next(p, p->cur);
  if (next != UINT32_MAX) switch_to(p, next, "yield_cpu", true);
}

/* ---- the platform ---------------------------------------------------------- */

int sh_plat_new(uint32_t workers, sh_plat **out) {
  ensure_configured();
  if (S.plat != NULL) return -EBUSY; /* one simulated system at a time */
  if (S.used) {
    /* A simulation is one system: the next starts afresh (clock, steps,
     * generator, hash), as if configured again with the same options. */
    sh_sim_options o = S.opt;
    sh_sim_configure(&o);
  }
  S.used = true;
  if (workers == 0 || workers > SH_SIM_MAX_WORKERS) return -EINVAL;
  sh_plat *p = calloc(1, sizeof(*p) + (workers + 1 + SH_PLAT_MAX_THREADS) * sizeof(sim_fiber));
  if (p == NULL) return -ENOMEM;
  p->nworkers = workers;
  p->nfibers = workers + 1;
  p->cur = workers;
  p->next_deadline = SH_PLAT_NO_DEADLINE;
  for (uint32_t i = 0; i < p->nfibers; i++) {
    p->f[i].index = i;
    p->f[i].state = i == workers ? F_RUNNABLE : F_DONE;
    p->f[i].deadline = SH_PLAT_NO_DEADLINE;
  }
  sh_fiber_init_self(&p->f[workers].ctx);
  p->f[workers].local = S.outside_local;
  if (S.opt.trace_path != NULL && S.trace == NULL) {
    int rc = sh_simtrace_open(S.opt.trace_path, workers, &S.trace);
    if (rc != 0) {
      free(p);
      return rc;
    }
  }
  S.plat = p;
  *out = p;
  return 0;
}

void sh_plat_free(sh_plat *p) {
  if (p == NULL) return;
  assert(p == S.plat && p->cur == p->nworkers && p->ndone == (p->started ? p->nworkers : 0));
  for (uint32_t i = p->nworkers + 1; i < p->nfibers; i++)
    assert(p->f[i].joined && "sh_plat_free before sh_plat_thread_join");
  S.outside_local = p->f[p->nworkers].local;
  for (uint32_t i = 0; i < p->nworkers; i++) sh_fiber_destroy(&p->f[i].ctx);
  mix(MIX_END);
  mix(S.steps);
  mix(S.now);
  trace_close();
  S.plat = NULL;
  free(p);
}

/* PCT: distinct random initial priorities d .. d+n-1 and d-1 change points. */
static void pct_init(sh_plat *p) {
  uint32_t n = p->nfibers;
  int64_t order[SH_SIM_MAX_FIBERS];
  for (uint32_t i = 0; i < n; i++) order[i] = i;
  for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
    uint32_t j = (uint32_t)rng_below(i + 1);
    int64_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (uint32_t i = 0; i < n; i++) p->f[i].prio = (int64_t)S.opt.pct_depth + order[i];
  S.nchanges = S.opt.pct_depth - 1;
  for (uint32_t i = 0; i < S.nchanges; i++) S.changes[i] = 1 + rng_below(S.opt.pct_steps);
  /* Sorted, so the step loop checks only the next one (insertion sort: d <= 17). */
  for (uint32_t i = 1; i < S.nchanges; i++)
    for (uint32_t j = i; j > 0 && S.changes[j - 1] > S.changes[j]; j--) {
      uint64_t t = S.changes[j];
      S.changes[j] = S.changes[j - 1];
      S.changes[j - 1] = t;
    }
  S.prio_floor = 0;
}

static void fiber_main(void *arg) {
  sh_fiber_started();
  sim_fiber *f = arg;
  sh_plat *p = S.plat;
  p->entry(p->ctx, f->index);
  f->state = F_DONE;
  p->ndone++;
  /* The outside fiber may be in sh_plat_join; if it blocks for another
   * reason, it re-checks that and blocks again. */
  if (p->ndone == p->nworkers) unblock(p, &p->f[p->nworkers]);
  give_way("exit");
  abort(); /* a finished fiber is never switched to */
}

int sh_plat_start(sh_plat *p, sh_plat_entry entry, void *ctx) {
  assert(p == S.plat && !p->started);
  p->entry = entry;
  p->ctx = ctx;
  for (uint32_t i = 0; i < p->nworkers; i++) {
    int rc = sh_fiber_init(&p->f[i].ctx, sh_fiber_default_stack(), fiber_main, &p->f[i]);
    if (rc != 0) {
      for (uint32_t j = 0; j < i; j++) sh_fiber_destroy(&p->f[j].ctx);
      return rc;
    }
  }
  for (uint32_t i = 0; i < p->nworkers; i++) make_runnable(&p->f[i]);
  if (S.opt.strategy == SH_SIM_PCT) pct_init(p);
  p->started = true;
  return 0;
}

void sh_plat_join(sh_plat *p) {
  assert(p == S.plat && p->cur == p->nworkers);
  if (!p->started) return;
  /* Bounded by the workers: each pass ends only when one more finished. */
  while (p->ndone < p->nworkers) {
    block(p, SH_PLAT_NO_DEADLINE);
    give_way("join");
  }
}

void *sh_plat_local(void) {
  return S.plat != NULL ? S.plat->f[S.plat->cur].local : S.outside_local;
}

void sh_plat_set_local(void *ctx) {
  if (S.plat != NULL)
    S.plat->f[S.plat->cur].local = ctx;
  else
    S.outside_local = ctx;
}

uint32_t sh_plat_cpu_count(void) { return SH_SIM_CPUS; }

uint64_t sh_plat_now_ns(void) { return S.now; }

uint64_t sh_plat_random(void) {
  ensure_configured();
  return xoshiro(S.core_rng);
}

void sh_plat_park(sh_plat *p, uint32_t w, uint64_t deadline_ns) {
  assert(p == S.plat && w == p->cur && w < p->nworkers);
  sim_fiber *f = &p->f[w];
  step(p, false);
  if (f->wake_pending || deadline_ns <= S.now) {
    f->wake_pending = false;
    return;
  }
  f->state = F_PARKED;
  f->deadline = deadline_ns;
  if (deadline_ns < p->next_deadline) p->next_deadline = deadline_ns;
  give_way("park");
  /* Woken (make_runnable) or expired: either way runnable again. */
  f->wake_pending = false;
}

void sh_plat_wake(sh_plat *p, uint32_t w) {
  assert(p == S.plat && w < p->nworkers);
  sim_fiber *f = &p->f[w];
  if (f->state == F_PARKED) {
    make_runnable(f);
    recompute_deadline(p);
  } else if (f->state != F_DONE) {
    f->wake_pending = true;
  }
}

/* ---- events (fibers that are not workers wait on them) ------------------------ */

int sh_plat_event_new(sh_plat_event **out) {
  sh_plat_event *e = calloc(1, sizeof(*e));
  if (e == NULL) return -ENOMEM;
  e->waiter = NO_FIBER;
  *out = e;
  return 0;
}

void sh_plat_event_free(sh_plat_event *e) { free(e); }

void sh_plat_event_set(sh_plat_event *e) {
  e->set = true;
  sh_plat *p = S.plat;
  if (e->waiter != NO_FIBER && p != NULL && e->waiter < p->nfibers)
    unblock(p, &p->f[e->waiter]);
}

void sh_plat_event_reset(sh_plat_event *e) { e->set = false; }

/* No fiber can set the event: with a deadline the clock jumps to it, as it
 * would with every fiber asleep; without one the wait could never end. */
static int wait_alone(uint64_t deadline_ns) {
  if (deadline_ns == SH_PLAT_NO_DEADLINE)
    sim_fail("deadlock", "waiting for an event with no worker running");
  clock_jump(deadline_ns);
  return -ETIMEDOUT;
}

int sh_plat_event_wait_until(sh_plat_event *e, uint64_t deadline_ns) {
  if (e->set) return 0;
  sh_plat *p = active();
  if (p == NULL) return wait_alone(deadline_ns);
  assert(p->cur >= p->nworkers); /* workers never block on events */
  if (deadline_ns <= S.now) {
    /* A poll: a scheduling point, so that a loop of polls lets the setter run. */
    point("event_poll", true);
    return e->set ? 0 : -ETIMEDOUT;
  }
  assert(e->waiter == NO_FIBER); /* one waiter at a time */
  e->waiter = p->cur;
  /* Bounded: each pass ends with a set (unblock), the deadline (expire) or
   * the last worker's exit, which wakes the outside fiber once. */
  while (!e->set && S.now < deadline_ns) {
    block(p, deadline_ns);
    give_way("event_wait");
  }
  e->waiter = NO_FIBER;
  return e->set ? 0 : -ETIMEDOUT;
}

void sh_plat_event_wait(sh_plat_event *e) {
  (void)sh_plat_event_wait_until(e, SH_PLAT_NO_DEADLINE);
}

/* ---- threads that are not workers (thread fibers) ------------------------------ */

/* PCT: the new fiber nf takes a random rank among the live fibers still at
 * their initial priorities (>= pct_depth: change points and CPU yields drop
 * a fiber below all of them), and those at or above that rank move up one,
 * so priorities stay distinct. */
static void pct_place(sh_plat *p, sim_fiber *nf) {
  int64_t base = (int64_t)S.opt.pct_depth;
  uint32_t ranked = 0;
  int64_t top = base - 1;
  for (uint32_t i = 0; i < p->nfibers; i++) {
    const sim_fiber *f = &p->f[i];
    if (f == nf || f->prio < base) continue;
    if (f->state != F_DONE) ranked++;
    if (f->prio > top) top = f->prio;
  }
  uint32_t rank = (uint32_t)rng_below((uint64_t)ranked + 1);
  /* The priority of the live fiber with `rank` live ones below it; above all if none. */
  int64_t at = top + 1;
  for (uint32_t i = 0; i < p->nfibers && rank < ranked; i++) {
    const sim_fiber *f = &p->f[i];
    if (f == nf || f->prio < base || f->state == F_DONE) continue;
    uint32_t below = 0;
    for (uint32_t j = 0; j < p->nfibers; j++) {
      const sim_fiber *g = &p->f[j];
      below += g != nf && g->state != F_DONE && g->prio >= base && g->prio < f->prio;
    }
    if (below == rank) at = f->prio;
  }
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (&p->f[i] != nf && p->f[i].prio >= at) p->f[i].prio++;
  nf->prio = at;
}

static void thread_main(void *arg) {
  sh_fiber_started();
  sim_fiber *f = arg;
  f->fn(f->arg);
  sh_plat *p = S.plat;
  f->state = F_DONE;
  if (f->joiner != NO_FIBER) unblock(p, &p->f[f->joiner]);
  give_way("thread_exit");
  abort(); /* a finished fiber is never switched to */
}

int sh_plat_thread_start(void (*fn)(void *arg), void *arg, sh_plat_thread **out) {
  sh_plat *p = active();
  if (fn == NULL || out == NULL || p == NULL) return -EINVAL;
  /* Slots are not reused (see the top of the file). */
  if (p->nfibers - p->nworkers - 1 >= SH_PLAT_MAX_THREADS) return -EAGAIN;
  sh_plat_thread *t = calloc(1, sizeof(*t));
  if (t == NULL) return -ENOMEM;
  sim_fiber *f = &p->f[p->nfibers];
  memset(f, 0, sizeof(*f));
  int rc = sh_fiber_init(&f->ctx, sh_fiber_default_stack(), thread_main, f);
  if (rc != 0) {
    free(t);
    return rc;
  }
  f->index = p->nfibers;
  f->fn = fn;
  f->arg = arg;
  f->joiner = NO_FIBER;
  make_runnable(f);
  p->nfibers++;
  if (S.opt.strategy == SH_SIM_PCT) pct_place(p, f);
  mix(MIX_THREAD);
  mix(f->index);
  if (S.trace != NULL) {
    char name[32];
    snprintf(name, sizeof(name), "thread %u", f->index - p->nworkers - 1);
    /* Out of memory costs only this track's events (the trace drops them). */
    (void)sh_simtrace_track(S.trace, f->index, name);
  }
  t->fiber = f->index;
  *out = t;
  return 0;
}

void sh_plat_thread_join(sh_plat_thread *t) {
  sh_plat *p = S.plat;
  assert(t != NULL && p != NULL && t->fiber > p->nworkers && t->fiber < p->nfibers);
  sim_fiber *f = &p->f[t->fiber];
  assert(t->fiber != p->cur && !f->joined && f->joiner == NO_FIBER);
  /* Bounded: the thread's exit unblocks us; any other wake re-checks. */
  while (f->state != F_DONE) {
    f->joiner = p->cur;
    block(p, SH_PLAT_NO_DEADLINE);
    give_way("thread_join");
  }
  f->joiner = NO_FIBER;
  /* It left by sh_fiber_exit_to and never runs again: its stack can go. */
  sh_fiber_destroy(&f->ctx);
  f->joined = true;
  free(t);
}

/* ---- trace points -------------------------------------------------------------- */

void sh_plat_trace(sh_trace_kind kind, uint64_t house, const char *name, uint64_t flow) {
  mix(MIX_TRACE);
  mix(((uint64_t)cur_index() << 8) | (uint64_t)kind);
  mix(house);
  mix(str_hash(name));
  mix(flow);
  if (S.trace != NULL) sh_simtrace_event(S.trace, S.now, cur_index(), kind, house, name, flow);
}
