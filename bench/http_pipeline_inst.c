/*
 * The HTTP server's cost per pipelined request, in instructions: a fixed
 * piece of work to run under callgrind (docs/bench.md), not a timed one.
 *
 *   valgrind --tool=callgrind build/release/bench/http_pipeline_inst --requests 20000
 *
 * One process: an HTTP server on 127.0.0.1 (sh_http_serve, one route,
 * GET /plaintext answered "Hello, World!" as examples/http.c does) and,
 * in the main thread, one client over the loopback that sends --requests
 * GETs pipelined --batch at a time (one write each, the next once all
 * their responses are in, as bench/http_pipeline.lua), checks every
 * response (status 200, its body) and prints how many were answered.
 *
 * Workers do not spin before they park (--spin-us 0 by default): a spin
 * counts instructions that depend on timing, not on the work. The startup
 * and teardown are in the total; two runs with different --requests
 * subtract them: (Ir(N2) - Ir(N1)) / (N2 - N1).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stackhouse/http.h>
#include <stackhouse/stackhouse.h>

#include "echo_common.h"

#define PROG "http_pipeline_inst"
#define MAX_BATCH 64u
#define MAX_REQ (1ul << 40)
#define IN_SIZE 65536u

static const char usage[] =
    "usage: http_pipeline_inst [--requests N] [--batch B] [--workers W] [--spin-us S]\n"
    "  Serves GET /plaintext in-process and sends it N pipelined requests\n"
    "  (default 20000) over one loopback connection, B per write (default\n"
    "  16, at most 64), each write once the previous one's responses are\n"
    "  in; checks the responses and prints how many came. W workers\n"
    "  (default 1), spinning S us before they park (default 0). For\n"
    "  callgrind: instructions per request (docs/bench.md).\n";

static const char request[] = "GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
static const char body[] = "Hello, World!";

static sh_yield plaintext(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_http_reply(st, 200, "text/plain", body, sizeof(body) - 1);
}

static const sh_http_route routes[] = {{SH_HTTP_M(SH_HTTP_GET), "/plaintext", plaintext}};

typedef struct options {
  unsigned long requests, batch, workers, spin_us;
} options;

static options parse(int argc, char **argv) {
  options o = {.requests = 20000, .batch = 16, .workers = 1, .spin_us = 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) echo_usage_exit(usage);
    else if (strcmp(a, "--requests") == 0) o.requests = echo_num(PROG, argc, argv, &i, 1, MAX_REQ);
    else if (strcmp(a, "--batch") == 0) o.batch = echo_num(PROG, argc, argv, &i, 1, MAX_BATCH);
    else if (strcmp(a, "--workers") == 0) o.workers = echo_num(PROG, argc, argv, &i, 1, 1024);
    else if (strcmp(a, "--spin-us") == 0) o.spin_us = echo_num(PROG, argc, argv, &i, 0, 1000000);
    else {
      fprintf(stderr, "%s: unknown option %s (see --help)\n", PROG, argv[i]);
      exit(2);
    }
  }
  return o;
}

static _Noreturn void bad_response(const char *what) {
  fprintf(stderr, "%s: bad response: %s\n", PROG, what);
  exit(1);
}

/* Takes the whole responses at the start of in[0..*n), checks each, moves
 * the rest to the front; how many it took. */
static unsigned long take_responses(char *in, size_t *n) {
  static const char ok[] = "HTTP/1.1 200 ";
  unsigned long got = 0;
  size_t at = 0;
  for (;;) {
    char *p = in + at, *end = memmem(p, *n - at, "\r\n\r\n", 4);
    if (end == NULL) break;
    size_t head = (size_t)(end - p) + 4;
    char *cl = memmem(p, head, "Content-Length: ", 16);
    if (cl == NULL) bad_response("no Content-Length");
    size_t len = strtoul(cl + 16, NULL, 10);
    if (*n - at < head + len) break;
    if (memcmp(p, ok, sizeof(ok) - 1) != 0) bad_response("not 200");
    if (len != sizeof(body) - 1 || memcmp(p + head, body, len) != 0) bad_response("body");
    at += head + len;
    got++;
  }
  memmove(in, in + at, *n - at);
  *n -= at;
  return got;
}

/* The client: o->requests requests, o->batch per write; the responses read. */
static unsigned long drive(const options *o, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) echo_die(PROG, "socket");
  struct sockaddr_in a = echo_addr(port);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) echo_die(PROG, "connect");
  echo_nodelay(PROG, fd);
  static char out[MAX_BATCH * sizeof(request)], in[IN_SIZE];
  size_t rl = sizeof(request) - 1, have = 0;
  for (unsigned long i = 0; i < o->batch; i++) memcpy(out + i * rl, request, rl);
  unsigned long done = 0;
  while (done < o->requests) {
    unsigned long b = o->requests - done < o->batch ? o->requests - done : o->batch, got = 0;
    if (send(fd, out, b * rl, MSG_NOSIGNAL) != (ssize_t)(b * rl)) echo_die(PROG, "send");
    while (got < b) {
      ssize_t r = recv(fd, in + have, sizeof(in) - have, 0);
      if (r <= 0) r == 0 ? bad_response("the server closed") : echo_die(PROG, "recv");
      have += (size_t)r;
      got += take_responses(in, &have);
    }
    if (got > b || have != 0) bad_response("more responses than requests");
    done += got;
  }
  close(fd);
  return done;
}

int main(int argc, char **argv) {
  options o = parse(argc, argv);
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = (uint32_t)o.workers;
  cfg.spin_ns = (uint64_t)o.spin_us * 1000;
  sh_system *sys = NULL;
  int rc = sh_system_new(&cfg, &sys);
  if (rc == 0) rc = sh_system_start(sys);
  sh_http_config hc = {.routes = routes, .nroutes = 1, .idle_timeout_ms = SH_FOREVER};
  sh_http_server *srv = NULL;
  sh_netaddr at = {.ip = 0x7f000001, .port = 0};
  if (rc == 0) rc = sh_http_serve(sys, &at, &hc, &srv);
  if (rc == 0) rc = sh_http_server_addr(srv, &at);
  if (rc != 0) {
    fprintf(stderr, "%s: %s\n", PROG, strerror(-rc));
    if (sys != NULL) sh_system_free(sys);
    return 1;
  }
  unsigned long done = drive(&o, at.port);
  sh_http_stats s;
  sh_http_server_stats(srv, &s);
  printf("%s: %lu requests done (%lu a write, %lu worker%s); the server counted %llu\n", PROG,
         done, o.batch, o.workers, o.workers == 1 ? "" : "s", (unsigned long long)s.requests);
  (void)sh_system_shutdown(sys);
  sh_system_free(sys);
  return done == o.requests && s.requests == o.requests ? 0 : 1;
}
