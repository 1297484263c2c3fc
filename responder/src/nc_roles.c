/* netchar-responder: the dispatch to the roles besides the native protocol, and what they
 * share (nc_roles.h). */
#include "nc_roles.h"

#include <string.h>

#include "nc_responder.h"
#include "nc_roles_impl.h"

static uint16_t ports[NC_SVC_COUNT] = {NC_NCTEST_PORT, NC_NCTEST_DATA_PORT, NC_NETIO_PORT, NC_ECHO_PORT,
                                       NC_DISCARD_PORT};
static uint16_t bound[NC_SVC_COUNT];
static uint8_t off[NC_SVC_COUNT];

void nc_roles_set_port(enum nc_service svc, uint16_t port)
{
    if ((unsigned)svc < NC_SVC_COUNT)
        ports[svc] = port;
}

void nc_roles_disable(enum nc_service svc)
{
    if ((unsigned)svc < NC_SVC_COUNT)
        off[svc] = 1;
}

void nc_roles_enable(enum nc_service svc)
{
    if ((unsigned)svc < NC_SVC_COUNT)
        off[svc] = 0;
}

int nc_roles_enabled(enum nc_service svc)
{
    return !off[svc];
}

uint16_t nc_roles_port(enum nc_service svc)
{
    return (unsigned)svc < NC_SVC_COUNT ? bound[svc] : 0;
}

uint16_t nc_roles_wanted(enum nc_service svc)
{
    return ports[svc];
}

void nc_roles_bound(enum nc_service svc, uint16_t port)
{
    bound[svc] = port;
}

void nc_roles_init(void)
{
#if NC_ROLE_NC_TEST
    nc_nctest_init();
#endif
#if NC_ROLE_NETIO
    nc_netio_init();
#endif
#if NC_ROLE_ECHO
    nc_svc_init();
#endif
}

void nc_roles_fdset(fd_set *rd, fd_set *wr, int *maxfd, uint64_t now, uint64_t *wait_ns)
{
    (void)rd, (void)wr, (void)maxfd, (void)now, (void)wait_ns;
#if NC_ROLE_NC_TEST
    nc_nctest_fdset(rd, wr, maxfd, now, wait_ns);
#endif
#if NC_ROLE_NETIO
    nc_netio_fdset(rd, wr, maxfd, now, wait_ns);
#endif
#if NC_ROLE_ECHO
    nc_svc_fdset(rd, wr, maxfd, now, wait_ns);
#endif
}

void nc_roles_io(fd_set *rd, fd_set *wr, uint64_t now)
{
    (void)rd, (void)wr, (void)now;
#if NC_ROLE_NC_TEST
    nc_nctest_io(rd, wr, now);
#endif
#if NC_ROLE_NETIO
    nc_netio_io(rd, wr, now);
#endif
#if NC_ROLE_ECHO
    nc_svc_io(rd, wr, now);
#endif
}

static int bind_one(int type, nc_addr *a)
{
    int one = 1, fd = (int)socket(NC_AF, type, 0);
    if (fd < 0)
        return -1;
    NC_DUAL_STACK(fd);
    if (type == SOCK_STREAM)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, (const char *)&one, sizeof one);
    if (fd >= FD_SETSIZE || bind(fd, (struct sockaddr *)a, sizeof *a) != 0 ||
        (type == SOCK_STREAM && listen(fd, 4) != 0)) {
        nc_close(fd);
        return -1;
    }
    nc_plat_set_nonblocking(fd);
    return fd;
}

int nc_role_listen(uint16_t *port, int *tfd, int *ufd)
{
    int attempt;
    /* Port 0: TCP picks the number and UDP takes the same; another process may hold that UDP
     * port, so a few numbers are tried. */
    for (attempt = 0; attempt < 8; attempt++) {
        nc_addr a;
        socklen_t len = sizeof a;
        int t = -1, u = -1;
        memset(&a, 0, sizeof a);
        NC_ADDR_SET_LEN(&a);
        NC_ADDR_ANY(&a, *port);
        if (tfd) {
            t = bind_one(SOCK_STREAM, &a);
            if (t < 0)
                return -1;
            if (getsockname(t, (struct sockaddr *)&a, &len) != 0) {
                nc_close(t);
                return -1;
            }
        }
        if (ufd) {
            u = bind_one(SOCK_DGRAM, &a);
            if (u >= 0 && !tfd && getsockname(u, (struct sockaddr *)&a, &len) != 0) {
                nc_close(u);
                u = -1;
            }
            if (u < 0) {
                if (t >= 0)
                    nc_close(t);
                if (*port != 0 || !tfd)
                    return -1;
                continue;
            }
            nc_plat_tune_udp(u);
        }
        if (tfd)
            *tfd = t;
        if (ufd)
            *ufd = u;
        *port = ntohs(NC_ADDR_PORT(&a));
        return 0;
    }
    return -1;
}

void nc_role_watch(int fd, fd_set *set, int *maxfd)
{
    if (fd < 0)
        return;
    FD_SET(fd, set);
    if (fd > *maxfd)
        *maxfd = fd;
}

int nc_role_would_block(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

static char *put_u64(char *p, char *end, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < 20);
    while (n > 0 && p < end)
        *p++ = tmp[--n];
    return p;
}

static char *put_str(char *p, char *end, const char *s)
{
    while (*s && p < end)
        *p++ = *s++;
    return p;
}

void nc_role_log(const char *what, const nc_addr *peer, const char *text, const uint64_t *nums,
                 int nnums)
{
    char line[200], *p = line, *end = line + sizeof line - 1;
    int k = 0;
    p = put_str(p, end, what);
    if (peer) {
        const uint8_t *ip = (const uint8_t *)NC_ADDR_IP(peer);
        int i, at = 0;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        p = put_str(p, end, " from ");
        if (NC_ADDR_IP_LEN == 16 && memcmp(ip, mapped, 12) != 0) {
            /* IPv6: [eight groups]:port, in hex, uncompressed. */
            static const char hex[] = "0123456789abcdef";
            p = put_str(p, end, "[");
            for (i = 0; i < 16 && p + 3 < end; i += 2) {
                int v = ip[i] << 8 | ip[i + 1], shift, started = 0;
                for (shift = 12; shift >= 0; shift -= 4)
                    if ((v >> shift & 15) || started || shift == 0) {
                        *p++ = hex[v >> shift & 15];
                        started = 1;
                    }
                p = put_str(p, end, i < 14 ? ":" : "]:");
            }
        } else {
            /* IPv4, or an IPv4-mapped address: dotted. */
            at = NC_ADDR_IP_LEN - 4;
            for (i = 0; i < 4; i++) {
                p = put_u64(p, end, ip[at + i]);
                p = put_str(p, end, i < 3 ? "." : ":");
            }
        }
        p = put_u64(p, end, ntohs(NC_ADDR_PORT(peer)));
    }
    p = put_str(p, end, ": ");
    for (; *text && p < end; text++) {
        if (*text == '#' && k < nnums)
            p = put_u64(p, end, nums[k++]);
        else
            *p++ = *text;
    }
    *p = 0;
    nc_plat_log(line);
}

#if !NC_ROLE_NATIVE
/* Without the native protocol the loop is the roles' alone. */
uint8_t nc_iobuf[NC_IO_BUF];

void nc_iobuf_used(void)
{
}

int nc_responder_init(uint16_t port)
{
    (void)port;
    nc_roles_init();
    return 0;
}

uint16_t nc_responder_port(void)
{
    return 0;
}

void nc_responder_poll(uint32_t max_wait_ms)
{
    fd_set rd, wr;
    int maxfd = -1;
    struct timeval tv;
    uint64_t now = nc_plat_now_ns(), wait_ns = (uint64_t)max_wait_ms * 1000000u;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    nc_roles_fdset(&rd, &wr, &maxfd, now, &wait_ns);
    tv.tv_sec = (long)(wait_ns / 1000000000u);
    tv.tv_usec = (long)(wait_ns % 1000000000u / 1000);
    if (select(maxfd + 1, &rd, &wr, NULL, &tv) < 0)
        return;
    nc_roles_io(&rd, &wr, nc_plat_now_ns());
}

void nc_responder_run(void)
{
    for (;;)
        nc_responder_poll(50);
}
#endif
