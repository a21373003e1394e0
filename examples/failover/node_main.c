/*
 * A failover node as a process: the node's entry class and the process's
 * argv, handed to sh_run (failover.h lists the flags). It runs until it is
 * killed; run_local.sh starts three of them and kills the primary.
 */
#include "failover.h"

int main(int argc, char **argv) { return sh_run(NULL, &failover_node_class, argc, argv); }
