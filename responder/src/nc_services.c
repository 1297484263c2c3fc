/* netchar-responder: RFC 862 echo and RFC 863 discard, over TCP and UDP (NC_ROLE_ECHO).
 *
 * TCP echo returns every byte it reads on that connection; a connection's unsent bytes wait
 * in its own buffer (NC_SVC_BUF) and it is not read again until they are out, so a client
 * that does not read stalls only itself. UDP echo answers each datagram with one of the same
 * bytes to its source, never more (no amplification); through the reflection guard
 * (nc_guard.h): never to a source port below 1024 or one of the responder's own (two UDP
 * services cannot be set talking to each other), and to addresses outside the allowed
 * networks within the shared budget. Each TCP connection, and each spell of datagrams from one
 * source, is logged with its byte counts when it ends.
 */
#include "nc_guard.h"
#include "nc_roles_impl.h"

#if NC_ROLE_ECHO

#include <string.h>

enum { K_FREE, K_ECHO, K_DISCARD };

#if NC_TASK_PER_CONNECTION
/* GCC and clang builtins (arm-none-eabi-gcc too): C99 has no atomics. */
#define SLOT_IS_FREE(c) (__atomic_load_n(&(c)->kind, __ATOMIC_ACQUIRE) == K_FREE)
#define SLOT_RELEASE(c) __atomic_store_n(&(c)->kind, (uint8_t)K_FREE, __ATOMIC_RELEASE)
#else
#define SLOT_IS_FREE(c) ((c)->kind == K_FREE)
#define SLOT_RELEASE(c) ((c)->kind = K_FREE)
#endif

struct svc_conn {
    int fd;
    /* With NC_TASK_PER_CONNECTION the connection's task frees the slot by setting K_FREE as
     * its last act (a release store), and the loop only ever claims a slot it reads free (an
     * acquire load): the one byte both sides touch. */
    uint8_t kind;
    uint8_t eof;
    uint16_t len, off; /* echo: bytes read and not yet written back */
    uint64_t in, out, last;
    nc_addr peer;
    uint8_t buf[NC_SVC_BUF];
};

/* Datagrams from one source, until it has been quiet for NC_SVC_UDP_QUIET_MS. */
struct svc_spell {
    int active;
    nc_addr peer;
    uint64_t dgrams, in, out, last;
};

static struct {
    int tfd[2], ufd[2]; /* [0] echo, [1] discard */
    struct svc_conn conns[NC_SVC_CONNS];
    struct svc_spell spell[2];
} V;

static const char *const tcp_names[2] = {"echo tcp", "discard tcp"};
static const char *const udp_names[2] = {"echo udp", "discard udp"};

void nc_svc_init(void)
{
    int s, i;
    for (i = 0; i < NC_SVC_CONNS; i++)
        V.conns[i].fd = -1;
    for (s = 0; s < 2; s++) {
        enum nc_service svc = s == 0 ? NC_SVC_ECHO : NC_SVC_DISCARD;
        uint16_t port = nc_roles_wanted(svc);
        V.tfd[s] = V.ufd[s] = -1;
        if (!nc_roles_enabled(svc))
            continue;
        if (nc_role_listen(&port, &V.tfd[s], &V.ufd[s]) == 0) {
            nc_roles_bound(svc, port);
        } else {
            uint64_t p = nc_roles_wanted(svc);
            nc_role_log(s == 0 ? "echo" : "discard", NULL, "cannot listen on port #; the service is off", &p, 1);
        }
    }
}

static void conn_end_how(struct svc_conn *c, int reset)
{
    uint64_t n[2];
    n[0] = c->in;
    n[1] = c->out;
    if (c->kind == K_ECHO)
        nc_role_log(tcp_names[0], &c->peer, "# bytes in, # bytes out", n, 2);
    else
        nc_role_log(tcp_names[1], &c->peer, "# bytes", n, 1);
    if (reset)
        nc_tr_abort(c->fd);
    else
        nc_tr_close(c->fd);
    c->fd = -1;
    SLOT_RELEASE(c);
}

static void conn_end(struct svc_conn *c)
{
    conn_end_how(c, 0);
}

static void spell_end(int s)
{
    struct svc_spell *sp = &V.spell[s];
    uint64_t n[3];
    n[0] = sp->dgrams;
    n[1] = sp->in;
    n[2] = sp->out;
    if (s == 0)
        nc_role_log(udp_names[0], &sp->peer, "# datagrams, # bytes in, # bytes out", n, 3);
    else
        nc_role_log(udp_names[1], &sp->peer, "# datagrams, # bytes", n, 2);
    sp->active = 0;
}

void nc_svc_watch(uint64_t now, uint64_t *wait_ns)
{
    int s, i;
    for (s = 0; s < 2; s++) {
        struct svc_spell *sp = &V.spell[s];
        nc_tr_watch(V.tfd[s], NC_TR_RD);
        nc_tr_watch(V.ufd[s], NC_TR_RD);
        if (sp->active) {
            uint64_t end = sp->last + NC_SVC_UDP_QUIET_MS * NC_MS;
            if (now >= end)
                spell_end(s);
            else if (end - now < *wait_ns)
                *wait_ns = end - now;
        }
    }
#if !NC_TASK_PER_CONNECTION
    for (i = 0; i < NC_SVC_CONNS; i++) {
        struct svc_conn *c = &V.conns[i];
        if (c->kind == K_FREE)
            continue;
        if (now - c->last > NC_SVC_IDLE_MS * NC_MS) {
            conn_end_how(c, 1);
            continue;
        }
        if (c->off < c->len)
            nc_tr_watch(c->fd, NC_TR_WR);
        else if (!c->eof)
            nc_tr_watch(c->fd, NC_TR_RD);
    }
#else
    (void)i;
#endif
}

#if NC_TASK_PER_CONNECTION
#if NC_TRANSPORT_RAW
#error "NC_TASK_PER_CONNECTION needs a transport with blocking waits (sockets)"
#endif
/* One connection's task: its own slot and buffer, the loop's non-blocking socket waited on
 * by the task alone (nc_tr_wait_one, up to NC_SVC_IDLE_MS). */
static void *conn_task(void *arg)
{
    struct svc_conn *c = arg;
    for (;;) {
        long n;
        if (!nc_tr_wait_one(c->fd, NC_TR_RD, NC_SVC_IDLE_MS))
            break; /* silent for NC_SVC_IDLE_MS */
        n = nc_tr_recv(c->fd, c->buf, sizeof c->buf);
        if (n == 0 || n == NC_TR_FAIL)
            break;
        if (n < 0)
            continue;
        c->in += (uint64_t)n;
        if (c->kind == K_ECHO) {
            long off = 0;
            while (off < n) {
                long w = nc_tr_send(c->fd, c->buf + off, (size_t)(n - off));
                if (w > 0) {
                    off += w;
                    c->out += (uint64_t)w;
                } else if (w != NC_TR_AGAIN || !nc_tr_wait_one(c->fd, NC_TR_WR, NC_SVC_IDLE_MS)) {
                    break;
                }
            }
            if (off < n)
                break;
        }
    }
    conn_end(c);
    return NULL;
}
#endif

static void svc_accept(int s, uint64_t now)
{
    nc_addr peer;
    int i, fd = nc_tr_accept(V.tfd[s], &peer);
    if (fd < 0)
        return;
    for (i = 0; i < NC_SVC_CONNS; i++)
        if (SLOT_IS_FREE(&V.conns[i]))
            break;
#if !NC_TASK_PER_CONNECTION
    if (i == NC_SVC_CONNS) {
        /* Every slot taken: the connection quiet the longest gives way if it has been quiet
         * for a while, so that connections that say nothing cannot lock the service out for
         * NC_SVC_IDLE_MS. */
        int oldest = 0, k;
        for (k = 1; k < NC_SVC_CONNS; k++)
            if (V.conns[k].last < V.conns[oldest].last)
                oldest = k;
        if (now - V.conns[oldest].last >= NC_SVC_EVICT_MS * NC_MS) {
            nc_role_log(V.conns[oldest].kind == K_ECHO ? tcp_names[0] : tcp_names[1], &V.conns[oldest].peer,
                        "closed, quiet while all NC_SVC_CONNS connections were in use", NULL, 0);
            conn_end_how(&V.conns[oldest], 1);
            i = oldest;
        }
    }
#endif
    if (i == NC_SVC_CONNS) {
        nc_role_log(tcp_names[s], &peer, "refused: all NC_SVC_CONNS connections in use", NULL, 0);
        nc_tr_abort(fd);
        return;
    }
    memset(&V.conns[i], 0, sizeof V.conns[i] - sizeof V.conns[i].buf);
    V.conns[i].fd = fd;
    V.conns[i].peer = peer;
    V.conns[i].last = now;
    V.conns[i].kind = (uint8_t)(s == 0 ? K_ECHO : K_DISCARD);
#if NC_TASK_PER_CONNECTION
    if (nc_plat_task_start(conn_task, &V.conns[i]) != 0) {
        nc_role_log(tcp_names[s], &peer, "refused: no task could be started for it", NULL, 0);
        nc_tr_close(fd);
        V.conns[i].kind = K_FREE;
    }
#endif
}

#if !NC_TASK_PER_CONNECTION
static void conn_write(struct svc_conn *c, uint64_t now)
{
    long w = nc_tr_send(c->fd, c->buf + c->off, (size_t)(c->len - c->off));
    if (w > 0) {
        c->off = (uint16_t)(c->off + w);
        c->out += (uint64_t)w;
        c->last = now;
        if (c->off == c->len)
            c->off = c->len = 0;
    } else if (w == NC_TR_FAIL) {
        conn_end(c);
    }
}

static void conn_read(struct svc_conn *c, uint64_t now)
{
    long n;
    if (c->kind == K_ECHO) {
        n = nc_tr_recv(c->fd, c->buf, sizeof c->buf);
    } else {
        n = nc_tr_drop(c->fd, nc_iobuf, NC_IO_BUF);
        nc_iobuf_used();
    }
    if (n > 0) {
        c->in += (uint64_t)n;
        c->last = now;
        if (c->kind == K_ECHO) {
            c->len = (uint16_t)n;
            c->off = 0;
            conn_write(c, now);
        }
    } else if (n == 0) {
        c->eof = 1;
    } else if (n == NC_TR_FAIL) {
        conn_end(c);
    }
}

#endif

static void udp_read(int s, uint64_t now)
{
    int k;
    for (k = 0; k < 64; k++) {
        struct svc_spell *sp = &V.spell[s];
        nc_addr from;
        long n = nc_tr_recvfrom(V.ufd[s], nc_iobuf, NC_IO_BUF, &from);
        if (n < 0)
            return;
        nc_iobuf_used();
        if (nc_guard_check_source(&from, 0))
            continue;
        if (sp->active && !NC_SAME_ADDR(&sp->peer, &from))
            spell_end(s);
        if (!sp->active) {
            memset(sp, 0, sizeof *sp);
            sp->active = 1;
            sp->peer = from;
        }
        sp->dgrams++;
        sp->in += (uint64_t)n;
        sp->last = now;
        if (s == 0 && nc_role_answer("echo", V.ufd[s], nc_iobuf, (size_t)n, (uint64_t)n, &from, now) == n)
            sp->out += (uint64_t)n;
    }
}

void nc_svc_io(uint64_t now)
{
    int s, i;
#if NC_TASK_PER_CONNECTION
    (void)i;
#else
    for (i = 0; i < NC_SVC_CONNS; i++) {
        struct svc_conn *c = &V.conns[i];
        if (c->kind == K_FREE)
            continue;
        if (c->off < c->len) {
            if (nc_tr_ready(c->fd) & NC_TR_WR)
                conn_write(c, now);
        } else if (!c->eof && (nc_tr_ready(c->fd) & NC_TR_RD)) {
            conn_read(c, now);
        }
        if (c->kind != K_FREE && c->eof && c->off == c->len)
            conn_end(c);
    }
#endif
    for (s = 0; s < 2; s++) {
        if (nc_tr_ready(V.ufd[s]) & NC_TR_RD)
            udp_read(s, now);
        if (nc_tr_ready(V.tfd[s]) & NC_TR_RD)
            svc_accept(s, now);
    }
}

#endif
