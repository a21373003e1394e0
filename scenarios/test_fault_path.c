/*
 * test_fault_path: a hidden test scenario whose bug is on an error path
 * only a fault takes, for the tests of `shsim fuzz`'s drawn faults.
 *
 * A spawner actor makes TFP_SPAWNS actors, one at a time, each with a
 * greeting made before the spawn; when the spawn fails it forgets the
 * greeting instead of freeing it, a leak of one pooled message, which the
 * shared invariant pool_outstanding == 0 reports (FAIL:invariant), faults
 * or not. A spawn fails only when a fault point fires (sh/system/house,
 * sh/house/slab, sh/pool/alloc...): every run without faults passes, so
 * only a campaign whose seeds draw the runtime's faults finds it.
 *
 * Hidden and simulator only; no `expect`: a plain run passes.
 */
#include <stackhouse/scenario.h>

#define TFP_SPAWNS 64

static sh_yield tfp_greeted(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static const sh_actor_class tfp_child_class = {
    .name = "tfp_child",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = tfp_greeted,
};

static sh_yield tfp_spawner(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  for (uint32_t i = 0; i < TFP_SPAWNS; i++) {
    sh_msg *hello = sh_scn_num_new(i); /* made first: the spawn may fail */
    const sh_addr *child;
    int rc = sh_scn_spawn(s, sh_actor_system(self), &tfp_child_class, i, 1, &child);
    if (rc != 0) continue; /* the bug: the greeting is forgotten, not freed */
    sh_scn_go *go = sh_msg_new(sh_scn_go, .n = i);
    sh_msg_free(hello);
    if (go != NULL) (void)sh_notice(child, &go->hdr); /* on an error the notice is freed */
  }
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class tfp_spawner_class = {
    .name = "tfp_spawner",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = tfp_spawner,
};

static int tfp_setup(sh_scn *s, sh_system *sys) {
  const sh_addr *a;
  int rc = sh_scn_spawn(s, sys, &tfp_spawner_class, 0, 1, &a);
  return rc == 0 ? sh_scn_kick(a) : rc;
}

static const sh_scenario test_fault_path = {
    .name = "test_fault_path",
    .summary = "must fail only with runtime faults: a failed spawn leaks a message",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .setup = tfp_setup,
};
SH_SCENARIO(test_fault_path);
