/* libFuzzer harness of the responder's parsers (make fuzz; make fuzz-run): every client
 * message, the hello, the JSON scanner, and the other roles' records (nc_test requests and
 * data headers, netio CONTROL) on arbitrary bytes must return, never read or
 * write out of bounds (ASan) or overflow (UBSan). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../src/nc_peer_proto.h"
#include "../src/nc_proto.h"

static void count(void *ctx, const char *path, int index, const struct nc_jval *v)
{
    size_t *n = ctx;
    (void)index;
    *n += strlen(path) + (v->type == NC_J_STR ? v->slen : 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct nc_client_msg m;
    size_t n = 0;
    uint8_t out[256];
    struct nc_out o;
    (void)nc_parse_client_msg(data, size, &m);
    (void)nc_json_walk((const char *)data, size, count, &n);
    if (size >= NC_HELLO_LEN) {
        struct nc_hello h;
        (void)nc_hello_decode(data, &h);
    }
    /* nc_test: a request (and the slave's answer to it with small and large limits), a data
     * header; netio: a CONTROL message, re-encoded in the order it came in. */
    {
        struct nct_request r;
        struct nct_limits lim = {8770, 1472, 1000000u, 4u << 20, 0, 1};
        uint8_t reply[NCT_REPLY_LEN], hdr[NCT_HEADER_LEN], res[NCT_RESULTS_LEN], ctl[NETIO_CONTROL_LEN];
        uint32_t seq, cmd, arg;
        int little;
        if (nct_request_decode(data, size, &r) == 0) {
            uint32_t reason = nct_check(&r, &lim);
            lim.udp_max = 65507;
            lim.have_load = 1;
            reason |= nct_check(&r, &lim);
            nct_reply_encode(reply, reason == 0, r.seq, reason, r.nbufs, (uint64_t)r.buflen << 32 | r.slave_port);
            nct_header_encode(hdr, r.seq, r.buflen);
            nct_results_encode(res, r.seq, r.nbufs, r.buflen);
            (void)nct_slave_sends(r.code);
            (void)nct_slave_receives(r.code);
        }
        if (nct_header_decode(data, size, &seq) == 0)
            nct_header_encode(hdr, seq, (uint32_t)size);
        if (size >= NETIO_CONTROL_LEN && netio_control_decode(data, &little, &cmd, &arg) == 0)
            netio_control_encode(ctl, little, cmd, arg);
    }
    /* The emitter stays within its buffer whatever it is asked to write. */
    o.buf = out;
    o.cap = sizeof out;
    o.len = 0;
    o.overflow = 0;
    {
        size_t mark = nc_frame_begin(&o);
        char s[300];
        size_t k = size < sizeof s - 1 ? size : sizeof s - 1;
        memcpy(s, data, k);
        s[k] = 0;
        nc_out_str(&o, s);
        nc_out_hex(&o, data, size < 64 ? size : 64);
        nc_out_fixed(&o, m.spec.end_us, 6);
        nc_out_u64(&o, m.spec.end_bytes);
        (void)nc_frame_end(&o, mark);
    }
    return 0;
}
