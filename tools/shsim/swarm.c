/*
 * The options a seed draws (swarm.h).
 */
#include "swarm.h"

#include <string.h>

/* Apart from the simulator's own use of the seed: its schedule stream must
 * not be correlated with the options drawn here. */
#define SWARM_SALT 0x5357524d464c4f57ull
/* Some scenarios need a second worker (one waits while another runs): with
 * one they fail by design, not by a bug. */
#define SWARM_WORKERS_MIN 2
#define SWARM_WORKERS_MAX 4
#define SWARM_PERMILLE_MAX 500 /* a switch at every other yield point, at most */
#define SWARM_PCT_DEPTH_MAX 6
#define SWARM_PCT_STEPS_MAX 50000
#define SWARM_MSGPCT_DELIVERIES_MAX 2000

/* splitmix64: a fixed function of its state, whatever the libc. */
static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A seed's fault spec: the campaign's, each rate scaled by a factor the
 * seed draws (0 turns the entry off), at most 1. Kept until the next draw. */
static char swarm_faults[512];

typedef struct swarm_scale {
  uint64_t *x;
  size_t len;
} swarm_scale;

static uint64_t draw(uint64_t *x, uint64_t lo, uint64_t hi);

static int scale_entry(void *ctx, const char *pattern, double p) {
  static const double factors[] = {0, 0.1, 1, 10};
  swarm_scale *sc = ctx;
  double q = p * factors[draw(sc->x, 0, 3)];
  size_t room = sizeof(swarm_faults) - sc->len;
  int n = snprintf(swarm_faults + sc->len, room, "%s%s:%.6g", sc->len > 0 ? "," : "", pattern,
                   q < 1 ? q : 1);
  if (n < 0 || (size_t)n >= room) return -1;
  sc->len += (size_t)n;
  return 0;
}

/* In [lo, hi]. The modulo's bias is of no matter for a configuration. */
static uint64_t draw(uint64_t *x, uint64_t lo, uint64_t hi) {
  return lo + splitmix(x) % (hi - lo + 1);
}

/* Without a campaign's faults, half the seeds of a scenario that uses the
 * network (SH_SCN_NET) get network weather: the points a correct program
 * copes with (sh_sim_faults_benign), which excuse no check. Others draw
 * the same number and get none: their runs would be the same, only longer
 * to replay, and their replay commands would name faults that never fire. */
static void draw_weather(const sh_scenario *sc, uint64_t *x, sh_sim_options *o) {
  static const char *const levels[] = {
      "sh/net/delay:0.01,sh/net/partition:0.001,sh/net/read:0.05,sh/net/write:0.05,"
      "sh/net/drop:0.01,sh/net/dup:0.01,sh/net/reorder:0.01",
      "sh/net/delay:0.05,sh/net/partition:0.01,sh/net/read:0.3,sh/net/write:0.3,"
      "sh/net/drop:0.2,sh/net/dup:0.2,sh/net/reorder:0.2",
  };
  uint64_t k = draw(x, 0, 3);
  if (k < 2 && (sc->flags & SH_SCN_NET)) o->faults = levels[k];
}

/* Without a campaign's faults, a quarter of the seeds also get the
 * runtime's own fault points (every sh/ point: an allocation that fails, a
 * refused wake, an accept without a descriptor, a reset), at a drawn rate,
 * behind the weather's entries (the first entry naming a point decides):
 * the error paths, which a run without faults never takes, as
 * FoundationDB's swarm runs turn BUGGIFY on. A scenario's check that fails
 * after such a fault fired is excused (scenario.h); a crash, a hang, a
 * model violation, a leak or a count that does not add up is not. */
static void draw_runtime_faults(uint64_t *x, sh_sim_options *o) {
  static const char *const rates[] = {"0.001", "0.01"};
  uint64_t k = draw(x, 0, 7);
  if (k >= 2) return;
  const char *weather = o->faults != NULL ? o->faults : "";
  int n = snprintf(swarm_faults, sizeof(swarm_faults), "%s%ssh/*:%s", weather,
                   *weather != '\0' ? "," : "", rates[k]);
  if (n > 0 && (size_t)n < sizeof(swarm_faults)) o->faults = swarm_faults;
}

void swarm_draw(const sh_scenario *sc, uint64_t seed, sh_sim_options *o, uint32_t *workers) {
  uint64_t x = seed ^ SWARM_SALT;
  /* Every strategy (in tenths: random 3, pct 3, msgpct 2, delay 1, none 1);
   * none explores least (one schedule per seed and worker count): rarest. */
  static const sh_sim_strategy by_tenth[10] = {
      SH_SIM_RANDOM, SH_SIM_RANDOM, SH_SIM_RANDOM, SH_SIM_PCT,   SH_SIM_PCT,
      SH_SIM_PCT,    SH_SIM_MSGPCT, SH_SIM_MSGPCT, SH_SIM_DELAY, SH_SIM_NONE};
  o->strategy = by_tenth[draw(&x, 0, 9)];
  *workers = (uint32_t)draw(&x, SWARM_WORKERS_MIN, SWARM_WORKERS_MAX);
  /* A scenario that declares its workers is written for that many (its
   * checks may count on them): the draw is kept, so that the others stay. */
  if (sc->workers != 0) *workers = sc->workers;
  if (o->strategy == SH_SIM_RANDOM) o->switch_permille = (uint32_t)draw(&x, 1, SWARM_PERMILLE_MAX);
  if (o->strategy == SH_SIM_PCT || o->strategy == SH_SIM_DELAY) {
    o->pct_depth = (uint32_t)draw(&x, 1, SWARM_PCT_DEPTH_MAX);
    o->pct_steps = draw(&x, 100, SWARM_PCT_STEPS_MAX);
  }
  /* msgpct's change points count deliveries, a run's hundreds to thousands. */
  if (o->strategy == SH_SIM_MSGPCT) {
    o->pct_depth = (uint32_t)draw(&x, 1, SWARM_PCT_DEPTH_MAX);
    o->pct_steps = draw(&x, 10, SWARM_MSGPCT_DELIVERIES_MAX);
  }
  /* Weak memory: off for a third of the seeds, where runs are faster. */
  static const uint32_t stale_rates[] = {0, 250, 750};
  o->stale_permille = stale_rates[draw(&x, 0, 2)];
  /* A scheduling point at every atomic operation: every other seed. */
  o->atomic_points = (uint32_t)draw(&x, 0, 1);
  /* Faults last: a seed draws the same configuration with them as without. */
  if (o->faults == NULL) {
    draw_weather(sc, &x, o);
    draw_runtime_faults(&x, o);
    return;
  }
  swarm_scale scale = {&x, 0};
  /* A spec too long to scale runs as given. */
  if (sh_sim_faults_parse(o->faults, scale_entry, &scale, NULL) == 0) o->faults = swarm_faults;
}

void swarm_fprint_command(FILE *f, const args *a, const char *name, uint64_t seed) {
  swarm_fprint_as(f, a, "run", ARGS_CMD_RUN, name, seed);
}

void swarm_fprint_as(FILE *f, const args *a, const char *cmd, unsigned mask, const char *name,
                     uint64_t seed) {
  args drawn = *a;
  uint32_t workers;
  swarm_draw(sh_scenario_find(name), seed, &drawn.sim, &workers);
  args_fprint_command(f, &drawn, cmd, name, seed, mask);
  fprintf(f, " --workers %u", workers);
  if (drawn.sim.strategy == SH_SIM_RANDOM) fprintf(f, " --switch-permille %u", drawn.sim.switch_permille);
  if (drawn.sim.strategy == SH_SIM_PCT || drawn.sim.strategy == SH_SIM_MSGPCT ||
      drawn.sim.strategy == SH_SIM_DELAY)
    fprintf(f, " --pct-depth %u --pct-steps %llu", drawn.sim.pct_depth,
            (unsigned long long)drawn.sim.pct_steps);
  if (drawn.sim.stale_permille != 0) fprintf(f, " --stale-permille %u", drawn.sim.stale_permille);
  if (drawn.sim.atomic_points != 0) fprintf(f, " --atomic-points 1");
}
