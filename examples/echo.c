/*
 * A TCP echo server, and a client to drive it.
 *
 *   build/release/examples/echo --port 7000 --workers 2
 *   build/release/examples/echo --connect 127.0.0.1:7000 --connections 16 --bytes 1000000
 *
 * Server: every byte a client sends comes back, in order. Each connection
 * is a channel of one of the connection actors (one per worker); each read
 * reaches the actor as a request (an sh_bytes message) handled in a channel
 * stack, which moves the bytes to the write side without copying and waits
 * until the channel's write buffer is below its high watermark. So a client
 * that does not read pushes back: its channel stops reading, the kernel's
 * window closes, and the server's memory stays bounded. When a client
 * closes its sending side, the server sends what is still due and closes.
 * Ctrl-C (SIGINT) or SIGTERM stops it.
 *
 * Client: opens --connections connections, sends --bytes bytes on each (a
 * pattern), closes its sending side, and checks that exactly those bytes
 * come back in order before the server closes. Exit status 0 when every
 * connection got its bytes back.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackhouse/net.h>
#include <stackhouse/stackhouse.h>

/* ---- the server ---------------------------------------------------------- */

typedef struct echo_locals {
  sh_future *f;
} echo_locals;

enum { START = SH_START, SENT };

static sh_yield echo_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  echo_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case START: {
    sh_bytes *in = sh_stack_msg_as(st, sh_bytes);
    sh_bytes *out = sh_bytes_new(NULL, 0);
    if (out == NULL) return sh_throw(st, -ENOMEM);
    if (sh_buf_move(&out->buf, &in->buf, sh_buf_len(&in->buf)) != 0) {
      sh_msg_free(&out->hdr);
      return sh_throw(st, -ENOMEM);
    }
    l->f = sh_channel_send(st, sh_stack_channel(st), &out->hdr);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, SENT);
  }
  case SENT:
    if (sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
    return sh_return(st, NULL);
  }
  return sh_throw(st, -EPROTO);
}

static const sh_actor_class echo_class = {
    .name = "echo",
    .size = sizeof(sh_actor),
    .locals_size = sizeof(echo_locals),
    .kind = SH_IO_ACTOR,
    .channel = echo_channel,
};

static int serve(uint32_t workers, uint16_t port) {
  /* Signals go to the main thread's sigwait: block them before the
   * workers start, so that they inherit the mask. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = workers;
  sh_system *sys;
  int rc = sh_system_new(&cfg, &sys);
  if (rc == 0) rc = sh_system_start(sys);
  sh_netaddr at = {.ip = 0x7f000001, .port = port};
  sh_tcp_server *srv = NULL;
  if (rc == 0) rc = sh_tcp_serve(sys, &at, &echo_class, NULL, SH_SPAWN_PER_WORKER, NULL, &srv);
  if (rc == 0) {
    char name[32];
    sh_tcp_server_addr(srv, &at);
    sh_netaddr_format(&at, name, sizeof(name));
    printf("echo: listening on %s with %u workers\n", name, sh_system_workers(sys));
    fflush(stdout);
    int sig;
    sigwait(&sigs, &sig);
    sh_tcp_stats s;
    sh_tcp_server_stats(srv, &s);
    printf("echo: %llu connections accepted, %llu refused\n", (unsigned long long)s.accepted,
           (unsigned long long)s.refused);
  } else {
    fprintf(stderr, "echo: %s\n", strerror(-rc));
  }
  if (sys != NULL) sh_system_free(sys);
  return rc == 0 ? 0 : 1;
}

/* ---- the client ------------------------------------------------------------- */

typedef struct conn {
  uint32_t index;
  uint64_t sent, received;
  bool closed, bad;
  int error;
} conn;

typedef struct client {
  sh_actor base;
  sh_netaddr to;
  uint32_t nconns;
  uint64_t bytes;
  conn *conns;
  uint32_t done;
  struct timespec t0;
} client;

typedef struct job {
  sh_msg hdr;
  uint32_t index;
} job;
SH_MSG_DEFINE(job, SH_NOTICE, 0);

#define CHUNK 16384u

static uint8_t pattern(const conn *c, uint64_t offset) { return (uint8_t)(offset * 31u + c->index); }

static void conn_done(client *cl, conn *c, int error) {
  c->closed = true;
  c->error = error;
  if (++cl->done < cl->nconns) return;
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - cl->t0.tv_sec) + (double)(t1.tv_nsec - cl->t0.tv_nsec) / 1e9;
  uint32_t ok = 0;
  uint64_t total = 0;
  for (uint32_t i = 0; i < cl->nconns; i++) {
    conn *k = &cl->conns[i];
    total += k->received;
    if (!k->bad && k->received == cl->bytes && k->sent == cl->bytes) ok++;
  }
  printf("connections=%u bytes=%llu ok=%u failed=%u seconds=%.3f MB/s=%.1f\n", cl->nconns,
         (unsigned long long)cl->bytes, ok, cl->nconns - ok, s, s > 0 ? (double)total / s / 1e6 : 0.0);
  sh_system_exit(sh_actor_system(&cl->base), ok == cl->nconns ? 0 : 1);
}

typedef struct job_locals {
  sh_future *f;
  sh_channel *ch;
  conn *c;
} job_locals;

enum { J_START = SH_START, J_CONNECTED, J_SENT };

/* Sends the next chunk, or closes the sending side when all went. */
static sh_yield send_next(sh_stack *st, client *cl, job_locals *l) {
  if (l->c->closed) return sh_return(st, NULL);
  if (l->c->sent == cl->bytes) {
    sh_channel_shutdown(l->ch);
    return sh_return(st, NULL);
  }
  uint8_t buf[CHUNK];
  uint32_t n = cl->bytes - l->c->sent < CHUNK ? (uint32_t)(cl->bytes - l->c->sent) : CHUNK;
  for (uint32_t i = 0; i < n; i++) buf[i] = pattern(l->c, l->c->sent + i);
  sh_bytes *b = sh_bytes_new(buf, n);
  l->f = b != NULL ? sh_channel_send(st, l->ch, &b->hdr) : NULL;
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  l->c->sent += n;
  return sh_suspend(st, J_SENT);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  client *cl = (client *)self;
  job_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case J_START:
    if (sh_msg_is(sh_stack_msg(st), &sh_args_type)) {
      clock_gettime(CLOCK_MONOTONIC, &cl->t0);
      for (uint32_t i = 0; i < cl->nconns; i++) sh_notice(sh_self(self), &sh_msg_new(job, .index = i)->hdr);
      return sh_return(st, NULL);
    }
    l->c = &cl->conns[sh_stack_msg_as(st, job)->index];
    l->f = sh_tcp_connect(st, &cl->to, NULL);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, J_CONNECTED);
  case J_CONNECTED:
    if (sh_future_failed(l->f)) {
      fprintf(stderr, "echo: connect: %s\n", strerror(-sh_future_error(l->f)));
      conn_done(cl, l->c, sh_future_error(l->f));
      return sh_return(st, NULL);
    }
    l->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    sh_channel_set_data(l->ch, l->c);
    return send_next(st, cl, l);
  case J_SENT:
    if (sh_future_failed(l->f)) return sh_return(st, NULL); /* the close tells the rest */
    return send_next(st, cl, l);
  }
  return sh_throw(st, -EPROTO);
}

/* Bytes that came back: they must be the next ones of the pattern. */
static sh_yield client_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  conn *c = sh_channel_data(sh_stack_channel(st));
  sh_bytes *b = sh_stack_msg_as(st, sh_bytes);
  const uint8_t *p;
  size_t off = 0, n;
  while ((n = sh_buf_span(&b->buf, off, &p)) > 0) {
    for (size_t i = 0; i < n; i++)
      if (p[i] != pattern(c, c->received + off + i)) c->bad = true;
    off += n;
  }
  c->received += off;
  return sh_return(st, NULL);
}

static void client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  if (ev != SH_CHANNEL_CLOSED) return;
  conn *c = sh_channel_data(ch);
  if (c != NULL) conn_done((client *)self, c, error);
}

static sh_netaddr client_to;
static uint32_t client_nconns;
static uint64_t client_bytes;

static int client_init(sh_actor *self, void *arg) {
  (void)arg;
  client *cl = (client *)self;
  cl->to = client_to;
  cl->nconns = client_nconns;
  cl->bytes = client_bytes;
  cl->conns = calloc(cl->nconns, sizeof(conn));
  if (cl->conns == NULL) return -ENOMEM;
  for (uint32_t i = 0; i < cl->nconns; i++) cl->conns[i].index = i;
  return 0;
}

static void client_stop(sh_actor *self) { free(((client *)self)->conns); }

static const sh_actor_class client_class = {
    .name = "echo_client",
    .size = sizeof(client),
    .locals_size = sizeof(job_locals),
    .kind = SH_IO_ACTOR,
    .init = client_init,
    .stop = client_stop,
    .notice = client_notice,
    .channel = client_channel,
    .channel_event = client_event,
};

/* ---- the command line ------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: echo [--port P] [--workers N]            serve on 127.0.0.1:P (default 7000)\n"
          "       echo --connect A:P [--connections N] [--bytes B] [--workers N]\n"
          "                                                send B bytes on each of N connections\n"
          "                                                and check they all come back\n");
}

int main(int argc, char **argv) {
  static const struct option longs[] = {
      {"port", required_argument, NULL, 'p'},        {"workers", required_argument, NULL, 'w'},
      {"connect", required_argument, NULL, 'c'},     {"connections", required_argument, NULL, 'n'},
      {"bytes", required_argument, NULL, 'b'},       {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  unsigned long port = 7000, workers = 0;
  const char *connect_to = NULL;
  client_nconns = 1;
  client_bytes = 1u << 20;
  int opt;
  while ((opt = getopt_long(argc, argv, "p:w:c:n:b:h", longs, NULL)) != -1) {
    switch (opt) {
    case 'p': port = strtoul(optarg, NULL, 10); break;
    case 'w': workers = strtoul(optarg, NULL, 10); break;
    case 'c': connect_to = optarg; break;
    case 'n': client_nconns = (uint32_t)strtoul(optarg, NULL, 10); break;
    case 'b': client_bytes = strtoull(optarg, NULL, 10); break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (port > 65535 || client_nconns == 0 || optind != argc) {
    usage(stderr);
    return 2;
  }
  if (connect_to == NULL) return serve((uint32_t)workers, (uint16_t)port);
  if (sh_netaddr_parse(connect_to, &client_to) != 0) {
    fprintf(stderr, "echo: bad address %s (want a.b.c.d:port)\n", connect_to);
    return 2;
  }
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = (uint32_t)workers;
  return sh_run(&cfg, &client_class, argc, argv);
}
