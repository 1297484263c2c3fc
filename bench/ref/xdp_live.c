/* bench/ref/xdp_live.c: the most 64-byte UDP datagrams per second one core can put onto a
 * veth without building a socket buffer per frame: the ceiling bench/xdp.sh holds netchar's
 * senders against (xdp.sh builds it with gcc into its work directory; it is not part of
 * netchar and not installed).
 *
 * The kernel's XDP "live frames" test mode (BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES,
 * Linux 5.18) runs an XDP program over frames it keeps in a page pool, and carries out the
 * program's verdict for real: here the program is `return bpf_redirect(IFINDEX, 0)`, so each
 * frame goes to the interface's ndo_xdp_xmit (veth: straight into its peer's receive ring as an
 * xdp_frame, for the peer's XDP program). No system call per batch of frames, no socket, no
 * socket buffer: what is left is the redirect and the veth's ring. Every frame is the same one
 * (no sequence number is written), IPv4 with no UDP checksum, from SRC_IP to DST_IP port 9000.
 * It sends in calls of 1 Mi frames until SECONDS have passed, and prints one line of JSON:
 *   {"packets": N, "seconds": S, "cpu_seconds": C}
 *
 *   xdp_live IFACE DST_MAC SRC_MAC SRC_IP DST_IP SECONDS       (needs CAP_BPF and CAP_NET_ADMIN)
 */
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAYLOAD 64
#define FRAME (14 + 20 + 8 + PAYLOAD)
#define PER_CALL (1u << 20)

static long sys_bpf(int cmd, union bpf_attr *attr) {
    return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static struct bpf_insn insn(uint8_t code, uint8_t dst, int16_t off, int32_t imm) {
    struct bpf_insn i = {.code = code, .dst_reg = dst, .src_reg = 0, .off = off, .imm = imm};
    return i;
}

static double seconds_of(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int parse_mac(const char *text, uint8_t *out) {
    return sscanf(text, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", out, out + 1, out + 2, out + 3, out + 4, out + 5) == 6;
}

/* The IPv4 header's checksum: the ones' complement of the ones' complement sum of its words. */
static uint16_t ip_checksum(const uint8_t *header) {
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += (uint32_t)(header[i] << 8 | header[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: xdp_live IFACE DST_MAC SRC_MAC SRC_IP DST_IP SECONDS\n");
        return 2;
    }
    unsigned ifindex = if_nametoindex(argv[1]);
    uint8_t frame[FRAME] = {0};
    struct in_addr src, dst;
    double duration = atof(argv[6]);
    if (!ifindex || !parse_mac(argv[2], frame) || !parse_mac(argv[3], frame + 6) || !inet_aton(argv[4], &src) ||
        !inet_aton(argv[5], &dst) || !(duration > 0)) {
        fprintf(stderr, "xdp_live: bad interface, MAC, address or duration\n");
        return 2;
    }
    frame[12] = 0x08; /* IPv4 */
    uint8_t *ip = frame + 14;
    ip[0] = 0x45;
    ip[2] = (20 + 8 + PAYLOAD) >> 8;
    ip[3] = (20 + 8 + PAYLOAD) & 0xff;
    ip[8] = 64;  /* TTL */
    ip[9] = 17;  /* UDP */
    memcpy(ip + 12, &src, 4);
    memcpy(ip + 16, &dst, 4);
    uint16_t check = ip_checksum(ip);
    ip[10] = check >> 8;
    ip[11] = check & 0xff;
    uint8_t *udp = ip + 20;
    udp[0] = 40000 >> 8, udp[1] = 40000 & 0xff;
    udp[2] = 9000 >> 8, udp[3] = 9000 & 0xff;
    udp[5] = 8 + PAYLOAD; /* length; checksum 0: none (IPv4) */

    struct bpf_insn prog[] = {
        insn(BPF_ALU64 | BPF_MOV | BPF_K, 1, 0, (int32_t)ifindex), /* r1 = ifindex */
        insn(BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0),                /* r2 = flags */
        insn(BPF_JMP | BPF_CALL, 0, 0, BPF_FUNC_redirect),         /* r0 = bpf_redirect(r1, r2) */
        insn(BPF_JMP | BPF_EXIT, 0, 0, 0),
    };
    char log[4096] = "";
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_XDP;
    attr.insns = (uintptr_t)prog;
    attr.insn_cnt = sizeof prog / sizeof prog[0];
    attr.license = (uintptr_t)"GPL";
    attr.log_buf = (uintptr_t)log;
    attr.log_size = sizeof log;
    attr.log_level = 1;
    int prog_fd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    if (prog_fd < 0) {
        perror("xdp_live: BPF_PROG_LOAD");
        fprintf(stderr, "%s", log);
        return 1;
    }
    /* The frames' context: received on IFACE (a redirect needs an ingress device). */
    struct xdp_md ctx = {.data_end = FRAME, .ingress_ifindex = ifindex};
    uint64_t packets = 0;
    double start = seconds_of(CLOCK_MONOTONIC), cpu_start = seconds_of(CLOCK_THREAD_CPUTIME_ID), now = start;
    while (now - start < duration) {
        memset(&attr, 0, sizeof attr);
        attr.test.prog_fd = prog_fd;
        attr.test.data_in = (uintptr_t)frame;
        attr.test.data_size_in = FRAME;
        attr.test.ctx_in = (uintptr_t)&ctx;
        attr.test.ctx_size_in = sizeof ctx;
        attr.test.repeat = PER_CALL;
        attr.test.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
        if (sys_bpf(BPF_PROG_TEST_RUN, &attr) < 0) {
            perror("xdp_live: BPF_PROG_TEST_RUN (live frames)");
            return 1;
        }
        packets += PER_CALL;
        now = seconds_of(CLOCK_MONOTONIC);
    }
    printf("{\"packets\": %llu, \"seconds\": %.6f, \"cpu_seconds\": %.6f}\n", (unsigned long long)packets,
           now - start, seconds_of(CLOCK_THREAD_CPUTIME_ID) - cpu_start);
    return 0;
}
