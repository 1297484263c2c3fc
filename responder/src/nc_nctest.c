/* netchar-responder: the eCos nc_test slave (NC_ROLE_NC_TEST), as nc_test_slave answers
 * nc_test_master (docs/embedded.md; the Rust slave is crates/engine/src/peers/nc_test.rs).
 *
 * Requests arrive on the UDP control port (7777) and are answered to their source; a test's
 * data runs on the data port (8770): UDP datagrams to the master's address at the request's
 * master_port, or the TCP connection the master opens 3 s after the ACK. Every buffer is a
 * 16-byte header (keys, seq, length) and buflen bytes; the slave answers lock-step, as the
 * stock one does, then sends its results record (buffers sent and received). The data socket
 * takes data only from the master's address. SET_LOAD and START_IDLE/STOP_IDLE go to the
 * platform's optional hooks (the board's: a calibrated share of its loop, src/nc_transport_raw.c);
 * without them they are refused with reason 3 ("no background load or idle support"), which the
 * master answers by skipping those sections. Each load level, when it stops (the next SET_LOAD,
 * DISCONNECT, a silent master), logs the share the platform says it ran.
 *
 * Unlike the stock slave the loop never blocks: the other roles keep being served while a
 * test waits for its master, and control requests that come during a test wait in the socket
 * until it ends.
 *
 * A request proves nothing of its source (nc_guard.h): UDP_SEND, which sends a test's worth
 * of datagrams to it unasked, runs only for an allowed network and is NAKed (reason 2, "cannot
 * handle the request": a stock master prints "Slave denied ...") elsewhere; no UDP test sends
 * to a service port or one of the responder's own; replies, echoes and results records to an
 * address outside the allowed networks spend only the bytes it sent, within the budget.
 */
#include "nc_guard.h"
#include "nc_roles_impl.h"

#if NC_ROLE_NC_TEST

#include <string.h>

#include "nc_peer_proto.h"

#define TEST_TIMEOUT_MS 3000     /* one buffer (NC_TEST_TIMEOUT) */
#define ACCEPT_WAIT_MS 15000     /* the master connects 3 s after the ACK, retrying for 5 s */
#define SEND_STALL_MS 21000      /* a TCP master that stops reading */
#define UDP_HEAD_START_MS 100    /* a stock master binds its data port after the ACK */
#define TICK_MS 10
/* A master that vanished (crashed, unplugged) never sends DISCONNECT: its SET_LOAD stops
 * after this long without a request, as netchar's own slave does. */
#ifndef NC_NCTEST_LOAD_OFF_MS
#define NC_NCTEST_LOAD_OFF_MS 120000u
#endif
#define LOAD_OFF_MS NC_NCTEST_LOAD_OFF_MS

enum phase { P_IDLE, P_ACCEPT, P_RECV, P_SEND, P_RESULTS };

static struct {
    int cfd, tfd, ufd, conn;
    uint16_t data_port;
    uint8_t phase;
    struct nct_request req;
    nc_addr master, to;
    uint32_t td, i, seq, nsent, nrecvd, lost, seq_errors, refused;
    uint32_t pos; /* TCP: bytes of the current buffer (or results record) done */
    uint8_t hdr[NCT_HEADER_LEN];
    uint64_t deadline, next_send, bytes_in, bytes_out;
    /* What the master's address sent and answers have not spent yet (nc_guard.h, rule 3),
     * and the size of the datagram an echo answers. */
    uint64_t credit;
    uint32_t last_len;
#if NC_HAVE_IDLE_COUNTER
    uint64_t idle0, idle_t0;
#endif
#if NC_HAVE_BACKGROUND_LOAD
    uint64_t load_until; /* 0: no load running */
    uint64_t load_since;
    uint32_t load_pct;
#endif
} T;

#if NC_HAVE_BACKGROUND_LOAD
/* SET_LOAD: the running load (if any) stops and says what it ran, then `pct` starts. Each
 * level is measured on its own: "background load of 50% ran 49.8% of the time for 12010 ms"
 * (the platform's figure: the load's own time over the time it ran). */
static void set_load(uint32_t pct, const nc_addr *master, uint64_t now)
{
    if (T.load_pct) {
        uint64_t n[4];
        uint64_t got = (uint64_t)(nc_plat_background_load(0) * 10.0 + 0.5);
        n[0] = T.load_pct;
        n[1] = got / 10u;
        n[2] = got % 10u;
        n[3] = (now - T.load_since) / NC_MS;
        nc_role_log("nc-test", master, "background load of #% ran #.#% of the time for # ms", n, 4);
    }
    T.load_pct = pct;
    T.load_since = now;
    if (pct)
        (void)nc_plat_background_load((double)pct);
}
#endif

static const char *test_name(uint32_t code)
{
    switch (code) {
    case NCT_UDP_SEND:
        return "nc-test UDP send";
    case NCT_UDP_RECV:
        return "nc-test UDP recv";
    case NCT_UDP_ECHO:
        return "nc-test UDP echo";
    case NCT_TCP_SEND:
        return "nc-test TCP send";
    case NCT_TCP_RECV:
        return "nc-test TCP recv";
    default:
        return "nc-test TCP echo";
    }
}

void nc_nctest_init(void)
{
    uint16_t cport = nc_roles_wanted(NC_SVC_NCTEST), dport = nc_roles_wanted(NC_SVC_NCTEST_DATA);
    T.cfd = T.tfd = T.ufd = T.conn = -1;
    if (!nc_roles_enabled(NC_SVC_NCTEST))
        return;
    if (nc_role_listen(&dport, &T.tfd, &T.ufd) != 0 || nc_role_listen(&cport, NULL, &T.cfd) != 0) {
        uint64_t p[2];
        p[0] = nc_roles_wanted(NC_SVC_NCTEST);
        p[1] = nc_roles_wanted(NC_SVC_NCTEST_DATA);
        nc_role_log("nc-test", NULL, "cannot listen on UDP port # and data port #; the slave is off", p, 2);
        nc_tr_close(T.tfd);
        nc_tr_close(T.ufd);
        T.tfd = T.ufd = -1;
        return;
    }
    T.data_port = dport;
    nc_roles_bound(NC_SVC_NCTEST, cport);
    nc_roles_bound(NC_SVC_NCTEST_DATA, dport);
}

static void test_end(const char *why)
{
    uint64_t n[6];
    n[0] = T.nsent;
    n[1] = T.nrecvd;
    n[2] = T.bytes_in;
    n[3] = T.bytes_out;
    n[4] = T.lost;
    n[5] = T.seq_errors;
    nc_role_log(test_name(T.req.code), &T.master,
                why ? why : "sent # buffers, received # buffers (# bytes in, # bytes out), # timeouts", n, 5);
    if (T.conn >= 0) {
        nc_tr_shutdown(T.conn);
        nc_tr_close(T.conn);
    }
    T.conn = -1;
    T.phase = P_IDLE;
}

/* The next step of the lock-step loop, after buffer T.i was received (or timed out). */
static void next_buffer(uint64_t now)
{
    if (T.i >= T.req.nbufs) {
        T.phase = P_RESULTS;
        T.pos = 0;
        T.deadline = now + SEND_STALL_MS * NC_MS;
        return;
    }
    if (nct_slave_receives(T.req.code)) {
        T.phase = P_RECV;
        T.pos = 0;
        T.deadline = now + TEST_TIMEOUT_MS * NC_MS;
    } else {
        T.phase = P_SEND;
        T.pos = 0;
        T.deadline = now + SEND_STALL_MS * NC_MS;
    }
}

/* Buffer T.i is in (got) or timed out (!got). */
static void received(int got, uint64_t now)
{
    if (got) {
        uint32_t seq;
        T.nrecvd++;
        if (nct_header_decode(T.hdr, sizeof T.hdr, &seq) == 0 && seq != T.seq) {
            /* The slave resynchronises to the master's numbering. */
            T.seq = seq;
            T.seq_errors++;
        }
    } else {
        /* The stock slave echoes a whole buffer after a timeout too: it answers no datagram,
         * so only the guard's credit holds it (nc_guard.h). */
        T.last_len = T.td;
        if (++T.lost > NCT_MAX_ERRORS) {
            T.i = T.req.nbufs;
            next_buffer(now);
            return;
        }
    }
    if (nct_slave_sends(T.req.code)) {
        T.phase = P_SEND;
        T.pos = 0;
        T.deadline = now + SEND_STALL_MS * NC_MS;
    } else {
        T.seq++;
        T.i++;
        next_buffer(now);
    }
}

static void sent_one(uint64_t now)
{
    T.nsent++;
    T.seq++;
    T.i++;
    next_buffer(now);
}

static void start_test(uint64_t now)
{
    T.td = T.req.buflen + NCT_HEADER_LEN;
    T.i = T.seq = T.nsent = T.nrecvd = T.lost = T.seq_errors = T.refused = 0;
    T.bytes_in = T.bytes_out = 0;
    T.to = T.master;
    NC_ADDR_PORT(&T.to) = htons((uint16_t)T.req.master_port);
    if (nct_is_udp(T.req.code)) {
        /* Stale datagrams of an earlier test must not count in this one. */
        nc_addr from;
        while (nc_tr_recvfrom(T.ufd, nc_iobuf, NC_IO_BUF, &from) >= 0)
            continue;
        nc_iobuf_used();
        T.next_send = T.req.code == NCT_UDP_SEND ? now + UDP_HEAD_START_MS * NC_MS : now;
        next_buffer(now);
    } else {
        T.phase = P_ACCEPT;
        T.deadline = now + ACCEPT_WAIT_MS * NC_MS;
    }
}

/* The reflection guard's word on a UDP test (nc_guard.h): 0, or the NAK reason, the refusal
 * logged once per source. Reason 2, "the slave cannot handle the request": a stock master
 * prints "Slave denied <test> [n,len] test" for any NAK and goes on with its sequence. */
static uint32_t guard_udp_test(const struct nct_request *r, const nc_addr *from, uint64_t now)
{
    nc_addr to = *from;
    NC_ADDR_PORT(&to) = htons((uint16_t)r->master_port);
    if (nc_guard_check_source(&to, 0)) {
        uint64_t port = r->master_port;
        if (nc_guard_first_refusal(from, NC_GUARD_SOURCE, now))
            nc_role_log("nc-test", from, "a UDP test to port # refused: a service port or one of the responder's own",
                        &port, 1);
        return NCT_NAK_BAD_REQUEST;
    }
    if (r->code == NCT_UDP_SEND && !nc_guard_may_send_unprompted(from)) {
        if (nc_guard_first_refusal(from, NC_GUARD_UNPROMPTED, now))
            nc_role_log_to("nc_test", from,
                           " UDP_SEND to @ refused: not in " NC_ALLOW_HINT " (add " NC_ALLOW_HINT " @/%)", 0);
        return NCT_NAK_BAD_REQUEST;
    }
    return 0;
}

static void control_read(uint64_t now)
{
    nc_addr from;
    struct nct_request r;
    struct nct_limits lim;
    uint8_t reply[NCT_REPLY_LEN];
    uint32_t reason, ticks = 0;
    uint64_t count = 0;
    long n = nc_tr_recvfrom(T.cfd, nc_iobuf, NC_IO_BUF, &from);
    nc_iobuf_used();
    if (n < 0 || nc_guard_check_source(&from, 0))
        return;
    /* Refusals are logged once per source in a while: a flood of forged requests does not
     * flood the log (nc_guard_first_refusal). */
    if (nct_request_decode(nc_iobuf, (size_t)n, &r) != 0) {
        uint64_t k = (uint64_t)n;
        if (nc_guard_first_refusal(&from, NC_GUARD_REQUEST, now))
            nc_role_log("nc-test", &from, "a #-byte datagram is not a request", &k, 1);
        return;
    }
    memset(&lim, 0, sizeof lim);
    lim.data_port = T.data_port;
    lim.udp_max = NC_UDP_MAX;
    lim.max_nbufs = 1000000u;
    lim.max_udp_send = NC_NCTEST_MAX_UDP_SEND;
    lim.have_load = NC_HAVE_BACKGROUND_LOAD;
    lim.have_idle = NC_HAVE_IDLE_COUNTER;
    reason = nct_check(&r, &lim);
    if (reason != 0) {
        if (nc_guard_first_refusal(&from, NC_GUARD_REQUEST, now)) {
            uint64_t k[2];
            k[0] = r.code;
            k[1] = reason;
            nc_role_log("nc-test", &from, "refused request # (NAK reason #)", k, 2);
        }
    } else if (nct_is_udp(r.code)) {
        reason = guard_udp_test(&r, &from, now);
    }
    if (reason == 0) {
        switch (r.code) {
#if NC_HAVE_BACKGROUND_LOAD
        case NCT_SET_LOAD:
            set_load(r.nbufs, &from, now);
            T.load_until = r.nbufs > 0 ? now + LOAD_OFF_MS * NC_MS : 0;
            T.master = from;
            break;
#endif
#if NC_HAVE_IDLE_COUNTER
        case NCT_START_IDLE:
            T.idle0 = nc_plat_idle_count();
            T.idle_t0 = now;
            break;
        case NCT_STOP_IDLE:
            if (T.idle_t0) {
                /* At least one tick: a stock master divides by it (SIGFPE on a test under
                 * 10 ms, which a fast link makes common). */
                ticks = (uint32_t)((now - T.idle_t0) / (TICK_MS * NC_MS));
                if (ticks == 0)
                    ticks = 1;
                count = nc_plat_idle_count() - T.idle0;
            }
            break;
#endif
        case NCT_DISCONNECT:
#if NC_HAVE_BACKGROUND_LOAD
            set_load(0, &from, now);
            T.load_until = 0;
#endif
            nc_role_log("nc-test", &from, "the master disconnected", NULL, 0);
            break;
        default:
            break;
        }
    }
    nct_reply_encode(reply, reason == 0, r.seq, reason, ticks, count);
#if NC_HAVE_BACKGROUND_LOAD
    if (T.load_until)
        T.load_until = now + LOAD_OFF_MS * NC_MS; /* any request: the master is still there */
#endif
    if (reason == 0 && nct_is_test(r.code)) {
        T.req = r;
        T.master = from;
        start_test(now);
        /* The request's bytes less the reply's: what the test's answers may spend. */
        T.credit = (uint64_t)n - sizeof reply;
    }
    (void)nc_role_answer("nc-test", T.cfd, reply, sizeof reply, (uint64_t)n, &from, now);
}

void nc_nctest_watch(uint64_t now, uint64_t *wait_ns)
{
    uint64_t due = UINT64_MAX;
    if (T.cfd < 0)
        return;
#if NC_HAVE_BACKGROUND_LOAD
    if (T.load_until && T.phase == P_IDLE) {
        if (now >= T.load_until) {
            set_load(0, &T.master, now);
            T.load_until = 0;
            {
                uint64_t secs = LOAD_OFF_MS / 1000u;
                nc_role_log("nc-test", &T.master, "no request for # s: the background load is stopped", &secs, 1);
            }
        } else if (T.load_until - now < *wait_ns) {
            *wait_ns = T.load_until - now;
        }
    }
#endif
    if (T.phase == P_IDLE)
        nc_tr_watch(T.cfd, NC_TR_RD);
    nc_tr_watch(T.tfd, NC_TR_RD);
    if (T.phase != P_IDLE && now >= T.deadline) {
        if (T.phase == P_RECV && !nct_is_udp(T.req.code))
            /* Part of a buffer may have come: the stream cannot be followed any more. */
            test_end("the master sent nothing for 3 s: test abandoned after sending # buffers, receiving # "
                     "buffers (# bytes in, # bytes out)");
        else if (T.phase == P_RECV)
            received(0, now);
        else if (T.phase == P_ACCEPT)
            test_end("the master did not connect to the data port in time");
        else
            test_end("the master stopped reading: test abandoned");
    }
    if (T.phase == P_IDLE)
        return;
    if (T.phase == P_RECV || T.phase == P_ACCEPT)
        due = T.deadline;
    if (nct_is_udp(T.req.code)) {
        if (T.phase == P_RECV) {
            nc_tr_watch(T.ufd, NC_TR_RD);
        } else if (T.next_send > now) {
            due = T.next_send;
        } else {
            nc_tr_watch(T.ufd, NC_TR_WR); /* due now: when the socket takes it */
        }
    } else if (T.conn >= 0) {
        nc_tr_watch(T.conn, T.phase == P_RECV ? NC_TR_RD : NC_TR_WR);
    }
    if (due != UINT64_MAX) {
        uint64_t w = due > now ? due - now : 0;
        if (w < *wait_ns)
            *wait_ns = w;
    }
}

static void accept_data(uint64_t now)
{
    nc_addr peer;
    int fd = nc_tr_accept(T.tfd, &peer);
    if (fd < 0)
        return;
    if (T.phase != P_ACCEPT || !NC_SAME_IP(&peer, &T.master)) {
        /* Not this test's master, or no TCP test waiting: a stale or stray connection. */
        nc_tr_abort(fd);
        return;
    }
    nc_tr_nodelay(fd);
    T.conn = fd;
    next_buffer(now);
}

static void udp_io(uint64_t now)
{
    int k;
    if (T.phase == P_RECV && (nc_tr_ready(T.ufd) & NC_TR_RD)) {
        for (k = 0; k < 64 && T.phase == P_RECV; k++) {
            nc_addr from;
            long n = nc_tr_recvfrom(T.ufd, nc_iobuf, NC_IO_BUF, &from);
            if (n < 0)
                break;
            nc_iobuf_used();
            if (nc_guard_check_source(&from, 0) || !NC_SAME_IP(&from, &T.master)) {
                T.refused++;
                continue;
            }
            T.bytes_in += (uint64_t)n;
            T.credit += (uint64_t)n;
            T.last_len = (uint32_t)n;
            memset(T.hdr, 0, sizeof T.hdr);
            memcpy(T.hdr, nc_iobuf, (size_t)n < sizeof T.hdr ? (size_t)n : sizeof T.hdr);
            received(1, now);
        }
    }
    /* Sends: one per turn for echo (lock-step), paced batches for UDP_SEND. */
    for (k = 0; k < 32 && (T.phase == P_SEND || T.phase == P_RESULTS) && now >= T.next_send; k++) {
        uint32_t len = T.td;
        long w;
        if (T.phase == P_RESULTS) {
            nct_results_encode(nc_iobuf, T.req.seq, T.nsent, T.nrecvd);
            nc_iobuf_used();
            (void)nc_role_answer("nc-test", T.ufd, nc_iobuf, NCT_RESULTS_LEN, T.credit, &T.to, now);
            test_end(NULL);
            return;
        }
        /* An echo is never longer than the datagram it answers (a master sends whole buffers). */
        if (T.req.code == NCT_UDP_ECHO && T.last_len < len)
            len = T.last_len;
        memset(nc_iobuf, 0, T.td);
        nct_header_encode(nc_iobuf, T.seq, T.td);
        nc_iobuf_used();
        if (T.req.code == NCT_UDP_SEND) /* admitted for an allowed network only */
            w = nc_tr_sendto(T.ufd, nc_iobuf, len, &T.to);
        else
            w = nc_role_answer("nc-test", T.ufd, nc_iobuf, len, T.credit, &T.to, now);
        if (w == (long)len) {
            T.bytes_out += len;
            T.credit = T.credit > len ? T.credit - len : 0;
            sent_one(now);
        } else if (w == NC_TR_AGAIN || w == NC_TR_NOBUFS) {
            break; /* retried on a later turn */
        } else {
            /* Refused (an ICMP error) or held back by the guard: the stock slave does not
             * count a send that failed. */
            T.seq++;
            T.i++;
            next_buffer(now);
        }
        if (T.req.code == NCT_UDP_SEND)
            T.next_send += NC_NCTEST_UDP_GAP_US * 1000u;
    }
    if (T.req.code == NCT_UDP_SEND && T.next_send + 50 * NC_MS < now)
        T.next_send = now; /* fell behind (a stall): no burst to catch up */
}

static void tcp_io(uint64_t now)
{
    if (T.conn < 0)
        return;
    if (T.phase == P_RECV && (nc_tr_ready(T.conn) & NC_TR_RD)) {
        uint32_t want = T.td - T.pos;
        long n = nc_tr_recv(T.conn, nc_iobuf, want < NC_IO_BUF ? want : NC_IO_BUF);
        nc_iobuf_used();
        if (n > 0) {
            if (T.pos < NCT_HEADER_LEN) {
                uint32_t h = NCT_HEADER_LEN - T.pos;
                memcpy(T.hdr + T.pos, nc_iobuf, (uint32_t)n < h ? (uint32_t)n : h);
            }
            T.pos += (uint32_t)n;
            T.bytes_in += (uint64_t)n;
            T.deadline = now + TEST_TIMEOUT_MS * NC_MS;
            if (T.pos == T.td)
                received(1, now);
        } else if (n == 0 || n == NC_TR_FAIL) {
            test_end("the master closed the data connection: sent # buffers, received # buffers (# bytes in, "
                     "# bytes out), # timeouts");
        }
    } else if ((T.phase == P_SEND || T.phase == P_RESULTS) && (nc_tr_ready(T.conn) & NC_TR_WR)) {
        uint32_t total = T.phase == P_SEND ? T.td : NCT_RESULTS_LEN, chunk = total - T.pos;
        uint8_t head[NCT_HEADER_LEN > NCT_RESULTS_LEN ? NCT_HEADER_LEN : NCT_RESULTS_LEN];
        long w;
        if (chunk > NC_IO_BUF)
            chunk = NC_IO_BUF;
        if (T.phase == P_SEND)
            nct_header_encode(head, T.seq, T.td);
        else
            nct_results_encode(head, T.req.seq, T.nsent, T.nrecvd);
        memset(nc_iobuf, 0, chunk);
        if (T.pos < sizeof head) {
            uint32_t h = (T.phase == P_SEND ? NCT_HEADER_LEN : NCT_RESULTS_LEN) - T.pos;
            memcpy(nc_iobuf, head + T.pos, h < chunk ? h : chunk);
        }
        nc_iobuf_used();
        w = nc_tr_send(T.conn, nc_iobuf, chunk);
        if (w > 0) {
            T.pos += (uint32_t)w;
            T.deadline = now + SEND_STALL_MS * NC_MS;
            if (T.phase == P_SEND)
                T.bytes_out += (uint64_t)w;
            if (T.pos == total) {
                if (T.phase == P_SEND)
                    sent_one(now);
                else
                    test_end(NULL);
            }
        } else if (w == NC_TR_FAIL) {
            test_end("the data connection broke: sent # buffers, received # buffers (# bytes in, # bytes out), "
                     "# timeouts");
        }
    }
}

void nc_nctest_io(uint64_t now)
{
    if (T.cfd < 0)
        return;
    if (nc_tr_ready(T.tfd) & NC_TR_RD)
        accept_data(now);
    if (T.phase != P_IDLE && T.phase != P_ACCEPT) {
        if (nct_is_udp(T.req.code))
            udp_io(now);
        else
            tcp_io(now);
    }
    if (T.phase == P_IDLE && (nc_tr_ready(T.cfd) & NC_TR_RD))
        control_read(now);
}

#endif
