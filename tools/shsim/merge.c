/*
 * shsim merge (merge.h): the JSON summaries of the shards of campaigns as
 * one. The files of one campaign (the same command, scenario, seed range,
 * shard count and options) must each be another shard of it: a shard
 * given twice is refused (its runs would count twice); the shards none of
 * the files is are named. Files of several campaigns merge too (totals,
 * groups), each campaign checked on its own.
 */
#include "merge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "campaign.h"

#define MISSING_LISTED 16 /* missing shards named, per campaign */

static bool same_campaign(const campaign_meta *x, const campaign_meta *y) {
  return strcmp(x->command, y->command) == 0 && strcmp(x->scenario, y->scenario) == 0 &&
         x->seeds_lo == y->seeds_lo && x->seeds_hi == y->seeds_hi && x->shard_n == y->shard_n &&
         strcmp(x->options, y->options) == 0;
}

/* Index of a file before i of the same campaign and shard, or -1. A
 * summary that does not say its shard (format 1) is never a duplicate. */
static int duplicate_of(const campaign_meta *metas, int i) {
  if (metas[i].shard_n == 0) return -1;
  for (int k = 0; k < i; k++)
    if (same_campaign(&metas[k], &metas[i]) && metas[k].shard_i == metas[i].shard_i) return k;
  return -1;
}

/* Whether file k (of file i's campaign) is the first from i on with its
 * shard index. */
static bool shard_seen_first(const campaign_meta *metas, int nfiles, int i, int k) {
  (void)nfiles;
  for (int j = i; j < k; j++)
    if (same_campaign(&metas[j], &metas[k]) && metas[j].shard_i == metas[k].shard_i) return false;
  return true;
}

/* Appends "shard I/N of SCENARIO" for each shard of file i's campaign no
 * file is, unless an earlier file of that campaign did already. */
static size_t missing_of(const campaign_meta *metas, int nfiles, int i, char *out, size_t cap,
                         size_t len) {
  const campaign_meta *m = &metas[i];
  for (int k = 0; k < i; k++)
    if (same_campaign(&metas[k], m)) return len;
  /* Bounded by the files, not by the shard count a file claims: the
   * missing are the count less the distinct shards seen, and the listing
   * stops at MISSING_LISTED (each shard it passes over is one seen). */
  uint64_t seen_n = 0;
  for (int k = i; k < nfiles; k++)
    seen_n += same_campaign(&metas[k], m) && shard_seen_first(metas, nfiles, i, k);
  uint64_t missing = m->shard_n > seen_n ? m->shard_n - seen_n : 0, listed = 0;
  for (uint64_t s = 1; s <= m->shard_n && listed < missing && listed < MISSING_LISTED; s++) {
    bool seen = false;
    for (int k = i; k < nfiles && !seen; k++) seen = same_campaign(&metas[k], m) && metas[k].shard_i == s;
    if (seen) continue;
    listed++;
    if (len < cap)
      len += (size_t)snprintf(out + len, cap - len, "%s%llu/%llu", len > 0 ? ", " : "",
                              (unsigned long long)s, (unsigned long long)m->shard_n);
  }
  if (missing > MISSING_LISTED && len < cap)
    len += (size_t)snprintf(out + len, cap - len, " (%llu missing in all)", (unsigned long long)missing);
  if (missing > 0 && len < cap)
    len += (size_t)snprintf(out + len, cap - len, " of %s %s", m->command, m->scenario);
  return len < cap ? len : cap - 1;
}

/* The first file's description, or "several" where files differ. */
static void describe(campaign *c, const campaign_meta *m, int i) {
  if (i == 0) {
    c->meta = *m;
    c->meta.shard_i = 0; /* a merge is no one shard */
    c->meta.stopped[0] = '\0';
    return;
  }
  if (strcmp(c->meta.scenario, m->scenario) != 0) snprintf(c->meta.scenario, sizeof(c->meta.scenario), "several");
  if (strcmp(c->meta.binary, m->binary) != 0)
    fprintf(stderr, "shsim: warning: the shards were run by different binaries (%s, %s)\n",
            c->meta.binary, m->binary);
}

/* Reads and adds each file; 0, or 2 (reported). */
static int read_all(const args *a, campaign *c, campaign_meta *metas) {
  for (int i = 0; i < a->nfiles; i++) {
    campaign s;
    int rc = campaign_read_json(&s, a->files[i]);
    if (rc != 0) {
      fprintf(stderr, "shsim: %s: %s\n", a->files[i], rc == -EINVAL ? "not a campaign summary" : strerror(-rc));
      campaign_free(&s);
      return 2;
    }
    metas[i] = s.meta;
    int k = duplicate_of(metas, i);
    if (k >= 0) {
      fprintf(stderr, "shsim: %s and %s are the same shard (%llu/%llu) of one campaign: refused\n",
              a->files[k], a->files[i], (unsigned long long)s.meta.shard_i,
              (unsigned long long)s.meta.shard_n);
      campaign_free(&s);
      return 2;
    }
    describe(c, &s.meta, i);
    campaign_merge(c, &s);
    campaign_free(&s);
  }
  return 0;
}

static int write_outputs(const args *a, campaign *c, const char *missing) {
  int rc = a->json_path != NULL ? campaign_write_json(c, a->json_path) : 0;
  if (rc != 0) {
    fprintf(stderr, "shsim: cannot write %s: %s\n", a->json_path, strerror(-rc));
    return 2;
  }
  char extra[600];
  snprintf(extra, sizeof(extra), "shards missing: %s", missing);
  rc = a->junit_path != NULL ? campaign_write_junit(c, a->junit_path, missing[0] != '\0' ? extra : NULL) : 0;
  if (rc != 0) {
    fprintf(stderr, "shsim: cannot write %s: %s\n", a->junit_path, strerror(-rc));
    return 2;
  }
  return 0;
}

int merge_cmd(const args *a) {
  campaign *c = calloc(1, sizeof(*c));
  campaign_meta *metas = calloc((size_t)a->nfiles, sizeof(*metas));
  int status = c == NULL || metas == NULL ? 2 : 0;
  if (status == 0) {
    campaign_init(c, "", "");
    status = read_all(a, c, metas);
  }
  char missing[512] = "";
  size_t len = 0;
  for (int i = 0; status == 0 && i < a->nfiles; i++)
    len = missing_of(metas, a->nfiles, i, missing, sizeof(missing), len);
  if (status == 0) {
    printf("merged %d summar%s\n", a->nfiles, a->nfiles == 1 ? "y" : "ies");
    if (missing[0] != '\0') printf("shards missing: %s\n", missing);
    snprintf(c->meta.shards_missing, sizeof(c->meta.shards_missing), "%s", missing);
    campaign_print(c);
    status = write_outputs(a, c, missing);
    if (status == 0) status = c->nfails != 0 || missing[0] != '\0' ? 1 : 0;
  }
  if (c != NULL) campaign_free(c);
  free(c);
  free(metas);
  return status;
}
