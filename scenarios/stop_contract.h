/*
 * What the stop_contract scenario's parts share (stop_contract.c: the
 * stopping actors, the run; stop_peers.c: the actors they send to).
 *
 * The rules checked, from stackhouse.h (sh_stop, sh_put, sh_sleep,
 * sh_timer_start), README "Stopping" and docs/internals.md "Stopping and
 * shutdown":
 *   - once sh_stop of an actor returned, every send to it is refused:
 *     sh_notice and sh_notice_try with -ESHUTDOWN (the try's message still
 *     the caller's), sh_ask's and sh_put's futures already failed with
 *     -ESHUTDOWN (the put holding its notice), sh_ask_try 0 with such a
 *     future;
 *   - the stopping actor's own asks, puts and sleeps fail at once with
 *     -ESHUTDOWN, from the handler that called sh_stop and from its stacks
 *     that resume after the stop, and sh_timer_start is -ESHUTDOWN; its
 *     notices (which make no future) are not refused for it: a notice to a
 *     live actor is delivered;
 *   - its asks pending at the stop complete with -ESHUTDOWN (their answer
 *     comes only after the stop), its sleeps too; a put waiting for room
 *     ends exactly: 0 and the notice is delivered, or an error and the
 *     future holds the notice;
 *   - no queued message starts after the stop, the stop hook runs once and
 *     after the last handler;
 *   - every message is freed once, handled at most once, handled exactly
 *     once when its send said delivered, never when it said refused.
 */
#ifndef SCN_STOP_CONTRACT_H
#define SCN_STOP_CONTRACT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

#define SC_SUBJECTS 2u  /* actors that stop */
#define SC_MSGS 256u    /* serials of one run (a bound: a send past it is skipped) */
#define SC_HOLD_MS 400u /* a peer's wait for the stops, at most (1 ms turns) */

/* What a notice asks of its receiver. */
enum {
  SC_PLAIN,      /* nothing: counted */
  SC_PARK_ASK,   /* subject: ask P0 an ask it answers after our stop */
  SC_PARK_SLEEP, /* subject: sleep past the stop */
  SC_PARK_PUT,   /* subject: put into P1's full mailbox */
  SC_STOP_REQ,   /* subject: stop (itself, or ask the poker to) */
  SC_STOP_ME,    /* poker: stop the sender, then send to it */
  SC_STOPPED,    /* poker: the sender stopped itself, send to it */
  SC_HOLD,       /* P1 (a barrier): hold the mailbox until every subject stopped */
};

/* What a sender concluded of a message's fate. */
enum { SC_EXP_UNKNOWN, SC_EXP_ONCE, SC_EXP_NEVER, SC_EXP_MAYBE };

typedef struct sc_world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *subj[SC_SUBJECTS], *p0, *p1, *poker;
  bool external[SC_SUBJECTS]; /* stopped by the poker, else by itself */
  atomic_bool began[SC_SUBJECTS];   /* sh_stop of it is about to be called */
  atomic_bool stopped[SC_SUBJECTS]; /* sh_stop of it returned (release/acquire) */
  atomic_uint nstopped;  /* subjects whose stop returned */
  atomic_uint hooks;     /* stop hooks run */
  atomic_uint peer_sent; /* messages to peers that their sender said delivered */
  atomic_uint peer_got;  /* messages the peers handled */
  atomic_uint next_serial;
  atomic_uchar handled[SC_MSGS], freed[SC_MSGS], expect[SC_MSGS];
} sc_world;

typedef struct sc_note {
  sh_msg hdr;
  sc_world *wd;
  uint32_t serial, what, from; /* from: a subject's index, for SC_STOP_* */
} sc_note;
SH_MSG_DECLARE(sc_note);
typedef sc_note sc_hold; /* SC_HOLD, a barrier */
SH_MSG_DECLARE(sc_hold);

typedef struct sc_ask {
  sh_msg hdr;
  sc_world *wd;
  uint32_t serial, stuck, from; /* stuck: answered after subject `from` stopped */
} sc_ask;
SH_MSG_DECLARE(sc_ask);

/* New messages with a fresh serial; NULL when none is left or no memory. */
sc_note *sc_note_new(sc_world *wd, uint32_t what, uint32_t from);
sc_ask *sc_ask_new(sc_world *wd, uint32_t stuck, uint32_t from);
/* The sender's conclusion for a serial (once). */
void sc_expect(sc_world *wd, uint32_t serial, int exp);
/* A handler took message `serial`: counted, checked once only. */
void sc_handled(sc_world *wd, uint32_t serial);
/* A message to a peer was delivered (its send said so). */
void sc_peer_sent(sc_world *wd, uint32_t serial);
/* Ends the workload once every stop hook ran and every delivered message
 * to a peer was handled; called after each of those events. */
void sc_maybe_done(sc_world *wd);
static inline bool sc_is_stopped(sc_world *wd, uint32_t i) {
  return atomic_load_explicit(&wd->stopped[i], memory_order_acquire);
}
static inline bool sc_began(sc_world *wd, uint32_t i) {
  return atomic_load_explicit(&wd->began[i], memory_order_acquire);
}
/* Stops subject i (from any of the run's actors): marked before the call,
 * for the subject's own stacks, which the stop may resume before it
 * returns, and after it, for senders, who are refused from then on. */
void sc_stop(sc_world *wd, uint32_t i);
/* From a stack of any actor but subject i: every kind of send to subject
 * i, whose stop returned before: each must be refused. */
void sc_send_to_stopped(sc_world *wd, sh_stack *st, uint32_t i);

extern const sh_actor_class sc_p0_class, sc_p1_class, sc_poker_class;

#endif
