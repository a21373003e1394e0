/*
 * UDP on channels (udp.c): each datagram read becomes an sh_datagram
 * message that enters the pipeline at its head; an sh_datagram that
 * reaches the head on the way out is sent at once. The public call,
 * sh_udp_open, is in <stackhouse/net.h>. Nothing else of the core calls
 * this module by name: its channels reach it through their ops
 * (channel.h).
 */
#ifndef SH_UDP_H
#define SH_UDP_H

#include <stackhouse/net.h>

#endif
