/*
 * Failures kept and grouped, runs tallied, and the campaign's printout
 * (campaign.h).
 */
#include "campaign.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void campaign_init(campaign *c, const char *command, const char *scenario) {
  memset(c, 0, sizeof(*c));
  c->meta.format = CAMPAIGN_FORMAT;
  snprintf(c->meta.command, sizeof(c->meta.command), "%s", command);
  snprintf(c->meta.scenario, sizeof(c->meta.scenario), "%s", scenario);
}

void campaign_free(campaign *c) {
  free(c->fails);
  c->fails = NULL;
}

campaign_scn *campaign_scn_of(campaign *c, const char *name) {
  for (size_t i = 0; i < c->nscns; i++)
    if (strcmp(c->scns[i].name, name) == 0) return &c->scns[i];
  if (c->nscns == CAMPAIGN_SCNS_MAX) return NULL;
  campaign_scn *s = &c->scns[c->nscns++];
  memset(s, 0, sizeof(*s));
  snprintf(s->name, sizeof(s->name), "%s", name);
  return s;
}

void campaign_count_run(campaign *c, const char *name, double seconds) {
  c->runs++;
  campaign_scn *s = campaign_scn_of(c, name);
  if (s == NULL) return;
  s->runs++;
  s->seconds += seconds;
}

/* Copies s (up to its end or n bytes) to out, each run of digits as N and
 * each 0x-number as 0xN. */
static void mask(const char *s, size_t n, char *out, size_t cap) {
  size_t k = 0;
  const char *end = s + n;
  while (s < end && *s != '\0' && k + 4 < cap) {
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && s + 2 < end && isxdigit((unsigned char)s[2])) {
      memcpy(out + k, "0xN", 3);
      k += 3;
      for (s += 2; s < end && isxdigit((unsigned char)*s); s++) {
      }
    } else if (isdigit((unsigned char)*s)) {
      out[k++] = 'N';
      while (s < end && isdigit((unsigned char)*s)) s++;
    } else {
      out[k++] = *s++;
    }
  }
  out[k] = '\0';
}

void campaign_key(const char *detail, char *where, size_t wcap, char *message, size_t mcap) {
  size_t line = strcspn(detail, "\n");
  /* "file.c:58: ...": a word without blanks, a colon, digits, ": ". */
  size_t word = strcspn(detail, " :\n");
  size_t digits = detail[word] == ':' ? strspn(detail + word + 1, "0123456789") : 0;
  size_t at = word + 1 + digits;
  if (word > 0 && digits > 0 && detail[at] == ':' && at < line) {
    snprintf(where, wcap, "%.*s", (int)at, detail);
    at += detail[at + 1] == ' ' ? 2 : 1;
  } else {
    where[0] = '\0';
    at = 0;
  }
  mask(detail + at, line - at, message, mcap);
}

static campaign_group *group_find(campaign *c, const char *scenario, const char *kind,
                                  const char *where, const char *message) {
  for (size_t i = 0; i < c->ngroups; i++) {
    campaign_group *g = &c->groups[i];
    if (strcmp(g->lowest.scenario, scenario) == 0 && strcmp(g->lowest.kind, kind) == 0 &&
        strcmp(g->where, where) == 0 && strcmp(g->message, message) == 0)
      return g;
  }
  return NULL;
}

/* g's count grows by n; f is its failure if its seed is lower. */
static void group_take(campaign *c, const campaign_group *key, const campaign_failure *f, uint64_t n) {
  campaign_group *g = group_find(c, f->scenario, f->kind, key->where, key->message);
  if (g == NULL) {
    if (c->ngroups == CAMPAIGN_GROUPS_MAX) {
      c->ungrouped += n;
      return;
    }
    g = &c->groups[c->ngroups++];
    *g = *key;
    g->count = 0;
    g->lowest = *f;
  } else if (f->seed < g->lowest.seed) {
    g->lowest = *f;
  }
  g->lowest.detail[strcspn(g->lowest.detail, "\n")] = '\0';
  g->count += n;
}

void campaign_keep(campaign *c, const campaign_failure *f) {
  if (c->nkept == CAMPAIGN_KEPT_MAX) return;
  if (c->fails == NULL) {
    c->fails = malloc(CAMPAIGN_KEPT_MAX * sizeof(campaign_failure));
    if (c->fails == NULL) return;
  }
  c->fails[c->nkept++] = *f;
}

void campaign_add(campaign *c, const campaign_failure *f) {
  c->nfails++;
  campaign_scn *s = campaign_scn_of(c, f->scenario);
  if (s != NULL) s->fails++;
  campaign_keep(c, f);
  campaign_group key;
  memset(&key, 0, sizeof(key));
  campaign_key(f->detail, key.where, sizeof(key.where), key.message, sizeof(key.message));
  group_take(c, &key, f, 1);
}

void campaign_add_group(campaign *c, const campaign_group *g) {
  group_take(c, g, &g->lowest, g->count);
}

static int cmp_u64(uint64_t x, uint64_t y) { return (x > y) - (x < y); }

static int by_count(const void *x, const void *y) {
  const campaign_group *g = x, *h = y;
  if (g->count != h->count) return g->count < h->count ? 1 : -1;
  int d = strcmp(g->lowest.scenario, h->lowest.scenario);
  if (d != 0) return d;
  d = cmp_u64(g->lowest.seed, h->lowest.seed);
  return d != 0 ? d : strcmp(g->message, h->message);
}

static int by_scenario_seed(const void *x, const void *y) {
  const campaign_failure *f = x, *g = y;
  int d = strcmp(f->scenario, g->scenario);
  return d != 0 ? d : cmp_u64(f->seed, g->seed);
}

static int by_name(const void *x, const void *y) {
  return strcmp(((const campaign_scn *)x)->name, ((const campaign_scn *)y)->name);
}

void campaign_sort(campaign *c) {
  qsort(c->scns, c->nscns, sizeof(campaign_scn), by_name);
  qsort(c->groups, c->ngroups, sizeof(campaign_group), by_count);
  if (c->nkept > 0) qsort(c->fails, c->nkept, sizeof(campaign_failure), by_scenario_seed);
}

void campaign_print(campaign *c) {
  campaign_sort(c);
  printf("%s: %llu runs, %llu failed, %.2f s", c->meta.scenario, (unsigned long long)c->runs,
         (unsigned long long)c->nfails, c->seconds);
  if (c->seconds > 0) printf(" (%.0f runs/s)", (double)c->runs / c->seconds);
  printf("\n");
  campaign_print_groups(c);
}

void campaign_print_groups(campaign *c) {
  campaign_sort(c);
  if (c->nfails == 0) return;
  printf("\n%zu failure group%s (each replayed by the command of its lowest seed):\n", c->ngroups,
         c->ngroups == 1 ? "" : "s");
  for (size_t i = 0; i < c->ngroups; i++) {
    const campaign_group *g = &c->groups[i];
    printf("%8llu x %s FAIL:%s (lowest seed %llu): %s\n    %s\n", (unsigned long long)g->count,
           g->lowest.scenario, g->lowest.kind, (unsigned long long)g->lowest.seed,
           g->lowest.detail, g->lowest.command);
  }
  if (c->ungrouped != 0)
    printf("(%llu more failures in no group listed)\n", (unsigned long long)c->ungrouped);
}
