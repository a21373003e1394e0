/*
 * A campaign's summary as JSON, written and read back (campaign.h). The
 * reader takes what the writer writes (any key order, unknown scalar keys
 * skipped), not every JSON: numbers are read as text, so that a 64-bit seed
 * keeps every digit.
 */
#include "campaign.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---------------------------------------------------------------------------- */

static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s != '\0'; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void put_failure(FILE *f, const campaign_failure *x) {
  fputs("    {\"scenario\": ", f);
  put_string(f, x->scenario);
  fprintf(f, ", \"seed\": %llu, \"kind\": ", (unsigned long long)x->seed);
  put_string(f, x->kind);
  fputs(", \"detail\": ", f);
  put_string(f, x->detail);
  fputs(", \"command\": ", f);
  put_string(f, x->command);
  fputc('}', f);
}

int campaign_write_json(const campaign *c, const char *path) {
  FILE *f = fopen(path, "we");
  if (f == NULL) return -errno;
  fputs("{\"scenario\": ", f);
  put_string(f, c->scenario);
  fprintf(f, ", \"seeds_run\": %llu, \"failed\": %llu, \"seconds\": %.3f,\n \"failures\": [",
          (unsigned long long)c->runs, (unsigned long long)c->nfails, c->seconds);
  for (size_t i = 0; i < c->nkept; i++) {
    fputs(i == 0 ? "\n" : ",\n", f);
    put_failure(f, &c->fails[i]);
  }
  fputs("]}\n", f);
  int rc = ferror(f) ? -EIO : 0;
  if (fclose(f) != 0 && rc == 0) rc = -errno;
  return rc;
}

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct reader {
  const char *s;
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

/* A string (unescaped) or a number (as text), to out (cut to cap). */
static bool take_scalar(reader *r, char *out, size_t cap) {
  skip_ws(r);
  size_t n = 0;
  if (*r->s != '"') {
    size_t len = strspn(r->s, "0123456789+-.eE");
    if (len == 0) return false;
    snprintf(out, cap, "%.*s", (int)len, r->s);
    r->s += len;
    return true;
  }
  for (r->s++; *r->s != '"'; ) {
    char ch = *r->s++;
    if (ch == '\0' || (ch == '\\' && !take_escape(r, &ch))) return false;
    if (n + 1 < cap) out[n++] = ch;
  }
  r->s++;
  out[n] = '\0';
  return true;
}

/* Calls field(ctx, key, r) for each member of an object; field reads the value. */
static bool take_object(reader *r, bool (*field)(void *, const char *, reader *), void *ctx) {
  if (!take(r, '{')) return false;
  if (take(r, '}')) return true;
  do {
    char key[64];
    if (!take_scalar(r, key, sizeof(key)) || !take(r, ':') || !field(ctx, key, r)) return false;
  } while (take(r, ','));
  return take(r, '}');
}

/* The text fields of a failure, by key. */
#define FIELD(name) {#name, offsetof(campaign_failure, name), sizeof(((campaign_failure *)0)->name)}
static const struct {
  const char *key;
  size_t off, cap;
} text_fields[] = {FIELD(scenario), FIELD(kind), FIELD(detail), FIELD(command)};
#undef FIELD

static bool failure_field(void *ctx, const char *key, reader *r) {
  campaign_failure *f = ctx;
  for (size_t i = 0; i < sizeof(text_fields) / sizeof(text_fields[0]); i++)
    if (strcmp(key, text_fields[i].key) == 0)
      return take_scalar(r, (char *)f + text_fields[i].off, text_fields[i].cap);
  char num[32];
  if (!take_scalar(r, num, sizeof(num))) return false;
  if (strcmp(key, "seed") == 0) f->seed = strtoull(num, NULL, 10);
  return true;
}

typedef struct summary {
  campaign *c;
  uint64_t failed, listed;
  bool has_runs;
} summary;

static bool take_failures(summary *m, reader *r) {
  if (!take(r, '[')) return false;
  if (take(r, ']')) return true;
  do {
    campaign_failure f;
    memset(&f, 0, sizeof(f));
    if (!take_object(r, failure_field, &f)) return false;
    campaign_add(m->c, &f);
    m->listed++;
  } while (take(r, ','));
  return take(r, ']');
}

static bool summary_field(void *ctx, const char *key, reader *r) {
  summary *m = ctx;
  if (strcmp(key, "failures") == 0) return take_failures(m, r);
  char v[64];
  if (!take_scalar(r, v, sizeof(v))) return false;
  if (strcmp(key, "seeds_run") == 0) {
    m->c->runs += strtoull(v, NULL, 10);
    m->has_runs = true;
  } else if (strcmp(key, "failed") == 0) {
    m->failed = strtoull(v, NULL, 10);
  } else if (strcmp(key, "seconds") == 0) {
    m->c->seconds += strtod(v, NULL);
  } else if (strcmp(key, "scenario") == 0 && strcmp(m->c->scenario, v) != 0) {
    /* The first file names the merge; files of other scenarios make it several. */
    snprintf(m->c->scenario, sizeof(m->c->scenario), "%s", m->c->scenario[0] == '\0' ? v : "several");
  }
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

int campaign_read_json(campaign *c, const char *path) {
  int err;
  char *text = slurp(path, &err);
  if (text == NULL) return err;
  reader r = {text};
  summary m = {.c = c};
  bool ok = take_object(&r, summary_field, &m) && m.has_runs;
  free(text);
  if (!ok) return -EINVAL;
  if (m.failed > m.listed) campaign_add_unlisted(c, m.failed - m.listed);
  return 0;
}
