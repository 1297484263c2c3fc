/* netchar-responder on lwIP over TAP: the platform functions that touch sockets act on
 * lwIP's; the clock, entropy, log and CPU figures are platform/posix.c's (built with its two
 * socket functions renamed out of the way, see the Makefile), and host_info adds the stack. */
#include "../../nc_platform.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "lwip/init.h"

void nc_posix_host_info(char *hostname, char *kernel, char *cpu_model, size_t cap, uint32_t *cores);

int nc_plat_set_nonblocking(int fd)
{
    return lwip_fcntl(fd, F_SETFL, O_NONBLOCK);
}

void nc_plat_tune_udp(int fd)
{
    (void)fd; /* lwIP's UDP queue is its mailbox (sys_arch: 128 datagrams), not a buffer size */
}

void nc_plat_host_info(char *hostname, char *kernel, char *cpu_model, size_t cap, uint32_t *cores)
{
    char k[160];
    nc_posix_host_info(hostname, kernel, cpu_model, cap, cores);
    snprintf(k, sizeof k, "lwIP %s (TAP) on %s", LWIP_VERSION_STRING, kernel);
    snprintf(kernel, cap, "%s", k);
}

int nc_lwip_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
    struct pollfd p[NC_MAX_CONNS + 4];
    int n = 0, fd, i, ready, timeout_ms;
    (void)ex;
    for (fd = 0; fd < nfds; fd++) {
        short events = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) | (wr && FD_ISSET(fd, wr) ? POLLOUT : 0));
        if (!events)
            continue;
        if (n == (int)(sizeof p / sizeof p[0])) {
            errno = EINVAL;
            return -1;
        }
        p[n].fd = fd;
        p[n].events = events;
        p[n].revents = 0;
        n++;
    }
    timeout_ms = tv ? (int)(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000) : -1;
    ready = lwip_poll(p, (nfds_t)n, timeout_ms);
    if (ready < 0)
        return -1;
    if (rd)
        FD_ZERO(rd);
    if (wr)
        FD_ZERO(wr);
    if (ex)
        FD_ZERO(ex);
    ready = 0;
    for (i = 0; i < n; i++) {
        /* An error or hang-up shows as readable/writable, as select() reports it: the next
         * recv or send returns the error. */
        short bad = (short)(p[i].revents & (POLLERR | POLLHUP | POLLNVAL));
        int counted = 0;
        if (rd && (p[i].events & POLLIN) && (p[i].revents & (POLLIN | bad))) {
            FD_SET(p[i].fd, rd);
            counted = 1;
        }
        if (wr && (p[i].events & POLLOUT) && (p[i].revents & (POLLOUT | bad))) {
            FD_SET(p[i].fd, wr);
            counted = 1;
        }
        ready += counted;
    }
    return ready;
}
