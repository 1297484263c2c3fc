/* netchar-responder: the native protocol's bytes, without sockets or clocks.
 *
 * A JSON scanner that walks a message and reports each value with its path
 * ("spec.udp.rate.bits_per_second"), the client messages the responder reads built on it,
 * and a bounded emitter for the messages it writes. Everything works on caller buffers;
 * malformed input is an error return, never a read or write out of bounds
 * (fuzz/fuzz_messages.c feeds it arbitrary bytes).
 */
#ifndef NC_PROTO_H
#define NC_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include "../nc_config.h"

#define NC_HELLO_LEN 40
#define NC_PROTOCOL_VERSION 2
#define NC_ROLE_CONTROL 0
#define NC_ROLE_DATA 1
#define NC_ROLE_SERVER 2

#define NC_DGRAM_HEADER 24
#define NC_DGRAM_MAGIC 0x4E43u
#define NC_DGRAM_VERSION 1
#define NC_FLAG_SETUP 1
#define NC_FLAG_CHALLENGE 2
#define NC_FLAG_CONFIRM 4
#define NC_SETUP_LEN 64
#define NC_CHALLENGE_LEN (NC_DGRAM_HEADER + 16)

/* ---- hello ---- */
struct nc_hello {
    uint16_t version;
    uint8_t role;
    uint8_t flags;
    uint8_t cookie[16];
    uint32_t stream_id;
};
/* 0: a netchar hello (any version, role checked by the caller); -1: not netchar. */
int nc_hello_decode(const uint8_t b[NC_HELLO_LEN], struct nc_hello *h);
void nc_hello_server(uint8_t b[NC_HELLO_LEN]);

/* ---- big-endian helpers ---- */
uint32_t nc_get32(const uint8_t *p);
uint64_t nc_get64(const uint8_t *p);
void nc_put32(uint8_t *p, uint32_t v);
void nc_put64(uint8_t *p, uint64_t v);

/* ---- JSON scanner ---- */
enum nc_jtype { NC_J_NULL, NC_J_BOOL, NC_J_NUM, NC_J_STR, NC_J_OBJ, NC_J_ARR };
struct nc_jval {
    enum nc_jtype type;
    int boolean;
    uint64_t u;      /* the number as an integer ... */
    int is_uint;     /* ... when it is a non-negative integer that fits */
    uint64_t micro;  /* the number times 10^6, truncated ... */
    int is_micro;    /* ... when it is non-negative and below 1.8e13 (no floating point) */
    const char *s; /* string contents, raw (escapes not decoded) */
    size_t slen;
};
#define NC_JSON_MAX_DEPTH 8
#define NC_JSON_MAX_PATH 64
typedef void (*nc_json_cb)(void *ctx, const char *path, int index, const struct nc_jval *v);
/* Walks one JSON value filling `len` bytes (whitespace around it allowed). Calls cb for every
 * value, objects and arrays included (before their members), with its dotted path; array
 * elements get "[]" and their index in `index` (the innermost array's). 0 on success, -1 when
 * the text is not JSON, nests deeper than NC_JSON_MAX_DEPTH or has a longer path. */
int nc_json_walk(const char *text, size_t len, nc_json_cb cb, void *ctx);

/* ---- what the client sends ---- */
enum nc_kind { NC_TCP, NC_UDP, NC_RR };
enum nc_dir { NC_UP, NC_DOWN, NC_BIDIR };
enum nc_rate { NC_RATE_BPS, NC_RATE_PPS, NC_RATE_UNLIMITED };

struct nc_spec {
    enum nc_kind kind;
    enum nc_dir direction;
    uint32_t streams;
    int end_is_bytes;
    uint64_t end_us; /* -t in microseconds */
    uint64_t end_bytes;
    uint64_t block_bytes;
    int nodelay;
    enum nc_rate rate;
    uint64_t rate_value;
    int per_stream;
    uint64_t grace_us;
    int rr_udp;
    uint64_t request_bytes, response_bytes;
    uint64_t rr_timeout_us;
    /* --server-load in millionths of a percent of one CPU (0: none), on one thread. */
    uint64_t load_micro_pct;
    /* --idle: the idle headroom during the test (needs the platform's idle counter). */
    int measure_idle;
    /* The first option the responder cannot honour, and a note after the words
     * " is not supported by netchar-responder" (NULL for none); check_spec joins them. */
    const char *refused;
    const char *refused_note;
};

enum nc_msg_type { NC_MSG_NONE, NC_MSG_REQUEST, NC_MSG_START, NC_MSG_SENDER_DONE, NC_MSG_STOP, NC_MSG_KEEPALIVE };

struct nc_total {
    uint32_t id;
    uint64_t bytes;
    uint64_t packets;
};

struct nc_client_msg {
    enum nc_msg_type type;
    struct nc_spec spec;
    struct nc_total totals[NC_MAX_STREAMS];
    uint32_t n_totals;
    uint32_t seen; /* bit set of the required fields found (internal) */
    int bad;       /* a field of the wrong type or range (internal) */
};

/* Parses a control frame's payload. 0: a message the responder knows (a request's options it
 * cannot honour are in spec.refused); -1: malformed, of an unknown type, or missing a field. */
int nc_parse_client_msg(const uint8_t *payload, size_t len, struct nc_client_msg *m);

/* ---- bounded emitter ---- */
struct nc_out {
    uint8_t *buf;
    size_t cap, len;
    int overflow;
};
void nc_out_raw(struct nc_out *o, const char *s);
void nc_out_str(struct nc_out *o, const char *s); /* quoted, escaped */
void nc_out_u64(struct nc_out *o, uint64_t v);
/* value / 10^decimals in decimal notation (decimals <= 9): fixed point, no floating point. */
void nc_out_fixed(struct nc_out *o, uint64_t value, unsigned decimals);
void nc_out_hex(struct nc_out *o, const uint8_t *b, size_t n);
/* Frames: begin reserves the 4-byte length, end fills it (or rolls back on overflow and
 * returns -1). */
size_t nc_frame_begin(struct nc_out *o);
int nc_frame_end(struct nc_out *o, size_t mark);

#endif
