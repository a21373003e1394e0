/*
 * A campaign as JUnit XML (campaign.h), the report CI systems read: one
 * <testsuite> for the campaign, a <testcase> per scenario, and for a
 * scenario that failed a <failure> per failure group, which carries the
 * group's count, its lowest seed and the command that replays it.
 */
#include "campaign.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The length of the UTF-8 sequence at s (1..4), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s) {
  size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
             : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return n;
}

/* Text as XML character data or an attribute value: markup escaped, and
 * what XML 1.0 cannot hold at all (control characters, bytes that are not
 * UTF-8: a crashing run's stderr may have anything) as '?'. */
static void put_xml(FILE *f, const char *text) {
  static const char *const ents[] = {['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;",
                                     ['"'] = "&quot;", ['\''] = "&apos;"};
  const unsigned char *s = (const unsigned char *)text;
  while (*s != '\0') {
    size_t n = utf8_len(s);
    if (n == 0 || (*s < 0x20 && *s != '\n' && *s != '\t')) {
      fputc('?', f);
      s++;
    } else if (*s < sizeof(ents) / sizeof(ents[0]) && ents[*s] != NULL) {
      fputs(ents[*s++], f);
    } else {
      fwrite(s, 1, n, f);
      s += n;
    }
  }
}

static void put_attr(FILE *f, const char *name, const char *value) {
  fprintf(f, " %s=\"", name);
  put_xml(f, value);
  fputc('"', f);
}

static void put_property(FILE *f, const char *name, const char *value) {
  fputs("      <property", f);
  put_attr(f, "name", name);
  put_attr(f, "value", value);
  fputs("/>\n", f);
}

static void put_failure(FILE *f, const campaign_group *g) {
  char msg[512];
  snprintf(msg, sizeof(msg), "%llu run%s, lowest seed %llu: %s", (unsigned long long)g->count,
           g->count == 1 ? "" : "s", (unsigned long long)g->lowest.seed, g->lowest.detail);
  fputs("      <failure", f);
  put_attr(f, "type", g->lowest.kind);
  put_attr(f, "message", msg);
  fputs(">FAIL:", f);
  put_xml(f, g->lowest.kind);
  fputs(": ", f);
  put_xml(f, g->lowest.detail);
  fprintf(f, "\n%llu failing run%s in this group; the lowest seed is %llu. Replay it with:\n",
          (unsigned long long)g->count, g->count == 1 ? "" : "s", (unsigned long long)g->lowest.seed);
  put_xml(f, g->lowest.command);
  fputs("\n</failure>\n", f);
}

static void put_case(FILE *f, const campaign *c, const campaign_scn *s) {
  fputs("    <testcase", f);
  put_attr(f, "classname", c->meta.command[0] != '\0' ? c->meta.command : "shsim");
  put_attr(f, "name", s->name);
  fprintf(f, " time=\"%.3f\">\n", s->seconds);
  for (size_t i = 0; i < c->ngroups; i++)
    if (strcmp(c->groups[i].lowest.scenario, s->name) == 0) put_failure(f, &c->groups[i]);
  fprintf(f, "      <system-out>%llu runs, %llu failed</system-out>\n    </testcase>\n",
          (unsigned long long)s->runs, (unsigned long long)s->fails);
}

static void put_properties(FILE *f, const campaign *c) {
  const campaign_meta *m = &c->meta;
  char v[64];
  fputs("    <properties>\n", f);
  snprintf(v, sizeof(v), "%llu..%llu", (unsigned long long)m->seeds_lo, (unsigned long long)m->seeds_hi);
  put_property(f, "seeds", v);
  snprintf(v, sizeof(v), "%llu/%llu", (unsigned long long)m->shard_i, (unsigned long long)m->shard_n);
  put_property(f, "shard", v);
  put_property(f, "options", m->options);
  put_property(f, "binary", m->binary);
  put_property(f, "version", m->version);
  snprintf(v, sizeof(v), "%llu of %llu", (unsigned long long)c->runs, (unsigned long long)m->planned);
  put_property(f, "runs", v);
  if (m->stopped[0] != '\0') put_property(f, "stopped", m->stopped);
  fputs("    </properties>\n", f);
}

int campaign_write_junit(campaign *c, const char *path, const char *extra) {
  campaign_sort(c);
  size_t failing = extra != NULL ? 1 : 0;
  for (size_t i = 0; i < c->nscns; i++) failing += c->scns[i].fails != 0;
  FILE *f = fopen(path, "we");
  if (f == NULL) return -errno;
  char name[128];
  snprintf(name, sizeof(name), "shsim %s %s", c->meta.command, c->meta.scenario);
  fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", f);
  put_attr(f, "name", "shsim");
  fprintf(f, " tests=\"%zu\" failures=\"%zu\" time=\"%.3f\">\n  <testsuite", c->nscns + (extra != NULL),
          failing, c->seconds);
  put_attr(f, "name", name);
  fprintf(f, " tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\" time=\"%.3f\">\n",
          c->nscns + (extra != NULL), failing, c->seconds);
  put_properties(f, c);
  for (size_t i = 0; i < c->nscns; i++) put_case(f, c, &c->scns[i]);
  if (extra != NULL) {
    fputs("    <testcase classname=\"merge\" name=\"shards\">\n      <failure type=\"shards\"", f);
    put_attr(f, "message", extra);
    fputs(">", f);
    put_xml(f, extra);
    fputs("</failure>\n    </testcase>\n", f);
  }
  fputs("  </testsuite>\n</testsuites>\n", f);
  int rc = ferror(f) ? -EIO : 0;
  if (fclose(f) != 0 && rc == 0) rc = -errno;
  return rc;
}
