/*
 * The node of test_e2e_cluster_proc.c: what runs in each node process of a
 * cluster of processes (a fresh exec of the test program, turned into the
 * node before main), on the public API only. It is here, in the test
 * program, because a node process starts from the program's own image:
 * its entry class and its init must be functions of that image.
 *
 * At boot (the sh_args notice) the node, by its argv:
 *   --port P       listens on TCP 0.0.0.0:P (0: a port the kernel picks);
 *   --listen A     listens on A (ip:port) instead;
 *   --connect A    then connects to A (ip:port) and reports what it reads
 *                  there until the peer closes;
 *   --ticks N      tells N numbered ticks right after its boot report;
 *   --abort        aborts right after its boot report (a fault);
 *   --exit N       ends its own system with status N after it;
 *   --stall-stop   makes its entry's stop hook sleep 15 s (a stop that
 *                  does not end in time);
 *   --connect-ms T gives its --connect a timeout of T ms;
 *   --persist-empty  persists an empty state instead of its count;
 *   --is-cut       puts sh_node_is_cut(itself, "main") in its boot's aux.
 * It counts its boots in what it persists (sh_node_recall, +1,
 * sh_node_persist) and tells every step (cp_report, through sh_node_tell):
 * its boot (the count, its listener's address as it sees it, its name),
 * each connection it accepts (its peer and local addresses; it writes its
 * name to the peer and closes), its own connect, what it read, and its
 * entry's stop hook (which a graceful stop runs and a SIGKILL does not).
 * A bad argv ends the node with status 2.
 */
#ifndef TESTS_CLUSTER_PROC_NODE_H
#define TESTS_CLUSTER_PROC_NODE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/cluster.h>
#include <stackhouse/net.h>
#include <stackhouse/stackhouse.h>

/* What a node tells. */
enum cp_kind {
  CP_BOOT = 1, /* counter, inited, local: the listener's address, error */
  CP_STOPPED,  /* the entry's stop hook ran */
  CP_ACCEPTED, /* peer, local: of a connection its listener accepted */
  CP_CONNECTED, /* peer, local of its --connect (error: why it failed) */
  CP_GREETED,  /* text: what its --connect read before the peer closed */
  CP_TICK,     /* counter: the tick's number, 1.. */
};

typedef struct cp_report {
  uint32_t kind;
  uint32_t counter;
  int32_t error;   /* the first call that failed: its negative errno (0: none) */
  uint32_t inited; /* BOOT: the spec's init ran in this process */
  int32_t aux;     /* BOOT with --is-cut: what sh_node_is_cut said */
  sh_netaddr local, peer;
  char self[32];   /* sh_node_self() */
  char text[32];
} cp_report;
_Static_assert(sizeof(cp_report) <= SH_NODE_TELL_MAX, "a report is told whole");

/* Set by the spec's init, in the node's process only (the test's own
 * process never runs it: a report saying 1 proves the init ran there). */
static volatile int cp_inited;
static void cp_node_init(void) { cp_inited = 1; }

static void cp_tell(cp_report *r) {
  const char *me = sh_node_self();
  snprintf(r->self, sizeof r->self, "%s", me != NULL ? me : "?");
  int rc = sh_node_tell(r, sizeof *r);
  /* -ENOBUFS is a test's own doing (a full ring); anything else is not. */
  if (rc != 0 && rc != -ENOBUFS) fprintf(stderr, "cluster_proc node: tell: %d\n", rc);
}

/* ---- argv ---------------------------------------------------------------------------- */

typedef struct cp_opts {
  sh_netaddr listen, to;
  bool connect, abort_after, stall_stop, persist_empty, is_cut;
  long connect_ms;
  int exit_code; /* -1: none */
  long ticks;
} cp_opts;

static bool cp_num(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = s != NULL ? strtol(s, &end, 10) : 0;
  if (s == NULL || errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static int cp_parse(int argc, char **argv, cp_opts *o) {
  *o = (cp_opts){.exit_code = -1};
  long v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--abort") == 0) {
      o->abort_after = true;
      continue;
    }
    if (strcmp(a, "--stall-stop") == 0 || strcmp(a, "--persist-empty") == 0 ||
        strcmp(a, "--is-cut") == 0) {
      o->stall_stop |= a[2] == 's';
      o->persist_empty |= a[2] == 'p';
      o->is_cut |= a[2] == 'i';
      continue;
    }
    if (strcmp(a, "--connect") == 0 && next != NULL && sh_netaddr_parse(next, &o->to) == 0) {
      o->connect = true;
    } else if (strcmp(a, "--listen") == 0 && next != NULL &&
               sh_netaddr_parse(next, &o->listen) == 0) {
    } else if (strcmp(a, "--port") == 0 && cp_num(next, 0, 65535, &v)) {
      o->listen.port = (uint16_t)v;
    } else if (strcmp(a, "--connect-ms") == 0 && cp_num(next, 1, 60000, &v)) {
      o->connect_ms = v;
    } else if (strcmp(a, "--exit") == 0 && cp_num(next, 0, 255, &v)) {
      o->exit_code = (int)v;
    } else if (strcmp(a, "--ticks") == 0 && cp_num(next, 0, 100000, &v)) {
      o->ticks = v;
    } else {
      return -EINVAL;
    }
    i++;
  }
  return 0;
}

/* ---- the listener's connections ------------------------------------------------------ */

static void cp_conn_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)self;
  (void)error;
  if (ev != SH_CHANNEL_OPEN) return;
  cp_report r = {.kind = CP_ACCEPTED};
  r.error = sh_channel_peer(ch, &r.peer);
  if (r.error == 0) r.error = sh_channel_local(ch, &r.local);
  cp_tell(&r);
  const char *me = sh_node_self();
  sh_bytes *b = sh_bytes_new(me, strlen(me));
  if (b != NULL && sh_channel_write(ch, &b->hdr) == 0)
    sh_channel_close_after_flush(ch);
  else
    sh_channel_close(ch);
}

/* What the peer sends is not read: the node greets and closes. */
static sh_yield cp_conn_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static const sh_actor_class cp_conn_class = {
    .name = "cp_conn", .size = sizeof(sh_actor), .kind = SH_IO_ACTOR,
    .channel = cp_conn_channel, .channel_event = cp_conn_event};

/* ---- the entry ----------------------------------------------------------------------- */

typedef struct cp_node {
  sh_actor base;
  char got[32]; /* what its --connect read */
  size_t ngot;
  bool greeted, stall_stop;
} cp_node;

typedef struct cp_locals { sh_future *f; } cp_locals;
enum { CP_CONNECTING = 1 };

static void cp_node_stop(sh_actor *self) {
  cp_report r = {.kind = CP_STOPPED};
  cp_tell(&r);
  if (((cp_node *)self)->stall_stop) sleep(15);
}

/* The boot's report: the boot counted in what the node persists, and
 * its listener, up. */
static cp_report cp_boot(cp_node *n, const cp_opts *o) {
  cp_report r = {.kind = CP_BOOT, .inited = (uint32_t)cp_inited};
  uint32_t count = 0;
  int64_t got = sh_node_recall(&count, sizeof count);
  if (got != 0 && got != (int64_t)sizeof count) r.error = got < 0 ? (int32_t)got : -EIO;
  r.counter = count + 1;
  if (o->is_cut) r.aux = sh_node_is_cut(sh_node_self(), "main");
  int rc = o->persist_empty ? sh_node_persist(NULL, 0)
                            : sh_node_persist(&r.counter, sizeof r.counter);
  if (rc == 0) {
    sh_tcp_server *srv = NULL;
    rc = sh_tcp_serve(sh_actor_system(&n->base), &o->listen, &cp_conn_class, NULL, 1, NULL, &srv);
    if (rc == 0) rc = sh_tcp_server_addr(srv, &r.local);
  }
  if (r.error == 0) r.error = rc;
  return r;
}

static sh_yield cp_connected(cp_node *n, sh_stack *st, cp_locals *l) {
  (void)n;
  cp_report r = {.kind = CP_CONNECTED, .error = sh_future_error(l->f)};
  if (r.error == 0) {
    sh_channel *ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    r.error = sh_channel_peer(ch, &r.peer);
    if (r.error == 0) r.error = sh_channel_local(ch, &r.local);
  }
  cp_tell(&r);
  return sh_return(st, NULL);
}

static sh_yield cp_node_notice(sh_actor *self, sh_stack *st) {
  cp_node *n = (cp_node *)self;
  cp_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == CP_CONNECTING) return cp_connected(n, st, l);
  sh_args *a = sh_stack_msg_as(st, sh_args);
  cp_opts o;
  if (!sh_msg_is(&a->hdr, &sh_args_type) || cp_parse(a->argc, a->argv, &o) != 0) {
    fprintf(stderr, "cluster_proc node: bad argv\n");
    sh_system_exit(sh_actor_system(self), 2);
    return sh_return(st, NULL);
  }
  n->stall_stop = o.stall_stop;
  cp_report r = cp_boot(n, &o);
  cp_tell(&r);
  for (long i = 1; i <= o.ticks; i++) {
    cp_report t = {.kind = CP_TICK, .counter = (uint32_t)i};
    cp_tell(&t);
  }
  if (o.abort_after) abort();
  if (o.exit_code >= 0) sh_system_exit(sh_actor_system(self), o.exit_code);
  if (!o.connect || o.exit_code >= 0) return sh_return(st, NULL);
  sh_channel_opts copts = {.connect_timeout_ms = o.connect_ms};
  l->f = sh_tcp_connect(st, &o.to, o.connect_ms != 0 ? &copts : NULL);
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  return sh_suspend(st, CP_CONNECTING);
}

/* What its --connect reads, kept (up to its room) until the close. */
static sh_yield cp_node_channel(sh_actor *self, sh_stack *st) {
  cp_node *n = (cp_node *)self;
  const sh_buf *b = &sh_stack_msg_as(st, sh_bytes)->buf;
  n->ngot += sh_buf_peek(b, 0, n->got + n->ngot, sizeof n->got - 1 - n->ngot);
  return sh_return(st, NULL);
}

/* Told once: at the peer's end of stream (then closed), or at a close
 * that came first (with its error). */
static void cp_node_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  cp_node *n = (cp_node *)self;
  if ((ev != SH_CHANNEL_EOF && ev != SH_CHANNEL_CLOSED) || n->greeted) return;
  n->greeted = true;
  cp_report r = {.kind = CP_GREETED, .error = ev == SH_CHANNEL_EOF ? 0 : error};
  memcpy(r.text, n->got, n->ngot);
  cp_tell(&r);
  if (ev == SH_CHANNEL_EOF) sh_channel_close(ch);
}

static const sh_actor_class cp_node_class = {
    .name = "cp_node", .size = sizeof(cp_node), .locals_size = sizeof(cp_locals),
    .kind = SH_IO_ACTOR, .stop = cp_node_stop, .notice = cp_node_notice,
    .channel = cp_node_channel, .channel_event = cp_node_event};

#endif
