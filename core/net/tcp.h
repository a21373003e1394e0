/*
 * TCP on channels (tcp.c): the stream transport (reading into the read
 * buffer, writing from the write buffer, its watermarks, the end of stream,
 * shutdown) and connecting. A connect's channel gets tcp.c's own ops; a
 * server's connections (tcpserver.c) are made of the same parts, declared
 * here, with the server's close. The public calls are in <stackhouse/net.h>.
 */
#ifndef SH_TCP_H
#define SH_TCP_H

#include <stdint.h>

#include <stackhouse/net.h>

#include "net/channel.h"

/* A stream's parts of its channel's ops (channel.h). */
/* Readiness: a connect's end, or bytes to read and room to write. */
void sh_tcp_on_ready(sh_channel *ch, uint32_t bits);
/* The outermost leave's round: queued requests start (sh_chanflow_pump),
 * the end of stream is told, the write buffer flushed. */
void sh_tcp_deferred(sh_channel *ch);
/* The pipeline's head: bytes (sh_bytes) into the write buffer. */
int sh_tcp_to_head(void *owner, sh_msg *m);

#endif
