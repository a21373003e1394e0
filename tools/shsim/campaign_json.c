/*
 * A campaign's summary written as JSON (campaign.h; campaign_read.c reads
 * it back), and a failure as one line of JSON (failures.jsonl).
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

static void put_key(FILE *f, const char *sep, const char *key) {
  fputs(sep, f);
  put_string(f, key);
  fputs(": ", f);
}

void campaign_put_failure(FILE *f, const campaign_failure *x, const char *replay) {
  put_key(f, "{", "scenario");
  put_string(f, x->scenario);
  fprintf(f, ", \"seed\": %llu", (unsigned long long)x->seed);
  put_key(f, ", ", "kind");
  put_string(f, x->kind);
  put_key(f, ", ", "detail");
  put_string(f, x->detail);
  put_key(f, ", ", "command");
  put_string(f, x->command);
  if (replay != NULL) {
    put_key(f, ", ", "replay");
    put_string(f, replay);
  }
  fputc('}', f);
}

/* options: "--name value" lines, as an object. */
static void put_options(FILE *f, const char *text) {
  fputc('{', f);
  for (const char *sep = ""; *text != '\0'; sep = ", ") {
    size_t line = strcspn(text, "\n"), name = strcspn(text, " \n");
    char key[64], value[512];
    snprintf(key, sizeof(key), "%.*s", (int)name, text);
    snprintf(value, sizeof(value), "%.*s", (int)(line > name ? line - name - 1 : 0), text + name + 1);
    put_key(f, sep, key);
    put_string(f, value);
    text += line + (text[line] == '\n');
  }
  fputc('}', f);
}

static void put_meta(FILE *f, const campaign *c) {
  const campaign_meta *m = &c->meta;
  fprintf(f, "{\"format\": %d", CAMPAIGN_FORMAT);
  put_key(f, ", ", "command");
  put_string(f, m->command);
  put_key(f, ", ", "scenario");
  put_string(f, m->scenario);
  fprintf(f, ",\n \"seeds\": {\"from\": %llu, \"to\": %llu}, \"shard\": {\"index\": %llu, \"count\": %llu}",
          (unsigned long long)m->seeds_lo, (unsigned long long)m->seeds_hi,
          (unsigned long long)m->shard_i, (unsigned long long)m->shard_n);
  put_key(f, ",\n ", "options");
  put_options(f, m->options);
  put_key(f, ",\n ", "binary");
  put_string(f, m->binary);
  put_key(f, ", ", "version");
  put_string(f, m->version);
  put_key(f, ", ", "stopped");
  if (m->stopped[0] != '\0') put_string(f, m->stopped);
  else fputs("null", f);
  if (m->shards_missing[0] != '\0') {
    put_key(f, ", ", "shards_missing");
    put_string(f, m->shards_missing);
  }
  fprintf(f, ",\n \"runs_planned\": %llu, \"seeds_run\": %llu, \"failed\": %llu, \"seconds\": %.3f",
          (unsigned long long)m->planned, (unsigned long long)c->runs,
          (unsigned long long)c->nfails, c->seconds);
}

static void put_group(FILE *f, const campaign_group *g) {
  put_key(f, "    {", "scenario");
  put_string(f, g->lowest.scenario);
  put_key(f, ", ", "kind");
  put_string(f, g->lowest.kind);
  put_key(f, ", ", "where");
  put_string(f, g->where);
  put_key(f, ", ", "message");
  put_string(f, g->message);
  fprintf(f, ", \"count\": %llu,\n     \"seed\": %llu", (unsigned long long)g->count,
          (unsigned long long)g->lowest.seed);
  put_key(f, ", ", "detail");
  put_string(f, g->lowest.detail);
  put_key(f, ", ", "command");
  put_string(f, g->lowest.command);
  fputc('}', f);
}

int campaign_write_json(campaign *c, const char *path) {
  campaign_sort(c);
  FILE *f = fopen(path, "we");
  if (f == NULL) return -errno;
  put_meta(f, c);
  fputs(",\n \"scenarios\": [", f);
  for (size_t i = 0; i < c->nscns; i++) {
    const campaign_scn *s = &c->scns[i];
    put_key(f, i == 0 ? "\n    {" : ",\n    {", "name");
    put_string(f, s->name);
    fprintf(f, ", \"runs\": %llu, \"failed\": %llu, \"seconds\": %.3f}", (unsigned long long)s->runs,
            (unsigned long long)s->fails, s->seconds);
  }
  fprintf(f, "],\n \"ungrouped\": %llu, \"groups\": [", (unsigned long long)c->ungrouped);
  for (size_t i = 0; i < c->ngroups; i++) {
    fputs(i == 0 ? "\n" : ",\n", f);
    put_group(f, &c->groups[i]);
  }
  fputs("],\n \"failures\": [", f);
  for (size_t i = 0; i < c->nkept; i++) {
    fputs(i == 0 ? "\n    " : ",\n    ", f);
    campaign_put_failure(f, &c->fails[i], NULL);
  }
  fputs("]}\n", f);
  int rc = ferror(f) ? -EIO : 0;
  if (fclose(f) != 0 && rc == 0) rc = -errno;
  return rc;
}
