/* netchar-responder: nc_test and netio records (nc_peer_proto.h). */
#include "nc_peer_proto.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

int nct_request_decode(const uint8_t *b, size_t n, struct nct_request *r)
{
    if (n < NCT_REQUEST_LEN)
        return -1;
    r->code = be32(b);
    r->seq = be32(b + 4);
    r->nbufs = be32(b + 8);
    r->buflen = be32(b + 12);
    r->slave_port = be32(b + 16);
    r->master_port = be32(b + 20);
    return 0;
}

int nct_is_udp(uint32_t code)
{
    return code == NCT_UDP_SEND || code == NCT_UDP_RECV || code == NCT_UDP_ECHO;
}

int nct_is_test(uint32_t code)
{
    return nct_is_udp(code) || code == NCT_TCP_SEND || code == NCT_TCP_RECV || code == NCT_TCP_ECHO;
}

int nct_slave_sends(uint32_t code)
{
    return code == NCT_UDP_SEND || code == NCT_UDP_ECHO || code == NCT_TCP_SEND || code == NCT_TCP_ECHO;
}

int nct_slave_receives(uint32_t code)
{
    return code == NCT_UDP_RECV || code == NCT_UDP_ECHO || code == NCT_TCP_RECV || code == NCT_TCP_ECHO;
}

uint32_t nct_check(const struct nct_request *r, const struct nct_limits *lim)
{
    if (nct_is_test(r->code)) {
        uint32_t td = r->buflen + NCT_HEADER_LEN;
        if (r->buflen > NCT_MAX_BUFLEN || r->nbufs > lim->max_nbufs || r->slave_port != lim->data_port ||
            r->master_port == 0 || r->master_port > 65535u)
            return NCT_NAK_BAD_REQUEST;
        if (nct_is_udp(r->code) && td > lim->udp_max)
            return NCT_NAK_BAD_REQUEST;
        if (r->code == NCT_UDP_SEND && (uint64_t)r->nbufs * td > lim->max_udp_send)
            return NCT_NAK_BAD_REQUEST;
        return 0;
    }
    switch (r->code) {
    case NCT_DISCONNECT:
        return 0;
    case NCT_SET_LOAD:
        if (!lim->have_load)
            return NCT_NAK_NO_BACKGROUND;
        return r->nbufs > 100 ? NCT_NAK_BAD_REQUEST : 0;
    case NCT_START_IDLE:
    case NCT_STOP_IDLE:
        return lim->have_idle ? 0 : NCT_NAK_NO_BACKGROUND;
    default:
        return NCT_NAK_UNKNOWN;
    }
}

void nct_reply_encode(uint8_t out[NCT_REPLY_LEN], int ack, uint32_t seq, uint32_t reason, uint32_t ticks,
                      uint64_t count)
{
    put_be32(out, ack ? 1u : 0u);
    put_be32(out + 4, seq);
    put_be32(out + 8, reason);
    put_be32(out + 12, ticks);
    put_be32(out + 16, (uint32_t)(count >> 32));
    put_be32(out + 20, (uint32_t)count);
}

int nct_header_decode(const uint8_t *b, size_t n, uint32_t *seq)
{
    if (n < NCT_HEADER_LEN || be32(b) != 0xC0DEADC0u || be32(b + 12) != 0xC0DEADC1u)
        return -1;
    *seq = be32(b + 4);
    return 0;
}

void nct_header_encode(uint8_t out[NCT_HEADER_LEN], uint32_t seq, uint32_t len)
{
    put_be32(out, 0xC0DEADC0u);
    put_be32(out + 4, seq);
    put_be32(out + 8, len);
    put_be32(out + 12, 0xC0DEADC1u);
}

void nct_results_encode(uint8_t out[NCT_RESULTS_LEN], uint32_t seq, uint32_t nsent, uint32_t nrecvd)
{
    put_be32(out, 0xDEADC0DEu);
    put_be32(out + 4, seq);
    put_be32(out + 8, nsent);
    put_be32(out + 12, nrecvd);
    put_be32(out + 16, 0xDEADC1DEu);
}

int netio_control_decode(const uint8_t b[NETIO_CONTROL_LEN], int *little, uint32_t *cmd, uint32_t *data)
{
    uint32_t cb = be32(b), cl = le32(b);
    *little = cb > NETIO_RES && cl <= NETIO_RES;
    *cmd = *little ? cl : cb;
    *data = *little ? le32(b + 4) : be32(b + 4);
    return *cmd <= NETIO_RES ? 0 : -1;
}

void netio_control_encode(uint8_t b[NETIO_CONTROL_LEN], int little, uint32_t cmd, uint32_t data)
{
    if (little) {
        int i;
        for (i = 0; i < 4; i++) {
            b[i] = (uint8_t)(cmd >> (8 * i));
            b[4 + i] = (uint8_t)(data >> (8 * i));
        }
    } else {
        put_be32(b, cmd);
        put_be32(b + 4, data);
    }
}
