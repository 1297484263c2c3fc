/* lwIP options of the Cortex-M4 size-check build (make arm): the socket API with select(),
 * IPv4, TCP and UDP, a handful of sockets. A firmware project uses its own lwipopts.h; the
 * responder needs LWIP_SOCKET, LWIP_SOCKET_SELECT, LWIP_TCP, LWIP_UDP and about
 * NC_MAX_CONNS + 2 sockets (MEMP_NUM_NETCONN). */
#ifndef LWIPOPTS_H
#define LWIPOPTS_H

#define NO_SYS 0
#define LWIP_SOCKET 1
#define LWIP_NETCONN 1
#define LWIP_COMPAT_SOCKETS 1
#define LWIP_POSIX_SOCKETS_IO_NAMES 0
#define LWIP_SOCKET_SELECT 1
#define LWIP_SOCKET_POLL 0
#define LWIP_IPV4 1
#define LWIP_IPV6 0
#define LWIP_TCP 1
#define LWIP_UDP 1
#define MEMP_NUM_NETCONN 10
#define LWIP_TIMEVAL_PRIVATE 0
#define LWIP_ERRNO_STDINCLUDE 1

#endif
