/* netchar-responder: the bytes of the peer protocols its other roles speak (eCos nc_test,
 * netio), without sockets or clocks. Pure functions on caller buffers; any input is answered
 * by a return code, never a read or write out of bounds (fuzz/fuzz_messages.c).
 *
 * nc_test's records are the ILP32 layout of the 32-bit targets: every field a big-endian
 * 32-bit word (docs/embedded.md; crates/wire/src/nc_test.rs is the Rust version).
 */
#ifndef NC_PEER_PROTO_H
#define NC_PEER_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* ---- eCos nc_test ---- */
#define NCT_REQUEST_LEN 28
#define NCT_REPLY_LEN 24
#define NCT_HEADER_LEN 16
#define NCT_RESULTS_LEN 20
#define NCT_MAX_ERRORS 5
#define NCT_MAX_BUFLEN 65000u

#define NCT_DISCONNECT 0x0001u
#define NCT_UDP_SEND 0x0010u
#define NCT_UDP_RECV 0x0011u
#define NCT_UDP_ECHO 0x0012u
#define NCT_TCP_SEND 0x0020u
#define NCT_TCP_RECV 0x0021u
#define NCT_TCP_ECHO 0x0022u
#define NCT_START_IDLE 0x0100u
#define NCT_STOP_IDLE 0x0101u
#define NCT_SET_LOAD 0x0200u

#define NCT_NAK_UNKNOWN 1u
#define NCT_NAK_BAD_REQUEST 2u
#define NCT_NAK_NO_BACKGROUND 3u

struct nct_request {
    uint32_t code, seq, nbufs, buflen, slave_port, master_port;
};

/* What a slave with these limits can do. */
struct nct_limits {
    uint16_t data_port;     /* requests naming another slave_port are refused */
    uint32_t udp_max;       /* largest datagram (header included) it sends or reads */
    uint32_t max_nbufs;
    uint32_t max_udp_send;  /* bytes a UDP_SEND may make it send (a forged source) */
    int have_load, have_idle;
};

/* 0 and *r filled for 28 bytes or more; -1 for fewer (not a request). */
int nct_request_decode(const uint8_t *b, size_t n, struct nct_request *r);
/* The answer to a decoded request: 0 = ACK, else the NAK reason. */
uint32_t nct_check(const struct nct_request *r, const struct nct_limits *lim);
int nct_is_test(uint32_t code);
int nct_is_udp(uint32_t code);
int nct_slave_sends(uint32_t code);
int nct_slave_receives(uint32_t code);
void nct_reply_encode(uint8_t out[NCT_REPLY_LEN], int ack, uint32_t seq, uint32_t reason, uint32_t ticks,
                      uint64_t count);
/* 0 and *seq for a header with both keys; -1 otherwise (short, or bad keys). */
int nct_header_decode(const uint8_t *b, size_t n, uint32_t *seq);
void nct_header_encode(uint8_t out[NCT_HEADER_LEN], uint32_t seq, uint32_t len);
void nct_results_encode(uint8_t out[NCT_RESULTS_LEN], uint32_t seq, uint32_t nsent, uint32_t nrecvd);

/* ---- netio ---- */
#define NETIO_CONTROL_LEN 8
#define NETIO_QUIT 0u
#define NETIO_C2S 1u
#define NETIO_S2C 2u
#define NETIO_RES 3u
#define NETIO_MAX_BLOCK 65536u

/* Decodes a CONTROL message. *little says its byte order: builds before netio 1.23 send host
 * order (little-endian x86), recognised when the big-endian command is not one of the four
 * and the little-endian one is. Returns 0 for a known command, -1 for anything else (the
 * server closes). */
int netio_control_decode(const uint8_t b[NETIO_CONTROL_LEN], int *little, uint32_t *cmd, uint32_t *data);
void netio_control_encode(uint8_t b[NETIO_CONTROL_LEN], int little, uint32_t cmd, uint32_t data);

#endif
