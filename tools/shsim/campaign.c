/*
 * Failures kept and grouped, and the campaign's printout (campaign.h).
 */
#include "campaign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void campaign_init(campaign *c, const char *scenario) {
  memset(c, 0, sizeof(*c));
  snprintf(c->scenario, sizeof(c->scenario), "%s", scenario);
}

void campaign_free(campaign *c) {
  free(c->fails);
  c->fails = NULL;
}

/* The detail's first line: where several differ below it, the bug is one. */
static size_t first_line_len(const char *detail) { return strcspn(detail, "\n"); }

static campaign_group *group_of(campaign *c, const campaign_failure *f) {
  size_t len = first_line_len(f->detail);
  for (size_t i = 0; i < c->ngroups; i++) {
    const campaign_failure *g = &c->groups[i].first;
    if (strcmp(g->scenario, f->scenario) == 0 && strcmp(g->kind, f->kind) == 0 &&
        strlen(g->detail) == len && strncmp(g->detail, f->detail, len) == 0)
      return &c->groups[i];
  }
  if (c->ngroups == CAMPAIGN_GROUPS_MAX) return NULL;
  campaign_group *g = &c->groups[c->ngroups++];
  g->first = *f;
  g->first.detail[len] = '\0';
  g->count = 0;
  return g;
}

static void keep(campaign *c, const campaign_failure *f) {
  if (c->nkept == CAMPAIGN_KEPT_MAX) return;
  if (c->fails == NULL) {
    c->fails = malloc(CAMPAIGN_KEPT_MAX * sizeof(campaign_failure));
    if (c->fails == NULL) return;
  }
  c->fails[c->nkept++] = *f;
}

void campaign_add(campaign *c, const campaign_failure *f) {
  c->nfails++;
  keep(c, f);
  campaign_group *g = group_of(c, f);
  if (g != NULL) g->count++;
  else c->ungrouped++;
}

void campaign_add_unlisted(campaign *c, uint64_t n) {
  c->nfails += n;
  c->ungrouped += n;
}

static int by_count(const void *x, const void *y) {
  const campaign_group *g = x, *h = y;
  if (g->count != h->count) return g->count < h->count ? 1 : -1;
  int d = strcmp(g->first.scenario, h->first.scenario);
  return d != 0 ? d : (g->first.seed > h->first.seed) - (g->first.seed < h->first.seed);
}

void campaign_print(campaign *c) {
  printf("%s: %llu runs, %llu failed, %.2f s", c->scenario, (unsigned long long)c->runs,
         (unsigned long long)c->nfails, c->seconds);
  if (c->seconds > 0) printf(" (%.0f runs/s)", (double)c->runs / c->seconds);
  printf("\n");
  if (c->nfails == 0) return;
  qsort(c->groups, c->ngroups, sizeof(campaign_group), by_count);
  printf("\n%zu failure group%s (replay each with the command shown):\n", c->ngroups,
         c->ngroups == 1 ? "" : "s");
  for (size_t i = 0; i < c->ngroups; i++) {
    const campaign_group *g = &c->groups[i];
    printf("%8llu x %s FAIL:%s: %s\n    %s\n", (unsigned long long)g->count, g->first.scenario,
           g->first.kind, g->first.detail, g->first.command);
  }
  if (c->ungrouped != 0)
    printf("(%llu more failures in no group listed)\n", (unsigned long long)c->ungrouped);
}
