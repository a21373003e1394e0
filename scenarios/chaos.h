/*
 * What the actor_chaos scenario's parts share (chaos_target.c: the actors
 * under test; actor_chaos.c: the drivers, the outside thread, the run).
 *
 * The workload is generated, and checked against the API's promises
 * (stackhouse.h, bridge.h) rather than against what some bug would break:
 * every message names the incarnation it is meant for and carries a serial,
 * so the run knows of each one whether it was handled by the right actor,
 * at most once, in its sender's order, and freed exactly once; every reply
 * carries its ask's serial; every timer is checked against its starts and
 * cancels.
 */
#ifndef SCN_CHAOS_H
#define SCN_CHAOS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/bridge.h>
#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

#define CH_CELLS 6u      /* places for an actor; cell i is driver i % CH_DRIVERS's */
#define CH_DRIVERS 3u
#define CH_OPS 100u      /* operations per driver */
#define CH_GENS (CH_OPS + 1u) /* incarnations per cell: at most one spawn per op */
#define CH_BRIDGE_OPS 100u
#define CH_MSGS 4096u    /* serials of one run (a bound: an op past it sends nothing) */
#define CH_SENDERS (CH_DRIVERS + 1u) /* the drivers, then the outside thread */
#define CH_NO_SENDER UINT32_MAX /* a target's own asks: no order kept */
#define CH_TIMERS 4u     /* timers a target keeps track of */
#define CH_THROWN (-EPROTO) /* what a target throws when an ask says so */
#define CH_NKINDS 5u     /* target classes */

/* What an ask asks of its target. */
enum { CH_ANSWER, CH_SLEEP, CH_THROW, CH_NESTED, CH_ASK_KINDS };
/* What a notice asks of its target. */
enum { CH_NOTHING, CH_ONE_SHOT, CH_PERIODIC, CH_CANCEL, CH_HOLD, CH_NOTE_KINDS };

/* One actor's life in a cell: published by the cell's driver once spawned,
 * `stopped` once its sh_stop returned. Immutable but for the flags. */
typedef struct ch_inc {
  const sh_addr *addr;
  uint32_t cell, gen, kind; /* kind: its class, ch_classes[kind] */
  atomic_bool stopped;
} ch_inc;

typedef struct ch_cell {
  _Atomic(ch_inc *) live; /* NULL: empty. release/acquire: publishes the record */
  uint32_t gens;          /* incarnations made (the driver's own) */
  ch_inc inc[CH_GENS];
} ch_cell;

typedef struct ch_world {
  sh_scn *s;
  sh_system *sys;
  atomic_uint left;
  atomic_uint next_serial;
  atomic_uint inits, stops;
  atomic_uchar handled[CH_MSGS], freed[CH_MSGS];
  ch_cell cells[CH_CELLS];
  sh_thread *thread;
} ch_world;

typedef struct ch_note {
  sh_msg hdr;
  ch_world *wd;
  uint32_t serial, cell, gen, sender;
  uint32_t what, arg; /* CH_NOTHING..: a timer to start (arg: its delay) or cancel */
} ch_note;
SH_MSG_DECLARE(ch_note);
/* A ch_note that is a barrier (CH_HOLD): the target sleeps arg + 1 ms in
 * it, taking no other ask or notice meanwhile, so its mailboxes fill. */
typedef ch_note ch_hold;
SH_MSG_DECLARE(ch_hold);

typedef struct ch_ask {
  sh_msg hdr;
  ch_world *wd;
  uint32_t serial, cell, gen, sender;
  uint32_t what; /* CH_ANSWER.. */
} ch_ask;
SH_MSG_DECLARE(ch_ask);

/* The spawn argument of a target. */
typedef struct ch_spawn_arg {
  ch_world *wd;
  uint32_t cell, gen;
  bool fail;    /* its init fails with -EIO */
  bool ordered; /* its class keeps per-sender order across asks and notices */
} ch_spawn_arg;

extern const sh_actor_class ch_classes[CH_NKINDS];

/* A fresh serial, or 0 when the run has used them all. */
uint32_t ch_serial(ch_world *wd);
/* The value a reply to the ask of this serial carries. */
static inline uint64_t ch_reply_of(uint32_t serial) { return 0x9e3779b97f4a7c15ull ^ serial; }
/* A new ask to inc from sender, with a fresh serial; NULL when none is left. */
ch_ask *ch_ask_new(ch_world *wd, const ch_inc *inc, uint32_t sender, uint32_t what);
/* The same for a notice. */
ch_note *ch_note_new(ch_world *wd, const ch_inc *inc, uint32_t sender, uint32_t what,
                     uint32_t arg);
/* The live incarnation of a cell, or NULL. */
static inline ch_inc *ch_live(ch_world *wd, uint32_t cell) {
  return atomic_load_explicit(&wd->cells[cell].live, memory_order_acquire);
}

#endif
