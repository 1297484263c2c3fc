/* libFuzzer harness of the responder's parsers (make fuzz; make fuzz-run): every client
 * message, the hello, and the JSON scanner on arbitrary bytes must return, never read or
 * write out of bounds (ASan) or overflow (UBSan). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
