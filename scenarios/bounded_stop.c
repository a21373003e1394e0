/*
 * A bounded mailbox whose actor stops while senders wait for room (in the
 * manner of Kilim's bounded mailboxes: blocking, non-blocking and waiting
 * puts):
 *
 *   bounded_stop      senders waiting on a full mailbox when its actor
 *                     stops: each fails with -ESHUTDOWN, nothing is lost
 *                     or doubled.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#include "kilim.h"

/* ==== bounded_stop ============================================================
 *
 * A consumer C (notice capacity SP_CAP, ask capacity 1) stopped while
 * senders wait for room. Setup sends C SP_PRE items and then a barrier
 * notice (exactly SP_CAP messages: all fit). C handles the items, then the
 * barrier's stack asks a holder H and waits; from then C takes nothing. H's
 * stack asks C in turn (its ask takes C's one ask slot and stays in the
 * mailbox: C takes no asks either) and kicks an asker A, whose ask to C
 * must wait for room. Meanwhile SP_PRODUCERS producers put items to C until
 * a put waits; C never takes one of theirs, so SP_CAP of them fill the
 * mailbox and each producer ends with one put waiting (each has more items
 * than fit). Every sender whose send began to wait kicks a stopper S; S
 * stops C once the gates show everyone waiting: A waits (so C is held for
 * good), every producer waits and the notice mailbox is full. Nothing can
 * change after that but the stop. Then:
 *   - every waiting put fails with -ESHUTDOWN and hands its item back
 *     (sh_future_take); a put after the stop fails at once, likewise;
 *   - A's ask fails with -ESHUTDOWN, and so does H's (answered by the
 *     stopped C); C's barrier stack's ask fails with -ESHUTDOWN too (the
 *     asker stopped), or gets H's answer (0), which H sends as soon as the
 *     stopped C refused its ask: a run takes a reply that arrives while it
 *     refuses C's queued messages ahead of them, so the answer may reach
 *     C's barrier stack before the run's stop work fails it;
 *   - before the stop, sh_notice_try to the full mailbox is -EAGAIN with the
 *     item still S's, and sh_notice is -EAGAIN with the item freed; after
 *     it, sh_notice_try is -ESHUTDOWN with the item still S's;
 *   - every item is freed exactly once (its type's drop hook), and each
 *     ends one way: received by C, handed back, dropped with C's mailbox
 *     (exactly SP_CAP), or refused by sh_notice (one): nothing lost, nothing
 *     doubled.
 */
#define SP_PRODUCERS 3
#define SP_CAP 4
#define SP_PRE (SP_CAP - 1)
#define SP_ITEMS (SP_CAP + 1) /* per producer: one more than C's mailbox holds */
/* Items: setup's, the producers' (each at most SP_ITEMS, and one after the
 * stop), and S's two. */
#define SP_MAX_ITEMS (SP_PRE + SP_PRODUCERS * (SP_ITEMS + 1) + 2)

/* An item's fate, bits of stop_world.fate. */
enum { F_RECEIVED = 1, F_BACK = 2, F_REFUSED = 4, F_FREED = 8 };

typedef struct sp_world sp_world;

/* An item the world follows to its end through its type's drop hook. */
typedef struct sp_item {
  sh_msg hdr;
  sp_world *w;
  uint32_t id;
} sp_item;

struct sp_world {
  sh_scn *s;
  const sh_addr *c, *h, *a, *stopper;
  /* relaxed: the ids only have to be distinct. */
  atomic_uint items;
  /* Each item's F_* bits: set by whoever handles it (C, a producer, S, the
   * drop hook on any thread) with relaxed fetch_or, read by verify after
   * the join. */
  atomic_uchar fate[SP_MAX_ITEMS];
  atomic_bool stopped; /* S's, relaxed: read by S and by verify after the join */
  /* Producers, A, H and C's barrier stack, each when it has seen the stop. */
  atomic_uint left;
};

static void sp_item_drop(sh_msg *m) {
  sp_item *it = (sp_item *)m;
  unsigned was = atomic_fetch_or_explicit(&it->w->fate[it->id], F_FREED, memory_order_relaxed);
  SH_SCN_CHECK(it->w->s, !(was & F_FREED), "item %u freed twice", it->id);
}
static SH_MSG_DEFINE_DROP(sp_item, SH_NOTICE, 0, sp_item_drop);

/* C's barrier notice: while its stack waits for H, C takes nothing. */
typedef struct sp_hold {
  sh_msg hdr;
} sp_hold;
static SH_MSG_DEFINE(sp_hold, SH_NOTICE, SH_MSG_BARRIER);

static sp_item *sp_item_new(sp_world *w) {
  uint32_t id = atomic_fetch_add_explicit(&w->items, 1, memory_order_relaxed);
  if (!SH_SCN_CHECK(w->s, id < SP_MAX_ITEMS, "more than %d items", SP_MAX_ITEMS)) return NULL;
  return sh_msg_new(sp_item, .w = w, .id = id);
}

static void sp_mark(sp_world *w, const sp_item *it, unsigned bit) {
  atomic_fetch_or_explicit(&w->fate[it->id], (unsigned char)bit, memory_order_relaxed);
}

static void sp_one_less(sh_actor *self) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sh_scn_count_down(w->s, sh_actor_system(self), &w->left);
}

/* A send of self's began to wait for room: S may find everyone waiting. */
static void sp_waits(sh_actor *self) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  if (!SH_SCN_CHECK(w->s, sh_scn_kick(w->stopper) == 0, "kick of the stopper failed"))
    kl_give_up(self);
}

/* ---- C --------------------------------------------------------------------------- */

enum { C_RELEASED = 1 };

static sh_yield sp_c_notice(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &sp_item_type)) {
    sp_mark(w, (sp_item *)m, F_RECEIVED);
    return sh_return(st, NULL);
  }
  sh_future **f = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    *f = sh_scn_ask_num(st, w->h, 0, SH_FOREVER);
    if (SH_SCN_CHECK(w->s, *f != NULL, "C: ask to the holder not made"))
      return sh_suspend(st, C_RELEASED);
    kl_give_up(self);
    return sh_return(st, NULL);
  }
  int err = sh_future_error(*f);
  SH_SCN_CHECK(w->s, err == -ESHUTDOWN || err == 0, "C: hold ended with %d, want %d or 0", err,
               -ESHUTDOWN);
  sp_one_less(self);
  return sh_return(st, NULL);
}

/* Never runs: the only asks C gets come while it is held. */
static sh_yield sp_c_ask(sh_actor *self, sh_stack *st) {
  SH_SCN_CHECK(sh_scn_of(self), false, "C took an ask while held");
  return sh_scn_answer(st, 0);
}

/* ---- H, A and the producers -------------------------------------------------------- */

enum { H_ANSWERED = 1, A_ANSWERED = 1, P_PUT = 1 };

/* H's stack, for C's ask: asks C back (admitted at once into C's empty ask
 * mailbox, where it stays), then lets A ask. */
static sh_yield sp_h_ask(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sh_future **f = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    *f = sh_scn_ask_num(st, w->c, 1, SH_FOREVER);
    if (SH_SCN_CHECK(w->s, *f != NULL && !sh_future_done(*f), "H: ask to C not pending") &&
        SH_SCN_CHECK(w->s, sh_scn_kick(w->a) == 0, "H: kick of A failed"))
      return sh_suspend(st, H_ANSWERED);
    kl_give_up(self);
    return sh_throw(st, -EPROTO);
  }
  SH_SCN_CHECK(w->s, sh_future_error(*f) == -ESHUTDOWN, "H: ask to C ended with %d, want %d",
               sh_future_error(*f), -ESHUTDOWN);
  sp_one_less(self);
  return sh_scn_answer(st, 0);
}

/* A's ask finds C's one ask slot taken by H's: it waits for room. */
static sh_yield sp_a_notice(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sh_future **f = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    *f = sh_scn_ask_num(st, w->c, 2, SH_FOREVER);
    if (SH_SCN_CHECK(w->s, *f != NULL && !sh_future_done(*f), "A: ask to C not waiting")) {
      sp_waits(self);
      return sh_suspend(st, A_ANSWERED);
    }
    kl_give_up(self);
    return sh_return(st, NULL);
  }
  SH_SCN_CHECK(w->s, sh_future_error(*f) == -ESHUTDOWN, "A: ask to C ended with %d, want %d",
               sh_future_error(*f), -ESHUTDOWN);
  sp_one_less(self);
  return sh_return(st, NULL);
}

typedef struct sp_put_locals {
  sh_future *f;
  sp_item *item; /* what f put: compared with what a failed put hands back */
  uint32_t sent;
} sp_put_locals;

/* The put of `it` has failed with -ESHUTDOWN: it must hand `it` back. */
static void sp_take_back(sh_actor *self, sh_future *f, sp_item *it) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  SH_SCN_CHECK(w->s, sh_future_error(f) == -ESHUTDOWN, "producer %u: put ended with %d, want %d",
               sh_scn_id(self), sh_future_error(f), -ESHUTDOWN);
  sh_msg *back = sh_future_take(f);
  if (!SH_SCN_CHECK(w->s, back == &it->hdr, "producer %u: failed put handed back %s",
                    sh_scn_id(self), back == NULL ? "nothing" : "another message")) {
    sh_msg_free(back);
    return;
  }
  sp_mark(w, it, F_BACK);
  sh_msg_free(back);
}

/* After the stop: a put to C fails at once, handing its item back. */
static void sp_put_after_stop(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sp_item *it = sp_item_new(w);
  sh_future *f = it != NULL ? sh_put(st, w->c, &it->hdr, SH_FOREVER) : NULL;
  if (!SH_SCN_CHECK(w->s, f != NULL && sh_future_done(f), "producer %u: put after the stop %s",
                    sh_scn_id(self), f == NULL ? "not made" : "did not fail at once"))
    return;
  sp_take_back(self, f, it);
}

/* Puts items to C until one fails (the stop); each waits for the one before. */
static sh_yield sp_producer(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sp_put_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == P_PUT && sh_future_error(l->f) != 0) {
    sp_take_back(self, l->f, l->item);
    sp_put_after_stop(self, st);
    sp_one_less(self);
    return sh_return(st, NULL);
  }
  if (!SH_SCN_CHECK(w->s, l->sent < SP_ITEMS, "producer %u: all %d items admitted",
                    sh_scn_id(self), SP_ITEMS) ||
      (l->item = sp_item_new(w)) == NULL) {
    kl_give_up(self);
    return sh_return(st, NULL);
  }
  l->sent++;
  l->f = sh_put(st, w->c, &l->item->hdr, SH_FOREVER);
  if (!SH_SCN_CHECK(w->s, l->f != NULL, "producer %u: put not made", sh_scn_id(self))) {
    kl_give_up(self);
    return sh_return(st, NULL);
  }
  if (!sh_future_done(l->f)) sp_waits(self);
  return sh_suspend(st, P_PUT);
}

/* ---- S --------------------------------------------------------------------------- */

/* Everyone waits: A for room in C's ask mailbox (H's ask holds the slot,
 * and A asks only once C is held), every producer for room in the full
 * notice mailbox. */
static bool sp_all_waiting(sp_world *w) {
  sh_mailbox_stats a = kl_box_stats(w->s, w->c, SH_ASK);
  sh_mailbox_stats n = kl_box_stats(w->s, w->c, SH_NOTICE);
  if (a.waiting != 1 || n.waiting != SP_PRODUCERS || n.depth != SP_CAP) return false;
  SH_SCN_CHECK(w->s, a.depth == 1, "C's ask mailbox holds %u, want H's ask", a.depth);
  kl_check_bounded(w->s, "C's notices", &n, SP_CAP);
  kl_check_bounded(w->s, "C's asks", &a, 1);
  return true;
}

/* The sends that cannot wait, before the stop: refused for want of room
 * (the mailbox is full and senders wait). The sh_notice_try item stays S's
 * and is tried again after the stop. */
static sp_item *sp_refusals(sh_actor *self) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sp_item *keep = sp_item_new(w), *lost = sp_item_new(w);
  if (keep == NULL || lost == NULL) {
    sh_msg_free(keep != NULL ? &keep->hdr : NULL);
    sh_msg_free(lost != NULL ? &lost->hdr : NULL);
    return NULL;
  }
  int rc = sh_notice_try(w->c, &keep->hdr);
  SH_SCN_CHECK(w->s, rc == -EAGAIN, "S: sh_notice_try to the full mailbox: %d", rc);
  sp_mark(w, lost, F_REFUSED);
  rc = sh_notice(w->c, &lost->hdr); /* frees it on -EAGAIN */
  SH_SCN_CHECK(w->s, rc == -EAGAIN, "S: sh_notice to the full mailbox: %d", rc);
  return keep;
}

static void sp_stop_c(sh_actor *self) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sp_item *keep = sp_refusals(self);
  atomic_store_explicit(&w->stopped, true, memory_order_relaxed);
  SH_SCN_CHECK(w->s, sh_stop(w->c) == 0, "S: sh_stop failed");
  /* The stop refused every waiting sender on the spot. */
  sh_mailbox_stats n = kl_box_stats(w->s, w->c, SH_NOTICE);
  SH_SCN_CHECK(w->s, n.waiting == 0, "%u senders still waiting after the stop", n.waiting);
  if (keep == NULL) return;
  int rc = sh_notice_try(w->c, &keep->hdr);
  SH_SCN_CHECK(w->s, rc == -ESHUTDOWN, "S: sh_notice_try to the stopped C: %d", rc);
  sp_mark(w, keep, F_BACK);
  sh_msg_free(&keep->hdr);
}

static sh_yield sp_stopper(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  if (!atomic_load_explicit(&w->stopped, memory_order_relaxed) && sp_all_waiting(w))
    sp_stop_c(self);
  return sh_return(st, NULL);
}

/* ---- the run ------------------------------------------------------------------------ */

static const sh_actor_class sp_c_class = {
    .name = "stop_consumer",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sh_future *),
    .init = sh_scn_actor_init,
    .notice = sp_c_notice,
    .ask = sp_c_ask,
    .notice_capacity = SP_CAP,
    .ask_capacity = 1,
};
static const sh_actor_class sp_h_class = {
    .name = "stop_holder",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sh_future *),
    .init = sh_scn_actor_init,
    .ask = sp_h_ask,
};
static const sh_actor_class sp_a_class = {
    .name = "stop_asker",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sh_future *),
    .init = sh_scn_actor_init,
    .notice = sp_a_notice,
};
static const sh_actor_class sp_p_class = {
    .name = "stop_producer",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sp_put_locals),
    .init = sh_scn_actor_init,
    .notice = sp_producer,
};
static const sh_actor_class sp_s_class = {
    .name = "stop_stopper",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = sp_stopper,
};

/* SP_PRE items, then the hold: SP_CAP messages, all fit. */
static int sp_fill(sp_world *w) {
  for (uint32_t i = 0; i < SP_PRE; i++) {
    sp_item *it = sp_item_new(w);
    if (it == NULL) return -ENOMEM;
    int rc = sh_notice_try(w->c, &it->hdr);
    if (rc != 0) {
      sh_msg_free(&it->hdr);
      return rc;
    }
  }
  sp_hold *h = sh_msg_new(sp_hold);
  if (h == NULL) return -ENOMEM;
  int rc = sh_notice_try(w->c, &h->hdr);
  if (rc != 0) sh_msg_free(&h->hdr);
  return rc;
}

static int sp_setup(sh_scn *s, sh_system *sys) {
  sp_world *w = sh_scn_state(s);
  uint32_t workers = sh_scn_workers(s);
  w->s = s;
  atomic_store(&w->left, SP_PRODUCERS + 3);
  int rc = sh_scn_spawn_on(s, sys, &sp_c_class, 0, 0, &w->c);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &sp_h_class, 0, 1 % workers, &w->h);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &sp_a_class, 0, 1, &w->a);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &sp_s_class, 0, 1, &w->stopper);
  if (rc == 0) rc = sp_fill(w);
  if (rc == 0)
    rc = sh_scn_spawn_each(s, sys, &sp_p_class, SP_PRODUCERS,
                           SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK, NULL);
  return rc;
}

static void sp_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  sp_world *w = sh_scn_state(s);
  SH_SCN_CHECK(s, atomic_load(&w->stopped), "C was never stopped");
  uint32_t n = atomic_load(&w->items), count[F_FREED] = {0};
  for (uint32_t i = 0; i < n && i < SP_MAX_ITEMS; i++) {
    unsigned f = atomic_load(&w->fate[i]);
    unsigned end = f & (unsigned)~F_FREED;
    SH_SCN_CHECK(s, f & F_FREED, "item %u never freed", i);
    SH_SCN_CHECK(s, end == 0 || end == F_RECEIVED || end == F_BACK || end == F_REFUSED,
                 "item %u ended two ways (%#x)", i, f);
    count[end]++;
  }
  /* end 0: freed with nothing else done to it, dropped with C's mailbox. */
  SH_SCN_CHECK_EQ(s, count[F_RECEIVED], SP_PRE, "items received");
  SH_SCN_CHECK_EQ(s, count[0], SP_CAP, "items dropped with the mailbox");
  SH_SCN_CHECK_EQ(s, count[F_REFUSED], 1, "items refused");
  /* Each producer: the waiting put and the one after the stop; S's try. */
  SH_SCN_CHECK_EQ(s, count[F_BACK], 2 * SP_PRODUCERS + 1, "items handed back");
  SH_SCN_CHECK_EQ(s, n, SP_PRE + SP_CAP + 2 * SP_PRODUCERS + 2, "items made");
  sh_mailbox_stats ms = kl_box_stats(s, w->c, SH_NOTICE);
  /* S's two sends refused for want of room; the try after the stop is not one. */
  SH_SCN_CHECK_EQ(s, ms.refused, 2, "refusals counted");
}

static const sh_scenario bounded_stop = {
    .name = "bounded_stop",
    .summary = "senders waiting on a full mailbox when it stops: -ESHUTDOWN, items handed back",
    .workers = 2,
    .state_size = sizeof(sp_world),
    .setup = sp_setup,
    .verify = sp_verify,
};
SH_SCENARIO(bounded_stop);

