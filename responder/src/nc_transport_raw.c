/* netchar-responder: the transport seam (nc_transport.h) on lwIP's raw API with NO_SYS=1: a
 * bare-metal board, no threads, no sockets, no select.
 *
 * A handle is a slot of one static table. lwIP calls back into it from the loop below (never
 * from an interrupt: the port's driver hands frames to lwIP in nc_plat_net_poll):
 * - tcp_recv: the pbufs are queued on the connection's slot as they came; the responder's
 *   reads copy or drop bytes from the head and only then give the window back (tcp_recved),
 *   so a reader that falls behind closes the sender's window, as a socket's buffer would;
 * - tcp_sent: room in the send buffer again (writes are tcp_write with TCP_WRITE_FLAG_COPY,
 *   at most tcp_sndbuf() bytes, then tcp_output);
 * - tcp_accept: the new pcb takes a free slot and waits there until nc_tr_accept;
 * - tcp_err: the pcb is gone (lwIP freed it); what was queued can still be read, then
 *   NC_TR_FAIL;
 * - udp_recv: the datagram's pbuf and its source join a queue of NC_TR_UDP_QUEUE per socket;
 *   a datagram that finds it full is dropped and counted (nc_tr_udp_queue_drops), as a
 *   socket's full receive buffer drops.
 *
 * nc_tr_wait is the board's main loop and its idle loop: it polls the network interface and
 * lwIP's timers until a watched handle is ready or the time is up, and counts the turns that
 * found nothing to do (nc_plat_idle_count, calibrated at boot) and the time they took.
 *
 * With NC_HAVE_BACKGROUND_LOAD the loop also carries the background load
 * (nc_plat_background_load, nc_test's SET_LOAD): eCos's nc_test slave runs load threads above
 * the network's priority, each computing a calibrated number of iterations per 10 ms tick; here
 * the loop itself, once every NC_TR_LOAD_PERIOD_MS, computes the asked share of the period
 * before it polls again, in iterations calibrated at boot against the board's clock
 * (nc_tr_load_calibrate), and times what it ran. That time is busy time, never idle.
 */
#include "nc_transport.h"

#include <string.h>

#if NC_TRANSPORT_RAW

#include "lwip/pbuf.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "lwip/udp.h"

/* Slots: every TCP connection of every role, the listeners and the UDP sockets. */
#ifndef NC_TR_SLOTS
#define NC_TR_SLOTS (NC_MAX_CONNS + 12)
#endif
/* UDP sockets (native 1, nc_test 2, netio 1, echo and discard 2) and the datagrams each may
 * hold unread. */
#ifndef NC_TR_UDP_SOCKETS
#define NC_TR_UDP_SOCKETS 6
#endif
#ifndef NC_TR_UDP_QUEUE
#define NC_TR_UDP_QUEUE 8
#endif
/* An idle turn of the loop counts this many times before it polls again: the idle counter of
 * eCos's nc_test slave, a loop of plain instructions. It keeps the turn's device reads (the
 * interface's receive FIFO, the clock) to a few per couple of hundred instructions, which an
 * emulator runs fast, and bounds how late a frame is seen to one turn. */
#ifndef NC_TR_IDLE_SPIN
#define NC_TR_IDLE_SPIN 32
#endif

enum { K_FREE, K_LISTEN, K_CONN, K_UDP };
#define F_EOF 1u     /* the peer's FIN came */
#define F_ERR 2u     /* the pcb failed and lwIP freed it */
#define F_PENDING 4u /* accepted by lwIP, not yet by the responder */

struct dgram {
    struct pbuf *p;
    ip_addr_t ip;
    uint16_t port;
};

struct udpq {
    struct dgram q[NC_TR_UDP_QUEUE];
    uint8_t head, len;
};

struct slot {
    uint8_t kind, flags, want, ready;
    int8_t owner;    /* F_PENDING: the listener's handle; K_UDP: the queue's index */
    uint8_t order;   /* F_PENDING: accepted before those with a higher number (mod 256) */
    uint8_t backlog; /* K_LISTEN: connections that may wait for nc_tr_accept */
    union {
        struct tcp_pcb *tcp;
        struct udp_pcb *udp;
    } pcb;
    struct pbuf *rx; /* TCP: received, not yet read */
    nc_addr peer;
};

static struct slot slots[NC_TR_SLOTS];
static struct udpq udpqs[NC_TR_UDP_SOCKETS];
static uint8_t udpq_used[NC_TR_UDP_SOCKETS];
static uint8_t accept_seq;
static volatile int events; /* a callback ran: readiness may have changed */

/* The idle loop's count and time, and what was lost for want of room (nc_transport.h). */
static uint64_t idle_count, idle_ns, idle_per_s;
static volatile uint32_t idle_spin;
uint32_t nc_tr_udp_queue_drops, nc_tr_accept_drops;

#if NC_HAVE_BACKGROUND_LOAD
/* The load's period: eCos's tick. */
#ifndef NC_TR_LOAD_PERIOD_MS
#define NC_TR_LOAD_PERIOD_MS 10u
#endif
#define LOAD_PERIOD_NS ((uint64_t)NC_TR_LOAD_PERIOD_MS * 1000000u)
/* Iterations of the load's computation per ms (calibrated), per period now (0: no load); when
 * the next period starts, when the load started and the time its computation took since. */
static uint32_t load_per_ms, load_iters;
static uint64_t load_next, load_t0, load_ns;
static volatile uint32_t load_sink;

/* eCos's do_some_random_computation: plain arithmetic the compiler cannot drop. */
static void load_compute(uint32_t n)
{
    uint32_t x = load_sink;
    while (n-- > 0)
        x = (x * 1103515245u + 12345u) ^ (x >> 11);
    load_sink = x;
}

/* The period's share, when it is due; the clock after it. A loop that fell more than a period
 * behind (a long turn) catches up one period, not all of them. */
static uint64_t load_turn(uint64_t now)
{
    uint64_t t;
    if (!load_iters || now < load_next)
        return now;
    load_compute(load_iters);
    t = nc_plat_now_ns();
    load_ns += t - now;
    load_next += LOAD_PERIOD_NS;
    if (load_next + LOAD_PERIOD_NS < t)
        load_next = t;
    return t;
}

void nc_tr_load_calibrate(uint32_t ms)
{
    uint64_t t0 = nc_plat_now_ns(), t = t0, n = 0;
    while (t - t0 < (uint64_t)ms * 1000000u) {
        load_compute(1000);
        n += 1000;
        t = nc_plat_now_ns();
    }
    load_per_ms = (uint32_t)(n * 1000000u / (t - t0));
}

uint32_t nc_tr_load_per_ms(void)
{
    return load_per_ms;
}

double nc_plat_background_load(double pct)
{
    uint64_t now = nc_plat_now_ns();
    uint32_t permille = pct <= 0 ? 0u : pct >= 100 ? 1000u : (uint32_t)(pct * 10.0 + 0.5);
    double achieved = 0;
    if (load_iters && !permille && now > load_t0)
        achieved = (double)(load_ns * 1000u / (now - load_t0)) / 10.0;
    if (permille && !load_iters) {
        load_t0 = load_next = now;
        load_ns = 0;
    }
    load_iters = (uint32_t)((uint64_t)load_per_ms * NC_TR_LOAD_PERIOD_MS * permille / 1000u);
    if (permille && !load_iters)
        load_iters = 1;
    return achieved;
}
#endif

static int slot_new(int kind)
{
    int i;
    for (i = 0; i < NC_TR_SLOTS; i++)
        if (slots[i].kind == K_FREE) {
            memset(&slots[i], 0, sizeof slots[i]);
            slots[i].kind = (uint8_t)kind;
            slots[i].owner = -1;
            return i;
        }
    return -1;
}

static struct slot *slot_of(int h, int kind)
{
    if (h < 0 || h >= NC_TR_SLOTS || slots[h].kind != kind)
        return NULL;
    return &slots[h];
}

#if NC_HAVE_IPV6
/* lwIP's address as the responder's: IPv6 as it is, IPv4 as ::ffff:a.b.c.d (a dual-stack
 * socket's way), and back. */
static void set_addr(nc_addr *a, const ip_addr_t *ip, u16_t port)
{
    memset(a, 0, sizeof *a);
    a->sin6_len = sizeof *a;
    a->sin6_family = AF_INET6;
    a->sin6_port = lwip_htons(port);
    if (IP_IS_V6(ip)) {
        memcpy(a->sin6_addr.s6_addr, ip_2_ip6(ip)->addr, 16);
    } else {
        uint32_t v4 = ip4_addr_get_u32(ip_2_ip4(ip));
        a->sin6_addr.s6_addr[10] = a->sin6_addr.s6_addr[11] = 0xff;
        memcpy(a->sin6_addr.s6_addr + 12, &v4, 4);
    }
}

static void get_addr(ip_addr_t *ip, const nc_addr *a)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(a->sin6_addr.s6_addr, mapped, 12) == 0) {
        uint32_t v4;
        memcpy(&v4, a->sin6_addr.s6_addr + 12, 4);
        ip_addr_set_ip4_u32_val(*ip, v4);
    } else {
        memset(ip, 0, sizeof *ip);
        memcpy(ip_2_ip6(ip)->addr, a->sin6_addr.s6_addr, 16);
        IP_SET_TYPE(ip, IPADDR_TYPE_V6);
    }
}
#define PCB_TYPE IPADDR_TYPE_ANY
#define ANY_ADDR IP_ANY_TYPE
#else
static void set_addr(nc_addr *a, const ip_addr_t *ip, u16_t port)
{
    memset(a, 0, sizeof *a);
    a->sin_len = sizeof *a;
    a->sin_family = AF_INET;
    a->sin_port = lwip_htons(port);
    a->sin_addr.s_addr = ip4_addr_get_u32(ip_2_ip4(ip));
}

static void get_addr(ip_addr_t *ip, const nc_addr *a)
{
    ip_addr_set_ip4_u32(ip, a->sin_addr.s_addr);
}
#define PCB_TYPE IPADDR_TYPE_V4
#define ANY_ADDR IP_ADDR_ANY
#endif

/* ---------------------------------------------------------------- lwIP's callbacks */

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
    struct slot *s = &slots[(intptr_t)arg];
    (void)pcb, (void)err;
    if (!p) {
        s->flags |= F_EOF;
    } else if (!s->rx) {
        s->rx = p;
    } else {
        pbuf_cat(s->rx, p);
    }
    events = 1;
    return ERR_OK;
}

static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
    (void)arg, (void)pcb, (void)len;
    events = 1;
    return ERR_OK;
}

static void on_err(void *arg, err_t err)
{
    struct slot *s = &slots[(intptr_t)arg];
    (void)err;
    s->pcb.tcp = NULL;
    if (s->flags & F_PENDING) {
        /* Reset before the responder took it: nothing to tell. */
        if (s->rx)
            pbuf_free(s->rx);
        s->kind = K_FREE;
        return;
    }
    s->flags |= F_ERR;
    events = 1;
}

static err_t on_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
    int lh = (int)(intptr_t)arg, i, waiting = 0, h;
    if (err != ERR_OK || !pcb)
        return ERR_VAL;
    for (i = 0; i < NC_TR_SLOTS; i++)
        if (slots[i].kind == K_CONN && (slots[i].flags & F_PENDING) && slots[i].owner == lh)
            waiting++;
    h = waiting < slots[lh].backlog ? slot_new(K_CONN) : -1;
    if (h < 0) {
        /* The backlog or the table is full: refused as a full backlog is (lwIP resets it). */
        nc_tr_accept_drops++;
        tcp_abort(pcb);
        return ERR_ABRT;
    }
    slots[h].flags = F_PENDING;
    slots[h].owner = (int8_t)lh;
    slots[h].order = accept_seq++;
    slots[h].pcb.tcp = pcb;
    set_addr(&slots[h].peer, &pcb->remote_ip, pcb->remote_port);
    tcp_arg(pcb, (void *)(intptr_t)h);
    tcp_recv(pcb, on_recv);
    tcp_sent(pcb, on_sent);
    tcp_err(pcb, on_err);
    events = 1;
    return ERR_OK;
}

static void on_datagram(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr, u16_t port)
{
    struct slot *s = &slots[(intptr_t)arg];
    struct udpq *q = &udpqs[s->owner];
    struct dgram *d;
    (void)pcb;
    if (q->len == NC_TR_UDP_QUEUE) {
        nc_tr_udp_queue_drops++;
        pbuf_free(p);
        return;
    }
    d = &q->q[(q->head + q->len) % NC_TR_UDP_QUEUE];
    d->p = p;
    ip_addr_copy(d->ip, *addr);
    d->port = port;
    q->len++;
    events = 1;
}

/* ---------------------------------------------------------------- opening */

int nc_tr_tcp_listen(uint16_t *port, int backlog)
{
    struct tcp_pcb *pcb = tcp_new_ip_type(PCB_TYPE), *lpcb;
    int h = slot_new(K_LISTEN);
    if (!pcb || h < 0 || tcp_bind(pcb, ANY_ADDR, *port) != ERR_OK) {
        if (pcb)
            tcp_abort(pcb);
        if (h >= 0)
            slots[h].kind = K_FREE;
        return -1;
    }
    lpcb = tcp_listen(pcb);
    if (!lpcb) {
        tcp_abort(pcb);
        slots[h].kind = K_FREE;
        return -1;
    }
    slots[h].pcb.tcp = lpcb;
    slots[h].backlog = (uint8_t)(backlog > 255 ? 255 : backlog);
    tcp_arg(lpcb, (void *)(intptr_t)h);
    tcp_accept(lpcb, on_accept);
    *port = lpcb->local_port;
    return h;
}

int nc_tr_udp_open(uint16_t *port)
{
    int h = slot_new(K_UDP), q;
    struct udp_pcb *pcb;
    for (q = 0; q < NC_TR_UDP_SOCKETS && udpq_used[q]; q++)
        continue;
    pcb = h >= 0 && q < NC_TR_UDP_SOCKETS ? udp_new_ip_type(PCB_TYPE) : NULL;
    if (!pcb || udp_bind(pcb, ANY_ADDR, *port) != ERR_OK) {
        if (pcb)
            udp_remove(pcb);
        if (h >= 0)
            slots[h].kind = K_FREE;
        return -1;
    }
    udpq_used[q] = 1;
    memset(&udpqs[q], 0, sizeof udpqs[q]);
    slots[h].owner = (int8_t)q;
    slots[h].pcb.udp = pcb;
    udp_recv(pcb, on_datagram, (void *)(intptr_t)h);
    *port = pcb->local_port;
    return h;
}

int nc_tr_accept(int lh, nc_addr *peer)
{
    int i, first = -1;
    if (!slot_of(lh, K_LISTEN))
        return -1;
    for (i = 0; i < NC_TR_SLOTS; i++) {
        const struct slot *s = &slots[i];
        if (s->kind == K_CONN && (s->flags & F_PENDING) && s->owner == lh &&
            (first < 0 || (uint8_t)(s->order - slots[first].order) >= 128))
            first = i;
    }
    if (first >= 0) {
        slots[first].flags &= (uint8_t)~F_PENDING;
        *peer = slots[first].peer;
    }
    return first;
}

/* ---------------------------------------------------------------- TCP connections */

static struct slot *conn_of(int h)
{
    struct slot *s = slot_of(h, K_CONN);
    return s && !(s->flags & F_PENDING) ? s : NULL;
}

/* Up to cap bytes from the head of the queue into buf (NULL: dropped), the window given back. */
static long take(int h, void *buf, size_t cap)
{
    struct slot *s = conn_of(h);
    u16_t n;
    if (!s)
        return NC_TR_FAIL;
    if (!s->rx)
        return s->flags & F_ERR ? NC_TR_FAIL : s->flags & F_EOF ? 0 : NC_TR_AGAIN;
    n = (u16_t)(cap < s->rx->tot_len ? cap : s->rx->tot_len);
    if (buf)
        pbuf_copy_partial(s->rx, buf, n, 0);
    s->rx = pbuf_free_header(s->rx, n);
    if (s->pcb.tcp)
        tcp_recved(s->pcb.tcp, n);
    return n;
}

long nc_tr_recv(int h, void *buf, size_t cap)
{
    return take(h, buf, cap > 0xffff ? 0xffff : cap);
}

long nc_tr_drop(int h, void *scratch, size_t cap)
{
    (void)scratch;
    return take(h, NULL, cap > 0xffff ? 0xffff : cap);
}

static int writable(const struct slot *s)
{
    return s->pcb.tcp && tcp_sndbuf(s->pcb.tcp) > 0 && tcp_sndqueuelen(s->pcb.tcp) < TCP_SND_QUEUELEN - 1;
}

long nc_tr_send(int h, const void *buf, size_t n)
{
    struct slot *s = conn_of(h);
    u16_t room;
    err_t e;
    if (!s || !s->pcb.tcp)
        return NC_TR_FAIL;
    if (!writable(s))
        return NC_TR_AGAIN;
    room = tcp_sndbuf(s->pcb.tcp);
    if (n > room)
        n = room;
    e = tcp_write(s->pcb.tcp, buf, (u16_t)n, TCP_WRITE_FLAG_COPY);
    if (e == ERR_MEM)
        return NC_TR_AGAIN; /* out of segments or heap: room comes back with the peer's acks */
    if (e != ERR_OK)
        return NC_TR_FAIL;
    tcp_output(s->pcb.tcp);
    return (long)n;
}

void nc_tr_shutdown(int h)
{
    struct slot *s = conn_of(h);
    if (s && s->pcb.tcp)
        tcp_shutdown(s->pcb.tcp, 0, 1);
}

void nc_tr_nodelay(int h)
{
    struct slot *s = conn_of(h);
    if (s && s->pcb.tcp)
        tcp_nagle_disable(s->pcb.tcp);
}

static void tcp_drop_pcb(struct tcp_pcb *pcb, int reset)
{
    tcp_arg(pcb, NULL);
    tcp_recv(pcb, NULL); /* lwIP's default: later data is acknowledged and freed */
    tcp_sent(pcb, NULL);
    tcp_err(pcb, NULL);
    if (reset || tcp_close(pcb) != ERR_OK)
        tcp_abort(pcb);
}

static void close_slot(int h, int reset);

void nc_tr_close(int h)
{
    close_slot(h, 0);
}

void nc_tr_abort(int h)
{
    close_slot(h, 1);
}

static void close_slot(int h, int reset)
{
    struct slot *s;
    int i;
    if (h < 0 || h >= NC_TR_SLOTS || slots[h].kind == K_FREE)
        return;
    s = &slots[h];
    if (s->kind == K_LISTEN) {
        tcp_accept(s->pcb.tcp, NULL);
        tcp_close(s->pcb.tcp);
        for (i = 0; i < NC_TR_SLOTS; i++)
            if (slots[i].kind == K_CONN && (slots[i].flags & F_PENDING) && slots[i].owner == h) {
                slots[i].flags &= (uint8_t)~F_PENDING;
                close_slot(i, 1);
            }
    } else if (s->kind == K_CONN) {
        if (s->pcb.tcp)
            tcp_drop_pcb(s->pcb.tcp, reset);
        if (s->rx)
            pbuf_free(s->rx);
    } else {
        struct udpq *q = &udpqs[s->owner];
        udp_remove(s->pcb.udp);
        while (q->len > 0) {
            pbuf_free(q->q[q->head].p);
            q->head = (uint8_t)((q->head + 1) % NC_TR_UDP_QUEUE);
            q->len--;
        }
        udpq_used[s->owner] = 0;
    }
    s->kind = K_FREE;
}

/* ---------------------------------------------------------------- UDP */

long nc_tr_recvfrom(int h, void *buf, size_t cap, nc_addr *from)
{
    struct slot *s = slot_of(h, K_UDP);
    struct udpq *q;
    struct dgram *d;
    long n;
    if (!s)
        return NC_TR_FAIL;
    q = &udpqs[s->owner];
    if (q->len == 0)
        return NC_TR_AGAIN;
    d = &q->q[q->head];
    n = d->p->tot_len;
    pbuf_copy_partial(d->p, buf, (u16_t)(cap < (size_t)n ? cap : (size_t)n), 0);
    set_addr(from, &d->ip, d->port);
    pbuf_free(d->p);
    q->head = (uint8_t)((q->head + 1) % NC_TR_UDP_QUEUE);
    q->len--;
    return n;
}

long nc_tr_sendto(int h, const void *buf, size_t n, const nc_addr *to)
{
    struct slot *s = slot_of(h, K_UDP);
    struct pbuf *p;
    ip_addr_t ip;
    err_t e;
    if (!s || n > 0xffff)
        return NC_TR_FAIL;
    /* The payload by reference: lwIP prepends its headers in a pbuf of its own, and the
     * driver copies the frame out before udp_sendto returns (ARP, waiting for an address,
     * keeps a copy of its own). */
    p = pbuf_alloc(PBUF_RAW, (u16_t)n, PBUF_REF);
    if (!p)
        return NC_TR_NOBUFS;
    p->payload = (void *)(uintptr_t)buf;
    get_addr(&ip, to);
    e = udp_sendto(s->pcb.udp, p, &ip, lwip_ntohs(NC_ADDR_PORT(to)));
    pbuf_free(p);
    if (e == ERR_OK)
        return (long)n;
    return e == ERR_MEM || e == ERR_BUF ? NC_TR_NOBUFS : NC_TR_FAIL;
}

/* ---------------------------------------------------------------- the wait */

void nc_tr_watch(int h, unsigned ev)
{
    if (h >= 0 && h < NC_TR_SLOTS && slots[h].kind != K_FREE)
        slots[h].want |= (uint8_t)ev;
}

static unsigned readiness(const struct slot *s)
{
    unsigned r = 0;
    int i;
    switch (s->kind) {
    case K_LISTEN:
        for (i = 0; i < NC_TR_SLOTS; i++)
            if (slots[i].kind == K_CONN && (slots[i].flags & F_PENDING) && &slots[slots[i].owner] == s)
                return NC_TR_RD;
        return 0;
    case K_CONN:
        if (s->flags & F_PENDING)
            return 0;
        if (s->rx || (s->flags & (F_EOF | F_ERR)))
            r |= NC_TR_RD;
        if (!s->pcb.tcp || writable(s))
            r |= NC_TR_WR;
        return r;
    case K_UDP:
        return NC_TR_WR | (udpqs[s->owner].len ? NC_TR_RD : 0u);
    default:
        return 0;
    }
}

/* Sets each slot's ready bits from what it watches; 1 when any is ready. */
static int scan(void)
{
    int i, any = 0;
    for (i = 0; i < NC_TR_SLOTS; i++) {
        struct slot *s = &slots[i];
        s->ready = s->want ? (uint8_t)(s->want & readiness(s)) : 0;
        any |= s->ready;
    }
    return any;
}

int nc_tr_wait(uint64_t max_ns)
{
    uint64_t now = nc_plat_now_ns(), deadline = now + max_ns;
    int i, any;
#if NC_HAVE_BACKGROUND_LOAD
    now = load_turn(now);
#endif
    any = scan();
    events = 0;
    while (!any && now < deadline) {
        /* One turn of the loop: frames to lwIP, lwIP's timers. Readiness changes only in
         * lwIP's callbacks, so the table is scanned again only after one ran. A turn that
         * handled no frame and ran no callback is idle: it counts (NC_TR_IDLE_SPIN), and its
         * time, from the clock reading before it to the one after, is idle time. */
        uint64_t t;
        int idle;
#if NC_HAVE_BACKGROUND_LOAD
        now = load_turn(now);
#endif
        idle = nc_plat_net_poll() == 0;
        sys_check_timeouts();
        if (events) {
            events = 0;
            idle = 0;
            any = scan();
        }
        if (idle) {
            int k;
            for (k = 0; k < NC_TR_IDLE_SPIN; k++)
                idle_spin++;
            idle_count += NC_TR_IDLE_SPIN;
        }
        t = nc_plat_now_ns();
        if (idle)
            idle_ns += t - now;
        now = t;
    }
    for (i = 0; i < NC_TR_SLOTS; i++)
        slots[i].want = 0;
    return 0;
}

unsigned nc_tr_ready(int h)
{
    return h >= 0 && h < NC_TR_SLOTS && slots[h].kind != K_FREE ? slots[h].ready : 0u;
}

/* ---------------------------------------------------------------- the idle loop's figures */

void nc_tr_idle_calibrate(uint32_t ms)
{
    uint64_t c0 = idle_count, t0 = nc_plat_now_ns(), t;
    (void)nc_tr_wait((uint64_t)ms * 1000000u);
    t = nc_plat_now_ns() - t0;
    idle_per_s = t ? (idle_count - c0) * 1000000000u / t : 0;
}

uint64_t nc_tr_idle_ns(void)
{
    return idle_ns;
}

#if NC_HAVE_IDLE_COUNTER
uint64_t nc_plat_idle_count(void)
{
    return idle_count;
}

uint64_t nc_plat_idle_per_second(void)
{
    return idle_per_s;
}
#endif

#if NC_HAVE_CPU_TIMES
/* The loop's busy time since boot: everything but its idle turns (no system time). */
void nc_plat_cpu_times(uint64_t *user_us, uint64_t *system_us)
{
    *user_us = (nc_plat_now_ns() - idle_ns) / 1000u;
    *system_us = 0;
}
#endif

#endif /* NC_TRANSPORT_RAW */
