/* netchar-responder on lwIP in user space (ports/lwip-tap): the responder's socket calls go to
 * lwIP's socket API instead of the kernel's. Debian's liblwip is built with the system's
 * socket types (LWIP_SOCKET_EXTERNAL_HEADERS: struct sockaddr, socklen_t and the SOL_/SO_/O_
 * constants are glibc's), so only the names change. It offers poll() but not select()
 * (LWIP_SOCKET_SELECT 0), hence nc_lwip_select. Included by nc_platform.h through
 * -DNC_PORT_SOCKETS_HEADER, after the system headers. */
#ifndef NC_LWIP_SOCKETS_H
#define NC_LWIP_SOCKETS_H

#include <sys/select.h>

#include "lwip/sockets.h"

#define socket lwip_socket
#define bind lwip_bind
#define listen lwip_listen
#define accept lwip_accept
#define getsockname lwip_getsockname
#define setsockopt lwip_setsockopt
#define recv lwip_recv
#define send lwip_send
#define recvfrom lwip_recvfrom
#define sendto lwip_sendto
#define shutdown lwip_shutdown
#define select nc_lwip_select
#undef nc_close
#define nc_close lwip_close

/* select() over lwip_poll: the same contract for the descriptors below nfds (lwIP's). */
int nc_lwip_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv);

#endif
