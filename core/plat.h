/*
 * The platform seam: everything that differs between a real machine and the
 * simulator, and nothing else. The core calls only these functions to touch
 * time, randomness, threads and sleeping; backend-epoll/ and backend-sim/
 * each implement all of them. Selection is at link time.
 */
#ifndef SH_PLAT_H
#define SH_PLAT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct sh_plat sh_plat;

/* A worker's body: the core's worker loop. Returns when the worker is told to stop. */
typedef void (*sh_plat_entry)(void *ctx, uint32_t worker);

#define SH_PLAT_NO_DEADLINE UINT64_MAX

/* Creates the platform state for `workers` workers; nothing runs yet. */
int sh_plat_new(uint32_t workers, sh_plat **out);
/* Frees it; the workers must have been joined. */
void sh_plat_free(sh_plat *p);

/* Starts every worker, each calling entry(ctx, index) on its own thread (epoll)
 * or fiber (sim). -errno if a worker cannot be started (the started ones are
 * told nothing: the caller stops and joins them). */
int sh_plat_start(sh_plat *p, sh_plat_entry entry, void *ctx);
/* Waits until every started worker returned from its entry. */
void sh_plat_join(sh_plat *p);

/* The current thread's (fiber's) context pointer: the core stores its worker
 * there. NULL on a thread the core has not claimed. Read several times per
 * message (pools, counters), so the core reads it inline: on threads it is
 * a thread-local; the simulator keeps the running fiber's in one variable,
 * which it changes with every switch. */
#ifdef SH_SIM
extern void *sh_plat_sim_local;
#define SH_PLAT_LOCAL sh_plat_sim_local
#else
extern _Thread_local void *sh_plat_tls_local;
#define SH_PLAT_LOCAL sh_plat_tls_local
#endif
/* One definition for both builds (gcovr merges a source's builds by
 * function and line). */
static inline void *sh_plat_local(void) { return SH_PLAT_LOCAL; }
void sh_plat_set_local(void *ctx);

/* Who runs: a value, never 0, that differs between threads (fibers) alive
 * at the same time, for the checks of the simulation and test builds (a
 * lock knows its holder). The context pointer above cannot serve: threads
 * that are not workers all have NULL. On threads, the address of a
 * thread-local; in the simulator, the running fiber's number. */
#if defined(SH_SIM)
uintptr_t sh_plat_self(void);
#elif defined(SH_DEBUG)
static inline uintptr_t sh_plat_self(void) { return (uintptr_t)&sh_plat_tls_local; }
#endif

/* Processors available to this process (>= 1): the default worker count. */
uint32_t sh_plat_cpu_count(void);

/* Monotonic nanoseconds (virtual in the simulator). */
uint64_t sh_plat_now_ns(void);
/* Nanoseconds since the Unix epoch (in the simulator: a fixed date plus the
 * virtual clock, so that a run replays exactly). */
uint64_t sh_plat_wall_ns(void);
/* 64 random bits (a seeded stream in the simulator). */
uint64_t sh_plat_random(void);

/*
 * Worker `w`'s wait: its sleep and its IO poll in one call, made by w's own
 * thread (or by the one thread that drives w). It reports the readiness of
 * w's sockets (core/netplat.h) through the readiness function, at most
 * `max` (>= 1) reports, on the calling thread and before it returns, and
 * returns how many. With nothing to report it first sleeps until
 * sh_plat_wake(w), the deadline (absolute, sh_plat_now_ns clock), readiness
 * of a socket w watches, or spuriously.
 *
 * A deadline at or before now (SH_PLAT_POLL) never sleeps: the call only
 * reports, and leaves a pending wake for the next call that would sleep. A
 * wake sent before a call that would sleep is not lost: that call returns
 * at once. The core decides whether a wake is needed (it coalesces wakes);
 * this layer only delivers them. Readiness is reported from here only, so
 * nothing the platform fetched waits anywhere for a later call.
 */
#define SH_PLAT_POLL 0
uint32_t sh_plat_wait(sh_plat *p, uint32_t w, uint64_t deadline_ns, uint32_t max);
void sh_plat_wake(sh_plat *p, uint32_t w);
/* sh_plat_wait for a caller that only sleeps (the platform's own tests):
 * whatever readiness the wait finds is reported all the same. */
#define SH_PLAT_PARK_REPORTS 64u
static inline void sh_plat_park(sh_plat *p, uint32_t w, uint64_t deadline_ns) {
  (void)sh_plat_wait(p, w, deadline_ns, SH_PLAT_PARK_REPORTS);
}

/* A hint inside a short polling loop (pause instruction / simulator step). */
void sh_plat_relax(void);
/* Gives the CPU to another runnable thread, if any (sched_yield); a polling
 * worker calls it now and then so it cannot starve a peer on its CPU. */
void sh_plat_yield_cpu(void);

/*
 * An event a thread that is not a worker blocks on (sh_system_wait, the
 * outside-thread bridge); workers never block on one. Set wakes the waiter
 * and stays set until reset, so a set that comes before the wait is not
 * lost. Any number of threads may wait on an event (sh_system_wait from
 * several); set wakes them all. Set may come from any thread (a worker,
 * or a non-worker thread in the simulator).
 */
typedef struct sh_plat_event sh_plat_event;
int sh_plat_event_new(sh_plat_event **out);
void sh_plat_event_free(sh_plat_event *e);
void sh_plat_event_set(sh_plat_event *e);
/* Clears the event; a waiter calls it (an event that is reset has one: a
 * sleeper's), before it looks at the condition it is about to wait for (a
 * set after the reset is kept). */
void sh_plat_event_reset(sh_plat_event *e);
void sh_plat_event_wait(sh_plat_event *e);
/* Waits until the event is set (0) or the deadline passes (-ETIMEDOUT);
 * absolute, on the sh_plat_now_ns clock (virtual in the simulator);
 * SH_PLAT_NO_DEADLINE waits without one. May also return 0 spuriously
 * (the caller re-checks its condition). */
int sh_plat_event_wait_until(sh_plat_event *e, uint64_t deadline_ns);

/*
 * Threads that are not workers: a program's own threads, which talk to the
 * actors through bridges (tests and scenarios start them here so that they
 * run on both backends). On epoll a pthread; in the simulator one more
 * fiber, scheduled like the workers, which can only be started while a
 * started system exists (else -EINVAL) and must be joined before that
 * system is freed. At most SH_PLAT_MAX_THREADS at a time in the simulator.
 */
#define SH_PLAT_MAX_THREADS 32
typedef struct sh_plat_thread sh_plat_thread;
int sh_plat_thread_start(void (*fn)(void *arg), void *arg, sh_plat_thread **out);
/* Waits for the thread to return from fn, then frees it. */
void sh_plat_thread_join(sh_plat_thread *t);

/*
 * Scheduling points. SH_YIELD marks a place inside the core's concurrent code
 * where another worker may run; the simulator decides whether to switch.
 * In production builds it compiles to nothing.
 */
#ifdef SH_SIM
void sh_plat_yield(const char *where);
#define SH_YIELD(where) sh_plat_yield(where)
#else
#define SH_YIELD(where) ((void)0)
#endif

/*
 * Sometimes-assertions (after Antithesis): SH_SOMETIMES(cond, "what") marks
 * a rare situation a campaign must reach at least once (a cancel that lost
 * to the fire, a push caught half-way). In simulation builds each point is
 * listed in the section sh_sometimes, found by the simulator without having
 * run (sh_sim_sometimes_points), and a run that passes it with cond true
 * marks it reached; `shsim explore` reports the points no run reached, and
 * takes a newly reached one as new coverage. `what` is a static string.
 * In production builds it compiles to nothing and cond is not evaluated.
 */
typedef struct sh_sometimes_point {
  const char *what;
  const char *file;
  int line;
} sh_sometimes_point;
#ifdef SH_SIM
void sh_plat_sometimes(const sh_sometimes_point *pt, bool cond);
#define SH_SOMETIMES(cond, what_)                                                         \
  do {                                                                                    \
    static const sh_sometimes_point sh_sometimes_pt_ = {(what_), __FILE__, __LINE__};     \
    __attribute__((used, section("sh_sometimes"), aligned(sizeof(void *)))) static const \
        sh_sometimes_point *const sh_sometimes_at_ = &sh_sometimes_pt_;                   \
    sh_plat_sometimes(&sh_sometimes_pt_, (cond));                                         \
  } while (0)
#else
#define SH_SOMETIMES(cond, what_) ((void)sizeof(!(cond)))
#endif

/*
 * Trace points: what the simulator's trace hash and its Chrome trace record
 * besides its own decisions. `house` is the house's creation number, `name`
 * an actor class or message type name (static strings), `flow` joins an ask
 * to its reply or timeout. SH_TRACE_MSG names a message handed over, asked
 * or answered: its type's name, and the message itself, which a trace file
 * shows in its type's own words (sh_msg_type.describe; never hashed). The
 * message must be alive and not yet handed on. Compiled out of production
 * builds.
 */
typedef enum sh_trace_kind {
  SH_TRACE_RUN,      /* a house run begins: name = actor class */
  SH_TRACE_RUN_END,  /* it ends */
  SH_TRACE_DELIVER,  /* a message is handed over: name = message type */
  SH_TRACE_ASK,      /* an ask is sent: name = message type, flow */
  SH_TRACE_REPLY,    /* its answer reaches the asker: name = reply type, flow */
  SH_TRACE_TIMEOUT,  /* an ask timed out: flow */
} sh_trace_kind;

/* The flow id of ask `id` of house `house`. */
#define SH_TRACE_FLOW(house, id) (((uint64_t)(house) << 32) ^ (uint64_t)(id))

struct sh_msg;
#ifdef SH_SIM
void sh_plat_trace(sh_trace_kind kind, uint64_t house, const char *name, uint64_t flow,
                   const struct sh_msg *msg);
#define SH_TRACE(kind, house, name, flow) sh_plat_trace((kind), (house), (name), (flow), NULL)
#define SH_TRACE_MSG(kind, house, m, flow) \
  sh_plat_trace((kind), (house), (m)->type->name, (flow), (m))
#else
#define SH_TRACE(kind, house, name, flow) ((void)0)
#define SH_TRACE_MSG(kind, house, m, flow) ((void)0)
#endif

#endif
