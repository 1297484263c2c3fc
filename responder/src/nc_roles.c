/* netchar-responder: the dispatch to the roles besides the native protocol, and what they
 * share (nc_roles.h). */
#include "nc_roles.h"

#include <string.h>

#include "nc_guard.h"
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
    /* The UDP ports (netio's UDP test is on the port after its TCP one). */
    nc_guard_own_port(svc == NC_SVC_NETIO ? (uint16_t)(port + 1) : port);
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

void nc_roles_watch(uint64_t now, uint64_t *wait_ns)
{
    (void)now, (void)wait_ns;
#if NC_ROLE_NC_TEST
    nc_nctest_watch(now, wait_ns);
#endif
#if NC_ROLE_NETIO
    nc_netio_watch(now, wait_ns);
#endif
#if NC_ROLE_ECHO
    nc_svc_watch(now, wait_ns);
#endif
}

void nc_roles_io(uint64_t now)
{
    (void)now;
#if NC_ROLE_NC_TEST
    nc_nctest_io(now);
#endif
#if NC_ROLE_NETIO
    nc_netio_io(now);
#endif
#if NC_ROLE_ECHO
    nc_svc_io(now);
#endif
}

int nc_role_listen(uint16_t *port, int *tfd, int *ufd)
{
    int attempt;
    /* Port 0: TCP picks the number and UDP takes the same; another process may hold that UDP
     * port, so a few numbers are tried. */
    for (attempt = 0; attempt < 8; attempt++) {
        uint16_t p = *port;
        int t = -1, u = -1;
        if (tfd) {
            t = nc_tr_tcp_listen(&p, 4);
            if (t < 0)
                return -1;
        }
        if (ufd) {
            u = nc_tr_udp_open(&p);
            if (u < 0) {
                nc_tr_close(t);
                if (*port != 0 || !tfd)
                    return -1;
                continue;
            }
        }
        if (tfd)
            *tfd = t;
        if (ufd)
            *ufd = u;
        *port = p;
        return 0;
    }
    return -1;
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

static int is_v6(const nc_addr *a)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return NC_ADDR_IP_LEN == 16 && memcmp(NC_ADDR_IP(a), mapped, 12) != 0;
}

/* A.B.C.D (an IPv4-mapped address too), or eight hex groups, uncompressed, in brackets when
 * a port follows. */
static char *put_ip(char *p, char *end, const nc_addr *a, int brackets)
{
    const uint8_t *ip = (const uint8_t *)NC_ADDR_IP(a);
    int i;
    if (is_v6(a)) {
        static const char hex[] = "0123456789abcdef";
        if (brackets)
            p = put_str(p, end, "[");
        for (i = 0; i < 16 && p + 3 < end; i += 2) {
            int v = ip[i] << 8 | ip[i + 1], shift, started = 0;
            for (shift = 12; shift >= 0; shift -= 4)
                if ((v >> shift & 15) || started || shift == 0) {
                    *p++ = hex[v >> shift & 15];
                    started = 1;
                }
            if (i < 14)
                p = put_str(p, end, ":");
        }
        return brackets ? put_str(p, end, "]") : p;
    }
    for (i = 0; i < 4; i++) {
        p = put_u64(p, end, ip[NC_ADDR_IP_LEN - 4 + i]);
        if (i < 3)
            p = put_str(p, end, ".");
    }
    return p;
}

/* TEXT into the line from p on, '#' standing for the next number, '@' for a's address and
 * '%' for a host's prefix length in its family (32, 128); then the line goes to the log. */
static void log_text(char *line, char *p, char *end, const char *text, const nc_addr *a, const uint64_t *nums,
                     int nnums)
{
    int k = 0;
    for (; *text && p < end; text++) {
        if (*text == '#' && k < nnums)
            p = put_u64(p, end, nums[k++]);
        else if (*text == '@' && a)
            p = put_ip(p, end, a, 0);
        else if (*text == '%' && a)
            p = put_u64(p, end, is_v6(a) ? 128 : 32);
        else
            *p++ = *text;
    }
    *p = 0;
    nc_plat_log(line);
}

void nc_role_log(const char *what, const nc_addr *peer, const char *text, const uint64_t *nums,
                 int nnums)
{
    char line[200], *p = line, *end = line + sizeof line - 1;
    p = put_str(p, end, what);
    if (peer) {
        p = put_str(p, end, " from ");
        p = put_ip(p, end, peer, 1);
        p = put_str(p, end, ":");
        p = put_u64(p, end, ntohs(NC_ADDR_PORT(peer)));
    }
    p = put_str(p, end, ": ");
    log_text(line, p, end, text, NULL, nums, nnums);
}

void nc_role_log_to(const char *what, const nc_addr *a, const char *text, uint64_t num)
{
    char line[256], *end = line + sizeof line - 1;
    log_text(line, put_str(line, end, what), end, text, a, &num, 1);
}

long nc_role_answer(const char *what, int fd, const void *buf, size_t len, uint64_t credit, const nc_addr *to,
                    uint64_t now)
{
    if (!nc_guard_may_answer(to, len, credit, now)) {
        if (nc_guard_first_refusal(to, NC_GUARD_BUDGET, now))
            nc_role_log_to(what, to,
                           ": answers to @ held back: outside " NC_ALLOW_HINT " an answer is never more bytes than "
                           "its address sent, and all such answers share # bytes/s (add " NC_ALLOW_HINT " @/%)",
                           NC_ANSWER_RATE);
        return 0;
    }
    return nc_tr_sendto(fd, buf, len, to);
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
    uint64_t now = nc_plat_now_ns(), wait_ns = (uint64_t)max_wait_ms * 1000000u;
    nc_roles_watch(now, &wait_ns);
    if (nc_tr_wait(wait_ns) != 0)
        return;
    now = nc_plat_now_ns();
    nc_roles_io(now);
    nc_guard_tick(now);
}

void nc_responder_run(void)
{
    for (;;)
        nc_responder_poll(50);
}
#endif
