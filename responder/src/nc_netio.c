/* netchar-responder: the netio server (NC_ROLE_NETIO), as netio's own server and the Keil MDK
 * one answer the netio client (docs/embedded.md; the Rust server is
 * crates/engine/src/peers/netio.rs).
 *
 * TCP test (port P): 8-byte CONTROL messages; after C2S the client writes N-byte blocks, the
 * last one with byte 0 set; after S2C the server writes N-byte blocks for 6 s, then one with
 * byte 0 set; QUIT (or anything else) closes. UDP test (control over TCP on P+1, datagrams on
 * P+1): C2S is echoed back and starts the count of the client's datagrams, RES answers that
 * count, S2C sends datagrams to the client's address at P+1 for 6 s and then RES with how
 * many. One client per test type at a time, as netio's server; each phase is logged with
 * its byte counts. CONTROL is big-endian, or little-endian from builds before netio 1.23,
 * answered in the order it came in.
 */
#include "nc_roles_impl.h"

#if NC_ROLE_NETIO

#include <string.h>

#include "nc_guard.h"
#include "nc_peer_proto.h"

enum { S_FREE, S_CTRL, S_RECV, S_SEND, S_BLAST, S_REPLY };

struct sess {
    int fd;
    uint8_t state, got, little, marker;
    uint8_t ctl[NETIO_CONTROL_LEN];
    uint8_t reply[NETIO_CONTROL_LEN];
    uint32_t block, pos;
    uint64_t in, out, until, last, count, count_bytes;
    nc_addr peer;
};

static struct {
    int lfd[2], ufd; /* [0] the TCP test, [1] the UDP test's control */
    uint16_t port;
    struct sess s[2];
} N;

static const char *const names[2] = {"netio tcp", "netio udp"};

static int open_ports(uint16_t *port)
{
    int attempt;
    for (attempt = 0; attempt < 8; attempt++) {
        uint16_t p = *port, aux;
        if (nc_role_listen(&p, &N.lfd[0], NULL) != 0)
            return -1;
        aux = (uint16_t)(p + 1);
        if (p < 65535 && nc_role_listen(&aux, &N.lfd[1], &N.ufd) == 0) {
            *port = p;
            return 0;
        }
        nc_tr_close(N.lfd[0]);
        if (*port != 0)
            return -1;
    }
    return -1;
}

void nc_netio_init(void)
{
    uint16_t port = nc_roles_wanted(NC_SVC_NETIO);
    N.lfd[0] = N.lfd[1] = N.ufd = -1;
    N.s[0].fd = N.s[1].fd = -1;
    if (!nc_roles_enabled(NC_SVC_NETIO))
        return;
    if (open_ports(&port) != 0) {
        uint64_t p = nc_roles_wanted(NC_SVC_NETIO);
        nc_role_log("netio", NULL, "cannot listen on TCP port # and the port after it; the server is off", &p, 1);
        N.lfd[0] = N.lfd[1] = N.ufd = -1;
        return;
    }
    N.port = port;
    nc_roles_bound(NC_SVC_NETIO, port);
}

static void sess_close(int k, const char *why)
{
    struct sess *s = &N.s[k];
    if (why)
        nc_role_log(names[k], &s->peer, why, NULL, 0);
    nc_tr_close(s->fd);
    s->fd = -1;
    s->state = S_FREE;
}

static void reply(int k, uint32_t cmd, uint32_t data)
{
    struct sess *s = &N.s[k];
    netio_control_encode(s->reply, s->little, cmd, data);
    s->pos = 0;
    s->state = S_REPLY;
}

/* A whole CONTROL message came. */
static void command(int k, uint64_t now)
{
    struct sess *s = &N.s[k];
    uint32_t cmd, data;
    int little;
    s->got = 0;
    if (netio_control_decode(s->ctl, &little, &cmd, &data) != 0 || cmd == NETIO_QUIT ||
        (k == 0 && cmd == NETIO_RES)) {
        sess_close(k, cmd == NETIO_QUIT && netio_control_decode(s->ctl, &little, &cmd, &data) == 0
                          ? NULL
                          : "not a netio command: connection closed");
        return;
    }
    s->little = (uint8_t)little;
    if ((cmd == NETIO_C2S || cmd == NETIO_S2C) &&
        (data == 0 || data > NETIO_MAX_BLOCK || (k == 1 && data > NC_UDP_MAX))) {
        uint64_t n = data;
        nc_role_log(names[k], &s->peer, "a block of # bytes is out of range: connection closed", &n, 1);
        sess_close(k, NULL);
        return;
    }
    s->block = data;
    s->pos = 0;
    s->in = s->out = 0;
    if (cmd == NETIO_C2S && k == 0) {
        s->state = S_RECV;
    } else if (cmd == NETIO_S2C) {
        s->state = k == 0 ? S_SEND : S_BLAST;
        s->marker = 0;
        s->count = s->count_bytes = 0;
        s->until = now + NC_NETIO_INTERVAL_MS * NC_MS;
    } else if (cmd == NETIO_C2S) {
        /* UDP: the count starts now; the control is echoed as the acknowledgement. */
        s->count = s->count_bytes = 0;
        memcpy(s->reply, s->ctl, sizeof s->reply);
        s->state = S_REPLY;
    } else {
        uint64_t n[2];
        n[0] = s->count;
        n[1] = s->count_bytes;
        nc_role_log(names[k], &s->peer, "received # datagrams (# bytes)", n, 2);
        reply(k, NETIO_RES, (uint32_t)s->count);
    }
}

/* Bytes read on a session in S_CTRL or S_RECV. */
static void feed(int k, const uint8_t *b, size_t n, uint64_t now)
{
    struct sess *s = &N.s[k];
    while (n > 0 && s->state != S_FREE) {
        if (s->state == S_RECV) {
            size_t take = s->block - s->pos < n ? s->block - s->pos : n;
            if (s->pos == 0)
                s->marker = b[0] != 0;
            s->pos += (uint32_t)take;
            s->in += take;
            b += take;
            n -= take;
            if (s->pos == s->block) {
                s->pos = 0;
                if (s->marker) {
                    uint64_t c[2];
                    c[0] = s->in;
                    c[1] = s->block;
                    nc_role_log(names[k], &s->peer, "received # bytes in #-byte blocks", c, 2);
                    s->state = S_CTRL;
                }
            }
        } else if (s->state == S_CTRL) {
            s->ctl[s->got++] = *b++;
            n--;
            if (s->got == NETIO_CONTROL_LEN)
                command(k, now);
        } else {
            /* The client said more while the server has the word: netio clients do not. */
            sess_close(k, "the client sent while the server was sending: connection closed");
            return;
        }
    }
}

void nc_netio_watch(uint64_t now, uint64_t *wait_ns)
{
    int k;
    if (N.lfd[0] < 0)
        return;
    nc_tr_watch(N.ufd, NC_TR_RD);
    for (k = 0; k < 2; k++) {
        struct sess *s = &N.s[k];
        if (s->state == S_FREE) {
            nc_tr_watch(N.lfd[k], NC_TR_RD);
            continue;
        }
        if ((s->state == S_CTRL || s->state == S_RECV) && now - s->last > NC_NETIO_IDLE_MS * NC_MS) {
            sess_close(k, "idle for 30 s: connection closed");
            continue;
        }
        if (s->state == S_CTRL || s->state == S_RECV)
            nc_tr_watch(s->fd, NC_TR_RD);
        else if (s->state == S_BLAST)
            nc_tr_watch(N.ufd, NC_TR_WR);
        else
            nc_tr_watch(s->fd, NC_TR_WR);
        if ((s->state == S_SEND || s->state == S_BLAST) && s->until > now && s->until - now < *wait_ns)
            *wait_ns = s->until - now;
    }
}

static void accept_one(int k, uint64_t now)
{
    nc_addr peer;
    int fd = nc_tr_accept(N.lfd[k], &peer);
    if (fd < 0)
        return;
    nc_tr_nodelay(fd);
    memset(&N.s[k], 0, sizeof N.s[k]);
    N.s[k].fd = fd;
    N.s[k].state = S_CTRL;
    N.s[k].peer = peer;
    N.s[k].last = now;
}

static void send_blocks(int k, uint64_t now)
{
    struct sess *s = &N.s[k];
    uint32_t chunk = s->block - s->pos;
    long w;
    if (chunk > NC_IO_BUF)
        chunk = NC_IO_BUF;
    if (s->pos == 0) {
        if (!s->marker && now >= s->until)
            s->marker = 1;
        nc_iobuf[0] = s->marker;
    } else {
        nc_iobuf[0] = 0;
    }
    nc_iobuf_used();
    w = nc_tr_send(s->fd, nc_iobuf, chunk);
    if (w > 0) {
        s->pos += (uint32_t)w;
        s->out += (uint64_t)w;
        s->last = now;
        if (s->pos == s->block) {
            s->pos = 0;
            if (s->marker) {
                uint64_t c[2];
                c[0] = s->out;
                c[1] = s->block;
                nc_role_log(names[k], &s->peer, "sent # bytes in #-byte blocks", c, 2);
                s->state = S_CTRL;
            }
        }
    } else if (w == NC_TR_FAIL) {
        sess_close(k, "the connection broke while sending");
    }
}

static void blast(int k, uint64_t now)
{
    struct sess *s = &N.s[k];
    nc_addr to = s->peer;
    int i;
    NC_ADDR_PORT(&to) = htons((uint16_t)(N.port + 1));
    if (now >= s->until) {
        uint64_t c[2];
        c[0] = s->count;
        c[1] = s->count_bytes;
        nc_role_log(names[k], &s->peer, "sent # datagrams (# bytes)", c, 2);
        reply(k, NETIO_RES, (uint32_t)s->count);
        return;
    }
    memset(nc_iobuf, 0, s->block);
    nc_iobuf_used();
    for (i = 0; i < 32; i++) {
        if (nc_tr_sendto(N.ufd, nc_iobuf, s->block, &to) != (long)s->block)
            break; /* a full queue (or ENOBUFS): retried when the socket takes more */
        s->count++;
        s->count_bytes += s->block;
    }
}

static void udp_count(void)
{
    int k;
    for (k = 0; k < 64; k++) {
        nc_addr from;
        struct sess *s = &N.s[1];
        long n = nc_tr_recvfrom(N.ufd, nc_iobuf, NC_IO_BUF, &from);
        if (n < 0)
            return;
        nc_iobuf_used();
        /* Never answered, but a service's datagram is not a client's (nc_guard.h); the
         * client's own port is the same number as this socket's, netio's convention. */
        if (nc_guard_check_source(&from, (uint16_t)(N.port + 1)))
            continue;
        /* Counted only from the address of a UDP test's control connection, and not while
         * this end sends (its count is then of what it sent). */
        if (s->state != S_FREE && s->state != S_BLAST && NC_SAME_IP(&from, &s->peer)) {
            s->count++;
            s->count_bytes += (uint64_t)n;
        }
    }
}

void nc_netio_io(uint64_t now)
{
    int k;
    if (N.lfd[0] < 0)
        return;
    if (nc_tr_ready(N.ufd) & NC_TR_RD)
        udp_count();
    for (k = 0; k < 2; k++) {
        struct sess *s = &N.s[k];
        if (s->state == S_FREE) {
            if (nc_tr_ready(N.lfd[k]) & NC_TR_RD)
                accept_one(k, now);
            continue;
        }
        if (s->state == S_CTRL || s->state == S_RECV) {
            if (nc_tr_ready(s->fd) & NC_TR_RD) {
                long n = nc_tr_recv(s->fd, nc_iobuf, NC_IO_BUF);
                nc_iobuf_used();
                if (n > 0) {
                    s->last = now;
                    feed(k, nc_iobuf, (size_t)n, now);
                } else if (n == 0 || n == NC_TR_FAIL) {
                    sess_close(k, s->state == S_RECV ? "the client closed in the middle of its blocks" : NULL);
                }
            }
        } else if (s->state == S_SEND) {
            if (nc_tr_ready(s->fd) & NC_TR_WR)
                send_blocks(k, now);
        } else if (s->state == S_BLAST) {
            if ((nc_tr_ready(N.ufd) & NC_TR_WR) || now >= s->until)
                blast(k, now);
        } else if (s->state == S_REPLY && (nc_tr_ready(s->fd) & NC_TR_WR)) {
            long w = nc_tr_send(s->fd, s->reply + s->pos, NETIO_CONTROL_LEN - s->pos);
            if (w > 0) {
                s->pos += (uint32_t)w;
                if (s->pos == NETIO_CONTROL_LEN) {
                    s->pos = 0;
                    s->state = S_CTRL;
                    s->last = now;
                }
            } else if (w == NC_TR_FAIL) {
                sess_close(k, "the connection broke");
            }
        }
    }
}

#endif
