/*
 * A failover client as a process: the client's entry class and the
 * process's argv, handed to sh_run; its exit status is the client's
 * (failover.h: 0 served, 1 fencing violation, 2 usage, 3 gave up).
 */
#include "failover.h"

int main(int argc, char **argv) { return sh_run(NULL, &failover_client_class, argc, argv); }
