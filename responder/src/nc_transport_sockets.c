/* netchar-responder: the transport seam (nc_transport.h) on BSD sockets and select(): POSIX
 * systems, and lwIP's socket API (an RTOS, or lwIP over TAP through nc_lwip_sockets.h). A
 * handle is the socket's descriptor; every socket is non-blocking. Only the calls lwIP offers
 * are used (docs/embedded.md, "Design"). */
#include "nc_transport.h"

#include <string.h>

#if !NC_TRANSPORT_RAW

/* A peer that resets must not raise SIGPIPE where the stack has it. lwIP's sockets.h defines
 * MSG_NOSIGNAL but marks it unimplemented (there are no signals): not passed there. */
#if defined(MSG_NOSIGNAL) && !defined(NC_PLATFORM_LWIP)
#define SEND_FLAGS MSG_NOSIGNAL
#else
#define SEND_FLAGS 0
#endif

/* What this turn waits for, and what the wait found. */
static struct {
    fd_set want_rd, want_wr, rd, wr;
    int maxfd;
    int fresh; /* want_* are cleared */
} W;

static int would_block(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* A socket of `type` bound to *port (SO_REUSEADDR for TCP), non-blocking, *port its number. */
static int open_bound(int type, uint16_t *port)
{
    nc_addr a;
    socklen_t len = sizeof a;
    int one = 1, fd = (int)socket(NC_AF, type, 0);
    if (fd < 0)
        return -1;
    NC_DUAL_STACK(fd);
    if (type == SOCK_STREAM)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, (const char *)&one, sizeof one);
    memset(&a, 0, sizeof a);
    NC_ADDR_SET_LEN(&a);
    NC_ADDR_ANY(&a, *port);
    if (fd >= FD_SETSIZE || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        nc_close(fd);
        return -1;
    }
    *port = ntohs(NC_ADDR_PORT(&a));
    nc_plat_set_nonblocking(fd);
    return fd;
}

int nc_tr_tcp_listen(uint16_t *port, int backlog)
{
    int fd = open_bound(SOCK_STREAM, port);
    if (fd >= 0 && listen(fd, backlog) != 0) {
        nc_close(fd);
        return -1;
    }
    return fd;
}

int nc_tr_udp_open(uint16_t *port)
{
    int fd = open_bound(SOCK_DGRAM, port);
    if (fd >= 0)
        nc_plat_tune_udp(fd);
    return fd;
}

int nc_tr_accept(int lh, nc_addr *peer)
{
    socklen_t len = sizeof *peer;
    int fd;
    if (lh < 0)
        return -1;
    fd = (int)accept(lh, (struct sockaddr *)peer, &len);
    if (fd < 0)
        return -1;
    if (fd >= FD_SETSIZE || !NC_ADDR_OK(peer, len)) {
        nc_close(fd);
        return -1;
    }
    nc_plat_set_nonblocking(fd);
    return fd;
}

long nc_tr_recv(int h, void *buf, size_t cap)
{
    long n;
    if (h < 0)
        return NC_TR_FAIL;
    n = (long)recv(h, (char *)buf, cap, 0);
    if (n >= 0)
        return n;
    return would_block() ? NC_TR_AGAIN : NC_TR_FAIL;
}

long nc_tr_drop(int h, void *scratch, size_t cap)
{
    return nc_tr_recv(h, scratch, cap);
}

long nc_tr_send(int h, const void *buf, size_t n)
{
    long w;
    if (h < 0)
        return NC_TR_FAIL;
    w = (long)send(h, (const char *)buf, n, SEND_FLAGS);
    if (w > 0)
        return w;
    return w < 0 && !would_block() ? NC_TR_FAIL : NC_TR_AGAIN;
}

void nc_tr_shutdown(int h)
{
    if (h >= 0)
        shutdown(h, SHUT_WR);
}

void nc_tr_nodelay(int h)
{
    int one = 1;
    if (h >= 0)
        setsockopt(h, IPPROTO_TCP, TCP_NODELAY, (const char *)&one, sizeof one);
}

void nc_tr_close(int h)
{
    if (h >= 0)
        nc_close(h);
}

void nc_tr_abort(int h)
{
    nc_tr_close(h);
}

long nc_tr_recvfrom(int h, void *buf, size_t cap, nc_addr *from)
{
    if (h < 0)
        return NC_TR_FAIL;
    for (;;) {
        socklen_t len = sizeof *from;
        long n = (long)recvfrom(h, (char *)buf, cap, 0, (struct sockaddr *)from, &len);
        if (n < 0)
            return would_block() ? NC_TR_AGAIN : NC_TR_FAIL;
        if (NC_ADDR_OK(from, len))
            return n;
        /* Another address family on this socket: not a peer the roles can answer. */
    }
}

long nc_tr_sendto(int h, const void *buf, size_t n, const nc_addr *to)
{
    long w;
    if (h < 0)
        return NC_TR_FAIL;
    w = (long)sendto(h, (const char *)buf, n, 0, (const struct sockaddr *)to, sizeof *to);
    if (w >= 0)
        return w;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return NC_TR_AGAIN;
#ifdef ENOBUFS
    if (errno == ENOBUFS)
        return NC_TR_NOBUFS;
#endif
    return NC_TR_FAIL;
}

void nc_tr_watch(int h, unsigned ev)
{
    if (!W.fresh) {
        FD_ZERO(&W.want_rd);
        FD_ZERO(&W.want_wr);
        W.maxfd = -1;
        W.fresh = 1;
    }
    if (h < 0 || !ev)
        return;
    if (ev & NC_TR_RD)
        FD_SET(h, &W.want_rd);
    if (ev & NC_TR_WR)
        FD_SET(h, &W.want_wr);
    if (h > W.maxfd)
        W.maxfd = h;
}

int nc_tr_wait(uint64_t max_ns)
{
    struct timeval tv;
    int r;
    nc_tr_watch(-1, 0); /* a turn that watched nothing still sleeps */
    W.rd = W.want_rd;
    W.wr = W.want_wr;
    W.fresh = 0;
    tv.tv_sec = (long)(max_ns / 1000000000u);
    tv.tv_usec = (long)(max_ns % 1000000000u / 1000);
    r = select(W.maxfd + 1, &W.rd, &W.wr, NULL, &tv);
    if (r < 0) {
        FD_ZERO(&W.rd);
        FD_ZERO(&W.wr);
        return -1;
    }
    return 0;
}

unsigned nc_tr_ready(int h)
{
    if (h < 0)
        return 0;
    return (FD_ISSET(h, &W.rd) ? NC_TR_RD : 0u) | (FD_ISSET(h, &W.wr) ? NC_TR_WR : 0u);
}

#if NC_TASK_PER_CONNECTION
int nc_tr_wait_one(int h, unsigned ev, uint32_t timeout_ms)
{
    fd_set set;
    struct timeval tv;
    FD_ZERO(&set);
    FD_SET(h, &set);
    tv.tv_sec = (long)(timeout_ms / 1000);
    tv.tv_usec = (long)(timeout_ms % 1000 * 1000);
    return select(h + 1, ev & NC_TR_RD ? &set : NULL, ev & NC_TR_WR ? &set : NULL, NULL, &tv) > 0;
}
#endif

#endif /* !NC_TRANSPORT_RAW */
