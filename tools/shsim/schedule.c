/*
 * Schedule files (schedule.h).
 */
#include "schedule.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SCHEDULE_MAX (1u << 22) /* choices in a schedule file */

static const char head[] = "# stackhouse schedule: step fiber-or-fault kind (0 preempt, 1 forced, 2 fault)\n";

/* Decimal digits of v at the end of buf[0..24): returns the first. */
static char *u64_digits(uint64_t v, char *end) {
  do {
    *--end = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return end;
}

void schedule_record(const char *path) {
  if (path == NULL) return;
  const sh_sim_choice *c;
  size_t n = sh_sim_schedule(&c);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, head, sizeof(head) - 1);
  for (size_t i = 0; i < n && w >= 0; i++) {
    char line[48], *end = line + sizeof(line);
    *--end = '\n';
    char *p = u64_digits(c[i].kind, end);
    *--p = ' ';
    p = u64_digits(c[i].to, p);
    *--p = ' ';
    p = u64_digits(c[i].step, p);
    w = write(fd, p, (size_t)(line + sizeof(line) - p));
  }
  close(fd);
}

int schedule_load(const char *path, sh_sim_choice **out, size_t *n_out) {
  FILE *f = fopen(path, "re");
  if (f == NULL) return -errno;
  size_t n = 0, cap = 0;
  sh_sim_choice *v = NULL;
  char line[128];
  int rc = 0;
  while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
    if (line[0] == '#' || line[0] == '\n') continue;
    unsigned long long step, to, kind;
    if (sscanf(line, "%llu %llu %llu", &step, &to, &kind) != 3 || to > UINT32_MAX ||
        kind > SH_SIM_FAULT || n == SCHEDULE_MAX) {
      rc = -EINVAL;
      break;
    }
    if (n == cap) {
      cap = cap == 0 ? 256 : cap * 2;
      sh_sim_choice *nv = realloc(v, cap * sizeof(*v));
      if (nv == NULL) {
        rc = -ENOMEM;
        break;
      }
      v = nv;
    }
    v[n++] = (sh_sim_choice){.step = step, .to = (uint32_t)to, .kind = (uint32_t)kind};
  }
  fclose(f);
  if (rc != 0) {
    free(v);
    return rc;
  }
  *out = v;
  *n_out = n;
  return 0;
}

int schedule_save(const char *path, const sh_sim_choice *c, size_t n, const char *about) {
  FILE *f = fopen(path, "we");
  if (f == NULL) return -errno;
  fprintf(f, "%s# %s\n", head, about);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%llu %u %u\n", (unsigned long long)c[i].step, c[i].to, c[i].kind);
  return fclose(f) == 0 ? 0 : -errno;
}

