/*
 * actor_chaos: a generated workload over the whole actor API, checked
 * against the API's promises, for the bugs nobody wrote a scenario for.
 *
 * CH_DRIVERS driver actors each run CH_OPS operations drawn from the run's
 * stream: spawn an actor into one of its cells (a random class of
 * chaos_target.c; sometimes its init fails), stop one, send notices
 * (sh_notice, sh_notice_try, sh_put with and without a timeout) and asks
 * (sh_ask, sh_ask_try; answered, thrown, slept on, or answered after an ask
 * of the target's own) to any cell, its own or another driver's, start and
 * cancel timers there, send to addresses whose sh_stop already returned, or
 * sleep. An outside thread does the same through a bridge, which it drops
 * and makes again now and then, receiving with and without timeouts.
 * Houses are reused all the while (spawns after stops).
 *
 * What each outcome may be follows from stackhouse.h and bridge.h alone:
 *   - a cell's own driver is its only stopper: to its own live actor a
 *     send is never refused as stopped, an ask or put without a timeout
 *     always succeeds, an ask's reply carries its own serial's value (or
 *     the error the ask said to throw);
 *   - a send to an address whose sh_stop returned is refused (-ESHUTDOWN);
 *   - -EAGAIN only from a bounded mailbox, -ETIMEDOUT only with a timeout;
 *   - a bridge's reply answers one of its own pending asks, with its value;
 *   - every message made is freed exactly once; handled at most once, by
 *     the incarnation it names, after its sender's earlier ones (target);
 *   - every actor whose init succeeded gets its stop; a failed init's
 *     error is sh_spawn's.
 */
#include <errno.h>
#include <stdatomic.h>

#include "chaos.h"

enum { D_NOTICE, D_TRY, D_PUT, D_ASK, D_ASK_TRY, D_COMMAND, D_STOP, D_SPAWN, D_RETIRED, D_SLEEP,
       D_BURST, D_OPS };
#define CH_BURST 6u /* notices of a burst, at most */

typedef struct driver {
  sh_scn_actor a; /* a.id: the driver's index, its sender number */
  uint32_t ops;
} driver;

/* What an operation that waits expects when its future completes. */
typedef struct drv_locals {
  sh_future *f;
  uint32_t serial, what;
  bool own, forever, ask, retired;
} drv_locals;

static ch_world *world_of(const sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }

static bool bounded_asks(const ch_inc *inc) { return ch_classes[inc->kind].ask_capacity != 0; }
static bool bounded_notices(const ch_inc *inc) {
  const sh_actor_class *c = &ch_classes[inc->kind];
  return c->notice_capacity != 0 || (c->ordered && c->ask_capacity != 0);
}

/* A send's immediate result: 0, or a refusal the API allows here. */
static void check_send(sh_scn *s, int rc, const ch_inc *inc, bool own, bool bounded,
                       const char *what) {
  bool ok = rc == 0 || (rc == -EAGAIN && bounded) || (rc == -ESHUTDOWN && !own) ||
            sh_scn_fault_error(s, rc);
  SH_SCN_CHECK(s, ok, "%s to cell %u gen %u (%s): %d", what, inc->cell, inc->gen,
               own ? "own, live" : "another's", rc);
}

/* A completed put or ask against what it expected (drv_locals). */
static void check_done(sh_scn *s, const drv_locals *l) {
  int err = sh_future_error(l->f);
  uint64_t v = 0;
  if (l->retired) {
    SH_SCN_CHECK(s, err == -ESHUTDOWN || sh_scn_fault_error(s, err),
                 "an ask to a stopped actor: %d", err);
    return;
  }
  bool ok = err == 0 || (err == -ETIMEDOUT && !l->forever) || (err == -ESHUTDOWN && !l->own) ||
            (err == CH_THROWN && l->ask && l->what == CH_THROW) || sh_scn_fault_error(s, err);
  SH_SCN_CHECK(s, ok, "#%u: %s to %s cell ended with %d", l->serial, l->ask ? "an ask" : "a put",
               l->own ? "its own live" : "another's", err);
  SH_SCN_CHECK(s, !(err == 0 && l->ask && l->what == CH_THROW), "#%u: a throw answered",
               l->serial);
  if (err == 0 && l->ask) {
    SH_SCN_CHECK(s, sh_scn_num_of(l->f, &v) && v == ch_reply_of(l->serial),
                 "#%u: the reply carries another ask's value", l->serial);
  }
}

/* ---- the driver's operations -------------------------------------------- */

static uint32_t own_cell(driver *d, uint32_t k) {
  return d->a.id + CH_DRIVERS * (k % (CH_CELLS / CH_DRIVERS));
}

static void do_spawn(driver *d, ch_world *wd, uint32_t k) {
  ch_cell *c = &wd->cells[own_cell(d, k)];
  if (atomic_load_explicit(&c->live, memory_order_relaxed) != NULL || c->gens == CH_GENS) return;
  ch_inc *inc = &c->inc[c->gens];
  inc->cell = own_cell(d, k);
  inc->gen = c->gens++;
  inc->kind = (uint32_t)sh_scn_below(wd->s, CH_NKINDS);
  ch_spawn_arg arg = {.wd = wd, .cell = inc->cell, .gen = inc->gen,
                      .fail = sh_scn_below(wd->s, 4) == 0,
                      .ordered = ch_classes[inc->kind].ordered};
  int rc = sh_spawn(wd->sys, &ch_classes[inc->kind], &arg, 1, &inc->addr);
  if (arg.fail) {
    SH_SCN_CHECK(wd->s, rc == -EIO || sh_scn_fault_error(wd->s, rc), "a failing init: %d", rc);
    return;
  }
  SH_SCN_CHECK(wd->s, rc == 0 || sh_scn_fault_error(wd->s, rc), "sh_spawn: %d", rc);
  /* release: the record, then its publication (ch_live's acquire). */
  if (rc == 0) atomic_store_explicit(&c->live, inc, memory_order_release);
}

static void do_stop(driver *d, ch_world *wd, uint32_t k) {
  ch_cell *c = &wd->cells[own_cell(d, k)];
  ch_inc *inc = atomic_load_explicit(&c->live, memory_order_relaxed);
  if (inc == NULL) return;
  int rc = sh_stop(inc->addr);
  SH_SCN_CHECK(wd->s, rc == 0, "sh_stop of a live actor: %d", rc);
  atomic_store_explicit(&c->live, NULL, memory_order_relaxed);
  /* release: a sender that sees the flag sends after the stop returned. */
  atomic_store_explicit(&inc->stopped, true, memory_order_release);
}

/* An address whose sh_stop returned, of any cell; NULL if none drawn. */
static ch_inc *pick_retired(ch_world *wd) {
  ch_inc *inc = &wd->cells[sh_scn_below(wd->s, CH_CELLS)].inc[sh_scn_below(wd->s, CH_GENS)];
  return atomic_load_explicit(&inc->stopped, memory_order_acquire) ? inc : NULL;
}

static sh_yield do_retired(driver *d, ch_world *wd, sh_stack *st, drv_locals *l) {
  ch_inc *inc = pick_retired(wd);
  if (inc == NULL) return SH_RETURN;
  if (sh_scn_below(wd->s, 2) == 0) {
    ch_note *n = ch_note_new(wd, inc, d->a.id, CH_NOTHING, 0);
    int rc = n != NULL ? sh_notice(inc->addr, &n->hdr) : -ESHUTDOWN;
    SH_SCN_CHECK(wd->s, rc == -ESHUTDOWN || sh_scn_fault_error(wd->s, rc),
                 "a notice to a stopped actor: %d", rc);
    return SH_RETURN;
  }
  ch_ask *m = ch_ask_new(wd, inc, d->a.id, CH_ANSWER);
  if (m == NULL) return SH_RETURN;
  *l = (drv_locals){.serial = m->serial, .ask = true, .retired = true};
  l->f = sh_ask(st, inc->addr, &m->hdr, SH_FOREVER);
  return l->f != NULL ? sh_suspend(st, 1) : SH_RETURN;
}

/* A send to a drawn cell's live actor: a notice, a try, a put, an ask. */
static sh_yield do_send(driver *d, ch_world *wd, sh_stack *st, drv_locals *l, uint32_t op) {
  sh_scn *s = wd->s;
  uint32_t cell = (uint32_t)sh_scn_below(s, CH_CELLS);
  ch_inc *inc = ch_live(wd, cell);
  if (inc == NULL) return SH_RETURN;
  *l = (drv_locals){.own = cell % CH_DRIVERS == d->a.id, .forever = sh_scn_below(s, 2) == 0};
  int64_t timeout = l->forever ? SH_FOREVER : (int64_t)(1 + sh_scn_below(s, 3));
  if (op == D_ASK || op == D_ASK_TRY) {
    l->ask = true;
    l->what = (uint32_t)sh_scn_below(s, CH_ASK_KINDS);
    ch_ask *m = ch_ask_new(wd, inc, d->a.id, l->what);
    if (m == NULL) return SH_RETURN;
    l->serial = m->serial;
    if (op == D_ASK) {
      l->f = sh_ask(st, inc->addr, &m->hdr, timeout);
    } else {
      int rc = sh_ask_try(st, inc->addr, &m->hdr, timeout, &l->f);
      check_send(s, rc, inc, l->own, bounded_asks(inc), "sh_ask_try");
      if (rc != 0) {
        sh_msg_free(&m->hdr); /* a refused try leaves the message ours */
        return SH_RETURN;
      }
    }
    return l->f != NULL ? sh_suspend(st, 1) : SH_RETURN;
  }
  uint32_t what = op == D_COMMAND ? 1 + (uint32_t)sh_scn_below(s, CH_NOTE_KINDS - 1) : CH_NOTHING;
  ch_note *n = ch_note_new(wd, inc, d->a.id, what, (uint32_t)sh_scn_below(s, 5));
  if (n == NULL) return SH_RETURN;
  l->serial = n->serial;
  if (op == D_PUT) {
    l->f = sh_put(st, inc->addr, &n->hdr, timeout);
    return l->f != NULL ? sh_suspend(st, 1) : SH_RETURN;
  }
  int rc = op == D_TRY ? sh_notice_try(inc->addr, &n->hdr) : sh_notice(inc->addr, &n->hdr);
  check_send(s, rc, inc, l->own, bounded_notices(inc), op == D_TRY ? "sh_notice_try" : "sh_notice");
  if (op == D_TRY && rc != 0) sh_msg_free(&n->hdr);
  return SH_RETURN;
}

/* A barrier now and then, notices until the mailbox is full, then a put
 * that waits for room: senders queue at the target's gate. */
static sh_yield do_burst(driver *d, ch_world *wd, sh_stack *st, drv_locals *l) {
  sh_scn *s = wd->s;
  uint32_t cell = (uint32_t)sh_scn_below(s, CH_CELLS);
  ch_inc *inc = ch_live(wd, cell);
  if (inc == NULL) return SH_RETURN;
  bool own = cell % CH_DRIVERS == d->a.id;
  uint32_t n = 1 + (uint32_t)sh_scn_below(s, CH_BURST);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t what = i == 0 && sh_scn_below(s, 2) ? CH_HOLD : CH_NOTHING;
    ch_note *m = ch_note_new(wd, inc, d->a.id, what, (uint32_t)sh_scn_below(s, 4));
    if (m == NULL) return SH_RETURN;
    check_send(s, sh_notice(inc->addr, &m->hdr), inc, own, bounded_notices(inc), "a burst's sh_notice");
  }
  *l = (drv_locals){.own = own, .forever = sh_scn_below(s, 2) == 0};
  ch_note *m = ch_note_new(wd, inc, d->a.id, CH_NOTHING, 0);
  if (m == NULL) return SH_RETURN;
  l->serial = m->serial;
  l->f = sh_put(st, inc->addr, &m->hdr, l->forever ? SH_FOREVER : 1 + (int64_t)sh_scn_below(s, 4));
  return l->f != NULL ? sh_suspend(st, 1) : SH_RETURN;
}

static sh_yield do_op(driver *d, ch_world *wd, sh_stack *st, drv_locals *l) {
  uint32_t op = (uint32_t)sh_scn_below(wd->s, D_OPS + 2);
  if (op >= D_OPS) op = D_SPAWN; /* weighed up: most sends need a live actor */
  uint32_t k = (uint32_t)sh_scn_below(wd->s, CH_CELLS / CH_DRIVERS);
  switch (op) {
  case D_SPAWN: do_spawn(d, wd, k); return SH_RETURN;
  case D_STOP: do_stop(d, wd, k); return SH_RETURN;
  case D_RETIRED: return do_retired(d, wd, st, l);
  case D_BURST: return do_burst(d, wd, st, l);
  case D_SLEEP:
    *l = (drv_locals){.f = sh_sleep(st, 1 + (int64_t)sh_scn_below(wd->s, 3))};
    return l->f != NULL ? sh_suspend(st, 2) : SH_RETURN;
  default: return do_send(d, wd, st, l, op);
  }
}

static sh_yield drv_notice(sh_actor *self, sh_stack *st) {
  driver *d = (driver *)self;
  ch_world *wd = world_of(self);
  drv_locals *l = sh_stack_locals(st);
  int state = sh_stack_state(st);
  if (state == SH_START) {
    sh_yield y = do_op(d, wd, st, l);
    if (y == SH_SUSPEND) return y;
  } else if (state == 1) {
    check_done(wd->s, l);
  }
  bool more = ++d->ops < CH_OPS;
  if (!more)
    for (uint32_t k = 0; k < CH_CELLS / CH_DRIVERS; k++) do_stop(d, wd, k);
  return sh_scn_round_end(st, more, &wd->left);
}

static const sh_actor_class drv_class = {
    .name = "chaos_driver",
    .size = sizeof(driver),
    .locals_size = sizeof(drv_locals),
    .init = sh_scn_actor_init,
    .notice = drv_notice,
};

/* ---- the outside thread --------------------------------------------------- */

#define BR_PENDING 16u

typedef struct br_state {
  sh_bridge *b;
  uint64_t ticket[BR_PENDING];
  uint32_t serial[BR_PENDING], what[BR_PENDING];
  bool retired[BR_PENDING]; /* to a stopped actor: only -ESHUTDOWN may come */
  uint32_t n;
} br_state;

static void br_ask(ch_world *wd, br_state *bs) {
  sh_scn *s = wd->s;
  bool retired = sh_scn_below(s, 4) == 0;
  ch_inc *inc = retired ? pick_retired(wd) : ch_live(wd, (uint32_t)sh_scn_below(s, CH_CELLS));
  uint32_t what = (uint32_t)sh_scn_below(s, CH_ASK_KINDS);
  int64_t timeout = sh_scn_below(s, 2) ? SH_FOREVER : 1;
  if (inc == NULL || bs->n == BR_PENDING) return;
  ch_ask *m = ch_ask_new(wd, inc, CH_DRIVERS, what);
  if (m == NULL) return;
  uint32_t serial = m->serial;
  uint64_t t;
  int rc = sh_bridge_ask(bs->b, inc->addr, &m->hdr, timeout, &t);
  bool ok = rc == 0 || rc == -ESHUTDOWN || (rc == -ETIMEDOUT && timeout > 0) ||
            sh_scn_fault_error(s, rc);
  SH_SCN_CHECK(s, ok, "sh_bridge_ask: %d", rc);
  if (rc != 0) return;
  bs->ticket[bs->n] = t;
  bs->serial[bs->n] = serial;
  bs->what[bs->n] = what;
  bs->retired[bs->n++] = retired;
}

/* A reply received: one of this bridge's pending asks, with its value. */
static void br_got(ch_world *wd, br_state *bs, const sh_bridge_reply *r) {
  sh_scn *s = wd->s;
  uint32_t i = 0;
  while (i < bs->n && bs->ticket[i] != r->ticket) i++;
  SH_SCN_CHECK(s, i < bs->n, "a bridge reply with ticket %llu, no pending ask of this bridge",
               (unsigned long long)r->ticket);
  uint64_t v = r->msg != NULL ? ((const sh_scn_num *)r->msg)->v : 0;
  if (i < bs->n) {
    /* -ESHUTDOWN: the actor may stop meanwhile (no cell is the thread's). */
    bool answered = !bs->retired[i] &&
                    ((r->error == 0 && v == ch_reply_of(bs->serial[i]) && bs->what[i] != CH_THROW) ||
                     (r->error == CH_THROWN && bs->what[i] == CH_THROW));
    bool ok = answered || r->error == -ESHUTDOWN || sh_scn_fault_error(s, r->error);
    SH_SCN_CHECK(s, ok, "bridge: the reply to #%u: error %d, %s value", bs->serial[i], r->error,
                 v == ch_reply_of(bs->serial[i]) ? "its" : "another");
    bs->ticket[i] = bs->ticket[--bs->n];
    bs->serial[i] = bs->serial[bs->n];
    bs->what[i] = bs->what[bs->n];
    bs->retired[i] = bs->retired[bs->n];
  }
  sh_msg_free(r->msg);
}

static void br_recv(ch_world *wd, br_state *bs, int64_t timeout) {
  sh_bridge_reply r;
  int rc = sh_bridge_recv(bs->b, timeout, &r);
  if (rc == 0) {
    br_got(wd, bs, &r);
    return;
  }
  bool ok = (rc == -ENOMSG && bs->n == 0) ||
            (bs->n > 0 && (rc == -EAGAIN || rc == -ETIMEDOUT) && timeout != SH_FOREVER);
  SH_SCN_CHECK(wd->s, ok, "sh_bridge_recv with %u pending, timeout %lld: %d", bs->n,
               (long long)timeout, rc);
}

static void br_op(ch_world *wd, br_state *bs) {
  sh_scn *s = wd->s;
  switch (sh_scn_below(s, 5)) {
  case 0: case 1: br_ask(wd, bs); break;
  case 2: br_recv(wd, bs, bs->n > 0 && sh_scn_below(s, 2) ? SH_FOREVER : (int64_t)sh_scn_below(s, 3)); break;
  case 3: {
    ch_inc *inc = ch_live(wd, (uint32_t)sh_scn_below(s, CH_CELLS));
    ch_note *n = inc != NULL ? ch_note_new(wd, inc, CH_DRIVERS, CH_NOTHING, 0) : NULL;
    if (n == NULL) break;
    int rc = sh_bridge_notice(bs->b, inc->addr, &n->hdr, 1 + (int64_t)sh_scn_below(s, 2));
    SH_SCN_CHECK(s, rc == 0 || rc == -ESHUTDOWN || rc == -ETIMEDOUT || sh_scn_fault_error(s, rc),
                 "sh_bridge_notice: %d", rc);
    break;
  }
  default: /* a new bridge: the old one's pending asks are forgotten */
    sh_bridge_free(bs->b);
    bs->n = 0;
    if (sh_bridge_new(wd->sys, &bs->b) != 0) bs->b = NULL;
  }
  SH_SCN_CHECK(s, bs->b == NULL || sh_bridge_pending(bs->b) == bs->n,
               "sh_bridge_pending %u, %u asks pending", bs->b ? sh_bridge_pending(bs->b) : 0,
               bs->n);
}

static void br_main(void *arg) {
  ch_world *wd = arg;
  br_state bs = {0};
  int rc = sh_bridge_new(wd->sys, &bs.b);
  SH_SCN_CHECK(wd->s, rc == 0 || sh_scn_fault_error(wd->s, rc), "sh_bridge_new: %d", rc);
  for (uint32_t i = 0; i < CH_BRIDGE_OPS && bs.b != NULL; i++) br_op(wd, &bs);
  /* Every ask is answered: a live actor answers, a stop refuses. */
  for (uint32_t i = 0; i < BR_PENDING && bs.b != NULL && bs.n > 0; i++) br_recv(wd, &bs, SH_FOREVER);
  sh_bridge_free(bs.b);
  sh_scn_count_down(wd->s, wd->sys, &wd->left);
}

/* ---- the run -------------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  ch_world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  atomic_store(&wd->left, CH_DRIVERS + 1);
  int rc = sh_scn_spawn_each(s, sys, &drv_class, CH_DRIVERS, SH_SCN_EACH_KICK, NULL);
  if (rc == 0) rc = sh_thread_start(br_main, wd, &wd->thread);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  ch_world *wd = sh_scn_state(s);
  if (wd->thread != NULL) sh_thread_join(wd->thread);
  uint32_t made = atomic_load(&wd->next_serial);
  for (uint32_t i = 1; i <= made && i < CH_MSGS; i++)
    SH_SCN_CHECK(s, atomic_load(&wd->freed[i]) == 1, "message #%u freed %u times", i,
                 (unsigned)atomic_load(&wd->freed[i]));
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->stops), atomic_load(&wd->inits),
                  "stop hooks run (one per init that succeeded)");
}

static const sh_scenario actor_chaos = {
    .name = "actor_chaos",
    .summary = "a generated workload over the actor API, checked against its promises",
    .state_size = sizeof(ch_world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(actor_chaos);
