/* netchar-responder: the platform layer, chosen at compile time.
 *
 * A port provides the functions below (platform/posix.c is the hosted one) and, for the
 * sockets transport (src/nc_transport_sockets.c, the only file that makes socket calls), a
 * socket header that declares the BSD socket calls it uses: socket, bind, listen, accept,
 * recv, send, recvfrom, sendto, shutdown, close, select, getsockname, setsockopt
 * (SO_REUSEADDR, TCP_NODELAY only), and non-blocking mode through nc_plat_set_nonblocking.
 * lwIP's <lwip/sockets.h> with LWIP_COMPAT_SOCKETS offers all of them. A bare-metal port on
 * lwIP's raw API (NC_PLATFORM_LWIP_RAW) needs no socket header: src/nc_transport_raw.c.
 */
#ifndef NC_PLATFORM_H
#define NC_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include "nc_config.h"

/* The transport (src/nc_transport.h): BSD sockets (0), or lwIP's raw API without an OS
 * (NC_PLATFORM_LWIP_RAW: src/nc_transport_raw.c, a bare-metal board). */
#if defined(NC_PLATFORM_LWIP_RAW)
#define NC_TRANSPORT_RAW 1
#else
#define NC_TRANSPORT_RAW 0
#endif

#if NC_TRANSPORT_RAW
/* No socket headers: lwIP's byte order functions, and an address of the sockaddr_in shape, or
 * with lwIP's IPv6 (LWIP_IPV6) of the sockaddr_in6 shape, IPv4 peers as IPv4-mapped addresses
 * as on a dual-stack socket (the fields the NC_ADDR_ macros below use), that the raw
 * transport fills in. */
#include "lwip/def.h"
#include "lwip/opt.h"
struct nc_in_addr {
    uint32_t s_addr;
};
struct nc_sockaddr_in {
    uint8_t sin_len, sin_family;
    uint16_t sin_port;
    struct nc_in_addr sin_addr;
};
struct nc_in6_addr {
    uint8_t s6_addr[16];
};
struct nc_sockaddr_in6 {
    uint8_t sin6_len, sin6_family;
    uint16_t sin6_port;
    struct nc_in6_addr sin6_addr;
};
#define AF_INET 2
#define AF_INET6 10
#define INADDR_ANY 0u
#define NC_HAVE_SIN_LEN 1
#ifndef NC_HAVE_IPV6
#define NC_HAVE_IPV6 LWIP_IPV6
#endif
#if NC_HAVE_IPV6 && !LWIP_IPV6
#error "NC_HAVE_IPV6 on the raw transport needs lwIP built with LWIP_IPV6"
#endif
#elif defined(NC_PLATFORM_LWIP)
#include "lwip/sockets.h"
#include "lwip/errno.h"
#define NC_HAVE_SIN_LEN 1
#define nc_close lwip_close
#else
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>
#define nc_close close
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__NetBSD__) || defined(__OpenBSD__)
#define NC_HAVE_SIN_LEN 1
#else
#define NC_HAVE_SIN_LEN 0
#endif
#endif

/* A hosted port on another TCP/IP stack (ports/lwip-tap: lwIP in user space) names a header
 * that maps the socket calls above onto that stack's; it comes after the system headers so
 * their declarations keep their own names. */
#if defined(NC_PORT_SOCKETS_HEADER)
#include NC_PORT_SOCKETS_HEADER
#endif

/* Monotonic time in nanoseconds since any fixed point. Required. */
uint64_t nc_plat_now_ns(void);

/* Fills buf with n unpredictable bytes (cookies, the UDP challenge key). Required. A target
 * without a hardware RNG mixes what it has (a free-running timer, ADC noise). */
void nc_plat_random(uint8_t *buf, size_t n);

#if !NC_TRANSPORT_RAW
/* Puts a socket in non-blocking mode; 0 on success. Required by the sockets transport. */
int nc_plat_set_nonblocking(int fd);
#endif

/* Describes the machine for `accepted.host`: writes NUL-terminated strings of at most
 * `cap` bytes each. Required (constant strings are fine). */
void nc_plat_host_info(char *hostname, char *kernel, char *cpu_model, size_t cap, uint32_t *cores);

#if !NC_TRANSPORT_RAW
/* Called once for each UDP socket after it is bound: a host may enlarge its buffers here (a
 * receive queue of a few datagrams loses test traffic whenever the responder is not
 * scheduled). Required by the sockets transport (may do nothing; lwIP sizes its queues in
 * lwipopts.h). */
void nc_plat_tune_udp(int fd);
#endif

/* One line to the operator's log (a UART, stderr). Required (may do nothing). */
void nc_plat_log(const char *line);

#if NC_TRANSPORT_RAW
/* The raw transport (src/nc_transport_raw.c) runs the stack in its wait: this hands lwIP the
 * frames the network interface received since the last call (netif->input, at most a few),
 * and returns how many. Required by that transport. */
int nc_plat_net_poll(void);
#endif

#if NC_HAVE_CPU_TIMES
/* CPU time the responder used so far, user and system, in microseconds. Optional: without
 * it the server's CPU figures are reported as 0. */
void nc_plat_cpu_times(uint64_t *user_us, uint64_t *system_us);
#endif

#if NC_HAVE_HOST_CPU
/* The whole machine's CPU time so far, in any unit (Linux: /proc/stat jiffies): busy (user,
 * nice, system, irq, softirq, steal), softirq alone, and all of it. Optional: without it the
 * host_busy_pct and host_softirq_pct figures are 0. */
void nc_plat_host_cpu(uint64_t *busy, uint64_t *softirq, uint64_t *total);
#endif

#if NC_HAVE_IDLE_COUNTER
/* The eCos way of measuring idle headroom: a counter the idle task increments. The
 * responder reads it at the start and end of a test; `nc_plat_idle_per_second` is the
 * count per second of an unloaded CPU (calibrated by the port). Optional: without it
 * --idle is refused. */
uint64_t nc_plat_idle_count(void);
uint64_t nc_plat_idle_per_second(void);
#endif

#if NC_HAVE_BACKGROUND_LOAD
/* Starts (pct > 0) or stops (pct == 0) a background load of `pct` percent of the CPU, the
 * eCos nc_test way; returns the load achieved when stopping. Optional: without it
 * --server-load is refused. */
double nc_plat_background_load(double pct);
#endif

#if NC_HAVE_TARGET_COUNTERS
/* The target's own counters: lwIP's statistics (lwip_stats), a driver's drops, the
 * transport's. nc_plat_counters writes their values now into v (at most
 * NC_TARGET_COUNTERS_MAX, 32 bits each and wrapping: a test moves each by less than 2^32)
 * and returns how many; nc_plat_counter_name(i) is the i-th one's name, letters, digits and
 * '_' only. The responder reports how much each moved over a test: in its results message
 * ("target", the ones that moved) and in its log. Optional. */
#define NC_TARGET_COUNTERS_MAX 32
unsigned nc_plat_counters(uint32_t *v);
const char *nc_plat_counter_name(unsigned i);
#endif

#if NC_HAVE_TCP_SINK
/* A TCP receiver counted below the socket layer. Optional: without it (the default) a
 * receiving stream's bytes are read with recv() into the data buffer. A stack whose socket
 * layer costs a thread hand-off and a copy per segment (lwIP: the tcpip thread posts each
 * pbuf to the socket's mailbox, recv copies it out) can count them where they arrive instead,
 * as the stack's own test servers do (lwIP: a tcp_recv callback that adds the pbuf's length,
 * opens the window with tcp_recved and frees it).
 *
 * nc_plat_tcp_sink_start(fd): from now on, the data arriving on connected TCP socket fd is
 * counted and discarded by the port; returns a handle (>= 0), or -1 when it cannot (the
 * responder then reads fd as usual). Data that arrived before the call stays readable with
 * recv(), and the end of the stream (the peer's FIN) and errors still reach the socket: it
 * becomes readable and recv() returns 0 or fails, as without the sink.
 * nc_plat_tcp_sink_take(h, &last_ns): the bytes counted since the previous take, and in
 * last_ns the nc_plat_now_ns() time of the latest arrival (untouched when none arrived).
 * nc_plat_tcp_sink_stop(h): ends counting (before the socket is closed); h is free again. */
int nc_plat_tcp_sink_start(int fd);
uint64_t nc_plat_tcp_sink_take(int sink, uint64_t *last_ns);
void nc_plat_tcp_sink_stop(int sink);
#endif

/* Addresses. NC_HAVE_IPV6 = 1 (hosted builds: the host Makefile targets set it; the raw
 * transport when lwIP has LWIP_IPV6): the responder listens on dual-stack sockets (pcbs), one
 * per protocol and port, and IPv4 peers appear as IPv4-mapped IPv6 addresses; 0 (the default,
 * lwIP's sockets targets): IPv4 only. The code handles a
 * peer through nc_addr and these macros only. */
#ifndef NC_HAVE_IPV6
#define NC_HAVE_IPV6 0
#endif
#if NC_HAVE_IPV6 && NC_TRANSPORT_RAW
typedef struct nc_sockaddr_in6 nc_addr;
#elif NC_HAVE_IPV6
typedef struct sockaddr_in6 nc_addr;
#endif
#if NC_HAVE_IPV6
#define NC_AF AF_INET6
#define NC_ADDR_PORT(a) ((a)->sin6_port)
#define NC_ADDR_IP(a) ((const void *)&(a)->sin6_addr)
#define NC_ADDR_IP_LEN 16
#define NC_ADDR_OK(a, len) ((len) >= (socklen_t)sizeof(nc_addr) && (a)->sin6_family == AF_INET6)
#define NC_ADDR_ANY(a, port) ((a)->sin6_family = AF_INET6, (a)->sin6_port = htons(port))
#elif NC_TRANSPORT_RAW
typedef struct nc_sockaddr_in nc_addr;
#define NC_AF AF_INET
#define NC_ADDR_PORT(a) ((a)->sin_port)
#define NC_ADDR_IP(a) ((const void *)&(a)->sin_addr)
#define NC_ADDR_IP_LEN 4
#define NC_ADDR_ANY(a, port) ((a)->sin_family = AF_INET, (a)->sin_port = htons(port), \
                              (a)->sin_addr.s_addr = htonl(INADDR_ANY))
#else
typedef struct sockaddr_in nc_addr;
#define NC_AF AF_INET
#define NC_ADDR_PORT(a) ((a)->sin_port)
#define NC_ADDR_IP(a) ((const void *)&(a)->sin_addr)
#define NC_ADDR_IP_LEN 4
#define NC_ADDR_OK(a, len) ((len) >= (socklen_t)sizeof(nc_addr) && (a)->sin_family == AF_INET)
#define NC_ADDR_ANY(a, port) ((a)->sin_family = AF_INET, (a)->sin_port = htons(port), \
                              (a)->sin_addr.s_addr = htonl(INADDR_ANY))
#endif
#if NC_HAVE_IPV6
/* IPv4 clients too, on the one socket (Linux's default, not every system's). */
#define NC_DUAL_STACK(fd)                                                                         \
    do {                                                                                          \
        int nc_off_ = 0;                                                                          \
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, (const char *)&nc_off_, sizeof nc_off_);        \
    } while (0)
#if NC_HAVE_SIN_LEN
#define NC_ADDR_SET_LEN(a) ((a)->sin6_len = sizeof *(a))
#endif
#else
#define NC_DUAL_STACK(fd) ((void)(fd))
#if NC_HAVE_SIN_LEN
#define NC_ADDR_SET_LEN(a) ((a)->sin_len = sizeof *(a))
#endif
#endif
#if !NC_HAVE_SIN_LEN
#define NC_ADDR_SET_LEN(a) ((void)(a))
#endif
/* The same host (any port), and the same host and port. */
#define NC_SAME_IP(a, b) (memcmp(NC_ADDR_IP(a), NC_ADDR_IP(b), NC_ADDR_IP_LEN) == 0)
#define NC_SAME_ADDR(a, b) (NC_SAME_IP(a, b) && NC_ADDR_PORT(a) == NC_ADDR_PORT(b))


#if NC_TASK_PER_CONNECTION
/* Starts fn(arg) as a task (thread) of its own, which returns (NULL) when done and is not
 * waited for; 0 on success. Required by the task-per-connection build only; nothing is
 * allocated by the responder for it (the task's state is a static slot). */
int nc_plat_task_start(void *(*fn)(void *), void *arg);
#endif

#endif
