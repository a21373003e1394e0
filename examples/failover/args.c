/*
 * failover's command lines, parsed by hand: several nodes and clients may
 * boot in one process (a test, the simulator), each from its own argv,
 * possibly at the same time on different threads, and getopt's state
 * (optind, optarg, its scan position) is the process's. Here everything
 * lives in the call: `--name value` and `--name=value` both work, every
 * number is checked whole and against its range, and a mistake names the
 * argument.
 */
#include <errno.h>
#include <string.h>

#include "fo_int.h"

const char fo_node_usage[] =
    "usage: failover-node --id N --listen IP:PORT --peer ID=IP:PORT [--peer ID=IP:PORT ...]\n"
    "                     [--lease-ms L (1000)] [--heartbeat-ms H (50)] [--drift-ppm D (1000)]\n"
    "                     [--verbose]\n";
const char fo_client_usage[] =
    "usage: failover-client --server IP:PORT [--server IP:PORT ...] [--requests N (10)]\n"
    "                       [--interval-ms I (10)] [--timeout-ms T (500)] [--max-ms M (0)]\n"
    "                       [--verbose]\n";

/* One argument split into its name and its value (NULL: none). */
typedef struct opt {
  char name[32];
  const char *value;
} opt;

/* Reads argument *i (and the next one as its value when it has no '=' and
 * `wants` says it takes one); advances *i. */
static int next_opt(int argc, char **argv, int *i, opt *o, bool (*wants)(const char *),
                    char *err, size_t errlen) {
  const char *a = argv[*i];
  if (strncmp(a, "--", 2) != 0) {
    snprintf(err, errlen, "unexpected argument '%s'", a);
    return -EINVAL;
  }
  a += 2;
  const char *eq = strchr(a, '=');
  size_t n = eq != NULL ? (size_t)(eq - a) : strlen(a);
  if (n == 0 || n >= sizeof(o->name)) {
    snprintf(err, errlen, "bad option '%s'", argv[*i]);
    return -EINVAL;
  }
  memcpy(o->name, a, n);
  o->name[n] = '\0';
  o->value = eq != NULL ? eq + 1 : NULL;
  (*i)++;
  if (o->value == NULL && wants(o->name)) {
    if (*i >= argc) {
      snprintf(err, errlen, "--%s needs a value", o->name);
      return -EINVAL;
    }
    o->value = argv[(*i)++];
  }
  return 0;
}

static int num(const opt *o, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen) {
  char *end = NULL;
  errno = 0;
  long long v = o->value != NULL ? strtoll(o->value, &end, 10) : 0;
  if (o->value == NULL || end == o->value || *end != '\0' || errno != 0 || v < lo || v > hi) {
    snprintf(err, errlen, "--%s wants a number in %lld..%lld, not '%s'", o->name, (long long)lo,
             (long long)hi, o->value != NULL ? o->value : "");
    return -EINVAL;
  }
  *out = v;
  return 0;
}

static int addr(const opt *o, const char *s, sh_netaddr *out, char *err, size_t errlen) {
  if (s != NULL && sh_netaddr_parse(s, out) == 0) return 0;
  snprintf(err, errlen, "--%s wants IP:PORT, not '%s'", o->name, s != NULL ? s : "");
  return -EINVAL;
}

static bool is(const opt *o, const char *name) { return strcmp(o->name, name) == 0; }

/* ---- the node ------------------------------------------------------------------ */

static bool node_wants(const char *name) {
  static const char *const valued[] = {"id", "listen", "peer", "lease-ms", "heartbeat-ms",
                                       "drift-ppm"};
  for (size_t i = 0; i < sizeof(valued) / sizeof(valued[0]); i++)
    if (strcmp(name, valued[i]) == 0) return true;
  return false;
}

static int node_peer(const opt *o, fo_node_cfg *c, char *err, size_t errlen) {
  if (c->npeers >= FO_MAX_PEERS) {
    snprintf(err, errlen, "at most %d --peer", FO_MAX_PEERS);
    return -EINVAL;
  }
  const char *eq = o->value != NULL ? strchr(o->value, '=') : NULL;
  char idtext[8];
  size_t n = eq != NULL ? (size_t)(eq - o->value) : 0;
  if (eq == NULL || n == 0 || n >= sizeof(idtext)) {
    snprintf(err, errlen, "--peer wants ID=IP:PORT, not '%s'", o->value != NULL ? o->value : "");
    return -EINVAL;
  }
  memcpy(idtext, o->value, n);
  idtext[n] = '\0';
  opt id = {.name = "peer", .value = idtext};
  int64_t v;
  fo_peer *p = &c->peers[c->npeers];
  if (num(&id, 1, FO_MAX_NODES, &v, err, errlen) != 0) return -EINVAL;
  if (addr(o, eq + 1, &p->addr, err, errlen) != 0) return -EINVAL;
  p->id = (int)v;
  c->npeers++;
  return 0;
}

static int node_one(const opt *o, fo_node_cfg *c, bool *listen, char *err, size_t errlen) {
  int64_t v = 0;
  if (is(o, "verbose") && o->value == NULL) {
    c->verbose = true;
    return 0;
  }
  if (is(o, "id")) {
    if (num(o, 1, FO_MAX_NODES, &v, err, errlen) != 0) return -EINVAL;
    c->id = (int)v;
    return 0;
  }
  if (is(o, "listen")) {
    *listen = true;
    return addr(o, o->value, &c->listen, err, errlen);
  }
  if (is(o, "peer")) return node_peer(o, c, err, errlen);
  if (is(o, "lease-ms")) return num(o, 10, 3600000, &c->lease_ms, err, errlen);
  if (is(o, "heartbeat-ms")) return num(o, 1, 600000, &c->heartbeat_ms, err, errlen);
  if (is(o, "drift-ppm")) return num(o, 0, 100000, &c->drift_ppm, err, errlen);
  snprintf(err, errlen, "unknown option --%s", o->name);
  return -EINVAL;
}

/* What the options must say together. */
static int node_check(const fo_node_cfg *c, bool listen, char *err, size_t errlen) {
  if (c->id == 0 || !listen) {
    snprintf(err, errlen, "--id and --listen are required");
    return -EINVAL;
  }
  unsigned seen = 1u << c->id;
  for (int i = 0; i < c->npeers; i++) {
    if (seen & (1u << c->peers[i].id)) {
      snprintf(err, errlen, "peer ids must differ from each other and from --id");
      return -EINVAL;
    }
    seen |= 1u << c->peers[i].id;
  }
  /* The serving window (lease less drift less margin) must outlast at
   * least two heartbeats, or the primary could never renew in time. */
  int64_t drift = (c->lease_ms * c->drift_ppm + 999999) / 1000000;
  if (c->lease_ms - drift - FO_MARGIN_MS < 2 * c->heartbeat_ms) {
    snprintf(err, errlen, "--lease-ms less its drift must exceed 2 x --heartbeat-ms");
    return -EINVAL;
  }
  return 0;
}

int fo_parse_node(int argc, char **argv, fo_node_cfg *out, char *err, size_t errlen) {
  fo_node_cfg c = {.lease_ms = 1000, .heartbeat_ms = 50, .drift_ppm = 1000};
  bool listen = false;
  int i = 1;
  /* Bounded by argc: each turn consumes one or two arguments. */
  while (i < argc) {
    opt o;
    if (next_opt(argc, argv, &i, &o, node_wants, err, errlen) != 0) return -EINVAL;
    if (node_one(&o, &c, &listen, err, errlen) != 0) return -EINVAL;
  }
  if (node_check(&c, listen, err, errlen) != 0) return -EINVAL;
  FO_ASSERT(c.npeers <= FO_MAX_PEERS);
  *out = c;
  return 0;
}

/* ---- the client ------------------------------------------------------------------ */

static bool client_wants(const char *name) {
  static const char *const valued[] = {"server", "requests", "interval-ms", "timeout-ms",
                                       "max-ms"};
  for (size_t i = 0; i < sizeof(valued) / sizeof(valued[0]); i++)
    if (strcmp(name, valued[i]) == 0) return true;
  return false;
}

static int client_one(const opt *o, fo_client_cfg *c, char *err, size_t errlen) {
  if (is(o, "verbose") && o->value == NULL) {
    c->verbose = true;
    return 0;
  }
  if (is(o, "server")) {
    if (c->nservers >= FO_MAX_NODES) {
      snprintf(err, errlen, "at most %d --server", FO_MAX_NODES);
      return -EINVAL;
    }
    return addr(o, o->value, &c->servers[c->nservers++], err, errlen);
  }
  if (is(o, "requests")) return num(o, 1, 1000000000, &c->requests, err, errlen);
  if (is(o, "interval-ms")) return num(o, 0, 3600000, &c->interval_ms, err, errlen);
  if (is(o, "timeout-ms")) return num(o, 1, 3600000, &c->timeout_ms, err, errlen);
  if (is(o, "max-ms")) return num(o, 0, INT64_C(1) << 40, &c->max_ms, err, errlen);
  snprintf(err, errlen, "unknown option --%s", o->name);
  return -EINVAL;
}

int fo_parse_client(int argc, char **argv, fo_client_cfg *out, char *err, size_t errlen) {
  fo_client_cfg c = {.requests = 10, .interval_ms = 10, .timeout_ms = 500};
  int i = 1;
  /* Bounded by argc: each turn consumes one or two arguments. */
  while (i < argc) {
    opt o;
    if (next_opt(argc, argv, &i, &o, client_wants, err, errlen) != 0) return -EINVAL;
    if (client_one(&o, &c, err, errlen) != 0) return -EINVAL;
  }
  if (c.nservers == 0) {
    snprintf(err, errlen, "at least one --server is required");
    return -EINVAL;
  }
  FO_ASSERT(c.nservers <= FO_MAX_NODES);
  *out = c;
  return 0;
}
