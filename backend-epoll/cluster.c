/*
 * <stackhouse/cluster.h> on the epoll backend. Nodes are simulated
 * systems: in a process of its own a node program is a process, and what
 * the simulator does to nodes (crash, cut, drift) a real cluster's
 * operator or launcher does to processes. Every call says so with
 * -ENOTSUP; sh_node_self says NULL (no simulator).
 */
#include <errno.h>

#include <stackhouse/cluster.h>

int sh_node_add(const sh_node_spec *spec) { return (void)spec, -ENOTSUP; }
int sh_node_crash(const char *name) { return (void)name, -ENOTSUP; }
int sh_node_stop(const char *name) { return (void)name, -ENOTSUP; }
int sh_node_restart(const char *name, int64_t delay_ms, unsigned flags) {
  return (void)name, (void)delay_ms, (void)flags, -ENOTSUP;
}
int sh_node_up(const char *name) { return (void)name, -ENOTSUP; }
int sh_node_cut(const char *from, const char *to) { return (void)from, (void)to, -ENOTSUP; }
int sh_node_heal(const char *from, const char *to) { return (void)from, (void)to, -ENOTSUP; }
void sh_node_heal_all(void) {}
int sh_node_is_cut(const char *from, const char *to) { return (void)from, (void)to, -ENOTSUP; }
int sh_node_calm(void) { return -ENOTSUP; }
int sh_node_stop_all(void) { return -ENOTSUP; }
int sh_node_drift(const char *name, int32_t ppm) { return (void)name, (void)ppm, -ENOTSUP; }
int sh_node_jump(const char *name, int64_t delta_ms) {
  return (void)name, (void)delta_ms, -ENOTSUP;
}
int sh_node_act_now(const sh_node_act *act) { return (void)act, -ENOTSUP; }
int sh_node_act_at(int64_t at_ms, const sh_node_act *act) {
  return (void)at_ms, (void)act, -ENOTSUP;
}
int sh_node_persist(const void *data, size_t len) { return (void)data, (void)len, -ENOTSUP; }
int64_t sh_node_recall(void *buf, size_t cap) { return (void)buf, (void)cap, -ENOTSUP; }
const char *sh_node_self(void) { return NULL; }
int sh_node_life(const char *name, uint32_t boot, uint64_t *began_ns, uint64_t *ended_ns) {
  return (void)name, (void)boot, (void)began_ns, (void)ended_ns, -ENOTSUP;
}
int sh_node_stats_get(const char *name, sh_node_stats *out) {
  return (void)name, (void)out, -ENOTSUP;
}
