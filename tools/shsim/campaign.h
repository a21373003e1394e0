/*
 * The summary of a fuzz campaign, or of several merged: how many runs, how
 * long, and the failures, kept and grouped (a bug tends to fail many seeds
 * the same way: a group is one line to read, with one command to replay).
 */
#ifndef SHSIM_CAMPAIGN_H
#define SHSIM_CAMPAIGN_H

#include <stddef.h>
#include <stdint.h>

#define CAMPAIGN_KEPT_MAX 10000 /* failures kept (and written to the summary) */
#define CAMPAIGN_GROUPS_MAX 256

typedef struct campaign_failure {
  char scenario[64];
  uint64_t seed;
  char kind[32];
  char detail[256];
  char command[512]; /* replays it */
} campaign_failure;

/* The failures of one scenario with one kind and the same first detail line. */
typedef struct campaign_group {
  campaign_failure first; /* its first failure, detail cut to the first line */
  uint64_t count;
} campaign_group;

typedef struct campaign {
  char scenario[64]; /* a scenario, "all", or "several" (merged) */
  uint64_t runs, nfails;
  double seconds; /* real time (a merge sums them: machine time) */
  campaign_failure *fails; /* the first nkept (malloc'd) */
  size_t nkept;
  campaign_group groups[CAMPAIGN_GROUPS_MAX];
  size_t ngroups;
  uint64_t ungrouped; /* failures past the kept ones or the groups */
} campaign;

void campaign_init(campaign *c, const char *scenario);
void campaign_free(campaign *c);

/* Counts f, keeps it and adds it to its group. */
void campaign_add(campaign *c, const campaign_failure *f);

/* Failures counted but not listed (a summary that kept only some). */
void campaign_add_unlisted(campaign *c, uint64_t n);

/* "N runs, F failed, S s (R runs/s)" then each group, largest first, with
 * its count and replay command. */
void campaign_print(campaign *c);

/* The summary as JSON:
 * {"scenario": S, "seeds_run": R, "failed": F, "seconds": T,
 *  "failures": [{"scenario", "seed", "kind", "detail", "command"}...]}
 * 0 or -errno. */
int campaign_write_json(const campaign *c, const char *path);

/* Adds the summary in path to c (its runs, seconds and failures). 0, -errno,
 * or -EINVAL for a file that is not such a summary. */
int campaign_read_json(campaign *c, const char *path);

#endif
