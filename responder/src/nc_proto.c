/* netchar-responder: hello, JSON scanner, client messages, emitter. See nc_proto.h. */
#include "nc_proto.h"

#include <string.h>

static const uint8_t MAGIC[8] = {'n', 'e', 't', 'c', 'h', 'a', 'r', 0};

uint32_t nc_get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

uint64_t nc_get64(const uint8_t *p)
{
    return ((uint64_t)nc_get32(p) << 32) | nc_get32(p + 4);
}

void nc_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void nc_put64(uint8_t *p, uint64_t v)
{
    nc_put32(p, (uint32_t)(v >> 32));
    nc_put32(p + 4, (uint32_t)v);
}

int nc_hello_decode(const uint8_t b[NC_HELLO_LEN], struct nc_hello *h)
{
    if (memcmp(b, MAGIC, 8) != 0)
        return -1;
    h->version = (uint16_t)((b[8] << 8) | b[9]);
    h->role = b[10];
    h->flags = b[11];
    memcpy(h->cookie, b + 12, 16);
    h->stream_id = nc_get32(b + 28);
    return 0;
}

void nc_hello_server(uint8_t b[NC_HELLO_LEN])
{
    memset(b, 0, NC_HELLO_LEN);
    memcpy(b, MAGIC, 8);
    b[9] = NC_PROTOCOL_VERSION;
    b[10] = NC_ROLE_SERVER;
}

/* ---------------------------------------------------------------- JSON scanner */

struct walker {
    const char *p, *end;
    char path[NC_JSON_MAX_PATH + 1];
    size_t path_len;
    int depth;
    nc_json_cb cb;
    void *ctx;
};

static void skip_ws(struct walker *w)
{
    while (w->p < w->end && (*w->p == ' ' || *w->p == '\t' || *w->p == '\n' || *w->p == '\r'))
        w->p++;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string at w->p (the opening quote); its raw contents in *s, *n. */
static int scan_string(struct walker *w, const char **s, size_t *n)
{
    if (w->p >= w->end || *w->p != '"')
        return -1;
    w->p++;
    *s = w->p;
    while (w->p < w->end) {
        unsigned char c = (unsigned char)*w->p;
        if (c == '"') {
            *n = (size_t)(w->p - *s);
            w->p++;
            return 0;
        }
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            w->p++;
            if (w->p >= w->end)
                return -1;
            switch (*w->p) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                w->p++;
                break;
            case 'u':
                if (w->end - w->p < 5 || !is_hex(w->p[1]) || !is_hex(w->p[2]) || !is_hex(w->p[3]) ||
                    !is_hex(w->p[4]))
                    return -1;
                w->p += 5;
                break;
            default:
                return -1;
            }
            continue;
        }
        w->p++;
    }
    return -1;
}

#define MICRO_MAX 18000000000000000000ull /* 1.8e19: 1.8e13 in micro units */

static int scan_number(struct walker *w, struct nc_jval *v)
{
    int neg = 0, frac_digits = 0, exp = 0, exp_neg = 0, exp_digits = 0, overflow = 0, micro_overflow = 0;
    uint64_t u = 0, frac = 0; /* frac: the first 6 fraction digits, as micro units */
    uint64_t micro;
    if (w->p < w->end && *w->p == '-') {
        neg = 1;
        w->p++;
    }
    if (w->p >= w->end || *w->p < '0' || *w->p > '9')
        return -1;
    if (*w->p == '0') {
        w->p++;
    } else {
        while (w->p < w->end && *w->p >= '0' && *w->p <= '9') {
            unsigned d = (unsigned)(*w->p - '0');
            if (u > (UINT64_MAX - d) / 10)
                overflow = 1;
            else
                u = u * 10 + d;
            w->p++;
        }
    }
    if (w->p < w->end && *w->p == '.') {
        w->p++;
        while (w->p < w->end && *w->p >= '0' && *w->p <= '9') {
            if (frac_digits < 6)
                frac = frac * 10 + (uint64_t)(*w->p - '0');
            frac_digits++;
            w->p++;
        }
        if (frac_digits == 0)
            return -1;
    }
    {
        int k;
        for (k = frac_digits; k < 6; k++)
            frac *= 10;
    }
    if (w->p < w->end && (*w->p == 'e' || *w->p == 'E')) {
        w->p++;
        if (w->p < w->end && (*w->p == '+' || *w->p == '-')) {
            exp_neg = *w->p == '-';
            w->p++;
        }
        while (w->p < w->end && *w->p >= '0' && *w->p <= '9') {
            if (exp < 1000)
                exp = exp * 10 + (*w->p - '0');
            exp_digits++;
            w->p++;
        }
        if (exp_digits == 0)
            return -1;
    }
    if (overflow || u > 18000000000000ull)
        micro_overflow = 1;
    micro = micro_overflow ? 0 : u * 1000000u + frac;
    {
        int k;
        for (k = 0; k < exp && !micro_overflow; k++) {
            if (exp_neg) {
                micro /= 10;
            } else if (micro > MICRO_MAX / 10) {
                micro_overflow = 1;
            } else {
                micro *= 10;
            }
        }
    }
    v->type = NC_J_NUM;
    v->is_uint = !neg && !overflow && frac_digits == 0 && exp_digits == 0;
    v->u = v->is_uint ? u : 0;
    v->is_micro = !neg && !micro_overflow;
    v->micro = v->is_micro ? micro : 0;
    return 0;
}

static int walk_value(struct walker *w, int index);

static int push_path(struct walker *w, const char *seg, size_t n, int dot)
{
    size_t need = n + (dot && w->path_len > 0 ? 1 : 0);
    if (w->path_len + need > NC_JSON_MAX_PATH)
        return -1;
    if (dot && w->path_len > 0)
        w->path[w->path_len++] = '.';
    memcpy(w->path + w->path_len, seg, n);
    w->path_len += n;
    w->path[w->path_len] = 0;
    return 0;
}

static int walk_value(struct walker *w, int index)
{
    struct nc_jval v;
    memset(&v, 0, sizeof v);
    skip_ws(w);
    if (w->p >= w->end)
        return -1;
    switch (*w->p) {
    case '{': {
        size_t saved = w->path_len;
        if (++w->depth > NC_JSON_MAX_DEPTH)
            return -1;
        v.type = NC_J_OBJ;
        w->cb(w->ctx, w->path, index, &v);
        w->p++;
        skip_ws(w);
        if (w->p < w->end && *w->p == '}') {
            w->p++;
            w->depth--;
            return 0;
        }
        for (;;) {
            const char *k;
            size_t kn;
            skip_ws(w);
            if (scan_string(w, &k, &kn) != 0)
                return -1;
            skip_ws(w);
            if (w->p >= w->end || *w->p != ':')
                return -1;
            w->p++;
            if (push_path(w, k, kn, 1) != 0)
                return -1;
            if (walk_value(w, index) != 0)
                return -1;
            w->path_len = saved;
            w->path[saved] = 0;
            skip_ws(w);
            if (w->p < w->end && *w->p == ',') {
                w->p++;
                continue;
            }
            if (w->p < w->end && *w->p == '}') {
                w->p++;
                w->depth--;
                return 0;
            }
            return -1;
        }
    }
    case '[': {
        size_t saved = w->path_len;
        int i = 0;
        if (++w->depth > NC_JSON_MAX_DEPTH)
            return -1;
        v.type = NC_J_ARR;
        w->cb(w->ctx, w->path, index, &v);
        w->p++;
        skip_ws(w);
        if (w->p < w->end && *w->p == ']') {
            w->p++;
            w->depth--;
            return 0;
        }
        if (push_path(w, "[]", 2, 0) != 0)
            return -1;
        for (;;) {
            if (walk_value(w, i) != 0)
                return -1;
            if (i < 1000000)
                i++;
            skip_ws(w);
            if (w->p < w->end && *w->p == ',') {
                w->p++;
                continue;
            }
            if (w->p < w->end && *w->p == ']') {
                w->p++;
                w->depth--;
                w->path_len = saved;
                w->path[saved] = 0;
                return 0;
            }
            return -1;
        }
    }
    case '"':
        if (scan_string(w, &v.s, &v.slen) != 0)
            return -1;
        v.type = NC_J_STR;
        break;
    case 't':
        if (w->end - w->p < 4 || memcmp(w->p, "true", 4) != 0)
            return -1;
        w->p += 4;
        v.type = NC_J_BOOL;
        v.boolean = 1;
        break;
    case 'f':
        if (w->end - w->p < 5 || memcmp(w->p, "false", 5) != 0)
            return -1;
        w->p += 5;
        v.type = NC_J_BOOL;
        break;
    case 'n':
        if (w->end - w->p < 4 || memcmp(w->p, "null", 4) != 0)
            return -1;
        w->p += 4;
        v.type = NC_J_NULL;
        break;
    default:
        if (scan_number(w, &v) != 0)
            return -1;
        break;
    }
    w->cb(w->ctx, w->path, index, &v);
    return 0;
}

int nc_json_walk(const char *text, size_t len, nc_json_cb cb, void *ctx)
{
    struct walker w;
    w.p = text;
    w.end = text + len;
    w.path[0] = 0;
    w.path_len = 0;
    w.depth = 0;
    w.cb = cb;
    w.ctx = ctx;
    if (walk_value(&w, 0) != 0)
        return -1;
    skip_ws(&w);
    return w.p == w.end ? 0 : -1;
}

/* ---------------------------------------------------------------- client messages */

enum {
    SEEN_TYPE = 1u << 0,
    SEEN_SPEC = 1u << 1,
    SEEN_KIND = 1u << 2,
    SEEN_DIR = 1u << 3,
    SEEN_STREAMS = 1u << 4,
    SEEN_END = 1u << 5,
    SEEN_BLOCK = 1u << 6,
    SEEN_TOTALS = 1u << 7,
    SEEN_RATE = 1u << 8,
    SEEN_RR = 1u << 9,
    SEEN_UDP = 1u << 10,
};

static int str_is(const struct nc_jval *v, const char *s)
{
    size_t n = strlen(s);
    return v->type == NC_J_STR && v->slen == n && memcmp(v->s, s, n) == 0;
}

static int present(const struct nc_jval *v)
{
    return v->type != NC_J_NULL && !(v->type == NC_J_BOOL && !v->boolean);
}

/* The first option the responder cannot honour: its name, and an optional note after
 * " is not supported by netchar-responder" (the words every refusal shares are stored once). */
static void refuse(struct nc_client_msg *m, const char *what, const char *note)
{
    if (!m->spec.refused) {
        m->spec.refused = what;
        m->spec.refused_note = note;
    }
}

/* Non-negative whole number, or mark the message bad. */
static uint64_t want_u(struct nc_client_msg *m, const struct nc_jval *v)
{
    if (v->type != NC_J_NUM || !v->is_uint) {
        m->bad = 1;
        return 0;
    }
    return v->u;
}

/* A non-negative number of seconds, in microseconds; or mark the message bad. */
static uint64_t want_us(struct nc_client_msg *m, const struct nc_jval *v)
{
    if (v->type != NC_J_NUM || !v->is_micro) {
        m->bad = 1;
        return 0;
    }
    return v->micro;
}

static void on_value(void *ctx, const char *path, int index, const struct nc_jval *v)
{
    struct nc_client_msg *m = ctx;
    struct nc_spec *s = &m->spec;
    if (path[0] == 0) {
        if (v->type != NC_J_OBJ)
            m->bad = 1;
        return;
    }
    if (strcmp(path, "type") == 0) {
        m->seen |= SEEN_TYPE;
        if (str_is(v, "request"))
            m->type = NC_MSG_REQUEST;
        else if (str_is(v, "start"))
            m->type = NC_MSG_START;
        else if (str_is(v, "sender_done"))
            m->type = NC_MSG_SENDER_DONE;
        else if (str_is(v, "stop"))
            m->type = NC_MSG_STOP;
        else if (str_is(v, "keepalive"))
            m->type = NC_MSG_KEEPALIVE;
        else
            m->bad = 1;
        return;
    }
    if (strncmp(path, "totals", 6) == 0) {
        if (strcmp(path, "totals") == 0) {
            m->seen |= SEEN_TOTALS;
            if (v->type != NC_J_ARR)
                m->bad = 1;
            return;
        }
        if (index < 0 || index >= NC_MAX_STREAMS) {
            /* More streams than any test here has: not ours. */
            m->bad = 1;
            return;
        }
        if ((uint32_t)index >= m->n_totals)
            m->n_totals = (uint32_t)index + 1;
        if (strcmp(path, "totals[].id") == 0) {
            uint64_t id = want_u(m, v);
            m->totals[index].id = id > 0xffffffffu ? 0 : (uint32_t)id;
        } else if (strcmp(path, "totals[].bytes") == 0) {
            m->totals[index].bytes = want_u(m, v);
        } else if (strcmp(path, "totals[].packets") == 0) {
            m->totals[index].packets = want_u(m, v);
        }
        return;
    }
    if (strcmp(path, "auth") == 0 && present(v)) {
        refuse(m, "--psk-file (authentication)", "; run the test without it");
        return;
    }
    if (strcmp(path, "companion") == 0 && present(v)) {
        refuse(m, "latency under load (a companion test)", ": it runs one test at a time");
        return;
    }
    if (strncmp(path, "spec", 4) != 0 || (path[4] != 0 && path[4] != '.'))
        return; /* client_version, reason, and fields of later versions */
    if (path[4] == 0) {
        m->seen |= SEEN_SPEC;
        if (v->type != NC_J_OBJ)
            m->bad = 1;
        return;
    }
    path += 5;
    if (strcmp(path, "kind") == 0) {
        m->seen |= SEEN_KIND;
        if (str_is(v, "tcp"))
            s->kind = NC_TCP;
        else if (str_is(v, "udp"))
            s->kind = NC_UDP;
        else if (str_is(v, "rr"))
            s->kind = NC_RR;
        else
            m->bad = 1;
    } else if (strcmp(path, "direction") == 0) {
        m->seen |= SEEN_DIR;
        if (str_is(v, "up"))
            s->direction = NC_UP;
        else if (str_is(v, "down"))
            s->direction = NC_DOWN;
        else if (str_is(v, "bidir"))
            s->direction = NC_BIDIR;
        else
            m->bad = 1;
    } else if (strcmp(path, "streams") == 0) {
        uint64_t n = want_u(m, v);
        m->seen |= SEEN_STREAMS;
        s->streams = n > 1000 ? 1000 : (uint32_t)n;
    } else if (strcmp(path, "end") == 0) {
        if (v->type != NC_J_OBJ)
            m->bad = 1;
    } else if (strcmp(path, "end.seconds") == 0) {
        m->seen |= SEEN_END;
        s->end_is_bytes = 0;
        s->end_us = want_us(m, v);
    } else if (strcmp(path, "end.bytes") == 0) {
        m->seen |= SEEN_END;
        s->end_is_bytes = 1;
        s->end_bytes = want_u(m, v);
    } else if (strcmp(path, "block_bytes") == 0) {
        m->seen |= SEEN_BLOCK;
        s->block_bytes = want_u(m, v);
    } else if (strcmp(path, "omit_seconds") == 0) {
        if (want_us(m, v) > 0)
            refuse(m, "-O (omit)", "; run without it");
    } else if (strcmp(path, "interval_seconds") == 0) {
        (void)want_us(m, v); /* the responder reports whole-test figures only */
    } else if (strcmp(path, "tcp.window_bytes") == 0) {
        if (present(v))
            refuse(m, "-w (window)", ": lwIP has no SO_SNDBUF/SO_RCVBUF");
    } else if (strcmp(path, "tcp.mss") == 0) {
        if (present(v))
            refuse(m, "-M (MSS)", NULL);
    } else if (strcmp(path, "tcp.nodelay") == 0) {
        s->nodelay = v->type == NC_J_BOOL && v->boolean;
    } else if (strcmp(path, "tcp.congestion") == 0) {
        if (present(v))
            refuse(m, "-C (congestion control)", NULL);
    } else if (strcmp(path, "tcp.zerocopy") == 0) {
        if (present(v))
            refuse(m, "--zerocopy", NULL);
    } else if (strcmp(path, "tcp.skip_rx_copy") == 0) {
        /* Sent only when set: the responder's receiver always copies, so it says so first. */
        if (v->type == NC_J_BOOL && v->boolean)
            refuse(m, "--skip-rx-copy", NULL);
    } else if (strcmp(path, "tcp.rate_bps_per_stream") == 0) {
        if (present(v))
            refuse(m, "-b on a TCP test (a paced TCP sender)", NULL);
    } else if (strcmp(path, "udp") == 0) {
        if (present(v))
            m->seen |= SEEN_UDP;
    } else if (strcmp(path, "udp.rate") == 0) {
        if (str_is(v, "unlimited")) {
            m->seen |= SEEN_RATE;
            s->rate = NC_RATE_UNLIMITED;
        } else if (v->type != NC_J_OBJ) {
            m->bad = 1;
        }
    } else if (strcmp(path, "udp.rate.bits_per_second") == 0) {
        m->seen |= SEEN_RATE;
        s->rate = NC_RATE_BPS;
        s->rate_value = want_u(m, v);
    } else if (strcmp(path, "udp.rate.packets_per_second") == 0) {
        m->seen |= SEEN_RATE;
        s->rate = NC_RATE_PPS;
        s->rate_value = want_u(m, v);
    } else if (strcmp(path, "udp.per_stream") == 0) {
        s->per_stream = v->type == NC_J_BOOL && v->boolean;
    } else if (strcmp(path, "udp.pattern") == 0) {
        if (present(v))
            refuse(m, "--pattern", NULL);
    } else if (strcmp(path, "udp.no_checksum") == 0) {
        /* Sent only when set. */
        if (v->type == NC_J_BOOL && v->boolean)
            refuse(m, "--no-udp-checksum", NULL);
    } else if (strcmp(path, "udp.grace_seconds") == 0) {
        s->grace_us = want_us(m, v);
    } else if (strcmp(path, "rr") == 0) {
        if (present(v))
            m->seen |= SEEN_RR;
    } else if (strcmp(path, "rr.udp") == 0) {
        s->rr_udp = v->type == NC_J_BOOL && v->boolean;
    } else if (strcmp(path, "rr.request_bytes") == 0) {
        s->request_bytes = want_u(m, v);
    } else if (strcmp(path, "rr.response_bytes") == 0) {
        s->response_bytes = want_u(m, v);
    } else if (strcmp(path, "rr.timeout_seconds") == 0) {
        s->rr_timeout_us = want_us(m, v);
    } else if (strcmp(path, "rr.connect_per_transaction") == 0) {
        if (present(v))
            refuse(m, "crr (a connection per transaction)", NULL);
    } else if (strcmp(path, "server_cpu") == 0) {
        if (present(v))
            refuse(m, "-A with a server CPU", NULL);
    } else if (strcmp(path, "server_load") == 0) {
        /* [percent of one CPU per thread, threads] */
        if (present(v) && !NC_HAVE_BACKGROUND_LOAD)
            refuse(m, "--server-load", " (this build has no background-load hook)");
        else if (present(v) && v->type != NC_J_ARR)
            m->bad = 1;
    } else if (strcmp(path, "server_load[]") == 0 && NC_HAVE_BACKGROUND_LOAD) {
        if (index == 0) {
            s->load_micro_pct = want_us(m, v);
            if (s->load_micro_pct > 100000000u)
                m->bad = 1;
        } else if (index == 1 && want_u(m, v) != 1) {
            refuse(m, "--server-load-threads above 1", " (one load thread)");
        }
    } else if (strcmp(path, "ip") == 0) {
        /* The IP options (sent only when one is set), which the far end must set on its own
         * sockets for its packets to carry them too. */
        if (present(v))
            refuse(m, "setting --tos, --dscp, --flowlabel or --df", "; run the test without them");
    } else if ((strcmp(path, "payload.kind") == 0 && !str_is(v, "pattern")) ||
               (strcmp(path, "verify") == 0 && present(v))) {
        /* Its senders write its own 0123456789 and its receivers do not compare. */
        refuse(m, "--verify or a --payload other than pattern", NULL);
    } else if (strcmp(path, "measure_idle") == 0) {
        if (present(v) && !NC_HAVE_IDLE_COUNTER)
            refuse(m, "--idle", " (this build has no idle-counter hook)");
        else if (present(v))
            s->measure_idle = 1;
    }
}

int nc_parse_client_msg(const uint8_t *payload, size_t len, struct nc_client_msg *m)
{
    memset(m, 0, sizeof *m);
    m->spec.rate = NC_RATE_BPS;
    m->spec.rate_value = 1000000;
    m->spec.grace_us = 250000;
    m->spec.request_bytes = 1;
    m->spec.response_bytes = 1;
    m->spec.rr_timeout_us = 1000000;
    if (nc_json_walk((const char *)payload, len, on_value, m) != 0 || m->bad || !(m->seen & SEEN_TYPE))
        return -1;
    switch (m->type) {
    case NC_MSG_REQUEST: {
        const uint32_t need = SEEN_SPEC | SEEN_KIND | SEEN_DIR | SEEN_STREAMS | SEEN_END | SEEN_BLOCK;
        if ((m->seen & need) != need)
            return -1;
        if (m->spec.kind == NC_UDP && !(m->seen & SEEN_UDP))
            return -1;
        if (m->spec.kind == NC_RR && !(m->seen & SEEN_RR))
            return -1;
        return 0;
    }
    case NC_MSG_SENDER_DONE:
        return (m->seen & SEEN_TOTALS) ? 0 : -1;
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------- emitter */

static void put(struct nc_out *o, const char *s, size_t n)
{
    if (o->overflow || o->cap - o->len < n) {
        o->overflow = 1;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

void nc_out_raw(struct nc_out *o, const char *s)
{
    put(o, s, strlen(s));
}

void nc_out_str(struct nc_out *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    put(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(o, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(o, e, 6);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
    put(o, "\"", 1);
}

void nc_out_u64(struct nc_out *o, uint64_t v)
{
    char b[21];
    int i = 20;
    b[20] = 0;
    do {
        b[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(o, b + i, (size_t)(20 - i));
}

void nc_out_fixed(struct nc_out *o, uint64_t value, unsigned decimals)
{
    uint64_t scale = 1;
    char frac[9];
    unsigned i;
    if (decimals > 9)
        decimals = 9;
    for (i = 0; i < decimals; i++)
        scale *= 10;
    nc_out_u64(o, value / scale);
    if (decimals == 0)
        return;
    value %= scale;
    for (i = decimals; i-- > 0;) {
        frac[i] = (char)('0' + value % 10);
        value /= 10;
    }
    put(o, ".", 1);
    put(o, frac, decimals);
}

void nc_out_hex(struct nc_out *o, const uint8_t *b, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i;
    for (i = 0; i < n; i++) {
        char e[2] = {hex[b[i] >> 4], hex[b[i] & 15]};
        put(o, e, 2);
    }
}

size_t nc_frame_begin(struct nc_out *o)
{
    size_t mark = o->len;
    put(o, "\0\0\0\0", 4);
    return mark;
}

int nc_frame_end(struct nc_out *o, size_t mark)
{
    if (o->overflow) {
        o->len = mark;
        o->overflow = 0;
        return -1;
    }
    nc_put32(o->buf + mark, (uint32_t)(o->len - mark - 4));
    return 0;
}
