/*
 * How long a channel pointer lives, for the tests that check it on either
 * backend (header only, public API only): a client whose channel closes
 * inside one of its own calls, from a handler that holds nothing of the
 * channel but a local (not a channel stack, no future of the channel),
 * and that goes on calling on it in the same invocation. Each such call
 * must fail with -EPIPE, a send's or an ask's future already failed: the
 * channel is still there (net.h) until that handler returns.
 *
 * The client connects, sleeps a millisecond (so that the connect's future,
 * which held the channel, is gone when it wakes), then closes the channel
 * in one of two ways (life_mode) and calls on it. A quiet server takes the
 * connection and drops what it reads.
 *
 * The including file defines, after including this one:
 *   static void life_check(sh_actor *self, bool ok, const char *what, long a);
 *   static void life_finished(sh_actor *self);
 * life_check records a failed check (what, with a figure); life_finished
 * says the client's run is over (once per client).
 */
#ifndef TESTS_CHAN_LIFE_H
#define TESTS_CHAN_LIFE_H

#include <errno.h>

#include <stackhouse/net.h>

static void life_check(sh_actor *self, bool ok, const char *what, long a);
static void life_finished(sh_actor *self);

typedef enum life_mode {
  LIFE_CLOSE = 1, /* the actor closes the channel itself */
  /* Its write fails in the transport (the caller makes the next write
   * fail: libfiu's sh/net/write on epoll, sh/net/reset in the simulator),
   * and the flush inside sh_channel_write closes the channel. */
  LIFE_WRITE_FAILS = 2,
} life_mode;

typedef struct life_plan {
  sh_netaddr at;
  life_mode mode;
  void *ctx; /* the including file's */
} life_plan;

typedef struct life_client {
  sh_actor base;
  life_plan plan;
  bool open, closed;
  int close_error;
} life_client;

typedef struct life_locals {
  sh_future *f, *send, *ask;
  sh_channel *ch;
} life_locals;

enum { LIFE_CONNECTED = 1, LIFE_SLEPT, LIFE_DONE };

typedef struct life_go { sh_msg hdr; } life_go;
static SH_MSG_DEFINE(life_go, SH_NOTICE, 0);
typedef struct life_req { sh_msg hdr; } life_req;
static SH_MSG_DEFINE(life_req, SH_NOTICE, 0);

static int life_init(sh_actor *self, void *arg) {
  life_client *c = (life_client *)self;
  c->plan = *(const life_plan *)arg;
  return 0;
}

/* The channel closes inside this call. */
static void life_close(sh_actor *self, life_locals *l) {
  life_client *c = (life_client *)self;
  if (c->plan.mode == LIFE_CLOSE) {
    sh_channel_close(l->ch);
    return;
  }
  sh_bytes *b = sh_bytes_new("bytes", 5);
  life_check(self, b != NULL, "sh_bytes_new", 0);
  /* Taken into the write buffer: the flush's failure closes the channel. */
  int rc = b != NULL ? sh_channel_write(l->ch, &b->hdr) : 0;
  life_check(self, rc == 0, "the failing write (its result)", rc);
}

/* Calls on the channel that closed inside this invocation: each fails. */
static sh_yield life_after_close(sh_actor *self, sh_stack *st, life_locals *l) {
  life_client *c = (life_client *)self;
  life_close(self, l);
  life_check(self, c->closed, "CLOSED heard inside the call that closed", c->closed);
  sh_bytes *b = sh_bytes_new("more", 4);
  int rc = b != NULL ? sh_channel_write(l->ch, &b->hdr) : -EPIPE;
  life_check(self, rc == -EPIPE, "a write after the close", rc);
  life_check(self, sh_channel_pending_bytes(l->ch) == 0, "bytes pending after the close",
             (long)sh_channel_pending_bytes(l->ch));
  life_check(self, sh_channel_shutdown(l->ch) == -EPIPE, "a shutdown after the close", 0);
  /* Futures of a closed channel hold it, then let it go: neither may touch
   * a channel that is gone. */
  b = sh_bytes_new("send", 4);
  l->send = b != NULL ? sh_channel_send(st, l->ch, &b->hdr) : NULL;
  life_req *q = sh_msg_new(life_req);
  l->ask = q != NULL ? sh_channel_ask(st, l->ch, &q->hdr) : NULL;
  if (l->send == NULL || l->ask == NULL) return sh_throw(st, -ENOMEM);
  life_check(self, sh_future_error(l->send) == -EPIPE, "a send after the close",
             sh_future_error(l->send));
  life_check(self, sh_future_done(l->ask) && sh_future_failed(l->ask), "an ask after the close",
             sh_future_error(l->ask));
  return sh_suspend(st, LIFE_DONE);
}

static sh_yield life_notice(sh_actor *self, sh_stack *st) {
  life_client *c = (life_client *)self;
  life_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    l->f = sh_tcp_connect(st, &c->plan.at, NULL);
    return l->f != NULL ? sh_suspend(st, LIFE_CONNECTED) : sh_throw(st, -ENOMEM);
  case LIFE_CONNECTED:
    life_check(self, !sh_future_failed(l->f), "the connect", sh_future_error(l->f));
    if (sh_future_failed(l->f)) {
      life_finished(self);
      return sh_return(st, NULL);
    }
    l->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    l->f = sh_sleep(st, 1);
    return l->f != NULL ? sh_suspend(st, LIFE_SLEPT) : sh_throw(st, -ENOMEM);
  case LIFE_SLEPT:
    /* Only this local refers to the channel now, and it is open. */
    life_check(self, c->open && !c->closed, "open after the sleep", c->closed);
    if (c->closed) {
      life_finished(self);
      return sh_return(st, NULL);
    }
    return life_after_close(self, st, l);
  default:
    life_finished(self);
    return sh_return(st, NULL);
  }
}

/* The channel stacks of both ends: what is read is dropped. */
static sh_yield life_quiet(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static void life_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch;
  life_client *c = (life_client *)self;
  if (ev == SH_CHANNEL_OPEN) c->open = true;
  if (ev == SH_CHANNEL_CLOSED) c->closed = true, c->close_error = error;
}

static const sh_actor_class life_client_class = {
    .name = "life_client", .size = sizeof(life_client), .locals_size = sizeof(life_locals),
    .kind = SH_IO_ACTOR, .init = life_init, .notice = life_notice, .channel = life_quiet,
    .channel_event = life_event};

/* The quiet server: takes the connection and answers nothing. */
static const sh_actor_class life_server_class = {
    .name = "life_server", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR,
    .channel = life_quiet};

#endif
