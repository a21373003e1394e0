/*
 * Scenarios: backend-agnostic programs that exercise the runtime and check
 * invariants. The same scenario runs on the deterministic simulator
 * (`shsim run NAME --seed N`, libstackhouse-sim.a) and on the epoll backend
 * (`shrun NAME`, libstackhouse.a); it cannot tell which, except through
 * sh_scn_simulated().
 *
 * The framework is part of the simulation library (pkg-config
 * stackhouse-sim, with shsim: stackhouse-shsim) and, for the epoll backend,
 * of libstackhouse-shrun.a (pkg-config stackhouse-shrun). SH_SCENARIO
 * registers through a linker section, which the linker fills only from the
 * objects it links: link scenario objects as objects (.o), never from an
 * archive, or they are not found.
 *
 * A scenario is a table (sh_scenario) registered with SH_SCENARIO(). The
 * framework's run of one scenario:
 *
 *   1. sh_config_default, workers from the run's options (or the scenario's
 *      default), then the scenario's optional configure();
 *   2. sh_system_new + sh_system_start;
 *   3. setup(s, sys) on the calling ("outside") thread: spawn actors, send the
 *      first messages. The workload must end with sh_scn_done(s, sys) (from
 *      an actor or from setup itself), which exits the system;
 *   4. sh_system_wait, whose code must be the one the run's end asked for
 *      (sh_scn_done), then sh_system_shutdown (statistics are exact from here);
 *   5. the invariants every scenario shares (below), then the scenario's
 *      optional verify(s, sys);
 *   6. sh_system_free.
 *
 * Invariants checked after every run, on both backends:
 *   - every ask resolved exactly once: asks == asks_resolved;
 *   - no message lost or duplicated: sent == delivered + replies_unknown +
 *     dropped_stopped (every message offered to a mailbox is accounted for);
 *   - every pooled object returned: pool_outstanding == 0 after shutdown;
 *   - no house left READY (or scheduled, or running) after shutdown;
 *   - in the simulator: the run ended within vtime_limit_ms of virtual time
 *     and its step bound (else FAIL:vtime / FAIL:livelock).
 * Fault-tolerant mode: in a run with faults enabled (sh_scn_faulty: shsim
 * --faults; on threads, a build with fault points under SH_FAULTS or
 * libfiu's fiu-run or fiu-ctrl, see sh_faults_enabled), a system that cannot
 * be created or started, a setup that fails after a fault fired, or a
 * workload that stalls (no message sent or delivered for 3 s, virtual in the
 * simulator), is a run cut short, not a failure; a scenario's own check that
 * fails after a fault fired is excused (not for the network's weather alone:
 * delays, partitions, short reads and writes, UDP loss, duplicates and
 * reordering excuse nothing, see sh_sim_faults_benign); the invariants
 * above still hold (every
 * ask resolved once, every message counted, nothing leaked). A scenario's
 * verify runs for a run cut short too (it is where threads the scenario
 * started are joined; its state may be partly set up) and relaxes what a
 * fault legitimately changes; a scenario that cannot tolerate faults is
 * marked SH_SCN_NO_FAULTS and runs without them.
 * A failed check does not stop the run: the first failure's message is kept
 * and the run reports FAIL:invariant with it.
 *
 * Randomness in a scenario comes from sh_scn_rand(s) and sh_scn_below(s, n)
 * only: a stream derived from the run's seed, so a workload is the same on
 * every run of a seed. Under the simulator each value drawn is a decision
 * of the run's choice sequence: replayed from a replay file, and shrunk
 * toward 0 with the schedule (`shsim shrink`). A workload shrinks best when
 * 0 is its simplest choice (no operation, the first key, stop) and each
 * operation takes its own draws.
 */
#ifndef SH_SCENARIO_H
#define SH_SCENARIO_H

#if defined(__cplusplus) && __cplusplus <= 202002L
/* Before C++23 C++ has no <stdatomic.h>; C++23's makes atomic_uint this very
 * type, std::atomic<unsigned int>, whose layout is C's atomic_uint's. */
#include <atomic>
using std::atomic_uint;
#else
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sh_scn sh_scn;

enum {
  /* Not part of `all` (and not run by make sim / make test's sweeps): test
   * scenarios that must fail in a given way (see `expect`). */
  SH_SCN_HIDDEN = 1u << 0,
  /* Runs only in the simulator (e.g. it deadlocks on purpose). */
  SH_SCN_SIM_ONLY = 1u << 1,
  /* Not fault-tolerant: its checks assume that nothing fails. A run with
   * faults in the simulator (shsim --faults) runs it without them; on
   * threads (SH_FAULTS, fiu-run, fiu-ctrl) the points are the whole
   * process's, and it may fail. */
  SH_SCN_NO_FAULTS = 1u << 2,
  /* Uses the (simulated) network: `shsim fuzz` draws network weather
   * (the sh/net/ fault points) for it, and for no scenario without it. */
  SH_SCN_NET = 1u << 3,
  /* No idle check after the workload (docs/simulator.md, "The idle
   * check"): for a scenario whose point is what the shutdown meets while
   * work is still in flight, which an idle stretch would let finish. */
  SH_SCN_NO_IDLE = 1u << 4,
  /* With SH_SCN_NO_FAULTS: the network's weather alone (sh_sim_faults_benign:
   * delays, partitions, short reads and writes, UDP loss, duplicates and
   * reordering) is kept; any other fault point turns every fault off. For
   * a scenario that copes with the network as a program must but whose
   * programs end on the runtime's own faults (a cluster's nodes). */
  SH_SCN_WEATHER = 1u << 5,
};

typedef struct sh_scenario {
  const char *name;    /* [a-z0-9_]+, unique */
  const char *summary; /* one line, for `shsim list` */
  uint32_t workers;    /* default worker count; 0: 2 */
  uint64_t vtime_limit_ms; /* virtual-time bound in the simulator; 0: 60000 */
  uint64_t max_steps;  /* step bound in the simulator, if lower than the run's (0: the run's) */
  /* Real time without a step before the simulator ends the run with
   * FAIL:hang, if lower than the run's (0: the run's); a run with none has none. */
  uint64_t hang_real_ms;
  unsigned flags;      /* SH_SCN_* */
  const char *expect;  /* hidden scenarios: the failure kind they must end with */
  /* Bytes of per-run state, zeroed before the run: sh_scn_state(s). */
  size_t state_size;
  /* Optional: adjust the system's configuration (workers already set). */
  void (*configure)(sh_scn *s, sh_config *cfg);
  /* Required: spawn the actors and start the workload (system started). A
   * non-zero return fails the run (FAIL:setup). */
  int (*setup)(sh_scn *s, sh_system *sys);
  /* Optional: scenario invariants, after shutdown (stats are exact). */
  void (*verify)(sh_scn *s, sh_system *sys, const sh_stats *st);
  /* Clusters (<stackhouse/cluster.h>). heal_ms (0: none): at this virtual
   * time from the run's start the nemesis stops (sh_node_calm: queued
   * acts dropped, cuts healed, drifts zeroed, every node down booted), and
   * from then on `liveness` must come to hold within liveness_ms (0: 5000)
   * of virtual time, polled every 10 ms, else the run fails with
   * FAIL:liveness naming liveness_name. The workload still ends itself
   * (sh_scn_done). A workload that ends before the heal is not judged. */
  uint64_t heal_ms;
  uint64_t liveness_ms;
  const char *liveness_name;
  bool (*liveness)(sh_scn *s);
} sh_scenario;

/* Registers a scenario (a `static const sh_scenario` defined in the same file). */
#define SH_SCENARIO(def)                                                              \
  __attribute__((used, section("sh_scenarios"), aligned(sizeof(void *))))           \
  static const sh_scenario *const def##_registered = &(def)

/* ---- for scenario code ---------------------------------------------------- */

/* The scenario's state (state_size bytes, zeroed). */
void *sh_scn_state(sh_scn *s);
uint32_t sh_scn_workers(const sh_scn *s);
uint64_t sh_scn_seed(const sh_scn *s);
/* True in the simulator. */
bool sh_scn_simulated(const sh_scn *s);
/* True when the run has fault points enabled (fault-tolerant mode, above;
 * <stackhouse/probe.h>'s sh_faults_enabled): a spawn, a send, an ask may
 * fail with -ENOMEM (-EAGAIN for a thread). */
bool sh_scn_faulty(const sh_scn *s);
/* Whether rc is an error in a faulty run after a fault fired (-ENOMEM,
 * -EAGAIN, or a consequence: -ESHUTDOWN from an actor a fault stopped, a
 * reply a fault spoiled): such an error is then no failed invariant. */
bool sh_scn_fault_error(const sh_scn *s, int rc);
/* 64 bits from the run's seeded stream; safe from any thread. Which call gets
 * which value depends on the interleaving, so on the epoll backend a workload
 * drawn from several actors differs run to run; draw it in setup to pin it. */
uint64_t sh_scn_rand(sh_scn *s);
/* A value in [0, n) (n > 0) from the same stream: shrinking lowers it
 * within its range, where a value of sh_scn_rand taken modulo n shrinks
 * only by halving 64 bits. */
uint64_t sh_scn_below(sh_scn *s, uint64_t n);
/* Records a failed invariant (the first is reported); the run goes on. Safe
 * from any thread. Returns cond. */
bool sh_scn_check_at(sh_scn *s, bool cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define SH_SCN_CHECK(s, cond, ...) sh_scn_check_at((s), (cond), __FILE__, __LINE__, __VA_ARGS__)
/* In the simulator, a check that fails is also drawn in the trace file
 * (shsim --trace): an instant "check failed: FILE:LINE: message" at its
 * virtual time on its fiber's track ("check excused: ..." when a fault
 * excused it, above). */

/* The scenario's own annotation, for its trace: in the simulator, with a
 * trace file being written, an instant named by the formatted text (up to
 * 200 bytes) at the current virtual time on the calling fiber's track,
 * never hashed; without a trace file the text is not even formatted. On
 * the epoll backend nothing (no timeline to put it on; a note per round
 * would flood a run's output): print there what must be seen. From any
 * actor or thread of the run. */
void sh_scn_note(sh_scn *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The clock of timers and timeouts (sh_clock_ms's) in nanoseconds, for
 * checks finer than a millisecond: the virtual clock in the simulator
 * (read without a step), CLOCK_MONOTONIC on threads. From any thread. */
uint64_t sh_scn_clock_ns(void);
/* True time in nanoseconds, the same for every node of a cluster: the
 * simulator's virtual clock (never a node's offset or drift); on threads
 * CLOCK_MONOTONIC. For checkers that judge "at the same moment". */
uint64_t sh_scn_true_ns(void);
/* The true time at which the caller's clock (sh_scn_clock_ns) read
 * local_ns: in the simulator its node's drifts undone; on threads the
 * same value. */
uint64_t sh_scn_true_of_ns(uint64_t local_ns);
/* Ends the workload: sh_system_exit(sys, code), the run's exit code: 0 for
 * some seeds, a small positive number for the others (from the seed). The
 * framework checks that its wait reads that very code (or, when setup
 * failed first, setup's error). Safe from any thread, idempotent. */
void sh_scn_done(sh_scn *s, sh_system *sys);

/* For a scenario that ends its run with sh_system_exit itself (a test of
 * the exit): the code its own wait read, which the framework's wait must
 * read again. Ends the workload as sh_scn_done does, without an exit. */
void sh_scn_exited(sh_scn *s, int code);

/* Checks got == want, numbers: on failure "<got> <what>, want <want>". */
bool sh_scn_check_eq_at(sh_scn *s, uint64_t got, uint64_t want, const char *what,
                        const char *file, int line);
#define SH_SCN_CHECK_EQ(s, got, want, what) \
  sh_scn_check_eq_at((s), (uint64_t)(got), (uint64_t)(want), (what), __FILE__, __LINE__)

/*
 * A nemesis drawn from the seed, within bounds the scenario declares: for
 * each of crashes, cuts and clock drift, whether it acts at all in this
 * run (swarm testing: a run with fewer kinds of fault goes deeper into
 * each) and how often, then each act's time, target and size. Every value
 * is a draw of sh_scn_below: replayed with the run and shrunk toward 0
 * (no act at all), so a failing run shrinks to the few acts it needs. The
 * acts are queued (sh_node_act_at) and run by the simulator's nemesis at
 * their times; a crashed node is restarted after a drawn delay (wiped
 * when `wiped` and the draw says so), so that at most max_down of the
 * listed nodes are down at once. Returns the number of acts queued, or a
 * negative errno. Off the simulator (a cluster of processes) only crashes
 * and restarts are drawn, and the launcher runs them on the real clock.
 */
typedef struct sh_scn_nemesis {
  const char *const *nodes; /* the nodes it may act on */
  uint32_t n;
  uint32_t max_down;        /* at most this many down at once (0: no crash) */
  bool cuts;                /* may cut the network between them and "main" */
  bool one_way;             /* cuts may be one way */
  bool wiped;               /* restarts may be wiped */
  int32_t max_drift_ppm;    /* |drift| at most (0: none; within each node's bound) */
  uint64_t start_ms, end_ms; /* acts fall in [start_ms, end_ms) */
  uint32_t max_acts;        /* per kind, at most (0: 8) */
  uint64_t max_outage_ms;   /* a crash or a cut lasts at most this (0: 2000) */
} sh_scn_nemesis;
int sh_scn_nemesis_draw(sh_scn *s, const sh_scn_nemesis *b);

/* A countdown to the end of the workload: the call that takes *left to 0
 * calls sh_scn_done. The scenario sets *left in setup. */
void sh_scn_count_down(sh_scn *s, sh_system *sys, atomic_uint *left);

/* ---- building blocks for scenario actors -------------------------------------- */

/* The first member of a scenario's actor structs (or the whole actor): the
 * run, and an index its spawner chose. */
typedef struct sh_scn_actor {
  sh_actor base;
  sh_scn *s;
  uint32_t id;
} sh_scn_actor;

/* The spawn argument sh_scn_actor_init takes; the sh_scn_spawn* functions
 * make it. */
typedef struct sh_scn_arg {
  sh_scn *s;
  uint32_t id;
} sh_scn_arg;

/* An actor class's .init (or the first call of a scenario's own init) for
 * actors that begin with sh_scn_actor: takes s and id from the sh_scn_arg. */
int sh_scn_actor_init(sh_actor *self, void *arg);

/* The run and the index of an actor that begins with sh_scn_actor. */
static inline sh_scn *sh_scn_of(const sh_actor *self) { return ((const sh_scn_actor *)self)->s; }
static inline uint32_t sh_scn_id(const sh_actor *self) { return ((const sh_scn_actor *)self)->id; }

/* sh_spawn / sh_spawn_on with the argument {s, id} (every instance gets the
 * same one). */
int sh_scn_spawn(sh_scn *s, sh_system *sys, const sh_actor_class *c, uint32_t id,
                 uint32_t instances, const sh_addr **out);
int sh_scn_spawn_on(sh_scn *s, sh_system *sys, const sh_actor_class *c, uint32_t id,
                    uint32_t worker, const sh_addr **out);

/* How sh_scn_spawn_each places and starts its actors. */
enum {
  /* Actor i on worker i % workers; else where sh_spawn puts one actor. */
  SH_SCN_EACH_PINNED = 1u << 0,
  /* Each gets a start notice (sh_scn_kick) right after its spawn. */
  SH_SCN_EACH_KICK = 1u << 1,
};

/* Spawns n actors of class c, one at a time, actor i with {s, i}; their
 * addresses to out[0..n) unless out is NULL. Stops at the first error. */
int sh_scn_spawn_each(sh_scn *s, sh_system *sys, const sh_actor_class *c, uint32_t n,
                      unsigned how, const sh_addr **out);

/* The framework's start notice; n says what to start (a part, a lane, an
 * ask number) where the scenario needs to. */
typedef struct sh_scn_go {
  sh_msg hdr;
  uint32_t n;
} sh_scn_go;
SH_MSG_DECLARE(sh_scn_go);

/* Sends a start notice (n = 0, or n). */
int sh_scn_kick(const sh_addr *to);
int sh_scn_kick_n(const sh_addr *to, uint32_t n);
/* The n of the start notice a notice stack handles (asserts it is one). */
uint32_t sh_scn_go_n(sh_stack *st);

/* For an actor (an sh_scn_actor) that runs a round per start notice, at the
 * end of a round: `more`, it kicks itself for the next one; else it counts
 * `left` down (sh_scn_count_down). From any of its handlers. */
void sh_scn_next_round(sh_actor *self, bool more, atomic_uint *left);
/* The same at the end of the round's notice stack, which it completes. */
sh_yield sh_scn_round_end(sh_stack *st, bool more, atomic_uint *left);

/* An ask and a reply that carry one number. */
typedef struct sh_scn_num_ask {
  sh_msg hdr;
  uint64_t v;
} sh_scn_num_ask;
SH_MSG_DECLARE(sh_scn_num_ask);

typedef struct sh_scn_num {
  sh_msg hdr;
  uint64_t v;
} sh_scn_num;
SH_MSG_DECLARE(sh_scn_num);

/* From a stack: asks `to` the number v; the future, or NULL (see sh_ask).
 * The _as form sends it as type t, an ask type whose struct is a typedef of
 * sh_scn_num_ask (a barrier, or one a filter tells apart). */
sh_future *sh_scn_ask_num(sh_stack *st, const sh_addr *to, uint64_t v, int64_t timeout_ms);
sh_future *sh_scn_ask_num_as(sh_stack *st, const sh_msg_type *t, const sh_addr *to, uint64_t v,
                             int64_t timeout_ms);
/* A reply carrying v; NULL when out of memory. */
sh_msg *sh_scn_num_new(uint64_t v);
/* Completes an ask stack with the reply v (or -ENOMEM). */
sh_yield sh_scn_answer(sh_stack *st, uint64_t v);
/* The number a future's reply carries; false (v untouched) when it failed. */
bool sh_scn_num_of(const sh_future *f, uint64_t *v);

/* ---- for the runners (shsim, shrun, tests) ---------------------------------- */

/* Every registered scenario, sorted by name (hidden ones included). */
size_t sh_scenario_count(void);
const sh_scenario *sh_scenario_at(size_t i);
const sh_scenario *sh_scenario_find(const char *name);

typedef struct sh_scn_result {
  bool ok;
  char kind[32];     /* failure kind: "invariant", "setup", ... ("" when ok) */
  char detail[256];  /* the first failure's message */
  sh_stats stats;    /* after shutdown */
} sh_scn_result;

/* The simulator's bounds for a run of sc: its virtual-time limit in ns
 * (vtime_limit_ms, or 60 s), and its step bound, the lower of the
 * scenario's (if any) and the run's. */
#define SH_SCN_VTIME_LIMIT_MS_DEFAULT 60000
uint64_t sh_scenario_vtime_limit_ns(const sh_scenario *sc);
uint64_t sh_scenario_max_steps(const sh_scenario *sc, uint64_t run_max);
/* The real-time hang bound (sim.h's hang_real_ms) for a run of sc: the
 * lower of the scenario's (if any) and the run's (0: none, which stays). */
uint64_t sh_scenario_hang_real_ms(const sh_scenario *sc, uint64_t run_ms);

/* Runs one scenario once on the linked backend. workers 0: its default. In
 * the simulator, the simulator must have been configured first (sim.h) and
 * failures other than invariants end the process (see tools/shsim/). */
void sh_scenario_run(const sh_scenario *sc, uint64_t seed, uint32_t workers, sh_scn_result *r);

#ifdef __cplusplus
}
#endif

#endif
