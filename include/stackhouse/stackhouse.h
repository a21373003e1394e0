/*
 * stackhouse: an actor runtime in C.
 *
 * This is the header applications include (with bridge.h and system.h,
 * which it includes: the rest of the API by subject). Every function that
 * can fail returns 0 or a negative errno value (-EINVAL, -ENOMEM,
 * -ESHUTDOWN, ...); misuse that cannot be reported (a corrupted message
 * header) is an assertion.
 *
 * Model (see docs in the README):
 *   - An actor is a struct whose first member is `sh_actor`, described by an
 *     `sh_actor_class` (its size, its handlers, the size of its stack locals).
 *   - A message is a struct whose first member is `sh_msg`, described by an
 *     `sh_msg_type` (its name, size and kind). No envelope is allocated: the
 *     header is intrusive. Ownership moves with the message: a send gives it up.
 *   - A message is handled by a Stack: a small state machine (an int state plus
 *     a locals area) that can suspend on futures of asks it made and resume
 *     when they complete, on the same actor, without blocking its worker.
 *
 * Who owns a message after a send (sh_notice, sh_notice_try, sh_ask,
 * sh_ask_try, sh_put, sh_bridge_notice, sh_bridge_notice_try,
 * sh_bridge_ask, sh_bridge_ask_try), one rule:
 *   - a call whose name ends in _try takes the message only when it
 *     returns 0; on any error the message is still the caller's;
 *   - every other send always takes the message; on an error it frees it
 *     (sh_put: its failed future holds the notice, freed with the future
 *     unless taken back with sh_future_take).
 *
 * Timeouts, one convention: an int64_t count of milliseconds; SH_NOWAIT (0)
 * does not wait at all, SH_FOREVER (-1) waits without limit, a positive
 * value waits at most that long; any other negative value is -EINVAL.
 */
#ifndef STACKHOUSE_H
#define STACKHOUSE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these headers (the Makefile, the .pc and CMake files take
 * theirs from here). SH_VERSION_NUMBER compares: MAJOR * 10000 + MINOR *
 * 100 + PATCH. sh_version() below is the library's, which a program linked
 * with libstackhouse.so may find newer than the headers it was built with. */
#define SH_VERSION_MAJOR 0
#define SH_VERSION_MINOR 1
#define SH_VERSION_PATCH 0
#define SH_VERSION_NUMBER (SH_VERSION_MAJOR * 10000 + SH_VERSION_MINOR * 100 + SH_VERSION_PATCH)
#define SH_VERSION_STR_(x) #x
#define SH_VERSION_STR(x) SH_VERSION_STR_(x)
#define SH_VERSION_STRING                                                      \
  SH_VERSION_STR(SH_VERSION_MAJOR) "." SH_VERSION_STR(SH_VERSION_MINOR) "." \
      SH_VERSION_STR(SH_VERSION_PATCH)

/* Marks the library's public API: the only symbols libstackhouse.so
 * exports (everything else is built with hidden visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define SH_API __attribute__((visibility("default")))
#else
#define SH_API
#endif

/* The library's version, "MAJOR.MINOR.PATCH": SH_VERSION_STRING of the
 * headers it was built with. A static string. */
SH_API const char *sh_version(void);

/* Timeouts (see the top of this file). */
#define SH_NOWAIT 0
#define SH_FOREVER (-1)

typedef struct sh_system sh_system;
typedef struct sh_actor sh_actor;
typedef struct sh_stack sh_stack;
typedef struct sh_future sh_future;
typedef struct sh_addr sh_addr;
typedef struct sh_msg sh_msg;
typedef struct sh_msg_type sh_msg_type;
typedef struct sh_actor_class sh_actor_class;
typedef struct sh_channel sh_channel; /* networking: <stackhouse/net.h> */
struct sh_house;

/* ------------------------------------------------------------------ */
/* Messages                                                            */
/* ------------------------------------------------------------------ */

/* What a message is for. An ask expects exactly one reply. */
typedef enum sh_msg_kind {
  SH_NOTICE = 1,
  SH_ASK = 2,
  SH_REPLY = 3,
} sh_msg_kind;

/* Message type flags. Bits 16 to 31 are the runtime's, for its own types. */
enum {
  /* An ask or notice of this type is a barrier: while its stack runs (until it
   * returns or throws), the actor takes no further asks or notices. Replies and
   * events still flow, so the barrier stack can make progress. */
  SH_MSG_BARRIER = 1u << 0,
  /* sh_msg_alloc zeroes only the header, not the body: for a large
   * message whose creator sets every field before it is read. */
  SH_MSG_UNZEROED = 1u << 1,
};

struct sh_msg_type {
  const char *name;
  size_t size;         /* sizeof the whole message struct, header included */
  sh_msg_kind kind;
  uint32_t flags;      /* SH_MSG_* */
  /* Optional: release what the message owns (not the message itself). Called
   * whenever the runtime frees a message of this type, delivered or dropped. */
  void (*drop)(sh_msg *m);
  /* Optional: the message in words, for traces: writes a short text (its
   * fields, say "key=7 value=42") to buf, n bytes, NUL-terminated as
   * snprintf does, and returns its length (as snprintf: longer than n - 1
   * is cut) or a negative errno (no text). Called only by the simulator
   * while it writes a trace file (shsim --trace), when a message of this
   * type is handed over, asked or answered; never in production, nor in a
   * simulation without a trace. It must only read the message: no sends,
   * no locks, no scheduling points (a traced run must stay the run of its
   * seed). The text is shown, never hashed. */
  int (*describe)(const sh_msg *m, char *buf, size_t n);
};

/*
 * The intrusive header; the first member of every message. Its fields belong
 * to the runtime: read them only through the functions below.
 */
struct sh_msg {
  const sh_msg_type *type;
#ifndef __cplusplus
  sh_msg *_Atomic next;     /* mailbox link */
#else
  /* C++ has no _Atomic qualifier. The runtime (C) alone touches the link,
   * and an atomic pointer has a plain pointer's size and alignment (core/mem/msg.c
   * asserts it), so C++ sees the same layout. */
  sh_msg *next;
#endif
  struct sh_house *sender;  /* the asking house, for replies */
  uint64_t id;              /* ask id; for a reply, the ask it answers */
  int32_t error;            /* exception replies: the negative errno */
  uint32_t internal;        /* runtime-private kind and flags */
};

/* Defines the descriptor `T##_type` for message struct T. */
#define SH_MSG_DEFINE(T, kind_, flags_) \
  const sh_msg_type T##_type = {#T, sizeof(T), (kind_), (flags_), NULL, NULL}
#define SH_MSG_DEFINE_DROP(T, kind_, flags_, drop_) \
  const sh_msg_type T##_type = {#T, sizeof(T), (kind_), (flags_), (drop_), NULL}
/* The same with a describe hook (sh_msg_type.describe); a type with both
 * hooks spells its descriptor out: {"T", sizeof(T), kind, flags, drop, describe}. */
#define SH_MSG_DEFINE_DESCRIBED(T, kind_, flags_, describe_) \
  const sh_msg_type T##_type = {#T, sizeof(T), (kind_), (flags_), NULL, (describe_)}
#define SH_MSG_DECLARE(T) extern SH_API const sh_msg_type T##_type

/* Allocates a zeroed message of type t (only its header for a type flagged
 * SH_MSG_UNZEROED) from the calling worker's pool (plain malloc on a
 * thread that is not a worker). NULL when out of memory. */
SH_API sh_msg *sh_msg_alloc(const sh_msg_type *t);
/* Copies the body (everything after the header) of `init` into m; returns m.
 * NULL in, NULL out. */
SH_API sh_msg *sh_msg_fill(sh_msg *m, const void *init, size_t size);
/* Frees a message the caller owns (calls its type's drop first). NULL is a no-op. */
SH_API void sh_msg_free(sh_msg *m);

/* `add_ask *a = sh_msg_new(add_ask, .n = 1);` : typed allocation and init. */
#define sh_msg_new(T, ...) \
  ((T *)sh_msg_fill(sh_msg_alloc(&T##_type), &(T){.hdr = {0}, __VA_ARGS__}, sizeof(T)))

static inline const sh_msg_type *sh_msg_type_of(const sh_msg *m) { return m->type; }
static inline bool sh_msg_is(const sh_msg *m, const sh_msg_type *t) { return m && m->type == t; }

/* ------------------------------------------------------------------ */
/* Actors                                                              */
/* ------------------------------------------------------------------ */

/* The runtime's part of an actor; the first member of every actor struct. */
struct sh_actor {
  struct sh_house *house;
  sh_system *sys;
  const sh_addr *self;
};

typedef enum sh_yield {
  SH_SUSPEND = 0, /* the stack waits for futures */
  SH_RETURN = 1,  /* the stack is done */
} sh_yield;

typedef enum sh_actor_kind {
  SH_STATE_ACTOR = 0, /* business logic; may be stolen by an idle worker */
  SH_IO_ACTOR = 1,    /* bound to its worker's IO; scheduled without a time budget */
} sh_actor_kind;

typedef sh_yield (*sh_stack_fn)(sh_actor *self, sh_stack *st);
typedef bool (*sh_filter_fn)(sh_actor *self, const sh_msg *m);

struct sh_actor_class {
  const char *name;
  size_t size;         /* sizeof the user's actor struct (>= sizeof(sh_actor)) */
  size_t locals_size;  /* bytes of locals per stack (what lives across a suspend) */
  sh_actor_kind kind;

  /* Optional hooks. init runs in sh_spawn on the spawning thread with the
   * spawn argument (non-zero return: the spawn fails with that error);
   * mount runs on the owning worker before any message; stop runs once when
   * the actor stops or the system shuts down, after its last handler. Every
   * actor whose init succeeded gets its stop, even when the spawn fails
   * later (another instance's init failed): then on the spawning thread. */
  int (*init)(sh_actor *self, void *arg);
  void (*mount)(sh_actor *self);
  void (*stop)(sh_actor *self);

  /* Message handlers: each (re)entry runs the stack's state machine. */
  sh_stack_fn notice;
  sh_stack_fn ask;
  /* Batching: messages that pass the filter are handed over together, up to
   * max_batch at a time, in one batch stack. Both filter and handler needed. */
  sh_stack_fn batch_notice;
  sh_stack_fn batch_ask;
  sh_filter_fn batch_notice_filter;
  sh_filter_fn batch_ask_filter;
  /* Optional barrier predicate; types flagged SH_MSG_BARRIER are barriers too. */
  sh_filter_fn barrier;

  /* Actor timers (sh_timer_start) fire here, on the actor, as events. */
  void (*timeout)(sh_actor *self, uint64_t timer_id, void *arg);

  /* IO actors (<stackhouse/net.h>): `channel` handles, in a channel stack,
   * one request that reached the tail of one of the actor's channels
   * (sh_stack_channel, sh_stack_msg); its sh_return writes the reply (NULL:
   * none) back to that channel, and its sh_throw closes the channel with
   * the error. `channel_event` hears each channel's life (an
   * sh_channel_event: open, end of input, writable, closed). */
  sh_stack_fn channel;
  void (*channel_event)(sh_actor *self, sh_channel *ch, int event, int error);

  uint32_t max_batch;   /* 0: the system default */
  uint32_t max_per_run; /* messages per scheduling; 0: the system default */

  /* Bounded mailboxes: at most this many asks / notices wait in the
   * actor's mailbox (not yet taken by the actor); 0: unbounded. A sender to
   * a full mailbox waits for room (sh_ask, sh_put: the stack suspends;
   * sh_bridge_*: the outside thread blocks) or is refused with -EAGAIN
   * (sh_notice_try, sh_ask_try, sh_notice). Waiting senders get the room in
   * FIFO order. Replies and events are never bounded. At most SH_MAX_CAPACITY. */
  uint32_t ask_capacity;
  uint32_t notice_capacity;

  /* Per-sender order: one sender's asks and notices are handled in the
   * order sent (by default an ask goes ahead of notices queued before it;
   * replies and events keep their priority). Both share the ask mailbox:
   * ask_capacity bounds them, notice_capacity must be 0 (-EINVAL at spawn),
   * and sh_mailbox_stats_get reports that mailbox for either kind. */
  bool ordered;
};

#define SH_MAX_CAPACITY (1u << 30)

/* Placement for sh_spawn's `instances`. */
#define SH_SPAWN_PER_WORKER UINT32_MAX /* one per worker; asks go to the sender's own worker */

/*
 * Spawns `instances` actors of class c (1: a plain address; SH_SPAWN_PER_WORKER:
 * one per worker behind a load-balanced address; K: K instances behind a
 * round-robin address). Callable before or after sh_system_start, from any
 * thread or actor. A single actor spawned by an actor starts on the
 * spawner's worker, from any other thread on the workers in turn
 * (sh_config.placement); then it runs on the worker whose send made it
 * ready (sh_config.affinity), so actors that talk end up together, and idle
 * workers steal to spread the load. The instances of K or
 * SH_SPAWN_PER_WORKER stay on their workers.
 *
 * An address stays a safe handle for the system's life: once its actor
 * stopped and was reclaimed, sends to it fail with -ESHUTDOWN and never
 * reach an actor spawned later in the same memory. The address of a single
 * actor costs no memory of its own; an address of several instances is
 * freed with the system, so spawn groups at setup, not per request.
 */
SH_API int sh_spawn(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t instances,
             const sh_addr **out);

/* Spawns one actor on a chosen worker (0 <= worker < sh_system_workers),
 * pinned there: it runs on that worker whoever sends to it (an idle worker
 * may still steal a run). For tests of placement, and for actors that must
 * stay apart. -EINVAL for a worker out of range. */
SH_API int sh_spawn_on(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t worker,
                const sh_addr **out);

static inline const sh_addr *sh_self(const sh_actor *a) { return a->self; }
static inline sh_system *sh_actor_system(const sh_actor *a) { return a->sys; }
/* Number of actor instances behind an address. */
SH_API uint32_t sh_addr_count(const sh_addr *a);
/* Index of the worker that owns this actor. */
SH_API uint32_t sh_actor_worker(const sh_actor *a);

/* Stops every instance behind the address: later sends fail with -ESHUTDOWN,
 * queued asks are answered with -ESHUTDOWN, queued notices are dropped
 * (counted), and the actor's pending asks complete with -ESHUTDOWN: those
 * still unanswered when its stop work runs (in its run after the stop);
 * a reply already in its mailbox by then completes its ask as usual. A
 * handler that is running meanwhile finishes; no queued ask or notice
 * (nor a batch of them) starts after the stop. */
SH_API int sh_stop(const sh_addr *a);

/* ------------------------------------------------------------------ */
/* Sending                                                             */
/* ------------------------------------------------------------------ */

/* Sends a notice; from an actor or any other thread. Takes m (freed on an
 * error): -EINVAL (NULL, or not a notice type), -ESHUTDOWN (stopped actor),
 * -EAGAIN (the actor's bounded notice mailbox is full, or senders wait for
 * room in it: counted as refused), -EXDEV (from an actor, an address of
 * another system: addresses are per system, as per process; systems talk
 * over the network). */
SH_API int sh_notice(const sh_addr *to, sh_msg *m);

/* sh_notice that never takes m on an error: -EAGAIN, -ESHUTDOWN, -EINVAL
 * leave it the caller's. From an actor or any other thread. */
SH_API int sh_notice_try(const sh_addr *to, sh_msg *m);

/*
 * From a stack: sends notice m, suspending the stack (no thread blocks)
 * while the target's bounded notice mailbox is full; waiting senders get
 * room in FIFO order. The future completes with 0 once m is in the mailbox
 * (at once when there is room), or fails with -ESHUTDOWN (the target, or
 * this actor, stopped before or while this waited), -ETIMEDOUT (timeout_ms
 * passed first), -EAGAIN (SH_NOWAIT and no room), -EXDEV (an address of
 * another system) or -ENOMEM; a failed put
 * holds m as the future's message (sh_future_take to keep it). NULL only
 * for -EINVAL (NULL argument, not a notice type, bad timeout) or -ENOMEM;
 * m is freed then.
 */
SH_API sh_future *sh_put(sh_stack *st, const sh_addr *to, sh_msg *m, int64_t timeout_ms);

/*
 * From a stack: sends an ask and returns its future, to wait on with
 * sh_suspend. timeout_ms (SH_FOREVER, or > 0) counts from the call and
 * covers the wait for room in a full bounded mailbox (FIFO among waiting
 * senders) and the wait for the reply; on expiry the future fails with
 * -ETIMEDOUT and a late reply is dropped (counted). SH_NOWAIT is -EINVAL:
 * an ask always waits for its reply. A send that fails (stopped target:
 * -ESHUTDOWN; an address of another system: -EXDEV) returns a future
 * already failed with the reason. Returns NULL only for
 * -EINVAL (NULL argument, not an ask type, bad timeout) or -ENOMEM; the
 * message is freed then.
 */
SH_API sh_future *sh_ask(sh_stack *st, const sh_addr *to, sh_msg *m, int64_t timeout_ms);

/* sh_ask without waiting for room: -EAGAIN when the target's bounded ask
 * mailbox is full (or senders wait ahead), -EINVAL, -ENOMEM, and then m is
 * still the caller's; else 0 and *out is the ask's future (which may have
 * failed at once, as sh_ask's can). */
SH_API int sh_ask_try(sh_stack *st, const sh_addr *to, sh_msg *m, int64_t timeout_ms,
                      sh_future **out);

/* From a stack: a future that completes with 0 once ms milliseconds passed
 * (SH_NOWAIT: at once), to wait on like any other (a stack's sleep; its
 * worker runs others meanwhile). Fails with -ESHUTDOWN if the actor stops
 * first (at once once it has stopped). NULL for a negative ms (SH_FOREVER
 * included) or -ENOMEM. */
SH_API sh_future *sh_sleep(sh_stack *st, int64_t ms);

/* Clocks, callable from any thread. sh_clock_ms: monotonic milliseconds
 * (the clock of timeouts and timers). sh_time_ms: milliseconds since the
 * Unix epoch (wall time, e.g. for a Date header). In the simulator both
 * are virtual: the clock starts at 0 and the wall time at 2026-01-01
 * 00:00:00 UTC plus the virtual clock, so that runs replay exactly. */
SH_API int64_t sh_clock_ms(void);
SH_API int64_t sh_time_ms(void);

SH_API bool sh_future_done(const sh_future *f);
/* 0 for a reply; -EINPROGRESS while the future is pending (not done yet:
 * after sh_suspend_any, a sibling of the one that completed); else
 * -ETIMEDOUT, -ESHUTDOWN, or what the other side threw. So
 * sh_future_failed is true for a pending future too: ask sh_future_done
 * first where a future may still be pending. */
SH_API int sh_future_error(const sh_future *f);
static inline bool sh_future_failed(const sh_future *f) { return sh_future_error(f) != 0; }
/* The reply; owned by the future (freed when the stack moves to another state
 * or returns) unless taken with sh_future_take. */
SH_API sh_msg *sh_future_msg(const sh_future *f);
SH_API sh_msg *sh_future_take(sh_future *f);
#define sh_future_reply(f, T) ((T *)sh_future_msg(f))

/* ------------------------------------------------------------------ */
/* Stacks                                                              */
/* ------------------------------------------------------------------ */

enum { SH_START = 0 }; /* every stack begins in state 0 */

SH_API int sh_stack_state(const sh_stack *st);
SH_API void *sh_stack_locals(sh_stack *st);
SH_API sh_actor *sh_stack_actor(const sh_stack *st);
/* The notice or ask this stack handles (NULL for batch stacks). */
SH_API sh_msg *sh_stack_msg(const sh_stack *st);
#define sh_stack_msg_as(st, T) ((T *)sh_stack_msg(st))
/* Batch stacks: the messages of the batch. */
SH_API size_t sh_stack_batch_len(const sh_stack *st);
SH_API sh_msg *sh_stack_batch_msg(const sh_stack *st, size_t i);

/* Waits until every future this stack made in its current state completed. */
SH_API sh_yield sh_suspend(sh_stack *st, int next_state);
/* Waits until any one future completed (a "resumable" state). */
SH_API sh_yield sh_suspend_any(sh_stack *st, int next_state);
/* Completes the stack. For an ask stack `reply` (a SH_REPLY message) goes to
 * the asker; for a batch ask stack it is copied to every ask of the batch not
 * answered with sh_batch_reply (a type with a drop hook cannot be copied:
 * the last such ask gets it, the others fail with -EINVAL). Notice stacks
 * pass NULL. An ask stack that returns NULL fails its asker with -ENODATA,
 * one that returns a message that is not a reply with -EINVAL (the message
 * freed); a batch ask stack's unanswered asks fail with -ENODATA then. */
SH_API sh_yield sh_return(sh_stack *st, sh_msg *reply);
/* Completes the stack with an error (negative errno): the asker's future
 * fails with it. */
SH_API sh_yield sh_throw(sh_stack *st, int error);
/* Batch ask stacks: answers ask i of the batch. */
SH_API int sh_batch_reply(sh_stack *st, size_t i, sh_msg *reply);

/* ------------------------------------------------------------------ */
/* Timers                                                              */
/* ------------------------------------------------------------------ */

/* Starts a timer on the calling actor: after delay_ms, and then every
 * period_ms if non-zero, the class's timeout handler runs with (id, arg).
 * Only from the actor's own handlers; a negative delay or period is
 * -EINVAL; -ESHUTDOWN once the actor was stopped (from a handler that was
 * running when sh_stop came: a stopped actor's timers never run). */
SH_API int sh_timer_start(sh_actor *self, int64_t delay_ms, int64_t period_ms, void *arg,
                          uint64_t *id_out);
/* After it returns 0 the handler never runs for this timer again, even if
 * it already expired and its event is on the way. -ENOENT when a one-shot's
 * handler already ran, or the id is unknown. */
SH_API int sh_timer_cancel(sh_actor *self, uint64_t id);

/* ------------------------------------------------------------------ */
/* Mailbox metrics                                                     */
/* ------------------------------------------------------------------ */

typedef struct sh_mailbox_stats {
  uint32_t capacity;   /* 0: unbounded */
  uint32_t depth;      /* messages waiting now (bounded: admitted and not yet
                        * taken; unbounded: as of the actor's last run) */
  uint32_t high_water; /* the greatest depth seen */
  uint32_t waiting;    /* senders suspended or blocked for room now */
  uint64_t suspended;  /* sends that had to wait for room, ever */
  uint64_t refused;    /* sends refused: -EAGAIN, or a bridge send's timeout */
} sh_mailbox_stats;

/* The ask (kind SH_ASK) or notice (SH_NOTICE) mailbox of instance `i` of
 * an address. Any thread; the figures are read without stopping anyone.
 * -EINVAL for a bad argument. */
SH_API int sh_mailbox_stats_get(const sh_addr *a, uint32_t i, sh_msg_kind kind,
                                sh_mailbox_stats *out);

#ifdef __cplusplus
}
#endif

/* The rest of the API, by subject: each includes this header, and this one
 * them, so that either way every declaration is there. */
#include <stackhouse/bridge.h> /* outside threads: sending in, receiving replies */
#include <stackhouse/system.h> /* the system: configuration, life, statistics */

#endif
