/* netchar-responder on QEMU's mps2-an386: the target counters the responder reports over each
 * test (NC_HAVE_TARGET_COUNTERS, nc_platform.h): lwIP's own statistics (lwip_stats, with
 * LWIP_STATS and MIB2_STATS in lwipopts.h), the driver's and the raw transport's drops.
 *
 * link_*: frames at the driver (recv: handed to lwIP; drop: dropped by the driver or lwIP's
 * Ethernet layer; memerr: no pbuf for a received frame). ip_*, icmp_*, tcp_*, udp_*: lwIP's
 * protocol counters (drop includes checksum, length and protocol errors). tcp_retrans:
 * segments retransmitted; tcp_rst_out: resets sent. mem_err: heap allocations that failed;
 * memp_err: pool allocations that failed, any pool; pbuf_pool_err: the receive pool's.
 * udp_queue_drop: datagrams a full socket queue of the raw transport dropped; accept_drop:
 * connections refused for a full backlog. ip6_*, icmp6_recv: the same for IPv6 (ip_* and
 * icmp_recv count IPv4 only). nic_near_full: polls that found the LAN9118's
 * receive FIFO within one frame of full, when it may have dropped a frame it counts nowhere
 * (lan9118.c). */
#include "../../nc_platform.h"
#include "../../src/nc_transport.h"
#include "board.h"

#include "lwip/memp.h"
#include "lwip/stats.h"

static const char *const names[] = {
    "link_recv", "link_xmit", "link_drop", "link_memerr", "ip_recv", "ip_xmit", "ip_drop", "icmp_recv",
    "tcp_recv", "tcp_xmit", "tcp_drop", "tcp_memerr", "tcp_retrans", "tcp_rst_out", "udp_recv", "udp_xmit",
    "udp_drop", "udp_memerr", "mem_err", "memp_err", "pbuf_pool_err", "udp_queue_drop", "accept_drop",
    "nic_near_full",
#if LWIP_IPV6
    "ip6_recv", "ip6_xmit", "ip6_drop", "icmp6_recv",
#endif
};
#define COUNT (sizeof names / sizeof names[0])

unsigned nc_plat_counters(uint32_t *v)
{
    uint32_t memp_err = 0;
    unsigned i;
    for (i = 0; i < MEMP_MAX; i++)
        memp_err += lwip_stats.memp[i]->err;
    v[0] = lwip_stats.link.recv;
    v[1] = lwip_stats.link.xmit;
    v[2] = lwip_stats.link.drop;
    v[3] = lwip_stats.link.memerr;
    v[4] = lwip_stats.ip.recv;
    v[5] = lwip_stats.ip.xmit;
    v[6] = lwip_stats.ip.drop;
    v[7] = lwip_stats.icmp.recv;
    v[8] = lwip_stats.tcp.recv;
    v[9] = lwip_stats.tcp.xmit;
    v[10] = lwip_stats.tcp.drop;
    v[11] = lwip_stats.tcp.memerr;
    v[12] = lwip_stats.mib2.tcpretranssegs;
    v[13] = lwip_stats.mib2.tcpoutrsts;
    v[14] = lwip_stats.udp.recv;
    v[15] = lwip_stats.udp.xmit;
    v[16] = lwip_stats.udp.drop;
    v[17] = lwip_stats.udp.memerr;
    v[18] = lwip_stats.mem.err;
    v[19] = memp_err;
    v[20] = lwip_stats.memp[MEMP_PBUF_POOL]->err;
    v[21] = nc_tr_udp_queue_drops;
    v[22] = nc_tr_accept_drops;
    v[23] = nc_lan9118_rx_near_full;
#if LWIP_IPV6
    v[24] = lwip_stats.ip6.recv;
    v[25] = lwip_stats.ip6.xmit;
    v[26] = lwip_stats.ip6.drop;
    v[27] = lwip_stats.icmp6.recv;
#endif
    return COUNT;
}

const char *nc_plat_counter_name(unsigned i)
{
    return i < COUNT ? names[i] : "";
}
