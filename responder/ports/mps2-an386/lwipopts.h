/* lwIP's options for netchar-responder on the mps2-an386 board: NO_SYS=1 and the raw API (no
 * threads, sockets or netconns), IPv4 with ARP and ICMP, TCP and UDP, every buffer from static
 * pools (docs/embedded.md, "A board: mps2-an386 in QEMU"); IPv6 beside IPv4 (below).
 *
 * The sizes follow from the responder's small profile (nc_config.h): at most NC_MAX_CONNS (6)
 * TCP connections of the native protocol, a control connection and two data streams moving
 * at once, one UDP socket (six with the other roles).
 * - Receive: the driver copies each frame into a PBUF_POOL pbuf; the raw transport keeps a
 *   connection's pbufs until the responder reads them, at most TCP_WND bytes per connection,
 *   and up to NC_TR_UDP_QUEUE datagrams per UDP socket.
 * - Send: tcp_write copies into PBUF_RAM segments from the heap, TCP_SND_BUF per connection;
 *   UDP payloads go by reference with a header pbuf from the heap.
 */
#ifndef LWIPOPTS_H
#define LWIPOPTS_H

#define NO_SYS 1
#define SYS_LIGHTWEIGHT_PROT 0 /* lwIP is never entered from an interrupt */
#define LWIP_SOCKET 0
#define LWIP_NETCONN 0
#define LWIP_SINGLE_NETIF 1

#define LWIP_IPV4 1
/* IPv6 beside IPv4, the least of it: a static address (BOARD_IP6, an implied /64 on the link)
 * and the link-local one, both valid at once (no duplicate address detection), neighbour
 * discovery; no MLD (the driver passes multicast, lwIP keeps its own solicited-node groups), no
 * autoconfiguration, router solicitation, DHCPv6, fragmentation or reassembly. lwIP learns
 * routers only from advertisements: off the link the board answers only where a router
 * advertises itself on it. */
#define LWIP_IPV6 1
#define LWIP_IPV6_NUM_ADDRESSES 2
#define LWIP_IPV6_SCOPES 0
#define LWIP_IPV6_MLD 0
#define LWIP_IPV6_AUTOCONFIG 0
#define LWIP_IPV6_SEND_ROUTER_SOLICIT 0
#define LWIP_IPV6_DUP_DETECT_ATTEMPTS 0
#define LWIP_IPV6_DHCP6 0
#define LWIP_IPV6_FRAG 0
#define LWIP_IPV6_REASS 0
#define LWIP_ND6_QUEUEING 0
#define LWIP_ND6_NUM_NEIGHBORS 8
#define LWIP_ND6_NUM_DESTINATIONS 8
#define LWIP_ND6_NUM_PREFIXES 2
#define LWIP_ND6_NUM_ROUTERS 2
#define LWIP_ARP 1
#define LWIP_ETHERNET 1
#define LWIP_ICMP 1
#define LWIP_RAW 0
#define LWIP_DHCP 0
#define LWIP_AUTOIP 0
#define LWIP_IGMP 0
#define LWIP_DNS 0
#define LWIP_TCP 1
#define LWIP_UDP 1
/* The responder never sends a datagram over the MTU (NC_UDP_MAX 1472) and takes none:
 * fragments are dropped, not held for reassembly. */
#define IP_REASSEMBLY 0
#define IP_FRAG 0

/* The IP header 4-byte aligned after the 14-byte Ethernet header (the driver asks the
 * LAN9118 for the same 2-byte offset). */
#define ETH_PAD_SIZE 2
#define MEM_ALIGNMENT 4

#define TCP_MSS 1460
#define TCP_WND (4 * TCP_MSS)
#define TCP_SND_BUF (4 * TCP_MSS)
#define TCP_SND_QUEUELEN (2 * TCP_SND_BUF / TCP_MSS + 2)
#define TCP_LISTEN_BACKLOG 0
#define LWIP_TCP_KEEPALIVE 0
#define LWIP_TCP_TIMESTAMPS 0
#define TCP_QUEUE_OOSEQ 1
#define TCP_OOSEQ_MAX_PBUFS 4

/* Static pools. */
#define MEM_SIZE (24 * 1024)  /* the heap: TCP send segments, UDP header pbufs */
#define PBUF_POOL_SIZE 24     /* received frames, 1516 bytes each */
#define MEMP_NUM_PBUF 8       /* PBUF_REF/ROM pbufs: UDP payloads sent by reference */
#define MEMP_NUM_UDP_PCB 6
#define MEMP_NUM_TCP_PCB 12   /* connections, TIME_WAIT ones included (the oldest is reused) */
#define MEMP_NUM_TCP_PCB_LISTEN 6
#define MEMP_NUM_TCP_SEG (4 * TCP_SND_QUEUELEN)
#define MEMP_NUM_SYS_TIMEOUT 8
#define ARP_TABLE_SIZE 8
#define ARP_QUEUEING 0

/* The LAN9118 model computes no checksums: lwIP does both ways. */
#define CHECKSUM_GEN_IP 1
#define CHECKSUM_GEN_UDP 1
#define CHECKSUM_GEN_TCP 1
#define CHECKSUM_CHECK_IP 1
#define CHECKSUM_CHECK_UDP 1
#define CHECKSUM_CHECK_TCP 1
#define CHECKSUM_GEN_ICMP6 1
#define CHECKSUM_CHECK_ICMP6 1

/* lwIP's own counters (lwip_stats): drops, errors and allocation failures, which the
 * responder reports over each test. */
#define LWIP_STATS 1
#define LWIP_STATS_DISPLAY 0
#define LINK_STATS 1
#define ETHARP_STATS 1
#define IP_STATS 1
#define ICMP_STATS 1
#define IP6_STATS 1
#define ICMP6_STATS 1
#define ND6_STATS 1
#define UDP_STATS 1
#define TCP_STATS 1
#define MEM_STATS 1
#define MEMP_STATS 1
#define SYS_STATS 0
#define MIB2_STATS 1 /* for tcp_retrans and tcp_rst_out */

#define LWIP_NETIF_STATUS_CALLBACK 0
#define LWIP_NETIF_LINK_CALLBACK 0

#endif
