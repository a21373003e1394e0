/*
 * Replay files (replayfile.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include "replayfile.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/scenario.h>
#include <stackhouse/stackhouse.h>

#define REPLAYFILE_MAX_DECISIONS (1u << 22)
#define REPLAYFILE_MAX_BYTES (256u << 20)
#define HEADER_MAX 2048
/* Lines go out in blocks of this many bytes (a killed child's record is
 * written in one write per block, not per line). On the stack: the writer
 * may run in a signal handler while a normal record is being written. */
#define WRITE_BLOCK 4096
#define LINE_MAX_BYTES 192

/* The simulator's numeric options, by the key that holds them. */
typedef struct opt_key {
  const char *key;
  size_t off;
  bool u32; /* else uint64_t */
} opt_key;

#define KEY(name, u32) {#name, offsetof(sh_sim_options, name), u32}
static const opt_key opt_keys[] = {
    KEY(seed, false),          KEY(switch_permille, true), KEY(pct_depth, true),
    KEY(pct_steps, false),     KEY(step_ns, false),        KEY(idle_step_ns, false),
    KEY(max_steps, false),     KEY(vtime_limit_ns, false), KEY(stale_permille, true),
    KEY(atomic_points, true),
};
#undef KEY
#define NKEYS (sizeof(opt_keys) / sizeof(opt_keys[0]))

/* The decision kinds, by their index (sh_sim_choice_kind) in a file. */
static const char *const kind_names[] = {"preempt", "forced", "fault", "stale", "draw"};
#define NKINDS (sizeof(kind_names) / sizeof(kind_names[0]))

/* ---- the binary's identity ------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

static uint64_t fnv_str(uint64_t h, const char *s) { return fnv(h, s, s != NULL ? strlen(s) + 1 : 0); }

/* The main program's GNU build id (the first object dl_iterate_phdr lists). */
static int build_id(struct dl_phdr_info *info, size_t size, void *ctx) {
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
      const char *desc = p + sizeof(*nh) + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(p + sizeof(*nh), "GNU", 4) == 0) {
        *(uint64_t *)ctx = fnv(*(uint64_t *)ctx, desc, nh->n_descsz);
        return 1;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

uint64_t replayfile_binary(void) {
  uint64_t h = 0xCBF29CE484222325ull;
  unsigned v[3] = {SH_VERSION_MAJOR, SH_VERSION_MINOR, SH_VERSION_PATCH};
  h = fnv(h, v, sizeof(v));
  for (size_t i = 0; i < sh_scenario_count(); i++) {
    const sh_scenario *sc = sh_scenario_at(i);
    h = fnv_str(h, sc->name);
    uint64_t f[4] = {sc->workers, sc->vtime_limit_ms, sc->max_steps, sc->flags};
    h = fnv(h, f, sizeof(f));
  }
  dl_iterate_phdr(build_id, &h);
  return h;
}

/* ---- writing ---------------------------------------------------------------------------- */

static size_t header_format(char *buf, size_t size, const replay_run *r) {
  int n = snprintf(buf, size,
                   "# stackhouse replay file: shsim replay FILE runs it again\n"
                   "format=%u\nbinary=0x%016llx\nscenario=%s\nstrategy=%s\nworkers=%u\n",
                   REPLAYFILE_FORMAT, (unsigned long long)replayfile_binary(), r->scenario,
                   sh_sim_strategy_name(r->o.strategy), r->workers);
  for (size_t i = 0; i < NKEYS && n >= 0 && (size_t)n < size; i++) {
    const void *field = (const char *)&r->o + opt_keys[i].off;
    uint64_t v = opt_keys[i].u32 ? *(const uint32_t *)field : *(const uint64_t *)field;
    n += snprintf(buf + n, size - (size_t)n, "%s=%llu\n", opt_keys[i].key, (unsigned long long)v);
  }
  if (r->faults != NULL && n >= 0 && (size_t)n < size)
    n += snprintf(buf + n, size - (size_t)n, "faults=%s\n", r->faults);
  if (n >= 0 && (size_t)n < size)
    n += snprintf(buf + n, size - (size_t)n,
                  "# decisions: STEP preempt|forced FIBER, STEP fault POINT, STEP stale RANK,\n"
                  "# N draw STREAM VALUE (the N-th value of a stream); then @WHERE, the\n"
                  "# scheduling point, and h=HASH, the trace hash before it\n");
  return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}

static struct {
  char text[HEADER_MAX];
  size_t len;
} prepared;

void replayfile_prepare(const replay_run *r) { prepared.len = header_format(prepared.text, sizeof(prepared.text), r); }

/* Digits of v in base 10 or 16, at least `min` of them (zeros first),
 * ending at `end`: returns the first. */
static char *digits(uint64_t v, unsigned base, int min, char *end) {
  int k = 0;
  do {
    *--end = "0123456789abcdef"[v % base];
    v /= base;
    k++;
  } while (v != 0 || k < min);
  return end;
}

/* Prepends the text s to p: returns the start. */
static char *put_word(char *p, const char *s) {
  size_t l = strlen(s);
  p -= l;
  memcpy(p, s, l);
  return p;
}

/* A scheduling point's name as a line carries it: at most WHERE_MAX
 * characters (the names are short literals; the bound keeps a line within
 * LINE_MAX_BYTES whatever a name is). */
#define WHERE_MAX 64
static const char *where_word(const char *w) {
  size_t l = strlen(w);
  return l <= WHERE_MAX ? w : w + l - WHERE_MAX;
}

/* One decision's line, built backwards from `end` (at most 20 + 8 + 20 + 20
 * digits, a kind, WHERE_MAX and 23 more: within LINE_MAX_BYTES): returns
 * its start. A draw's first number is its place in its stream, `nth`. */
static char *decision_line(const sh_sim_choice *c, const sh_sim_decision_context *x,
                           uint64_t nth, char *end) {
  char *p = end;
  *--p = '\n';
  if (x != NULL) {
    p = put_word(digits(x->hash, 16, 16, p), " h=0x");
    if (x->where != NULL) p = put_word(put_word(p, where_word(x->where)), " @");
  }
  if (c->kind == SH_SIM_DRAW) p = put_word(digits(c->value, 10, 1, p), " ");
  bool fault = c->kind == SH_SIM_FAULT;
  p = digits(c->to, fault ? 16 : 10, fault ? 8 : 1, p);
  p = put_word(p, fault ? " 0x" : " ");
  p = put_word(put_word(p, c->kind < NKINDS ? kind_names[c->kind] : "unknown"), " ");
  return digits(c->kind == SH_SIM_DRAW ? nth : c->step, 10, 1, p);
}

/* Only write(2): replayfile_record runs in signal handlers. x may be NULL.
 * Ends with `decisions=N`, which a reader checks: a file cut short (a child
 * killed while writing it) is told from a whole one. */
static bool write_decisions(int fd, const sh_sim_choice *c, const sh_sim_decision_context *x,
                            size_t n) {
  char block[WRITE_BLOCK];
  size_t len = 0;
  uint64_t drawn[SH_SIM_STREAMS] = {0};
  for (size_t i = 0; i <= n; i++) {
    char line[LINE_MAX_BYTES], *end = line + sizeof(line), *p;
    if (i < n) {
      uint64_t nth = c[i].kind == SH_SIM_DRAW && c[i].to < SH_SIM_STREAMS ? drawn[c[i].to]++ : 0;
      p = decision_line(&c[i], x != NULL ? &x[i] : NULL, nth, end);
    } else {
      p = end;
      *--p = '\n';
      p = put_word(digits(n, 10, 1, p), "decisions=");
    }
    size_t l = (size_t)(end - p);
    if (len + l > sizeof(block)) {
      if (write(fd, block, len) != (ssize_t)len) return false;
      len = 0;
    }
    memcpy(block + len, p, l);
    len += l;
  }
  return write(fd, block, len) == (ssize_t)len;
}

void replayfile_record(const char *path) {
  if (path == NULL) return;
  const sh_sim_choice *c;
  const sh_sim_decision_context *x;
  size_t n = sh_sim_schedule(&c);
  bool with_x = sh_sim_schedule_context(&x) == n;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  static const char incomplete[] = "incomplete=1\n";
  if (write(fd, prepared.text, prepared.len) >= 0 &&
      (sh_sim_schedule_complete() ||
       write(fd, incomplete, sizeof(incomplete) - 1) == (ssize_t)sizeof(incomplete) - 1))
    write_decisions(fd, c, with_x ? x : NULL, n);
  close(fd);
}

static int outcome_write(FILE *f, const replay_outcome *out) {
  fprintf(f, "result=%s%s\nhash=0x%016llx\nsteps=%llu\n", out->ok ? "ok" : "FAIL:",
          out->ok ? "" : out->kind, (unsigned long long)out->hash, (unsigned long long)out->steps);
  return fclose(f) == 0 ? 0 : -errno;
}

int replayfile_add_outcome(const char *path, const replay_outcome *out) {
  FILE *f = fopen(path, "ae");
  return f == NULL ? -errno : outcome_write(f, out);
}

/* ---- reading ---------------------------------------------------------------------------- */

/* Decimal, or hexadecimal with 0x; nothing after it. */
static bool num(const char *s, uint64_t *out) {
  if (s == NULL || s[0] < '0' || s[0] > '9') return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10);
  *out = v;
  return errno == 0 && *end == '\0';
}

static bool opt_key_set(sh_sim_options *o, const opt_key *k, const char *v) {
  uint64_t u;
  void *field = (char *)o + k->off;
  if (!num(v, &u) || (k->u32 && u > UINT32_MAX)) return false;
  if (k->u32) *(uint32_t *)field = (uint32_t)u;
  else *(uint64_t *)field = u;
  return true;
}

static bool outcome_key(replay_outcome *out, const char *key, const char *v) {
  if (strcmp(key, "hash") == 0) return num(v, &out->hash);
  if (strcmp(key, "steps") == 0) return num(v, &out->steps);
  out->known = true;
  out->ok = strcmp(v, "ok") == 0;
  if (!out->ok && strncmp(v, "FAIL:", 5) != 0) return false;
  snprintf(out->kind, sizeof(out->kind), "%s", out->ok ? "" : v + 5);
  return true;
}

/* A KEY=VALUE line. Keys this shsim does not know are kept for a warning. */
static bool header_key(replay_file *f, const char *key, const char *v) {
  uint64_t u;
  f->has_header = true;
  if (strcmp(key, "format") == 0) return num(v, &u) && (f->format = (unsigned)u) == u;
  if (strcmp(key, "binary") == 0) return num(v, &f->binary);
  if (strcmp(key, "scenario") == 0) return (f->run.scenario = v)[0] != '\0';
  if (strcmp(key, "strategy") == 0) return sh_sim_strategy_parse(v, &f->run.o.strategy) == 0;
  if (strcmp(key, "workers") == 0) return num(v, &u) && (f->run.workers = (uint32_t)u) == u;
  if (strcmp(key, "faults") == 0) return (f->run.faults = v) != NULL;
  if (strcmp(key, "decisions") == 0) {
    f->has_declared = true;
    return num(v, &f->declared);
  }
  if (strcmp(key, "incomplete") == 0) {
    f->incomplete = strcmp(v, "0") != 0;
    return true;
  }
  if (strcmp(key, "result") == 0 || strcmp(key, "hash") == 0 || strcmp(key, "steps") == 0)
    return outcome_key(&f->outcome, key, v);
  for (size_t i = 0; i < NKEYS; i++)
    if (strcmp(opt_keys[i].key, key) == 0) return opt_key_set(&f->run.o, &opt_keys[i], v);
  if (f->unknown == NULL) f->unknown = key;
  return true;
}

/* The kind named `w`, or NKINDS. */
static uint64_t kind_of(const char *w) {
  uint64_t kind = 0;
  while (kind < NKINDS && strcmp(w, kind_names[kind]) != 0) kind++;
  return kind;
}

/* "STEP KIND WHAT [VALUE] [@WHERE] [h=HASH]" (VALUE for a draw only), or
 * the plain "STEP FIBER KIND" of a schedule file. The line is cut into
 * strings: WHERE points into it. x->hash stays 0 without h=, *has_x says. */
static bool decision(char *line, sh_sim_choice *c, sh_sim_decision_context *x, bool *has_x) {
  char *save = NULL, *w[6];
  int nw = 0;
  for (char *t = strtok_r(line, " \t\r", &save); t != NULL; t = strtok_r(NULL, " \t\r", &save)) {
    if (nw == 6) return false;
    w[nw++] = t;
  }
  uint64_t step, to, kind, value = 0;
  if (nw < 3 || !num(w[0], &step)) return false;
  int at = 3;
  if (num(w[1], &to)) {
    if (!num(w[2], &kind) || nw != 3) return false;
  } else {
    kind = kind_of(w[1]);
    if (!num(w[2], &to)) return false;
    if (kind == SH_SIM_DRAW && (nw < 4 || !num(w[at++], &value))) return false;
  }
  *x = (sh_sim_decision_context){0};
  *has_x = false;
  if (at < nw && w[at][0] == '@') x->where = w[at++] + 1;
  if (at < nw && strncmp(w[at], "h=", 2) == 0) *has_x = num(w[at++] + 2, &x->hash);
  if (at != nw || kind >= NKINDS || to > UINT32_MAX) return false;
  if (kind == SH_SIM_DRAW && to >= SH_SIM_STREAMS) return false;
  /* A draw's number is for people: its place in the stream anchors it. */
  *c = kind == SH_SIM_DRAW
           ? (sh_sim_choice){.value = value, .to = (uint32_t)to, .kind = (uint32_t)kind}
           : (sh_sim_choice){.step = step, .to = (uint32_t)to, .kind = (uint32_t)kind};
  return true;
}

/* Both arrays grow together. */
static int add_decision(replay_file *f, size_t *cap, const sh_sim_choice *c,
                        const sh_sim_decision_context *x) {
  if (f->n == REPLAYFILE_MAX_DECISIONS) return -EFBIG;
  if (f->n == *cap) {
    size_t ncap = *cap == 0 ? 256 : *cap * 2;
    sh_sim_choice *nc = realloc(f->c, ncap * sizeof(*nc));
    if (nc == NULL) return -ENOMEM;
    f->c = nc;
    sh_sim_decision_context *nx = realloc(f->x, ncap * sizeof(*nx));
    if (nx == NULL) return -ENOMEM;
    f->x = nx;
    *cap = ncap;
  }
  f->x[f->n] = *x;
  f->c[f->n++] = *c;
  return 0;
}

static int read_all(const char *path, char **out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t len = 0, cap = 4096;
  char *t = malloc(cap + 1);
  ssize_t r = 1;
  while (t != NULL && r > 0) {
    if (len == cap) {
      char *nt = cap < REPLAYFILE_MAX_BYTES ? realloc(t, cap * 2 + 1) : NULL;
      if (nt == NULL) break;
      t = nt;
      cap *= 2;
    }
    r = read(fd, t + len, cap - len);
    if (r > 0) len += (size_t)r;
  }
  int rc = t == NULL ? -ENOMEM : r < 0 ? -errno : r > 0 ? -EFBIG : 0;
  close(fd);
  if (rc != 0) {
    free(t);
    return rc;
  }
  t[len] = '\0';
  *out = t;
  return 0;
}

int replayfile_load(const char *path, replay_file *f, size_t *line) {
  memset(f, 0, sizeof(*f));
  sh_sim_options_default(&f->run.o);
  f->has_context = true;
  *line = 0;
  int rc = read_all(path, &f->text);
  size_t cap = 0;
  char *next = NULL;
  for (char *l = rc == 0 ? f->text : NULL; l != NULL && rc == 0; l = next) {
    next = strchr(l, '\n');
    if (next != NULL) *next++ = '\0';
    (*line)++;
    sh_sim_choice c;
    sh_sim_decision_context x;
    bool has_x = false;
    if (l[0] == '#' || l[0] == '\0') continue;
    if (l[0] >= '0' && l[0] <= '9') {
      rc = decision(l, &c, &x, &has_x) ? add_decision(f, &cap, &c, &x) : -EINVAL;
      f->has_context &= has_x;
      continue;
    }
    char *eq = strchr(l, '=');
    if (eq == NULL) {
      rc = -EINVAL;
      continue;
    }
    *eq = '\0';
    rc = header_key(f, l, eq + 1) ? 0 : -EINVAL;
  }
  if (f->n == 0) f->has_context = false;
  if (rc != 0) replayfile_free(f);
  return rc;
}

bool replayfile_whole(const replay_file *f) {
  return f->has_declared && f->declared == f->n && !f->incomplete;
}

void replayfile_free(replay_file *f) {
  free(f->c);
  free(f->x);
  free(f->text);
  f->c = NULL;
  f->x = NULL;
  f->text = NULL;
}
