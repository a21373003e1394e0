/*
 * One simulation's run (run.c): its state, the fiber table of the simulated
 * platform, the trace hash, failures, and the clock and stepping that every
 * scheduling point goes through. plat.c (core/plat.h), strategy.c and
 * replay.c work on the fiber table; only run.c switches fibers and moves
 * the clock.
 */
#ifndef SH_SIM_RUN_H
#define SH_SIM_RUN_H

#include <stackhouse/sim.h>
#include <stdbool.h>
#include <stdint.h>

#include "fiber.h"
#include "plat.h"
#include "rng.h"
#include "trace.h"

/* Logical workers per system. */
#define SH_SIM_MAX_WORKERS 64
/* Fibers per simulation, over all its systems (nodes): their workers, the
 * outside fiber and the thread fibers (a node's main is one). A slot whose
 * fiber ended and was freed is taken again by the next fiber (the lowest
 * free one: a function of the run), and every per-fiber scan is bounded by
 * the slots used so far, t->nfibers. */
#define SH_SIM_MAX_FIBERS 256

typedef enum sh_simrun_fiber_state {
  SH_SIMRUN_RUNNABLE,
  SH_SIMRUN_PARKED,  /* in sh_plat_wait: until a wake, readiness or its deadline */
  SH_SIMRUN_BLOCKED, /* not a worker: in an event wait (until a set or its
                      * deadline), sh_plat_join or sh_plat_thread_join */
  SH_SIMRUN_DONE,
  SH_SIMRUN_FREE, /* an empty slot (never used, or its fiber was freed) */
} sh_simrun_fiber_state;

typedef enum sh_simrun_fiber_kind {
  SH_SIMRUN_WORKER = 1,
  SH_SIMRUN_OUTSIDE, /* the thread that made the first system (the program's main) */
  SH_SIMRUN_THREAD,  /* a program's own thread (sh_plat_thread_start), a node's main */
} sh_simrun_fiber_kind;

/* No fiber (an event nobody waits on, a thread nobody joins yet). */
#define SH_SIMRUN_NO_FIBER UINT32_MAX

typedef struct sh_simrun_fiber {
  sh_fiber ctx;
  uint32_t index;
  sh_simrun_fiber_state state;
  sh_simrun_fiber_kind kind;
  uint32_t node; /* the node it belongs to (node.h); 0: the simulation's own */
  bool wake_pending; /* a wake that came while not parked */
  uint64_t deadline; /* parked or blocked: wake time (true time), or SH_PLAT_NO_DEADLINE */
  void *local;
  int64_t prio; /* pct */
  const char *where; /* the last scheduling point it passed (watchdog.c names it) */
  /* Workers only: its system and its index there. */
  sh_plat *plat;
  uint32_t worker;
  /* Thread fibers only: */
  void (*fn)(void *arg);
  void *arg;
  uint32_t joiner; /* the fiber blocked in sh_plat_thread_join on it, or SH_SIMRUN_NO_FIBER */
} sh_simrun_fiber;

/* The fiber table: every fiber of the simulation, whichever system (node)
 * it belongs to, scheduled from the one seeded stream. */
typedef struct sh_simtab {
  uint32_t nfibers; /* slots used so far: every scan ends here */
  uint32_t cur;     /* the running fiber */
  bool started;     /* the first system started: there is someone to switch to */
  uint64_t next_deadline; /* earliest deadline of a parked or blocked fiber */
  sh_plat *root;          /* the first system, made by the outside fiber */
  /* Bit i: fiber i is RUNNABLE (sh_simrun_set_state keeps it), so that
   * the strategies' picks and the poll check cost a word per 64 fibers,
   * not a look at each: a cluster has many. */
  uint64_t runnable[SH_SIM_MAX_FIBERS / 64];
  uint32_t nrunnable; /* its bits set: a count kept, not counted per pick */
  /* Bit i: fiber i has work: its last step was no poll, or it was made
   * runnable since. When no other runnable fiber has work, a poller's
   * step may take idle_step_ns (run.c, advance): every one of them only
   * waits for time. */
  uint64_t busy[SH_SIM_MAX_FIBERS / 64];
  sh_simrun_fiber f[SH_SIM_MAX_FIBERS];
} sh_simtab;

/* One system's platform (core/plat.h's sh_plat): its workers' fibers. */
struct sh_plat {
  uint32_t node;    /* the node it runs on */
  uint32_t nworkers;
  uint32_t outside; /* the fiber that made it: it starts, joins and frees it */
  sh_plat_entry entry;
  void *ctx;
  bool started;
  uint32_t ndone;
  uint32_t fiber[]; /* worker w is fiber fiber[w] */
};

/* The simulation: one per process at a time, driven from one thread. */
typedef struct sh_simrun {
  sh_sim_options opt;
  bool configured;
  sh_simrng core_rng; /* sh_plat_random: a stream of its own (rng.h) */
  uint64_t slice;     /* steps since the running fiber got the CPU */
  bool used;          /* a system ran since the last configure */
  bool failing;       /* sh_simrun_fail is running its handler */
  uint64_t now, steps, hash, switches, jumps;
  uint64_t vtime_limit; /* opt.vtime_limit_ns, or UINT64_MAX for none */
  sh_simtab *tab;
  void *outside_local; /* sh_plat_local of the outside fiber */
  sh_simtrace *trace;
  sh_sim_fail_fn on_fail;
} sh_simrun;

extern sh_simrun sh_simrun_state;

/* What the trace hash mixes in before each kind of record. */
enum { SH_SIMRUN_MIX_SWITCH = 1, SH_SIMRUN_MIX_JUMP, SH_SIMRUN_MIX_TRACE, SH_SIMRUN_MIX_END,
       SH_SIMRUN_MIX_THREAD, SH_SIMRUN_MIX_FAULT, SH_SIMRUN_MIX_STALE,
       SH_SIMRUN_MIX_NET, SH_SIMRUN_MIX_NODE };

/* Mixes v into the trace hash. Inline: every trace point mixes five times. */
static inline void sh_simrun_mix(uint64_t v) {
  sh_simrun *s = &sh_simrun_state;
  s->hash = sh_simrng_rotl((s->hash ^ v) * 0x100000001B3ull, 29) + 0x9E3779B97F4A7C15ull;
}

/* A name's hash, by content (never by address, which differs between
 * builds). */
static inline uint64_t sh_simrun_str_hash_slow(const char *s) {
  uint64_t h = 0xCBF29CE484222325ull;
  /* Names are short static strings; the bound only guards a missing NUL. */
  for (int i = 0; s != NULL && s[i] != '\0' && i < 256; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
  return h;
}

/* Names hashed lately, by address: every switch and trace point hashes one,
 * and they are a few dozen static strings. The address only picks the
 * entry; the value is always the content's hash, so a hit or a miss gives
 * the same result and the run stays the same from build to build. */
#define SH_SIMRUN_NAME_CACHE 256u
typedef struct sh_simrun_name {
  const char *s;
  uint64_t h;
} sh_simrun_name;
extern sh_simrun_name sh_simrun_names[SH_SIMRUN_NAME_CACHE];

/* Inline: every trace point and every switch hashes a name. */
static inline uint64_t sh_simrun_str_hash(const char *s) {
  uintptr_t a = (uintptr_t)s;
  sh_simrun_name *e = &sh_simrun_names[(a ^ a >> 9) & (SH_SIMRUN_NAME_CACHE - 1)];
  if (e->s == s && s != NULL) return e->h;
  uint64_t h = sh_simrun_str_hash_slow(s);
  e->s = s;
  e->h = h;
  return h;
}

/* Configures with the default options if nothing configured yet. */
void sh_simrun_ensure_configured(void);

/* The fiber table once the first system's workers exist (only then is
 * there anyone to switch to), else NULL. */
static inline sh_simtab *sh_simrun_active(void) {
  sh_simtab *t = sh_simrun_state.tab;
  return t != NULL && t->started ? t : NULL;
}

/* The running fiber's index (0 with no platform). */
static inline uint32_t sh_simrun_cur(void) {
  const sh_simrun *s = &sh_simrun_state;
  return s->tab != NULL ? s->tab->cur : 0;
}

/* Every change of a fiber's state goes through here (the runnable set). */
static inline void sh_simrun_set_state(sh_simtab *t, sh_simrun_fiber *f,
                                       sh_simrun_fiber_state st) {
  uint64_t bit = 1ull << (f->index % 64), *word = &t->runnable[f->index / 64];
  bool was = (*word & bit) != 0;
  if (st == SH_SIMRUN_RUNNABLE) {
    t->nrunnable += !was;
    *word |= bit;
    t->busy[f->index / 64] |= bit;
  } else {
    t->nrunnable -= was;
    *word &= ~bit;
  }
  f->state = st;
}

/* Whether fiber i of t is a worker. */
static inline bool sh_simrun_is_worker(const sh_simtab *t, uint32_t i) {
  return i < t->nfibers && t->f[i].kind == SH_SIMRUN_WORKER;
}

/* Finishes the trace file, if one is open. */
void sh_simrun_trace_close(void);

/* A failure the simulator detected: the run cannot go on. */
__attribute__((noreturn)) void sh_simrun_fail(const char *kind, const char *detail);

void sh_simrun_make_runnable(sh_simrun_fiber *f);
/* A blocked fiber's reason to wait is over: it runs again (and re-checks). */
void sh_simrun_unblock(sh_simtab *p, sh_simrun_fiber *f);
/* The running fiber blocks until sh_simrun_unblock or (if not
 * SH_PLAT_NO_DEADLINE) the deadline; the caller gives way next. */
void sh_simrun_block(sh_simtab *p, uint64_t deadline_ns);
/* p->next_deadline again from the sleeping fibers. */
void sh_simrun_recompute_deadline(sh_simtab *p);

/* Systems and threads (platsys.c). Slot i's fiber ended and its stack is
 * freed: the slot is free again. */
void sh_simplat_slot_free(sh_simtab *t, uint32_t i);
/* Starts a thread fiber of `node` running fn(arg): its fiber in *out, or
 * -EAGAIN (the node's SH_PLAT_MAX_THREADS, or the table, is full), -errno. */
int sh_simplat_thread_new(uint32_t node, void (*fn)(void *arg), void *arg, uint32_t *out);
/* Waits for thread fiber `fiber` to end, then frees its stack and slot. */
void sh_simplat_thread_wait(uint32_t fiber);

/* A step: the clock advances, bounds are checked, sleepers whose deadline
 * came become runnable. polling: the running fiber waits for something. */
void sh_simrun_step(sh_simtab *p, bool polling);
/* A scheduling point: a step, then the strategy may switch. */
void sh_simrun_point(const char *where, bool polling);
/* The running fiber spins: it gives way to another runnable fiber. */
void sh_simrun_yield_cpu(void);
/* The running fiber cannot go on (parked, blocked, done): run another. */
void sh_simrun_give_way(const char *where);
/* The clock moves to `t` (if later) because nothing could run before it. */
void sh_simrun_clock_jump(uint64_t t);

#endif
