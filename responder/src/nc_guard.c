/* netchar-responder: the reflection guard (nc_guard.h). Compiled into every build: the native
 * protocol uses rule 1 and the counters, the other roles all of it. */
#include "nc_guard.h"

#include <string.h>

#include "nc_proto.h"

#define NS_PER_MS 1000000ull
#define NC_GUARD_OWN_PORTS 8 /* native, nc_test control and data, netio UDP, echo, discard: 6 */

#if NC_ANSWER_RATE < 1 || NC_ANSWER_RATE > 1000000000
#error "NC_ANSWER_RATE must be 1 to 10^9 bytes per second"
#endif
/* The bucket refills one byte per this many nanoseconds (800 at 1.25 MB/s; rounded down, so a
 * rate that does not divide 10^9 is exceeded by less than one byte per this many ns). */
#define NS_PER_BYTE (1000000000u / NC_ANSWER_RATE)

struct net {
    uint8_t ip[16]; /* IPv4: the first 4 bytes */
    uint8_t bits;
    uint8_t v6;
};

struct logged {
    uint8_t used, kind;
    uint8_t ip[NC_ADDR_IP_LEN];
    uint64_t at;
};

uint64_t nc_guard_count[NC_GUARD_COUNTERS];

/* Separate statics, so that a build whose roles use rule 1 alone (the native protocol) links
 * only that part (-fdata-sections, --gc-sections). */
static uint16_t own[NC_GUARD_OWN_PORTS];
static uint8_t nown;
static struct {
    uint8_t configured; /* the list is the operator's or NC_ALLOW_PEERS */
    uint8_t given;      /* nc_guard_allow was called: its list replaced the default */
    uint8_t n;
    struct net net[NC_MAX_ALLOW_PEERS];
} allowed;
/* The answer budget: bytes taken from a full bucket, and when it last refilled. Zero is a
 * full bucket. */
static struct {
    uint32_t spent;
    uint64_t refilled;
} bucket;
static struct logged logged[NC_GUARD_LOGGED];
/* The counters' sum when they were last logged, and when (0: never). */
static uint64_t shown, shown_at;

/* ---------------------------------------------------------------- rule 1: loops */

void nc_guard_own_port(uint16_t port)
{
    if (port != 0 && nown < NC_GUARD_OWN_PORTS)
        own[nown++] = port;
}

int nc_guard_check_source(const nc_addr *from, uint16_t same_port_ok)
{
    uint16_t port = ntohs(NC_ADDR_PORT(from));
    int i;
    if (port < 1024) {
        nc_guard_count[NC_GUARD_SERVICE_PORT]++;
        return 1;
    }
    for (i = 0; i < nown; i++) {
        if (own[i] == port && port != same_port_ok) {
            nc_guard_count[NC_GUARD_OWN_PORT]++;
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- the allowed networks */

static int digits(const char *s, size_t n, unsigned max, unsigned *v)
{
    size_t i;
    *v = 0;
    if (n == 0 || n > 3)
        return -1;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        *v = *v * 10 + (unsigned)(s[i] - '0');
    }
    return *v <= max ? 0 : -1;
}

static int parse_v4(const char *s, size_t n, uint8_t out[4])
{
    size_t i = 0;
    int part;
    for (part = 0; part < 4; part++) {
        size_t start = i;
        unsigned v;
        while (i < n && s[i] != '.')
            i++;
        if (digits(s + start, i - start, 255, &v) != 0 || (part < 3) != (i < n))
            return -1;
        out[part] = (uint8_t)v;
        i++;
    }
    return 0;
}

#if NC_HAVE_IPV6
static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Eight groups of up to four hex digits, one "::" standing for a run of zero groups. */
static int parse_v6(const char *s, size_t n, uint8_t out[16])
{
    unsigned group[8];
    int ngroups = 0, gap = -1, k;
    size_t i = 0;
    if (n >= 2 && s[0] == ':' && s[1] == ':') {
        gap = 0;
        i = 2;
    }
    while (i < n) {
        unsigned v = 0;
        int nd = 0;
        while (i < n && hex_value(s[i]) >= 0 && nd < 5) {
            v = v * 16 + (unsigned)hex_value(s[i++]);
            nd++;
        }
        if (nd == 0 || nd > 4 || ngroups == 8)
            return -1;
        group[ngroups++] = v;
        if (i == n)
            break;
        if (s[i++] != ':' || i == n)
            return -1;
        if (s[i] == ':') {
            if (gap >= 0)
                return -1;
            gap = ngroups;
            i++;
        }
    }
    if (gap < 0 ? ngroups != 8 : ngroups > 7)
        return -1;
    memset(out, 0, 16);
    for (k = 0; k < ngroups; k++) {
        int at = gap < 0 || k < gap ? k : 8 - (ngroups - k);
        out[2 * at] = (uint8_t)(group[k] >> 8);
        out[2 * at + 1] = (uint8_t)group[k];
    }
    return 0;
}
#endif

/* One entry: ADDR, ADDR/LEN, [V6ADDR] or [V6ADDR]/LEN. */
static int parse_net(const char *s, size_t n, struct net *net)
{
    size_t alen = n;
    const char *slash = memchr(s, '/', n);
    unsigned max, bits;
    if (slash)
        alen = (size_t)(slash - s);
    if (alen >= 2 && s[0] == '[' && s[alen - 1] == ']') {
        s++;
        alen -= 2;
        n -= 2; /* keeps n - alen, the "/LEN" part */
    }
    memset(net, 0, sizeof *net);
    if (memchr(s, ':', alen)) {
#if NC_HAVE_IPV6
        if (parse_v6(s, alen, net->ip) != 0)
            return -1;
        net->v6 = 1;
        max = 128;
#else
        return -1;
#endif
    } else {
        if (parse_v4(s, alen, net->ip) != 0)
            return -1;
        max = 32;
    }
    bits = max;
    if (slash && digits(slash + 1, n - alen - 1, max, &bits) != 0)
        return -1;
    net->bits = (uint8_t)bits;
    return 0;
}

static int add_list(const char *list, const char **bad, size_t *bad_len)
{
    const char *p = list;
    if (strcmp(list, "none") == 0)
        return 0;
    for (;;) {
        size_t n = strcspn(p, ",");
        struct net net;
#if !NC_HAVE_IPV6
        /* An IPv4-only build has no IPv6 peers: the default's ::1 means nothing here. */
        if (memchr(p, ':', n) && !memchr(p, '.', n)) {
            if (!p[n])
                return 0;
            p += n + 1;
            continue;
        }
#endif
        if (parse_net(p, n, &net) != 0) {
            *bad = p;
            *bad_len = n;
            return -1;
        }
        if (allowed.n == NC_MAX_ALLOW_PEERS)
            return -2;
        allowed.net[allowed.n++] = net;
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

int nc_guard_allow(const char *list, const char **bad, size_t *bad_len)
{
    if (!allowed.given) {
        allowed.given = 1;
        allowed.configured = 1;
        allowed.n = 0;
    }
    return add_list(list, bad, bad_len);
}

/* Without an operator's list, NC_ALLOW_PEERS; a default that does not parse allows nothing
 * (and says so). */
static void configure(void)
{
    const char *bad;
    size_t len;
    if (allowed.configured)
        return;
    allowed.configured = 1;
    if (add_list(NC_ALLOW_PEERS, &bad, &len) != 0) {
        allowed.n = 0;
        nc_plat_log("NC_ALLOW_PEERS does not parse: no network is allowed");
    }
}

int nc_guard_network(int i, uint8_t ip[16], unsigned *bits, int *v6)
{
    configure();
    if (i < 0 || i >= allowed.n)
        return -1;
    memcpy(ip, allowed.net[i].ip, 16);
    *bits = allowed.net[i].bits;
    *v6 = allowed.net[i].v6;
    return 0;
}

static int in_net(const uint8_t *ip, const struct net *net)
{
    unsigned whole = net->bits / 8u, rest = net->bits % 8u;
    if (memcmp(ip, net->ip, whole) != 0)
        return 0;
    return rest == 0 || ((ip[whole] ^ net->ip[whole]) & (0xffu << (8 - rest)) & 0xffu) == 0;
}

int nc_guard_allows(const nc_addr *a)
{
    const uint8_t *ip = (const uint8_t *)NC_ADDR_IP(a);
    int i, v6 = 0;
    configure();
#if NC_HAVE_IPV6
    {
        /* An IPv4 peer on a dual-stack socket: ::ffff:a.b.c.d. */
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(ip, mapped, 12) == 0)
            ip += 12;
        else
            v6 = 1;
    }
#endif
    for (i = 0; i < allowed.n; i++)
        if (allowed.net[i].v6 == v6 && in_net(ip, &allowed.net[i]))
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- rules 2 and 3 */

int nc_guard_may_send_unprompted(const nc_addr *to)
{
    if (nc_guard_allows(to))
        return 1;
    nc_guard_count[NC_GUARD_UNPROMPTED_REFUSED]++;
    return 0;
}

int nc_guard_may_answer(const nc_addr *to, size_t bytes, uint64_t credit, uint64_t now)
{
    uint64_t back;
    if (nc_guard_allows(to))
        return 1;
    /* Refill: whole bytes since the last refill; the fraction of a byte stays owed. */
    back = (now - bucket.refilled) / NS_PER_BYTE;
    if (back >= bucket.spent) {
        bucket.spent = 0;
        bucket.refilled = now;
    } else {
        bucket.spent -= (uint32_t)back;
        bucket.refilled += back * NS_PER_BYTE;
    }
    if (bytes > credit || bytes > NC_ANSWER_BURST - bucket.spent) {
        nc_guard_count[NC_GUARD_ANSWERS_WITHHELD]++;
        nc_guard_count[NC_GUARD_ANSWER_BYTES_WITHHELD] += bytes;
        return 0;
    }
    bucket.spent += (uint32_t)bytes;
    return 1;
}

int nc_guard_first_refusal(const nc_addr *a, enum nc_guard_kind kind, uint64_t now)
{
    int i, slot = -1;
    for (i = 0; i < NC_GUARD_LOGGED; i++) {
        struct logged *l = &logged[i];
        int fresh = l->used && now - l->at < NC_GUARD_LOG_PERIOD_S * 1000 * NS_PER_MS;
        if (fresh && l->kind == kind && memcmp(l->ip, NC_ADDR_IP(a), NC_ADDR_IP_LEN) == 0)
            return 0;
        if (!fresh && slot < 0)
            slot = i;
    }
    if (slot < 0)
        return 0;
    logged[slot].used = 1;
    logged[slot].kind = (uint8_t)kind;
    logged[slot].at = now;
    memcpy(logged[slot].ip, NC_ADDR_IP(a), NC_ADDR_IP_LEN);
    return 1;
}

/* ---------------------------------------------------------------- the counters' line */

void nc_guard_tick(uint64_t now)
{
    static const char text[] = "reflection guard: dropped # datagrams from service ports and # from the "
                               "responder's own, refused # unprompted tests, held back # answers (# bytes)";
    const char *t;
    const uint64_t *n = nc_guard_count;
    uint64_t sum = n[0] + n[1] + n[2] + n[3];
    char line[sizeof text + 5 * 20];
    struct nc_out o;
    if (sum == shown || (shown_at && now - shown_at < NC_GUARD_LOG_MS * NS_PER_MS))
        return;
    shown = sum;
    shown_at = now;
    o.buf = (uint8_t *)line;
    o.cap = sizeof line - 1;
    o.len = 0;
    o.overflow = 0;
    for (t = text; *t; t++) {
        if (*t == '#')
            nc_out_u64(&o, *n++);
        else
            line[o.len++] = *t;
    }
    line[o.len] = 0;
    nc_plat_log(line);
}
