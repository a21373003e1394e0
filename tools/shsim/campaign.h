/*
 * The summary of a campaign (a sweep or a fuzz, or several shards of one
 * merged): what ran (command, scenario, seed range, shard, options,
 * binary), how many runs per scenario and how long, and the failures, kept
 * and grouped (a bug tends to fail many seeds the same way: a group is one
 * line to read, with one command to replay).
 *
 * A group is the failures of one scenario with one kind, one place and one
 * message once its numbers are masked (a run of digits reads N, a hex
 * number 0xN: "round 3" and "round 7" are one bug). The place is the
 * detail's leading "file.c:LINE: ", kept as it is: two checks are two bugs.
 * Each group names its LOWEST failing seed, whatever order the runs
 * finished in, so that a campaign run again, sharded or not, names the
 * same seeds.
 */
#ifndef SHSIM_CAMPAIGN_H
#define SHSIM_CAMPAIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CAMPAIGN_FORMAT 2       /* of the JSON summary written; 1 (no "format" key) is read too */
#define CAMPAIGN_KEPT_MAX 10000 /* failures kept (and written to the summary) */
#define CAMPAIGN_GROUPS_MAX 256
#define CAMPAIGN_SCNS_MAX 256   /* scenarios tallied */

typedef struct campaign_failure {
  char scenario[64];
  uint64_t seed;
  char kind[32];
  char detail[256];
  char command[512]; /* replays it */
} campaign_failure;

typedef struct campaign_group {
  char where[96];          /* "file.c:LINE" or "" */
  char message[256];       /* the first line of the detail past `where`, numbers masked */
  campaign_failure lowest; /* its failure of the lowest seed, detail cut to the first line */
  uint64_t count;
} campaign_group;

/* The runs of one scenario. */
typedef struct campaign_scn {
  char name[64];
  uint64_t runs, fails;
  double seconds; /* real time of its runs, summed */
} campaign_scn;

/* What ran: the same in every shard of one campaign but the shard index. */
typedef struct campaign_meta {
  unsigned format;     /* of the file read; CAMPAIGN_FORMAT when made here */
  char command[16];    /* "sweep" or "fuzz" ("" in a format 1 file: fuzz) */
  char scenario[64];   /* a scenario, "all", or "several" (merged) */
  uint64_t seeds_lo, seeds_hi;
  uint64_t shard_i, shard_n; /* 0/0: unknown (format 1) */
  char options[512];   /* the options that shape the runs, "--name value ..." */
  char binary[24];     /* "0x" and 16 hex digits (replayfile_binary) */
  char version[24];
  uint64_t planned;    /* runs the plan (the shard's) had */
  char stopped[32];    /* "" (ran to the end), "SIGINT", "SIGTERM", "time budget" */
  char shards_missing[512]; /* a merge: the shards missing, "2/4, 4/4 of fuzz test_race" */
} campaign_meta;

typedef struct campaign {
  campaign_meta meta;
  uint64_t runs, nfails;
  double seconds; /* real time (a merge sums them: machine time) */
  campaign_failure *fails; /* the first nkept (malloc'd) */
  size_t nkept;
  campaign_group groups[CAMPAIGN_GROUPS_MAX];
  size_t ngroups;
  uint64_t ungrouped; /* failures past the groups */
  campaign_scn scns[CAMPAIGN_SCNS_MAX];
  size_t nscns;
} campaign;

void campaign_init(campaign *c, const char *command, const char *scenario);
void campaign_free(campaign *c);

/* The tally of scenario name (added if new; NULL past CAMPAIGN_SCNS_MAX). */
campaign_scn *campaign_scn_of(campaign *c, const char *name);

/* A run of scenario name that took seconds: counted. */
void campaign_count_run(campaign *c, const char *name, double seconds);

/* Counts f, keeps it and adds it to its group (f's run is counted apart). */
void campaign_add(campaign *c, const campaign_failure *f);

/* Keeps f in the list (the first CAMPAIGN_KEPT_MAX), nothing else. */
void campaign_keep(campaign *c, const campaign_failure *f);

/* Adds a group as a summary lists it: count failures, lowest its lowest. */
void campaign_add_group(campaign *c, const campaign_group *g);

/* The detail's first line split into its place and its masked message. */
void campaign_key(const char *detail, char *where, size_t wcap, char *message, size_t mcap);

/* Sorts the groups (largest first, then scenario, then lowest seed) and
 * the kept failures (scenario, seed): the order every printout takes. */
void campaign_sort(campaign *c);

/* "SCN: N runs, F failed, S s (R runs/s)" then each group with its count,
 * lowest seed and replay command. */
void campaign_print(campaign *c);

/* Only the groups (nothing if no run failed). */
void campaign_print_groups(campaign *c);

/* The summary as JSON (campaign_json.c), to path. 0 or -errno. */
int campaign_write_json(campaign *c, const char *path);

/* One failure as a JSON object on one line (failures.jsonl), with the
 * path of its replay file if replay is not NULL. */
void campaign_put_failure(FILE *f, const campaign_failure *x, const char *replay);

/* Reads the summary in path into a fresh *out (campaign_init'd here). 0,
 * -errno, or -EINVAL for a file that is not such a summary. Unknown keys
 * are skipped, whatever their value. */
int campaign_read_json(campaign *out, const char *path);

/* Adds summary s (its runs, seconds, tallies, groups, failures) to c. */
void campaign_merge(campaign *c, const campaign *s);

/* JUnit XML (campaign_junit.c): a test suite for the campaign, a test case
 * per scenario, a <failure> per group with its replay command. extra (may
 * be NULL): the text of one more failing test case, "shards" (a merge's
 * missing shards). 0 or -errno. */
int campaign_write_junit(campaign *c, const char *path, const char *extra);

#endif
