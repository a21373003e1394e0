/*
 * A campaign's JSON summary read back, and summaries merged (campaign.h).
 *
 * Tolerant: keys in any order; a key this shsim does not know is skipped
 * whatever its value (a newer shsim may add objects and arrays); a format 1
 * summary (no "format" key: scenario, seeds_run, failed, seconds, failures)
 * is read as well. Numbers are read as text, so that a 64-bit seed keeps
 * every digit. Nesting is bounded (DEPTH_MAX).
 */
#include "campaign.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 16

typedef struct reader {
  const char *s;
  int depth;
} reader;

static void skip_ws(reader *r) { r->s += strspn(r->s, " \t\r\n"); }

static bool take(reader *r, char ch) {
  skip_ws(r);
  if (*r->s != ch) return false;
  r->s++;
  return true;
}

static bool take_escape(reader *r, char *out) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char *k = strchr(from, *r->s);
  if (*r->s != '\0' && k != NULL) {
    *out = to[k - from];
    r->s++;
    return true;
  }
  if (*r->s != 'u' || strspn(r->s + 1, "0123456789abcdefABCDEF") < 4) return false;
  char hex[5] = {r->s[1], r->s[2], r->s[3], r->s[4], '\0'};
  unsigned long v = strtoul(hex, NULL, 16);
  *out = v < 0x80 ? (char)v : '?'; /* the writer escapes control characters only */
  r->s += 5;
  return true;
}

/* A string (unescaped), a number (as text) or a literal (true, false,
 * null: as its word), to out (cut to cap). */
static bool take_scalar(reader *r, char *out, size_t cap) {
  skip_ws(r);
  size_t n = 0;
  if (*r->s != '"') {
    size_t len = strspn(r->s, "0123456789+-.eEtrufalsn");
    if (len == 0) return false;
    snprintf(out, cap, "%.*s", (int)len, r->s);
    r->s += len;
    return true;
  }
  for (r->s++; *r->s != '"';) {
    char ch = *r->s++;
    if (ch == '\0' || (ch == '\\' && !take_escape(r, &ch))) return false;
    if (n + 1 < cap) out[n++] = ch;
  }
  r->s++;
  out[n] = '\0';
  return true;
}

typedef bool (*field_fn)(void *ctx, const char *key, reader *r);
static bool take_value(reader *r);

/* Calls field(ctx, key, r) for each member of an object; field reads the value. */
static bool take_object(reader *r, field_fn field, void *ctx) {
  if (r->depth >= DEPTH_MAX || !take(r, '{')) return false;
  r->depth++;
  bool ok = take(r, '}');
  if (!ok) {
    do {
      char key[64];
      ok = take_scalar(r, key, sizeof(key)) && take(r, ':') && field(ctx, key, r);
    } while (ok && take(r, ','));
    ok = ok && take(r, '}');
  }
  r->depth--;
  return ok;
}

/* Calls item(ctx, r) for each element of an array. */
static bool take_array(reader *r, bool (*item)(void *ctx, reader *r), void *ctx) {
  if (r->depth >= DEPTH_MAX || !take(r, '[')) return false;
  r->depth++;
  bool ok = take(r, ']');
  if (!ok) {
    do ok = item(ctx, r);
    while (ok && take(r, ','));
    ok = ok && take(r, ']');
  }
  r->depth--;
  return ok;
}

static bool skip_field(void *ctx, const char *key, reader *r) {
  (void)ctx;
  (void)key;
  return take_value(r);
}

static bool skip_item(void *ctx, reader *r) {
  (void)ctx;
  return take_value(r);
}

/* Any value, skipped. */
static bool take_value(reader *r) {
  skip_ws(r);
  if (*r->s == '{') return take_object(r, skip_field, NULL);
  if (*r->s == '[') return take_array(r, skip_item, NULL);
  char v[8];
  return take_scalar(r, v, sizeof(v));
}

static uint64_t num(const char *v) { return strtoull(v, NULL, 10); }

/* A number field: to *out. */
static bool take_u64(reader *r, uint64_t *out) {
  char v[32];
  if (!take_scalar(r, v, sizeof(v))) return false;
  *out = num(v);
  return true;
}

#define TEXT(type, name) {#name, offsetof(type, name), sizeof(((type *)0)->name)}
typedef struct text_field {
  const char *key;
  size_t off, cap;
} text_field;

/* The value of key into its text field of obj, if it is one. */
static bool text_of(const text_field *t, size_t n, void *obj, const char *key, reader *r, bool *done) {
  *done = false;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(key, t[i].key) != 0) continue;
    *done = true;
    return take_scalar(r, (char *)obj + t[i].off, t[i].cap);
  }
  return true;
}

static const text_field failure_text[] = {TEXT(campaign_failure, scenario), TEXT(campaign_failure, kind),
                                          TEXT(campaign_failure, detail), TEXT(campaign_failure, command)};

static bool failure_field(void *ctx, const char *key, reader *r) {
  campaign_failure *f = ctx;
  bool done;
  if (!text_of(failure_text, sizeof(failure_text) / sizeof(failure_text[0]), f, key, r, &done)) return false;
  if (done) return true;
  if (strcmp(key, "seed") == 0) return take_u64(r, &f->seed);
  return take_value(r);
}

static bool group_field(void *ctx, const char *key, reader *r) {
  campaign_group *g = ctx;
  if (strcmp(key, "where") == 0) return take_scalar(r, g->where, sizeof(g->where));
  if (strcmp(key, "message") == 0) return take_scalar(r, g->message, sizeof(g->message));
  if (strcmp(key, "count") == 0) return take_u64(r, &g->count);
  return failure_field(&g->lowest, key, r);
}

static bool scn_field(void *ctx, const char *key, reader *r) {
  campaign_scn *s = ctx;
  char v[64];
  if (strcmp(key, "name") == 0) return take_scalar(r, s->name, sizeof(s->name));
  if (strcmp(key, "runs") == 0) return take_u64(r, &s->runs);
  if (strcmp(key, "failed") == 0) return take_u64(r, &s->fails);
  if (strcmp(key, "seconds") != 0 || !take_scalar(r, v, sizeof(v))) return take_value(r);
  s->seconds = strtod(v, NULL);
  return true;
}

/* What a summary says, as read. */
typedef struct summary {
  campaign *c;
  campaign_failure *fails; /* as listed (malloc'd), up to CAMPAIGN_KEPT_MAX */
  size_t nfails;
  bool has_runs, has_groups, has_scns;
} summary;

static bool failure_item(void *ctx, reader *r) {
  summary *m = ctx;
  campaign_failure f;
  memset(&f, 0, sizeof(f));
  if (!take_object(r, failure_field, &f)) return false;
  if (m->nfails < CAMPAIGN_KEPT_MAX) {
    if (m->fails == NULL) m->fails = malloc(CAMPAIGN_KEPT_MAX * sizeof(campaign_failure));
    if (m->fails != NULL) m->fails[m->nfails++] = f;
  }
  return true;
}

static bool group_item(void *ctx, reader *r) {
  summary *m = ctx;
  campaign_group g;
  memset(&g, 0, sizeof(g));
  if (!take_object(r, group_field, &g)) return false;
  campaign_add_group(m->c, &g);
  m->has_groups = true;
  return true;
}

static bool scn_item(void *ctx, reader *r) {
  summary *m = ctx;
  campaign_scn s;
  memset(&s, 0, sizeof(s));
  if (!take_object(r, scn_field, &s)) return false;
  campaign_scn *t = campaign_scn_of(m->c, s.name);
  if (t != NULL) *t = s;
  m->has_scns = true;
  return true;
}

static bool option_field(void *ctx, const char *key, reader *r) {
  campaign_meta *m = ctx;
  char v[512];
  if (!take_scalar(r, v, sizeof(v))) return false;
  size_t len = strlen(m->options);
  snprintf(m->options + len, sizeof(m->options) - len, "%s %s\n", key, v);
  return true;
}

static bool range_field(void *ctx, const char *key, reader *r) {
  uint64_t *pair = ctx; /* from/to, or index/count */
  if (strcmp(key, "from") == 0 || strcmp(key, "index") == 0) return take_u64(r, &pair[0]);
  if (strcmp(key, "to") == 0 || strcmp(key, "count") == 0) return take_u64(r, &pair[1]);
  return take_value(r);
}

static const text_field meta_text[] = {TEXT(campaign_meta, command), TEXT(campaign_meta, scenario),
                                       TEXT(campaign_meta, binary), TEXT(campaign_meta, version),
                                       TEXT(campaign_meta, stopped), TEXT(campaign_meta, shards_missing)};

static bool meta_field(campaign *c, const char *key, reader *r, bool *done) {
  campaign_meta *m = &c->meta;
  uint64_t pair[2] = {0, 0};
  *done = true;
  if (strcmp(key, "format") == 0) {
    uint64_t v;
    if (!take_u64(r, &v)) return false;
    m->format = (unsigned)v;
    return true;
  }
  if (strcmp(key, "options") == 0) return take_object(r, option_field, m);
  bool seeds = strcmp(key, "seeds") == 0, shard = strcmp(key, "shard") == 0;
  if (seeds || shard) {
    if (!take_object(r, range_field, pair)) return false;
    *(seeds ? &m->seeds_lo : &m->shard_i) = pair[0];
    *(seeds ? &m->seeds_hi : &m->shard_n) = pair[1];
    return true;
  }
  if (strcmp(key, "runs_planned") == 0) return take_u64(r, &m->planned);
  bool ok = text_of(meta_text, sizeof(meta_text) / sizeof(meta_text[0]), m, key, r, done);
  if (ok && *done && strcmp(m->stopped, "null") == 0) m->stopped[0] = '\0';
  return ok;
}

static bool summary_field(void *ctx, const char *key, reader *r) {
  summary *m = ctx;
  campaign *c = m->c;
  bool done;
  if (!meta_field(c, key, r, &done)) return false;
  if (done) return true;
  if (strcmp(key, "failures") == 0) return take_array(r, failure_item, m);
  if (strcmp(key, "groups") == 0) return take_array(r, group_item, m);
  if (strcmp(key, "scenarios") == 0) return take_array(r, scn_item, m);
  if (strcmp(key, "failed") == 0) return take_u64(r, &c->nfails);
  if (strcmp(key, "ungrouped") == 0) return take_u64(r, &c->ungrouped);
  if (strcmp(key, "seeds_run") == 0) {
    m->has_runs = true;
    return take_u64(r, &c->runs);
  }
  char v[64];
  if (strcmp(key, "seconds") != 0 || !take_scalar(r, v, sizeof(v))) return take_value(r);
  c->seconds = strtod(v, NULL);
  return true;
}

static char *slurp(const char *path, int *err) {
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    *err = -errno;
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  while (buf != NULL) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap) break;
    char *more = realloc(buf, 2 * cap + 1);
    if (more == NULL) free(buf);
    buf = more;
    cap *= 2;
  }
  *err = buf == NULL ? -ENOMEM : ferror(f) ? -EIO : 0;
  fclose(f);
  if (buf != NULL) buf[len] = '\0';
  if (*err != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* After the parse: a format 1 summary lists failures only (its groups and
 * tallies come from them); a newer one lists its groups (its failures are
 * the first ones only, and kept as they are). */
static void summary_finish(summary *m) {
  campaign *c = m->c;
  uint64_t failed = c->nfails;
  for (size_t i = 0; i < m->nfails; i++) {
    if (m->has_groups) campaign_keep(c, &m->fails[i]);
    else campaign_add(c, &m->fails[i]);
  }
  if (!m->has_groups) {
    c->nfails = failed; /* listed or not */
    if (failed > m->nfails) c->ungrouped += failed - m->nfails;
  }
  if (!m->has_scns) {
    /* A format 1 summary tallies only the campaign's. */
    c->nscns = 0;
    campaign_scn *s = campaign_scn_of(c, c->meta.scenario);
    s->runs = c->runs;
    s->fails = c->nfails;
    s->seconds = c->seconds;
  }
  if (c->meta.command[0] == '\0') snprintf(c->meta.command, sizeof(c->meta.command), "fuzz");
}

int campaign_read_json(campaign *out, const char *path) {
  campaign_init(out, "", "");
  out->meta.format = 1; /* unless it says */
  int err;
  char *text = slurp(path, &err);
  if (text == NULL) return err;
  reader r = {text, 0};
  summary m = {.c = out};
  bool ok = take_object(&r, summary_field, &m) && m.has_runs;
  free(text);
  if (ok) summary_finish(&m);
  free(m.fails);
  return ok ? 0 : -EINVAL;
}

void campaign_merge(campaign *c, const campaign *s) {
  c->runs += s->runs;
  c->nfails += s->nfails;
  c->seconds += s->seconds;
  c->ungrouped += s->ungrouped;
  c->meta.planned += s->meta.planned;
  if (c->meta.stopped[0] == '\0') memcpy(c->meta.stopped, s->meta.stopped, sizeof(c->meta.stopped));
  for (size_t i = 0; i < s->nscns; i++) {
    campaign_scn *t = campaign_scn_of(c, s->scns[i].name);
    if (t == NULL) continue;
    t->runs += s->scns[i].runs;
    t->fails += s->scns[i].fails;
    t->seconds += s->scns[i].seconds;
  }
  for (size_t i = 0; i < s->ngroups; i++) campaign_add_group(c, &s->groups[i]);
  for (size_t i = 0; i < s->nkept; i++) campaign_keep(c, &s->fails[i]);
}
