/* netchar-responder: the native netchar protocol's server end.
 *
 * One test at a time, one loop over the transport seam (nc_transport.h: BSD sockets or lwIP's
 * raw API), every buffer static (nc_config.h). The protocol is
 * docs/protocol.md; what the responder refuses it refuses with a `rejected` naming the flag,
 * before any traffic.
 */
#include "nc_responder.h"

#include <string.h>

#include "../nc_platform.h"
#include "nc_guard.h"
#include "nc_proto.h"
#include "nc_roles.h"
#include "nc_transport.h"

#if NC_ROLE_NATIVE

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull
#define NONE UINT64_MAX

/* ---------------------------------------------------------------- state */

enum conn_state { CS_FREE, CS_HELLO, CS_CONTROL, CS_DATA, CS_LINGER };

struct conn {
    int fd;
    uint8_t state;
    uint8_t got; /* hello bytes so far */
    uint8_t hello[NC_HELLO_LEN];
    uint64_t deadline;
    nc_addr peer;
};

enum test_state { T_NONE, T_AWAIT_REQUEST, T_AWAIT_STREAMS, T_AWAIT_START, T_RUNNING, T_CLOSING };

/* Which sequence numbers of a receiving UDP stream arrived. */
struct tracker {
    uint64_t next; /* highest number seen + 1 */
    uint64_t unique, late, duplicates, foreign, extent_max;
    uint32_t bits[NC_SEQ_WINDOW / 32];
};

/* |D| (RFC 3550 transit variation) histogram: 4 buckets per power of two of nanoseconds. */
#define NC_VAR_BUCKETS 160
struct jitter {
    int have;
    uint64_t last_sent, last_recv;
    uint64_t j16; /* 16 times the RFC 3550 jitter, ns (the RFC's integer form) */
    uint32_t hist[NC_VAR_BUCKETS];
    uint64_t samples;
};

struct stream {
    uint32_t id;
    uint8_t up;  /* client to server: the responder receives (or answers, rr) */
    uint8_t udp; /* datagrams on the UDP socket */
    uint8_t done;
    uint8_t have_addr;
    int conn; /* TCP: index into conns; -1 */
    nc_addr addr;
    uint16_t challenges;
    uint64_t bytes, packets, errors, sends;
    uint64_t last_ns; /* since the start: last byte or datagram */
    uint64_t budget;  /* sender: bytes to send; NONE for a timed test */
    /* UDP sender pacing */
    uint64_t seq, slot, next_due, rem;
    /* rr */
    uint64_t owed, partial;
    /* UDP receiver */
    uint64_t peer_sent; /* the client's total, NONE until sender_done */
    struct tracker tr;
    struct jitter jit;
#if NC_HAVE_TCP_SINK
    int sink; /* the port's nc_plat_tcp_sink counting this TCP receiver, -1: recv() does */
#endif
};

static struct {
    int lfd, ufd;
    uint16_t port;
    struct conn conns[NC_MAX_CONNS];
    int ctrl; /* index of the control connection, -1 */
    enum test_state ts;
    uint8_t rx[NC_CTRL_RX];
    size_t rx_len;
    uint8_t tx[NC_CTRL_TX];
    size_t tx_len, tx_off;
    uint64_t phase_deadline, last_rx, last_tx;
    struct nc_spec spec;
    uint8_t cookie[16];
    uint8_t key[16];
    uint32_t nstreams;
    struct stream streams[NC_MAX_STREAMS];
    uint64_t ready_ns;
    uint64_t peer_done_ns;
    int peer_done;
    int senders_reported;
    int stopping;
    int udp_blocked; /* a UDP send would block: wait for the socket */
    int iobuf_dirty;
    char error[160];
    uint64_t cpu_user0, cpu_sys0;
    uint64_t host_busy0, host_softirq0, host_total0;
    int load_on;     /* this test started the platform's background load */
    uint64_t idle0;  /* the idle counter at `ready` (--idle) */
#if NC_HAVE_TARGET_COUNTERS
    uint32_t counters0[NC_TARGET_COUNTERS_MAX]; /* the target's counters at `ready` */
#endif
} S;

/* Shared with the other roles (nc_roles.h): nothing stays in it across turns but the
 * senders' pattern, which nc_iobuf_used() marks for refilling. */
uint8_t nc_iobuf[NC_IO_BUF];
#define iobuf nc_iobuf
static char host_name[64], host_kernel[64], host_cpu[64];
static uint32_t host_cores;

void nc_iobuf_used(void)
{
    S.iobuf_dirty = 1;
}

static void logf1(const char *a, const char *b)
{
    char line[256];
    size_t n = strlen(a), m = b ? strlen(b) : 0;
    if (n > 120)
        n = 120;
    if (m > sizeof line - n - 1)
        m = sizeof line - n - 1;
    memcpy(line, a, n);
    if (b)
        memcpy(line + n, b, m);
    line[n + m] = 0;
    nc_plat_log(line);
}

static uint64_t since_start(uint64_t now);

/* A receiving TCP stream whose bytes the port counts (NC_HAVE_TCP_SINK): what it counted so
 * far joins the stream's; sink_end also hands the connection back before it is closed. */
#if NC_HAVE_TCP_SINK
static void sink_collect(struct stream *s)
{
    uint64_t last = 0, n;
    if (s->sink < 0)
        return;
    n = nc_plat_tcp_sink_take(s->sink, &last);
    if (n > 0) {
        s->bytes += n;
        s->last_ns = since_start(last);
    }
}

static void sink_end(struct stream *s)
{
    if (s->sink < 0)
        return;
    sink_collect(s);
    nc_plat_tcp_sink_stop(s->sink);
    s->sink = -1;
}
#else
#define sink_collect(s) ((void)(s))
#define sink_end(s) ((void)(s))
#endif

static int same_ip(const nc_addr *a, const nc_addr *b)
{
    return NC_SAME_IP(a, b);
}

static int same_addr(const nc_addr *a, const nc_addr *b)
{
    return NC_SAME_ADDR(a, b);
}

/* ---------------------------------------------------------------- SipHash-2-4 (tokens) */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

/* `n` SipRounds on v[0..3]: one copy of the round, called in a loop (a small target's code
 * budget matters more than the few cycles per UDP setup). */
static void sip_rounds(uint64_t v[4], int n)
{
    while (n-- > 0) {
        v[0] += v[1]; v[1] = ROTL(v[1], 13); v[1] ^= v[0]; v[0] = ROTL(v[0], 32);
        v[2] += v[3]; v[3] = ROTL(v[3], 16); v[3] ^= v[2];
        v[0] += v[3]; v[3] = ROTL(v[3], 21); v[3] ^= v[0];
        v[2] += v[1]; v[1] = ROTL(v[1], 17); v[1] ^= v[2]; v[2] = ROTL(v[2], 32);
    }
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* SipHash-2-4 of m (n bytes) under key. */
static uint64_t siphash(const uint8_t key[16], const uint8_t *m, size_t n)
{
    uint64_t k0 = le64(key), k1 = le64(key + 8), v[4];
    uint64_t b = (uint64_t)n << 56, w;
    size_t i, left = n & 7;
    v[0] = 0x736f6d6570736575ull ^ k0;
    v[1] = 0x646f72616e646f6dull ^ k1;
    v[2] = 0x6c7967656e657261ull ^ k0;
    v[3] = 0x7465646279746573ull ^ k1;
    for (i = 0; i + 8 <= n; i += 8) {
        w = le64(m + i);
        v[3] ^= w;
        sip_rounds(v, 2);
        v[0] ^= w;
    }
    for (i = 0; i < left; i++)
        b |= (uint64_t)m[n - left + i] << (8 * i);
    v[3] ^= b;
    sip_rounds(v, 2);
    v[0] ^= b;
    v[2] ^= 0xff;
    sip_rounds(v, 4);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* The challenge token for a setup from `from`: stateless, bound to cookie, stream, address. */
static void token_for(uint32_t id, const nc_addr *from, uint8_t out[16])
{
    uint8_t m[23 + NC_ADDR_IP_LEN];
    memcpy(m, S.cookie, 16);
    nc_put32(m + 16, id);
    memcpy(m + 20, NC_ADDR_IP(from), NC_ADDR_IP_LEN);
    memcpy(m + 20 + NC_ADDR_IP_LEN, &NC_ADDR_PORT(from), 2);
    m[sizeof m - 1] = 0;
    nc_put64(out, siphash(S.key, m, sizeof m));
    m[sizeof m - 1] = 1;
    nc_put64(out + 8, siphash(S.key, m, sizeof m));
}

/* ---------------------------------------------------------------- UDP accounting */

static int bit_get(const struct tracker *t, uint64_t s)
{
    uint32_t i = (uint32_t)(s % NC_SEQ_WINDOW);
    return (t->bits[i / 32] >> (i % 32)) & 1;
}

static void bit_set(struct tracker *t, uint64_t s, int on)
{
    uint32_t i = (uint32_t)(s % NC_SEQ_WINDOW);
    if (on)
        t->bits[i / 32] |= 1u << (i % 32);
    else
        t->bits[i / 32] &= ~(1u << (i % 32));
}

/* 1: counted (bytes and timing count), 0: duplicate (bytes count), -1: foreign. */
static int tracker_record(struct tracker *t, uint64_t seq)
{
    if (seq == NONE)
        return -1;
    if (seq >= t->next) {
        if (seq - t->next >= NC_SEQ_WINDOW) {
            memset(t->bits, 0, sizeof t->bits);
        } else {
            uint64_t s;
            for (s = t->next; s < seq; s++)
                bit_set(t, s, 0);
        }
        bit_set(t, seq, 1);
        t->next = seq + 1;
        t->unique++;
        return 1;
    }
    if (t->next - seq > NC_SEQ_WINDOW) {
        t->foreign++;
        return -1;
    }
    if (bit_get(t, seq)) {
        t->duplicates++;
        return 0;
    }
    bit_set(t, seq, 1);
    t->unique++;
    t->late++;
    if (t->next - 1 - seq > t->extent_max)
        t->extent_max = t->next - 1 - seq;
    return 1;
}

static unsigned var_bucket(uint64_t d)
{
    unsigned lg = 0, b;
    uint64_t x = d;
    if (d < 4)
        return (unsigned)d;
    while (x >= 8) {
        x >>= 1;
        lg++;
    }
    /* d = x * 2^lg with 4 <= x < 8 */
    b = 4 + lg * 4 + (unsigned)(x - 4);
    return b < NC_VAR_BUCKETS ? b : NC_VAR_BUCKETS - 1;
}

static uint64_t var_bucket_value(unsigned b)
{
    if (b < 4)
        return b;
    return (uint64_t)(4 + (b - 4) % 4) << ((b - 4) / 4);
}

static void jitter_record(struct jitter *j, uint64_t sent_ns, uint64_t recv_ns)
{
    if (j->have) {
        /* D = (R_j - R_i) - (S_j - S_i) in wrapping unsigned arithmetic (a forged send time
         * cannot overflow anything), |D| capped at 2^40 ns. */
        uint64_t d = (recv_ns - j->last_recv) - (sent_ns - j->last_sent);
        uint64_t ad = d >> 63 ? 0 - d : d;
        if (ad > (1ull << 40))
            ad = 1ull << 40;
        j->j16 += ad;
        j->j16 -= (j->j16 + 8) >> 4;
        j->hist[var_bucket(ad)]++;
        j->samples++;
    }
    j->have = 1;
    j->last_sent = sent_ns;
    j->last_recv = recv_ns;
}

/* The `pct`th percentile of |D| in ns (the bucket's lower bound: within 25% below). */
static uint64_t jitter_quantile_ns(const struct jitter *j, unsigned pct)
{
    uint64_t want, seen = 0;
    unsigned b;
    if (j->samples == 0)
        return 0;
    want = j->samples / 100 * pct + j->samples % 100 * pct / 100;
    if (want >= j->samples)
        want = j->samples - 1;
    for (b = 0; b < NC_VAR_BUCKETS; b++) {
        seen += j->hist[b];
        if (seen > want)
            return var_bucket_value(b);
    }
    return 0;
}

/* ---------------------------------------------------------------- connections */

static void conn_close(int i)
{
    if (S.conns[i].state != CS_FREE)
        nc_tr_close(S.conns[i].fd);
    S.conns[i].state = CS_FREE;
    S.conns[i].fd = -1;
}

/* A connection dropped for what it did or did not do (no hello, a bad one, evicted): reset,
 * its resources freed at once (nc_tr_abort). */
static void conn_drop(int i)
{
    if (S.conns[i].state != CS_FREE)
        nc_tr_abort(S.conns[i].fd);
    S.conns[i].state = CS_FREE;
    S.conns[i].fd = -1;
}

static void conn_linger(int i, uint64_t now)
{
    nc_tr_shutdown(S.conns[i].fd);
    S.conns[i].state = CS_LINGER;
    S.conns[i].deadline = now + NC_LINGER_MS * NS_PER_MS;
}

/* Writes a whole short answer on a fresh connection (its send buffer is empty). */
static void send_now(int fd, const uint8_t *b, size_t n)
{
    while (n > 0) {
        long w = nc_tr_send(fd, b, n);
        if (w <= 0)
            return;
        b += w;
        n -= (size_t)w;
    }
}

/* ---------------------------------------------------------------- control output */

static struct nc_out out_ctrl(void)
{
    struct nc_out o;
    /* Compact what went out already, so the frame has the whole free space. */
    if (S.tx_off > 0) {
        memmove(S.tx, S.tx + S.tx_off, S.tx_len - S.tx_off);
        S.tx_len -= S.tx_off;
        S.tx_off = 0;
    }
    o.buf = S.tx;
    o.cap = sizeof S.tx;
    o.len = S.tx_len;
    o.overflow = 0;
    return o;
}

static void commit_ctrl(struct nc_out *o, size_t mark, uint64_t now)
{
    if (nc_frame_end(o, mark) == 0) {
        S.tx_len = o->len;
        S.last_tx = now;
    } else {
        logf1("a message did not fit NC_CTRL_TX; raise it", NULL);
    }
}

static void send_simple(const char *type, uint64_t now)
{
    struct nc_out o = out_ctrl();
    size_t mark = nc_frame_begin(&o);
    nc_out_raw(&o, "{\"type\":\"");
    nc_out_raw(&o, type);
    nc_out_raw(&o, "\"}");
    commit_ctrl(&o, mark, now);
}

static void send_text(const char *type, const char *field, const char *text, uint64_t now)
{
    struct nc_out o = out_ctrl();
    size_t mark = nc_frame_begin(&o);
    nc_out_raw(&o, "{\"type\":\"");
    nc_out_raw(&o, type);
    nc_out_raw(&o, "\",\"");
    nc_out_raw(&o, field);
    nc_out_raw(&o, "\":");
    nc_out_str(&o, text);
    nc_out_raw(&o, "}");
    commit_ctrl(&o, mark, now);
}

static void send_accepted(uint64_t now)
{
    struct nc_out o = out_ctrl();
    size_t mark = nc_frame_begin(&o);
    nc_out_raw(&o, "{\"type\":\"accepted\",\"cookie\":\"");
    nc_out_hex(&o, S.cookie, 16);
    nc_out_raw(&o, "\",\"concurrent_tests\":1,\"host\":{\"hostname\":");
    nc_out_str(&o, host_name);
    nc_out_raw(&o, ",\"kernel\":");
    nc_out_str(&o, host_kernel);
    nc_out_raw(&o, ",\"cpu_model\":");
    nc_out_str(&o, host_cpu);
    nc_out_raw(&o, ",\"cores\":");
    nc_out_u64(&o, host_cores);
    nc_out_raw(&o, "},\"server_version\":\"netchar-responder " NC_RESPONDER_VERSION "\"}");
    commit_ctrl(&o, mark, now);
}

static void send_sender_done(uint64_t now)
{
    struct nc_out o = out_ctrl();
    size_t mark = nc_frame_begin(&o);
    uint32_t i;
    int first = 1;
    nc_out_raw(&o, "{\"type\":\"sender_done\",\"totals\":[");
    for (i = 0; i < S.nstreams; i++) {
        const struct stream *s = &S.streams[i];
        if (s->up)
            continue;
        nc_out_raw(&o, first ? "{\"id\":" : ",{\"id\":");
        first = 0;
        nc_out_u64(&o, s->id);
        nc_out_raw(&o, ",\"bytes\":");
        nc_out_u64(&o, s->bytes);
        nc_out_raw(&o, ",\"packets\":");
        nc_out_u64(&o, s->udp ? s->packets : 0);
        nc_out_raw(&o, "}");
    }
    nc_out_raw(&o, "]}");
    commit_ctrl(&o, mark, now);
}

static void out_stream(struct nc_out *o, const struct stream *s)
{
    nc_out_raw(o, "{\"id\":");
    nc_out_u64(o, s->id);
    nc_out_raw(o, s->up ? ",\"flow\":\"up\",\"role\":\"receiver\"" : ",\"flow\":\"down\",\"role\":\"sender\"");
    nc_out_raw(o, ",\"measured_by\":\"server\",\"bytes\":");
    nc_out_u64(o, s->bytes);
    nc_out_raw(o, ",\"seconds\":");
    nc_out_fixed(o, s->last_ns, 9);
    nc_out_raw(o, ",\"omitted_bytes\":0");
    if (s->udp && !s->up) {
        nc_out_raw(o, ",\"udp_sent\":{\"packets\":");
        nc_out_u64(o, s->packets);
        nc_out_raw(o, ",\"send_errors\":");
        nc_out_u64(o, s->errors);
        nc_out_raw(o, ",\"gso\":false,\"sends\":");
        nc_out_u64(o, s->sends);
        nc_out_raw(o, "}");
    } else if (s->udp && S.spec.kind == NC_UDP) {
        const struct tracker *t = &s->tr;
        uint64_t sent = s->peer_sent == NONE ? t->next : s->peer_sent;
        uint64_t lost = sent > t->unique ? sent - t->unique : 0;
        uint64_t all = t->unique + lost;
        nc_out_raw(o, ",\"udp_received\":{\"packets\":");
        nc_out_u64(o, t->unique);
        nc_out_raw(o, ",\"lost\":");
        nc_out_u64(o, lost);
        nc_out_raw(o, ",\"loss_percent\":");
        /* percent, 6 decimals, in integers: lost * 10^8 / all */
        nc_out_fixed(o, !all ? 0 : lost <= UINT64_MAX / 100000000u ? lost * 100000000u / all
                                                                   : lost / (all / 100000000u), 6);
        nc_out_raw(o, ",\"out_of_order\":");
        nc_out_u64(o, t->late);
        nc_out_raw(o, ",\"duplicates\":");
        nc_out_u64(o, t->duplicates);
        nc_out_raw(o, ",\"reorder_extent_max\":");
        nc_out_u64(o, t->extent_max);
        nc_out_raw(o, ",\"jitter_ms\":");
        nc_out_fixed(o, s->jit.j16 / 16, 6);
        nc_out_raw(o, ",\"jitter_p50_ms\":");
        nc_out_fixed(o, jitter_quantile_ns(&s->jit, 50), 6);
        nc_out_raw(o, ",\"jitter_p99_ms\":");
        nc_out_fixed(o, jitter_quantile_ns(&s->jit, 99), 6);
        nc_out_raw(o, ",\"kernel_drops\":0,\"coalesced\":false,\"foreign\":");
        nc_out_u64(o, t->foreign);
        nc_out_raw(o, "}");
    }
    nc_out_raw(o, ",\"intervals\":[]}");
}

/* 100 * part / whole with 6 decimals, as an integer (part and whole in the same unit). */
static uint64_t pct(uint64_t part, uint64_t whole)
{
    if (part <= UINT64_MAX / 100000000u)
        return part * 100000000u / whole;
    return part / (whole / 100000000u + 1);
}

/* Stops the background load this test started; what it achieved, in millionths of a percent. */
static uint64_t stop_load(void)
{
    uint64_t achieved = 0;
#if NC_HAVE_BACKGROUND_LOAD
    if (S.load_on)
        achieved = (uint64_t)(nc_plat_background_load(0) * 1e6);
#endif
    S.load_on = 0;
    return achieved;
}

#if NC_HAVE_TARGET_COUNTERS
/* The target's own figures over the test, into the results: "target": {"idle_count",
 * "idle_per_second" (with an idle counter), "counters": {name: change, ...} (those that
 * changed)}; and one log line with each change and, in brackets, the count since boot. */
static void out_target(struct nc_out *o)
{
    uint32_t now[NC_TARGET_COUNTERS_MAX];
    char text[400];
    struct nc_out line;
    unsigned i, n = nc_plat_counters(now);
    const char *sep = "";
    line.buf = (uint8_t *)text;
    line.cap = sizeof text - 1;
    line.len = 0;
    line.overflow = 0;
    nc_out_raw(o, ",\"target\":{");
#if NC_HAVE_IDLE_COUNTER
    nc_out_raw(o, "\"idle_count\":");
    nc_out_u64(o, nc_plat_idle_count() - S.idle0);
    nc_out_raw(o, ",\"idle_per_second\":");
    nc_out_u64(o, nc_plat_idle_per_second());
    nc_out_raw(o, ",");
#endif
    nc_out_raw(o, "\"counters\":{");
    nc_out_raw(&line, "target counters over the test (since boot):");
    for (i = 0; i < n; i++) {
        uint32_t d = now[i] - S.counters0[i];
        if (!d)
            continue;
        nc_out_raw(o, sep);
        nc_out_str(o, nc_plat_counter_name(i));
        nc_out_raw(o, ":");
        nc_out_u64(o, d);
        sep = ",";
        nc_out_raw(&line, " ");
        nc_out_raw(&line, nc_plat_counter_name(i));
        nc_out_raw(&line, " ");
        nc_out_u64(&line, d);
        nc_out_raw(&line, " (");
        nc_out_u64(&line, now[i]);
        nc_out_raw(&line, ")");
    }
    nc_out_raw(o, "}}");
    text[line.len] = 0;
    nc_plat_log(text);
}
#endif

static void send_results(uint64_t now)
{
    struct nc_out o = out_ctrl();
    size_t mark = nc_frame_begin(&o);
    uint32_t i;
    /* CPU figures in integers: microseconds, and percent with 6 decimals. */
    uint64_t wall_us = (now - S.ready_ns) / 1000, user = 0, sys = 0, cores = host_cores ? host_cores : 1;
#if NC_HAVE_CPU_TIMES
    {
        uint64_t u, s;
        nc_plat_cpu_times(&u, &s);
        user = u - S.cpu_user0;
        sys = s - S.cpu_sys0;
    }
#endif
    uint64_t host_busy = 0, host_softirq = 0, host_total = 0;
#if NC_HAVE_HOST_CPU
    nc_plat_host_cpu(&host_busy, &host_softirq, &host_total);
    host_busy -= S.host_busy0;
    host_softirq -= S.host_softirq0;
    host_total -= S.host_total0;
    if (host_busy > host_total || host_softirq > host_total)
        host_busy = host_softirq = host_total = 0;
#endif
    if (wall_us == 0)
        wall_us = 1;
    for (i = 0; i < S.nstreams; i++)
        sink_collect(&S.streams[i]);
    nc_out_raw(&o, "{\"type\":\"results\",\"streams\":[");
    for (i = 0; i < S.nstreams; i++) {
        if (i)
            nc_out_raw(&o, ",");
        out_stream(&o, &S.streams[i]);
    }
    nc_out_raw(&o, "],\"cpu\":{\"user_pct\":");
    nc_out_fixed(&o, pct(user, wall_us), 6);
    nc_out_raw(&o, ",\"system_pct\":");
    nc_out_fixed(&o, pct(sys, wall_us), 6);
    nc_out_raw(&o, ",\"total_pct\":");
    nc_out_fixed(&o, pct(user + sys, wall_us), 6);
    nc_out_raw(&o, ",\"total_pct_of_all_cpus\":");
    nc_out_fixed(&o, pct(user + sys, wall_us) / cores, 6);
    nc_out_raw(&o, ",\"host_busy_pct\":");
    nc_out_fixed(&o, host_total ? pct(host_busy, host_total) : 0, 6);
    nc_out_raw(&o, ",\"host_softirq_pct\":");
    nc_out_fixed(&o, host_total ? pct(host_softirq, host_total) : 0, 6);
    nc_out_raw(&o, ",\"user_seconds\":");
    nc_out_fixed(&o, user, 6);
    nc_out_raw(&o, ",\"system_seconds\":");
    nc_out_fixed(&o, sys, 6);
    nc_out_raw(&o, ",\"wall_seconds\":");
    nc_out_fixed(&o, wall_us, 6);
    nc_out_raw(&o, ",\"cpus\":");
    nc_out_u64(&o, host_cores ? host_cores : 1);
    if (S.load_on) {
        nc_out_raw(&o, ",\"background_load_pct\":");
        nc_out_fixed(&o, stop_load(), 6);
    }
#if NC_HAVE_IDLE_COUNTER
    if (S.spec.measure_idle) {
        /* Idle counts over what an unloaded machine counts in the test's time, in %. */
        uint64_t whole = nc_plat_idle_per_second() * wall_us / 1000000u;
        uint64_t idle = pct(nc_plat_idle_count() - S.idle0, whole ? whole : 1);
        nc_out_raw(&o, ",\"idle_pct\":");
        nc_out_fixed(&o, idle > 100000000u ? 100000000u : idle, 6);
    }
#endif
    nc_out_raw(&o, "}");
#if NC_HAVE_TARGET_COUNTERS
    out_target(&o);
#endif
    nc_out_raw(&o, ",\"error\":");
    if (S.error[0])
        nc_out_str(&o, S.error);
    else
        nc_out_raw(&o, "null");
    nc_out_raw(&o, "}");
    commit_ctrl(&o, mark, now);
}

/* ---------------------------------------------------------------- test life cycle */

static void reset_test(void)
{
    uint32_t i;
    for (i = 0; i < S.nstreams; i++) {
        int c = S.streams[i].conn;
        sink_end(&S.streams[i]);
        if (c >= 0 && S.conns[c].state == CS_DATA)
            conn_close(c);
    }
    if (S.ctrl >= 0 && S.conns[S.ctrl].state == CS_CONTROL)
        conn_close(S.ctrl);
    S.ctrl = -1;
    S.ts = T_NONE;
    S.nstreams = 0;
    S.rx_len = S.tx_len = S.tx_off = 0;
    S.error[0] = 0;
    S.peer_done = S.senders_reported = S.stopping = S.udp_blocked = 0;
    (void)stop_load();
}

/* Ends the session: an `error` message when the connection still works, then a gentle close. */
static void end_session(const char *why, uint64_t now)
{
    uint32_t i;
    int c = S.ctrl;
    logf1("test ended: ", why);
    send_text("error", "message", why, now);
    if (c >= 0 && S.tx_len > S.tx_off)
        (void)nc_tr_send(S.conns[c].fd, S.tx + S.tx_off, S.tx_len - S.tx_off);
    for (i = 0; i < S.nstreams; i++) {
        int d = S.streams[i].conn;
        sink_end(&S.streams[i]);
        if (d >= 0 && S.conns[d].state == CS_DATA)
            conn_close(d);
        S.streams[i].conn = -1;
    }
    S.ctrl = -1;
    reset_test();
    if (c >= 0 && S.conns[c].state == CS_CONTROL)
        conn_linger(c, now);
}

static void set_error(const char *why)
{
    size_t n = strlen(why);
    if (S.error[0])
        return;
    if (n >= sizeof S.error)
        n = sizeof S.error - 1;
    memcpy(S.error, why, n);
    S.error[n] = 0;
}

static uint64_t u_min(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* A reason the spec cannot run here, formatted into buf; NULL when it can. */
static const char *check_spec(const struct nc_spec *sp, char *buf, size_t cap)
{
    struct nc_out o;
    uint32_t total = sp->streams * (sp->direction == NC_BIDIR ? 2u : 1u);
    o.buf = (uint8_t *)buf;
    o.cap = cap - 1;
    o.len = 0;
    o.overflow = 0;
    if (sp->refused) {
        nc_out_raw(&o, sp->refused);
        nc_out_raw(&o, " is not supported by netchar-responder");
        if (sp->refused_note)
            nc_out_raw(&o, sp->refused_note);
    } else if (sp->streams == 0 || total > NC_MAX_STREAMS) {
        nc_out_raw(&o, "-P ");
        nc_out_u64(&o, sp->streams);
        nc_out_raw(&o, sp->direction == NC_BIDIR ? " with --bidir: " : ": ");
        nc_out_raw(&o, "this netchar-responder takes at most ");
        nc_out_u64(&o, NC_MAX_STREAMS);
        nc_out_raw(&o, " streams in all (NC_MAX_STREAMS); ask for fewer");
    } else if (sp->block_bytes == 0 || sp->block_bytes > (64u << 20)) {
        nc_out_raw(&o, "-l must be between 1 byte and 64 MiB");
    } else if (sp->kind == NC_UDP && (sp->block_bytes < NC_DGRAM_HEADER || sp->block_bytes > NC_UDP_MAX)) {
        nc_out_raw(&o, "-l ");
        nc_out_u64(&o, sp->block_bytes);
        nc_out_raw(&o, ": this netchar-responder takes UDP payloads of 24 to ");
        nc_out_u64(&o, NC_UDP_MAX);
        nc_out_raw(&o, " bytes (NC_UDP_MAX)");
    } else if (!sp->end_is_bytes && (sp->end_us == 0 || sp->end_us > NC_MAX_DURATION_S * 1000000ull)) {
        nc_out_raw(&o, "-t: this netchar-responder runs tests of up to ");
        nc_out_u64(&o, NC_MAX_DURATION_S);
        nc_out_raw(&o, " s");
    } else if (sp->end_is_bytes && sp->end_bytes == 0) {
        nc_out_raw(&o, "-n must be at least 1 byte");
    } else if (sp->kind == NC_UDP && sp->rate != NC_RATE_UNLIMITED && sp->rate_value == 0) {
        nc_out_raw(&o, "-b/--pps: a rate of 0 (use -b 0 for unlimited)");
    } else if (sp->kind == NC_UDP && sp->grace_us > 60000000u) {
        nc_out_raw(&o, "--grace: at most 60 s");
    } else if (sp->kind == NC_RR && sp->direction != NC_UP) {
        nc_out_raw(&o, "rr runs from the client only (no -R or --bidir)");
    } else if (sp->kind == NC_RR && (sp->request_bytes == 0 || sp->response_bytes == 0 ||
                                     sp->rr_timeout_us > 60000000u)) {
        nc_out_raw(&o, "rr: request and response sizes must be at least 1, --timeout at most 60 s");
    } else if (sp->kind == NC_RR && sp->rr_udp &&
               (sp->request_bytes > NC_UDP_MAX || sp->response_bytes > NC_UDP_MAX)) {
        nc_out_raw(&o, "rr --udp: this netchar-responder takes requests and responses of up to ");
        nc_out_u64(&o, NC_UDP_MAX);
        nc_out_raw(&o, " bytes (NC_UDP_MAX)");
    } else {
        return NULL;
    }
    buf[o.len] = 0;
    return buf;
}

static int any_udp_stream(void)
{
    return S.spec.kind == NC_UDP || (S.spec.kind == NC_RR && S.spec.rr_udp);
}

static void admit(const struct nc_spec *sp, uint64_t now)
{
    uint32_t i, per = sp->streams;
    memset(S.streams, 0, sizeof S.streams);
    S.spec = *sp;
    S.nstreams = per * (sp->direction == NC_BIDIR ? 2u : 1u);
    nc_plat_random(S.cookie, sizeof S.cookie);
    nc_plat_random(S.key, sizeof S.key);
    for (i = 0; i < S.nstreams; i++) {
        struct stream *s = &S.streams[i];
        uint32_t index = i % per;
        s->id = i + 1;
        s->up = sp->direction == NC_UP || (sp->direction == NC_BIDIR && i < per);
        s->udp = (uint8_t)any_udp_stream();
        s->conn = -1;
#if NC_HAVE_TCP_SINK
        s->sink = -1;
#endif
        s->peer_sent = NONE;
        s->budget = NONE;
        if (sp->end_is_bytes)
            s->budget = sp->end_bytes / per + (index < sp->end_bytes % per ? 1 : 0);
    }
    send_accepted(now);
    S.ts = T_AWAIT_STREAMS;
    S.phase_deadline = now + NC_PHASE_TIMEOUT_MS * NS_PER_MS;
}

static void check_all_in(uint64_t now)
{
    uint32_t i;
    for (i = 0; i < S.nstreams; i++) {
        const struct stream *s = &S.streams[i];
        if (s->udp ? !s->have_addr : s->conn < 0)
            return;
    }
    /* This end's clock starts with `ready`: the client cannot send before it. */
    send_simple("ready", now);
    S.ready_ns = now;
    S.ts = T_AWAIT_START;
    S.phase_deadline = now + NC_PHASE_TIMEOUT_MS * NS_PER_MS;
#if NC_HAVE_HOST_CPU
    nc_plat_host_cpu(&S.host_busy0, &S.host_softirq0, &S.host_total0);
#endif
#if NC_HAVE_CPU_TIMES
    nc_plat_cpu_times(&S.cpu_user0, &S.cpu_sys0);
#endif
#if NC_HAVE_BACKGROUND_LOAD
    if (S.spec.load_micro_pct > 0) {
        (void)nc_plat_background_load((double)S.spec.load_micro_pct / 1e6);
        S.load_on = 1;
    }
#endif
#if NC_HAVE_IDLE_COUNTER
    S.idle0 = nc_plat_idle_count();
#endif
#if NC_HAVE_TARGET_COUNTERS
    (void)nc_plat_counters(S.counters0);
#endif
}


static void on_request(const struct nc_client_msg *m, uint64_t now)
{
    char why[160];
    const char *reason = check_spec(&m->spec, why, sizeof why);
    if (reason) {
        logf1("refused: ", reason);
        send_text("rejected", "reason", reason, now);
        S.ts = T_CLOSING;
        S.phase_deadline = now + NC_LINGER_MS * NS_PER_MS;
        return;
    }
    admit(&m->spec, now);
}

static void stop_senders(void)
{
    S.stopping = 1;
}

static void on_frame(const uint8_t *p, size_t n, uint64_t now)
{
    static struct nc_client_msg m;
    if (nc_parse_client_msg(p, n, &m) != 0) {
        end_session("malformed message from the client", now);
        return;
    }
    if (m.type == NC_MSG_KEEPALIVE)
        return;
    switch (S.ts) {
    case T_AWAIT_REQUEST:
        if (m.type == NC_MSG_REQUEST) {
            on_request(&m, now);
            return;
        }
        break;
    case T_AWAIT_STREAMS:
    case T_AWAIT_START:
        if (m.type == NC_MSG_START && S.ts == T_AWAIT_START) {
            S.ts = T_RUNNING;
            return;
        }
        if (m.type == NC_MSG_STOP) {
            end_session("stopped by the client", now);
            return;
        }
        break;
    case T_RUNNING:
        if (m.type == NC_MSG_SENDER_DONE) {
            uint32_t i, k;
            for (k = 0; k < m.n_totals; k++)
                for (i = 0; i < S.nstreams; i++)
                    if (S.streams[i].id == m.totals[k].id && S.streams[i].up)
                        S.streams[i].peer_sent = m.totals[k].packets;
            S.peer_done = 1;
            S.peer_done_ns = now;
            return;
        }
        if (m.type == NC_MSG_STOP) {
            set_error("stopped by the client");
            stop_senders();
            return;
        }
        break;
    default:
        return; /* closing: whatever comes is read and dropped */
    }
    end_session("unexpected message for the state of the test", now);
}

/* ---------------------------------------------------------------- control connection I/O */

static void control_read(uint64_t now)
{
    int c = S.ctrl;
    long n;
    if (S.ts == T_CLOSING) {
        n = nc_tr_drop(S.conns[c].fd, iobuf, sizeof iobuf);
        S.iobuf_dirty = 1;
        if (n == 0 || n == NC_TR_FAIL)
            reset_test();
        return;
    }
    n = nc_tr_recv(S.conns[c].fd, S.rx + S.rx_len, sizeof S.rx - S.rx_len);
    if (n == 0) {
        if (S.ts == T_AWAIT_REQUEST) {
            reset_test();
            return;
        }
        end_session("the client closed the control connection", now);
        return;
    }
    if (n < 0) {
        if (n == NC_TR_FAIL)
            end_session("the control connection failed", now);
        return;
    }
    S.rx_len += (size_t)n;
    S.last_rx = now;
    while (S.ctrl >= 0 && S.ts != T_CLOSING && S.rx_len >= 4) {
        uint32_t len = nc_get32(S.rx);
        if (len > sizeof S.rx - 4) {
            end_session("a control frame larger than this netchar-responder takes (NC_CTRL_RX)", now);
            return;
        }
        if (S.rx_len < 4 + (size_t)len)
            break;
        on_frame(S.rx + 4, len, now);
        if (S.ctrl < 0)
            return;
        memmove(S.rx, S.rx + 4 + len, S.rx_len - 4 - len);
        S.rx_len -= 4 + (size_t)len;
    }
}

static void control_write(uint64_t now)
{
    long w;
    if (S.ctrl < 0 || S.tx_len <= S.tx_off)
        return;
    w = nc_tr_send(S.conns[S.ctrl].fd, S.tx + S.tx_off, S.tx_len - S.tx_off);
    if (w > 0) {
        S.tx_off += (size_t)w;
        if (S.tx_off == S.tx_len)
            S.tx_off = S.tx_len = 0;
    } else if (w == NC_TR_FAIL) {
        end_session("the control connection failed", now);
    }
}

/* ---------------------------------------------------------------- hellos */

static void refuse_conn(int i, const char *type_json, uint64_t now)
{
    uint8_t b[NC_HELLO_LEN + 200];
    struct nc_out o;
    size_t mark;
    nc_hello_server(b);
    o.buf = b;
    o.cap = sizeof b;
    o.len = NC_HELLO_LEN;
    o.overflow = 0;
    mark = nc_frame_begin(&o);
    nc_out_raw(&o, type_json);
    if (nc_frame_end(&o, mark) == 0)
        send_now(S.conns[i].fd, b, o.len);
    conn_linger(i, now);
}

static void on_hello(int i, uint64_t now)
{
    struct conn *c = &S.conns[i];
    struct nc_hello h;
    if (nc_hello_decode(c->hello, &h) != 0) {
        logf1("dropped a connection: not a netchar hello", NULL);
        conn_drop(i);
        return;
    }
    if (h.version != NC_PROTOCOL_VERSION) {
        refuse_conn(i,
                    "{\"type\":\"error\",\"message\":\"the peer speaks another netchar control protocol version; "
                    "this netchar-responder speaks v2\"}",
                    now);
        return;
    }
    if (h.role == NC_ROLE_CONTROL) {
        uint8_t b[NC_HELLO_LEN];
        if (S.ts != T_NONE) {
            refuse_conn(i, "{\"type\":\"busy\",\"running\":1,\"max\":1}", now);
            return;
        }
        /* Control messages are small and each one is awaited: no Nagle delay on them. */
        nc_tr_nodelay(c->fd);
        S.ctrl = i;
        c->state = CS_CONTROL;
        S.ts = T_AWAIT_REQUEST;
        S.rx_len = S.tx_len = S.tx_off = 0;
        S.error[0] = 0;
        S.last_rx = S.last_tx = now;
        S.phase_deadline = c->deadline - NC_HELLO_TIMEOUT_MS * NS_PER_MS + NC_REQUEST_TIMEOUT_MS * NS_PER_MS;
        nc_hello_server(b);
        memcpy(S.tx, b, sizeof b);
        S.tx_len = sizeof b;
        return;
    }
    if (h.role == NC_ROLE_DATA && S.ts == T_AWAIT_STREAMS && memcmp(h.cookie, S.cookie, 16) == 0 &&
        S.ctrl >= 0 && same_ip(&c->peer, &S.conns[S.ctrl].peer) && h.stream_id >= 1 &&
        h.stream_id <= S.nstreams) {
        struct stream *s = &S.streams[h.stream_id - 1];
        if (!s->udp && s->conn < 0) {
            s->conn = i;
            c->state = CS_DATA;
            if (S.spec.nodelay || S.spec.kind == NC_RR)
                nc_tr_nodelay(c->fd);
#if NC_HAVE_TCP_SINK
            /* A TCP receiver: the port counts what arrives from here on (what came with or
             * after the hello before this is still read below, so every byte counts once). */
            if (s->up && S.spec.kind == NC_TCP)
                s->sink = nc_plat_tcp_sink_start(c->fd);
#endif
            check_all_in(now);
            return;
        }
    }
    logf1("dropped a data connection that matches no stream of the running test", NULL);
    conn_drop(i);
}

static void hello_read(int i, uint64_t now)
{
    struct conn *c = &S.conns[i];
    long n = nc_tr_recv(c->fd, c->hello + c->got, (size_t)(NC_HELLO_LEN - c->got));
    if (n == 0 || n == NC_TR_FAIL) {
        conn_close(i);
        return;
    }
    if (n < 0)
        return;
    c->got = (uint8_t)(c->got + n);
    if (c->got == NC_HELLO_LEN)
        on_hello(i, now);
}

/* 1 when a connection was accepted (taken or refused), 0 when none was waiting. */
static int do_accept(uint64_t now)
{
    nc_addr peer;
    int i, fd = nc_tr_accept(S.lfd, &peer);
    if (fd < 0)
        return 0;
    for (i = 0; i < NC_MAX_CONNS; i++)
        if (S.conns[i].state == CS_FREE)
            break;
    if (i == NC_MAX_CONNS) {
        /* Every slot taken: the oldest connection that is still silent (no whole hello) or
         * only lingering gives way, so connections that say nothing cannot lock a small
         * target out for their 5 s; a genuine hello takes microseconds. */
        int oldest = -1;
        for (i = 0; i < NC_MAX_CONNS; i++) {
            const struct conn *c = &S.conns[i];
            if ((c->state == CS_HELLO || c->state == CS_LINGER) &&
                (oldest < 0 || c->deadline < S.conns[oldest].deadline))
                oldest = i;
        }
        if (oldest < 0) {
            nc_tr_abort(fd);
            logf1("refused a connection: all NC_MAX_CONNS slots hold a running test", NULL);
            return 1;
        }
        if (S.conns[oldest].state == CS_HELLO)
            logf1("dropped the oldest silent connection: all NC_MAX_CONNS slots in use", NULL);
        conn_drop(oldest);
        i = oldest;
    }
    S.conns[i].fd = fd;
    S.conns[i].state = CS_HELLO;
    S.conns[i].got = 0;
    S.conns[i].peer = peer;
    S.conns[i].deadline = now + NC_HELLO_TIMEOUT_MS * NS_PER_MS;
    return 1;
}

/* ---------------------------------------------------------------- data plane */

static void fill_iobuf(void)
{
    if (S.iobuf_dirty) {
        size_t k;
        for (k = 0; k < sizeof iobuf; k++)
            iobuf[k] = (uint8_t)('0' + k % 10);
        S.iobuf_dirty = 0;
    }
}

static uint64_t since_start(uint64_t now)
{
    return now > S.ready_ns ? now - S.ready_ns : 0;
}

static uint64_t test_deadline(void)
{
    return S.ready_ns + S.spec.end_us * 1000u;
}

/* TCP receiver (or rr responder) reads: only the counts matter, the bytes are dropped. */
static void tcp_read(struct stream *s, uint64_t now)
{
    int k;
    sink_collect(s);
    for (k = 0; k < 16; k++) {
        long n = nc_tr_drop(S.conns[s->conn].fd, iobuf, sizeof iobuf);
        S.iobuf_dirty = 1;
        if (n > 0) {
            s->bytes += (uint64_t)n;
            s->last_ns = since_start(now);
            if (S.spec.kind == NC_RR) {
                s->partial += (uint64_t)n;
                s->owed += (s->partial / S.spec.request_bytes) * S.spec.response_bytes;
                s->packets += s->partial / S.spec.request_bytes;
                s->partial %= S.spec.request_bytes;
                return; /* answer before reading more */
            }
            continue;
        }
        if (n == 0) {
            /* The end of the stream: the sink has seen every byte before it. */
            sink_end(s);
            s->done = 1;
            conn_close(s->conn);
            s->conn = -1;
        } else if (n == NC_TR_FAIL) {
            set_error("a data connection failed");
            sink_end(s);
            s->done = 1;
            conn_close(s->conn);
            s->conn = -1;
        }
        return;
    }
}

/* rr responses owed. */
static void rr_write(struct stream *s)
{
    static uint8_t rs[256];
    int k;
    /* Responses are 'r' bytes, as the Rust responder's. */
    if (rs[0] != 'r')
        memset(rs, 'r', sizeof rs);
    for (k = 0; k < 64 && s->owed > 0; k++) {
        size_t n = (size_t)u_min(s->owed, sizeof rs);
        long w = nc_tr_send(S.conns[s->conn].fd, rs, n);
        if (w > 0) {
            s->owed -= (uint64_t)w;
        } else {
            if (w == NC_TR_FAIL) {
                set_error("a data connection failed");
                s->done = 1;
                conn_close(s->conn);
                s->conn = -1;
            }
            return;
        }
    }
}

static void sender_finished(struct stream *s)
{
    s->done = 1;
    if (!s->udp && s->conn >= 0) {
        /* The client reads until end-of-file: every byte written counts. */
        nc_tr_shutdown(S.conns[s->conn].fd);
        conn_close(s->conn);
        s->conn = -1;
    }
}

static int sender_should_stop(struct stream *s, uint64_t now)
{
    if (S.stopping)
        return 1;
    if (s->budget != NONE)
        return s->bytes >= s->budget;
    return now >= test_deadline();
}

static void tcp_write(struct stream *s, uint64_t now)
{
    int k;
    fill_iobuf();
    for (k = 0; k < 16; k++) {
        size_t n = (size_t)u_min(S.spec.block_bytes, sizeof iobuf);
        long w;
        if (sender_should_stop(s, now)) {
            sender_finished(s);
            return;
        }
        if (s->budget != NONE)
            n = (size_t)u_min(n, s->budget - s->bytes);
        w = nc_tr_send(S.conns[s->conn].fd, iobuf, n);
        if (w > 0) {
            s->bytes += (uint64_t)w;
            s->last_ns = since_start(now);
        } else {
            if (w == NC_TR_FAIL) {
                set_error("a data connection failed");
                sender_finished(s);
            }
            return;
        }
    }
}

/* The pace of a UDP sender as a fraction of nanoseconds per datagram, num / den (den 0:
 * unlimited), kept exact by carrying the remainder from slot to slot: no floating point. */
static void pace(uint64_t *q, uint64_t *r, uint64_t *den)
{
    uint64_t share = S.spec.per_stream ? 1 : S.spec.streams, num;
    switch (S.spec.rate) {
    case NC_RATE_PPS:
        num = 1000000000ull * share;
        break;
    case NC_RATE_BPS:
        num = 8000000000ull * S.spec.block_bytes * share;
        break;
    default:
        *q = *r = *den = 0;
        return;
    }
    *den = S.spec.rate_value;
    *q = num / *den;
    *r = num % *den;
}

static void next_slot(struct stream *s, uint64_t q, uint64_t r, uint64_t den)
{
    s->slot++;
    if (!den)
        return;
    s->next_due += q;
    s->rem += r;
    if (s->rem >= den) {
        s->next_due++;
        s->rem -= den;
    }
}

/* Paced or unlimited UDP sender; returns ns until its next datagram is due (NONE: none). */
static uint64_t udp_send(struct stream *s, uint64_t now)
{
    uint64_t q, r, den;
    int k;
    size_t size = (size_t)S.spec.block_bytes;
    pace(&q, &r, &den);
    if (s->next_due == 0)
        s->next_due = S.ready_ns;
    fill_iobuf();
    for (k = 0; k < NC_UDP_BATCH; k++) {
        long w;
        if (sender_should_stop(s, now)) {
            /* A paced sender's datagrams are the slots due before the deadline: its time is
             * the whole window. */
            if (den && s->budget == NONE && !S.stopping)
                s->last_ns = since_start(test_deadline());
            sender_finished(s);
            return NONE;
        }
        if (den) {
            if (s->next_due > now)
                return s->next_due - now;
            if (now - s->next_due > 50 * NS_PER_MS) {
                /* Fell behind (a stall): start the schedule afresh rather than burst. */
                s->next_due = now;
                s->rem = 0;
            }
        }
        if (S.udp_blocked)
            return NONE;
        iobuf[0] = (uint8_t)(NC_DGRAM_MAGIC >> 8);
        iobuf[1] = (uint8_t)NC_DGRAM_MAGIC;
        iobuf[2] = NC_DGRAM_VERSION;
        iobuf[3] = 0;
        nc_put32(iobuf + 4, s->id);
        nc_put64(iobuf + 8, s->seq);
        nc_put64(iobuf + 16, since_start(now));
        w = nc_tr_sendto(S.ufd, iobuf, size, &s->addr);
        if (w >= 0) {
            s->seq++;
            next_slot(s, q, r, den);
            s->packets++;
            s->sends++;
            s->bytes += size;
            s->last_ns = since_start(now);
        } else if (w == NC_TR_AGAIN) {
            S.udp_blocked = 1;
            return NONE;
        } else {
            /* Refused (ENOBUFS, an ICMP error): counted, never sent; the slot is used. */
            s->errors++;
            next_slot(s, q, r, den);
        }
    }
    return 0;
}

static struct stream *stream_by_addr(const nc_addr *from)
{
    uint32_t i;
    for (i = 0; i < S.nstreams; i++)
        if (S.streams[i].udp && S.streams[i].have_addr && same_addr(&S.streams[i].addr, from))
            return &S.streams[i];
    return NULL;
}

static void udp_setup(const uint8_t *b, size_t n, const nc_addr *from, uint64_t now)
{
    uint32_t id;
    struct stream *s;
    uint8_t token[16];
    if (n < NC_SETUP_LEN || S.ts != T_AWAIT_STREAMS || S.ctrl < 0 || !same_ip(from, &S.conns[S.ctrl].peer))
        return;
    id = nc_get32(b + 4);
    if (id < 1 || id > S.nstreams || memcmp(b + NC_DGRAM_HEADER, S.cookie, 16) != 0)
        return;
    s = &S.streams[id - 1];
    if (!s->udp || s->have_addr)
        return;
    token_for(id, from, token);
    if (b[3] == NC_FLAG_SETUP) {
        uint8_t c[NC_CHALLENGE_LEN];
        if (s->challenges >= NC_MAX_CHALLENGES)
            return;
        s->challenges++;
        memset(c, 0, sizeof c);
        c[0] = (uint8_t)(NC_DGRAM_MAGIC >> 8);
        c[1] = (uint8_t)NC_DGRAM_MAGIC;
        c[2] = NC_DGRAM_VERSION;
        c[3] = NC_FLAG_CHALLENGE;
        nc_put32(c + 4, id);
        memcpy(c + NC_DGRAM_HEADER, token, 16);
        (void)nc_tr_sendto(S.ufd, c, sizeof c, from);
    } else if (b[3] == (NC_FLAG_SETUP | NC_FLAG_CONFIRM)) {
        if (memcmp(b + NC_DGRAM_HEADER + 16, token, 16) != 0)
            return;
        s->addr = *from;
        s->have_addr = 1;
        check_all_in(now);
    }
}

static void udp_datagram(const uint8_t *b, size_t n, const nc_addr *from, uint64_t now)
{
    struct stream *s = stream_by_addr(from);
    int header = n >= NC_DGRAM_HEADER && nc_get32(b) >> 16 == NC_DGRAM_MAGIC && b[2] == NC_DGRAM_VERSION;
    if (!s) {
        if (header && (b[3] & NC_FLAG_SETUP))
            udp_setup(b, n, from, now);
        return;
    }
    if (S.ts != T_AWAIT_START && S.ts != T_RUNNING)
        return;
    if (S.spec.kind == NC_RR) {
        /* A request: answer with the response size, its first bytes echoing the request's
         * (the low bytes of its sequence number). Setup copies come only before the first. */
        size_t width = (size_t)u_min(u_min(S.spec.request_bytes, S.spec.response_bytes), 8);
        size_t resp = (size_t)S.spec.response_bytes;
        if (s->packets == 0 && header && (b[3] & NC_FLAG_SETUP) && n >= NC_SETUP_LEN)
            return;
        if (n < width)
            return;
        s->bytes += n;
        s->packets++;
        s->last_ns = since_start(now);
        memmove(iobuf + 0, b, width);
        memset(iobuf + width, 'r', resp - width);
        S.iobuf_dirty = 1;
        (void)nc_tr_sendto(S.ufd, iobuf, resp, from);
        return;
    }
    if (!s->up)
        return;
    if (!header || nc_get32(b + 4) != s->id) {
        s->tr.foreign++;
        return;
    }
    if (b[3] != 0)
        return; /* setup copies still in flight */
    {
        uint64_t seq = nc_get64(b + 8), sent = nc_get64(b + 16);
        int r = tracker_record(&s->tr, seq);
        if (r < 0)
            return;
        jitter_record(&s->jit, sent, since_start(now));
        s->bytes += n;
        s->last_ns = since_start(now);
    }
}

static void udp_read(uint64_t now)
{
    int k;
    for (k = 0; k < 64; k++) {
        nc_addr from;
        long n = nc_tr_recvfrom(S.ufd, iobuf, sizeof iobuf, &from);
        if (n < 0)
            return;
        S.iobuf_dirty = 1;
        /* A service's or a responder's datagram, even a setup, is never answered (a loop). */
        if (nc_guard_check_source(&from, 0))
            continue;
        udp_datagram(iobuf, (size_t)n, &from, now);
        /* udp_datagram may have sent from iobuf; the receive buffer is reused next turn. */
    }
}

/* Whether every stream is done; finishes receivers whose time is up. */
static int all_done(uint64_t now)
{
    uint32_t i;
    int done = 1;
    for (i = 0; i < S.nstreams; i++) {
        struct stream *s = &S.streams[i];
        if (s->done)
            continue;
        if (s->up && s->udp && S.peer_done) {
            uint64_t grace_us = S.spec.kind == NC_RR ? S.spec.rr_timeout_us : S.spec.grace_us;
            int complete = S.spec.kind == NC_UDP && s->peer_sent != NONE && s->tr.unique >= s->peer_sent;
            if (complete || now >= S.peer_done_ns + grace_us * 1000u)
                s->done = 1;
        }
        if (s->up && S.stopping && s->udp)
            s->done = 1;
        if (!s->done)
            done = 0;
    }
    return done;
}

static int senders_done(void)
{
    uint32_t i;
    int any = 0;
    for (i = 0; i < S.nstreams; i++) {
        if (S.streams[i].up)
            continue;
        any = 1;
        if (!S.streams[i].done)
            return 0;
    }
    return any;
}

/* ---------------------------------------------------------------- the loop */

static int open_sockets(uint16_t port)
{
    /* Port 0: the stack picks the TCP port, and UDP takes the same number. */
    S.lfd = nc_tr_tcp_listen(&port, NC_MAX_CONNS);
    if (S.lfd < 0)
        return -1;
    S.port = port;
    nc_guard_own_port(S.port);
    S.ufd = nc_tr_udp_open(&port);
    return S.ufd < 0 ? -1 : 0;
}

int nc_responder_init(uint16_t port)
{
    int i;
    memset(&S, 0, sizeof S);
    S.lfd = S.ufd = -1;
    S.ctrl = -1;
    S.iobuf_dirty = 1;
    for (i = 0; i < NC_MAX_CONNS; i++) {
        S.conns[i].fd = -1;
        S.conns[i].state = CS_FREE;
    }
    nc_plat_host_info(host_name, host_kernel, host_cpu, sizeof host_name, &host_cores);
    if (open_sockets(port) != 0) {
        logf1("cannot open the listening sockets (is the port in use?)", NULL);
        return -1;
    }
#if NC_ROLES_EXTRA
    nc_roles_init();
#endif
    return 0;
}

static void check_deadlines(uint64_t now)
{
    int i;
    for (i = 0; i < NC_MAX_CONNS; i++) {
        struct conn *c = &S.conns[i];
        if ((c->state == CS_HELLO || c->state == CS_LINGER) && now >= c->deadline) {
            if (c->state == CS_HELLO)
                logf1("dropped a connection: no hello within 5 s", NULL);
            conn_drop(i);
        }
    }
    if (S.ctrl < 0)
        return;
    switch (S.ts) {
    case T_AWAIT_REQUEST:
        if (now >= S.phase_deadline)
            end_session("no test request within 10 s of connecting", now);
        break;
    case T_AWAIT_STREAMS:
        if (now >= S.phase_deadline)
            end_session("timed out after 10 s waiting for the data connections", now);
        break;
    case T_AWAIT_START:
        if (now >= S.phase_deadline)
            end_session("timed out after 10 s waiting for start", now);
        break;
    case T_RUNNING:
        if (now - S.last_rx > NC_SILENCE_TIMEOUT_MS * NS_PER_MS) {
            end_session("the client said nothing for 10 s", now);
        } else if (S.peer_done &&
                   now > S.peer_done_ns + (uint64_t)(NC_PHASE_TIMEOUT_MS + 60000) * NS_PER_MS) {
            /* The client's senders finished long ago and their streams never closed. */
            uint32_t k;
            set_error("the client finished sending but its data did not arrive in time");
            for (k = 0; k < S.nstreams; k++)
                S.streams[k].done = 1;
        } else if ((!S.spec.end_is_bytes &&
                    now > test_deadline() + (uint64_t)(NC_PHASE_TIMEOUT_MS + 60000) * NS_PER_MS) ||
                   now - S.ready_ns > (NC_MAX_DURATION_S + 70ull) * NS_PER_S) {
            /* A timed test well past its end, or any test past the longest one admitted (a
             * -n test whose client keeps its connections open and idle). */
            set_error("the test did not end in time");
            stop_senders();
            {
                uint32_t k;
                for (k = 0; k < S.nstreams; k++)
                    S.streams[k].done = 1;
            }
        }
        break;
    case T_CLOSING:
        if (now >= S.phase_deadline)
            reset_test();
        break;
    default:
        break;
    }
}

static void run_test(uint64_t now, uint64_t *wait_ns)
{
    uint32_t i;
    if (S.ts != T_RUNNING)
        return;
    for (i = 0; i < S.nstreams; i++) {
        struct stream *s = &S.streams[i];
        if (s->done || s->up)
            continue;
        if (s->udp) {
            uint64_t w = udp_send(s, now);
            if (w < *wait_ns)
                *wait_ns = w;
        } else if (sender_should_stop(s, now)) {
            sender_finished(s);
        }
    }
    if (!S.senders_reported && senders_done()) {
        S.senders_reported = 1;
        send_sender_done(now);
    }
    if (all_done(now)) {
        /* Results are the last message: then our side closes, and the client's is read
         * until it closes. */
        send_results(now);
        logf1("test done", NULL);
        S.ts = T_CLOSING;
        S.phase_deadline = now + NC_LINGER_MS * NS_PER_MS;
    }
}

void nc_responder_poll(uint32_t max_wait_ms)
{
    int i;
    uint32_t k;
    uint64_t now = nc_plat_now_ns(), wait_ns = (uint64_t)max_wait_ms * NS_PER_MS;

    /* Work that is due without I/O first, so the wait is right. */
    run_test(now, &wait_ns);
    if (S.ts == T_RUNNING || S.ts == T_AWAIT_START) {
        if (now - S.last_tx >= NC_KEEPALIVE_MS * NS_PER_MS)
            send_simple("keepalive", now);
    }
    if (S.ts == T_CLOSING && S.ctrl >= 0 && S.tx_len == S.tx_off) {
        /* Everything said: close our side, read theirs until it closes. */
        int c = S.ctrl;
        S.ctrl = -1;
        reset_test();
        conn_linger(c, now);
    }

    nc_tr_watch(S.lfd, NC_TR_RD);
    nc_tr_watch(S.ufd, S.udp_blocked ? NC_TR_RD | NC_TR_WR : NC_TR_RD);
    for (i = 0; i < NC_MAX_CONNS; i++) {
        struct conn *c = &S.conns[i];
        if (c->state == CS_FREE || c->state == CS_DATA)
            continue;
        nc_tr_watch(c->fd, c->state == CS_CONTROL && S.tx_len > S.tx_off ? NC_TR_RD | NC_TR_WR : NC_TR_RD);
    }
    for (k = 0; k < S.nstreams; k++) {
        struct stream *s = &S.streams[k];
        if (s->conn < 0 || s->done)
            continue;
        nc_tr_watch(S.conns[s->conn].fd, (s->up ? NC_TR_RD : 0u) |
                                             (S.ts == T_RUNNING && (!s->up || s->owed > 0) ? NC_TR_WR : 0u));
    }
#if NC_ROLES_EXTRA
    nc_roles_watch(now, &wait_ns);
#endif
    if (wait_ns > 50 * NS_PER_MS)
        wait_ns = 50 * NS_PER_MS;
    if (nc_tr_wait(wait_ns) != 0)
        return;
    now = nc_plat_now_ns();

    if (nc_tr_ready(S.ufd) & NC_TR_WR)
        S.udp_blocked = 0;
    if (nc_tr_ready(S.ufd) & NC_TR_RD)
        udp_read(now);
    for (k = 0; k < S.nstreams; k++) {
        struct stream *s = &S.streams[k];
        if (s->conn < 0 || s->done)
            continue;
        if (s->up && (nc_tr_ready(S.conns[s->conn].fd) & NC_TR_RD))
            tcp_read(s, now);
        if (s->conn < 0 || s->done || S.ts != T_RUNNING)
            continue;
        if (!s->up && (nc_tr_ready(S.conns[s->conn].fd) & NC_TR_WR))
            tcp_write(s, now);
        else if (s->up && s->owed > 0)
            rr_write(s);
    }
    for (i = 0; i < NC_MAX_CONNS; i++) {
        struct conn *c = &S.conns[i];
        unsigned ready;
        if (c->state == CS_FREE || c->state == CS_DATA)
            continue;
        ready = nc_tr_ready(c->fd);
        if (c->state == CS_CONTROL) {
            if (ready & NC_TR_WR)
                control_write(now);
            if (S.ctrl == i && (ready & NC_TR_RD))
                control_read(now);
            continue;
        }
        if (!(ready & NC_TR_RD))
            continue;
        if (c->state == CS_HELLO) {
            hello_read(i, now);
        } else if (c->state == CS_LINGER) {
            long n = nc_tr_drop(c->fd, iobuf, sizeof iobuf);
            S.iobuf_dirty = 1;
            if (n == 0 || n == NC_TR_FAIL)
                conn_close(i);
        }
    }
    if (S.ctrl >= 0)
        control_write(now);
    if (nc_tr_ready(S.lfd) & NC_TR_RD) {
        /* A few per turn: a burst of connections (a test's streams) is taken at once. */
        int k2;
        for (k2 = 0; k2 < 8; k2++)
            if (!do_accept(now))
                break;
    }
    check_deadlines(now);
#if NC_ROLES_EXTRA
    nc_roles_io(now);
#endif
    nc_guard_tick(now);
}

uint16_t nc_responder_port(void)
{
    return S.port;
}

void nc_responder_run(void)
{
    for (;;)
        nc_responder_poll(50);
}

#endif /* NC_ROLE_NATIVE */
