/*
 * An HTTP/1.1 server with the two TechEmpower routes.
 *
 *   build/release/examples/http --port 8080 --workers 2
 *   curl -i http://127.0.0.1:8080/plaintext
 *
 * GET /plaintext answers "Hello, World!" (text/plain); GET /json answers
 * {"message":"Hello, World!"} (application/json), serialized for each
 * request as the benchmark's rules ask. Keep-alive and pipelining come with
 * the server; --max-connections caps the open connections (503 past it),
 * --idle-timeout closes a connection that takes longer than that to send a
 * request (0: never). Ctrl-C (SIGINT) or SIGTERM stops it.
 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/http.h>
#include <stackhouse/stackhouse.h>

static sh_yield plaintext(sh_actor *self, sh_stack *st) {
  (void)self;
  static const char body[] = "Hello, World!";
  return sh_http_reply(st, 200, "text/plain", body, sizeof(body) - 1);
}

/* A JSON string: the bytes between quotes, escaped where JSON says. */
static size_t json_string(char *out, size_t room, const char *s) {
  size_t n = 0;
  if (n < room) out[n++] = '"';
  for (; *s != '\0' && n + 7 < room; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      out[n++] = '\\';
      out[n++] = (char)ch;
    } else if (ch < 0x20) {
      n += (size_t)snprintf(out + n, room - n, "\\u%04x", ch);
    } else {
      out[n++] = (char)ch;
    }
  }
  if (n < room) out[n++] = '"';
  return n;
}

static sh_yield json(sh_actor *self, sh_stack *st) {
  (void)self;
  char body[64];
  size_t n = 0;
  body[n++] = '{';
  n += json_string(body + n, sizeof(body) - n, "message");
  body[n++] = ':';
  n += json_string(body + n, sizeof(body) - n, "Hello, World!");
  body[n++] = '}';
  return sh_http_reply(st, 200, "application/json", body, n);
}

static const sh_http_route routes[] = {
    {SH_HTTP_M(SH_HTTP_GET), "/plaintext", plaintext},
    {SH_HTTP_M(SH_HTTP_GET), "/json", json},
};

static int serve(uint32_t workers, uint16_t port, uint32_t max_conns, int64_t idle_ms) {
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
  sh_system *sys = NULL;
  int rc = sh_system_new(&cfg, &sys);
  if (rc == 0) rc = sh_system_start(sys);
  sh_netaddr at = {.ip = 0x7f000001, .port = port};
  sh_http_config hc = {
      .routes = routes,
      .nroutes = sizeof(routes) / sizeof(routes[0]),
      .max_connections = max_conns,
      .idle_timeout_ms = idle_ms == 0 ? SH_FOREVER : idle_ms,
  };
  sh_http_server *srv = NULL;
  if (rc == 0) rc = sh_http_serve(sys, &at, &hc, &srv);
  if (rc == 0) {
    char name[32];
    sh_http_server_addr(srv, &at);
    sh_netaddr_format(&at, name, sizeof(name));
    printf("http: listening on %s with %u workers\n", name, sh_system_workers(sys));
    fflush(stdout);
    int sig;
    sigwait(&sigs, &sig);
    sh_http_stats s;
    sh_http_server_stats(srv, &s);
    printf("http: %llu connections, %llu requests, %llu bad, %llu refused, %llu timed out\n",
           (unsigned long long)s.connections, (unsigned long long)s.requests,
           (unsigned long long)s.bad, (unsigned long long)s.refused, (unsigned long long)s.timeouts);
  } else {
    fprintf(stderr, "http: %s\n", strerror(-rc));
  }
  if (sys != NULL) sh_system_free(sys);
  return rc == 0 ? 0 : 1;
}

static void usage(FILE *f) {
  fprintf(f, "usage: http [--port P] [--workers N] [--max-connections N] [--idle-timeout MS]\n"
             "  serves /plaintext and /json on 127.0.0.1:P (default 8080) with N workers\n"
             "  (default: one per CPU); at most N connections (default 0: no limit);\n"
             "  a connection that takes MS ms to send a request closes (default 60000;\n"
             "  0: never)\n");
}

/* A whole decimal number in [0, max], or -1. */
static long long number(const char *s, long long max) {
  char *end;
  long long v = strtoll(s, &end, 10);
  return *s == '\0' || *end != '\0' || v < 0 || v > max ? -1 : v;
}

int main(int argc, char **argv) {
  static const struct option longs[] = {{"port", required_argument, NULL, 'p'},
                                        {"workers", required_argument, NULL, 'w'},
                                        {"max-connections", required_argument, NULL, 'm'},
                                        {"idle-timeout", required_argument, NULL, 'i'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  long long port = 8080, workers = 0, max_conns = 0, idle = 60000;
  int opt;
  while ((opt = getopt_long(argc, argv, "p:w:m:i:h", longs, NULL)) != -1) {
    switch (opt) {
    case 'p': port = number(optarg, 65535); break;
    case 'w': workers = number(optarg, 4096); break;
    case 'm': max_conns = number(optarg, UINT32_MAX); break;
    case 'i': idle = number(optarg, INT64_MAX / 2); break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (port < 0 || workers < 0 || max_conns < 0 || idle < 0 || optind != argc) {
    usage(stderr);
    return 2;
  }
  return serve((uint32_t)workers, (uint16_t)port, (uint32_t)max_conns, idle);
}
