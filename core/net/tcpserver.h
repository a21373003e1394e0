/*
 * TCP servers (tcpserver.c): an acceptor actor (an IO actor of the
 * runtime's own) owns the listening channel and hands each accepted socket,
 * as a notice of the runtime's own type, to one of the server's connection
 * actors in turn; taking that notice makes the socket a channel of the
 * receiving actor before its handlers see anything. The public calls are
 * in <stackhouse/net.h>. Nothing else of the core calls this module by
 * name: the listener's and the connections' channels reach it through
 * their ops (channel.h), the notice through its type (msg.h), and the
 * system frees the servers through the teardown that the first server
 * registers (system.h).
 */
#ifndef SH_TCPSERVER_H
#define SH_TCPSERVER_H

#include <stackhouse/net.h>

#endif
