/* netchar-responder on QEMU's mps2-an386: the LAN9118 Ethernet controller as an lwIP netif.
 *
 * Polled, no interrupt: nc_lan9118_poll, called from the raw transport's loop, moves the
 * frames waiting in the controller's receive FIFO into PBUF_POOL pbufs and hands each to lwIP;
 * linkoutput writes a frame into the transmit FIFO, which sends it. The registers and their
 * bits are those of the SMSC/Microchip LAN9118 data sheet as QEMU 7.2 models them
 * (hw/net/lan9118.c: 32-bit mode, received frames followed by their FCS, no checksum
 * offload, no drop counter).
 *
 * Receive: each frame comes RXDOFF = ETH_PAD_SIZE (2) bytes into the FIFO, so the IP header
 * lands 4-byte aligned in the pbuf, whose first two bytes are lwIP's padding. Its status word
 * gives the length with the FCS; the words are read whole, straight into the pbuf, and the
 * rest of the frame's words (the FCS) are read and dropped.
 * Transmit: one buffer per pbuf of the chain, each with its command words (A: size, data
 * start offset within the first word, first/last segment; B: the frame's length), then its
 * words read from the word-aligned address at or before the payload.
 */
#include "board.h"

#include "lwip/etharp.h"
#include "lwip/ethip6.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/stats.h"
#include "netif/ethernet.h"

#define LAN(off) NC_REG(0x40200000u + (off))
#define RX_DATA_FIFO 0x00u
#define TX_DATA_FIFO 0x20u
#define RX_STATUS_FIFO 0x40u
#define BYTE_TEST 0x64u
#define INT_STS 0x58u
#define INT_EN 0x5cu
#define IRQ_CFG 0x54u
#define RX_CFG 0x6cu
#define TX_CFG 0x70u
#define HW_CFG 0x74u
#define RX_FIFO_INF 0x7cu
#define TX_FIFO_INF 0x80u
#define PMT_CTRL 0x84u
#define MAC_CSR_CMD 0xa4u
#define MAC_CSR_DATA 0xa8u

#define BYTE_TEST_VALUE 0x87654321u
#define HW_CFG_SRST 1u
#define PMT_CTRL_READY 1u
#define TX_CFG_ON 2u
#define TX_CFG_SAO 4u /* the TX status FIFO may overflow: statuses are never read */
#define MAC_CSR_BUSY 0x80000000u
#define MAC_CSR_READ 0x40000000u
#define RX_STATUS_ERROR 0x8000u
#define TX_CMD_A_FIRST 0x2000u
#define TX_CMD_A_LAST 0x1000u

/* The MAC's registers, reached through MAC_CSR_CMD/DATA. */
#define MAC_CR 1u
#define MAC_ADDRH 2u
#define MAC_ADDRL 3u
#define MAC_MII_ACC 6u
#define MAC_MII_DATA 7u
#define MAC_CR_RXEN (1u << 2)
#define MAC_CR_TXEN (1u << 3)
#define MAC_CR_FDPX (1u << 20)
#define MAC_CR_MCPAS (1u << 19) /* pass all multicast */

#define PHY_BSR 1u
#define PHY_BSR_LINK 4u

#define RX_FRAMES_PER_POLL 8
#define FRAME_MAX 1514u /* without the FCS */
/* The receive FIFOs (HW_CFG's default split): 10560 data bytes, 176 status words. */
#define RX_DATA_FIFO_BYTES 10560u
#define RX_STATUS_FIFO_WORDS 176u

uint32_t nc_lan9118_rx_dropped, nc_lan9118_rx_near_full;

static int wait_clear(uint32_t off, uint32_t bits)
{
    uint32_t n;
    for (n = 0; n < 100000u; n++)
        if (!(LAN(off) & bits))
            return 0;
    return -1;
}

static uint32_t mac_read(uint32_t reg)
{
    (void)wait_clear(MAC_CSR_CMD, MAC_CSR_BUSY);
    LAN(MAC_CSR_CMD) = MAC_CSR_BUSY | MAC_CSR_READ | reg;
    (void)wait_clear(MAC_CSR_CMD, MAC_CSR_BUSY);
    return LAN(MAC_CSR_DATA);
}

static void mac_write(uint32_t reg, uint32_t v)
{
    (void)wait_clear(MAC_CSR_CMD, MAC_CSR_BUSY);
    LAN(MAC_CSR_DATA) = v;
    LAN(MAC_CSR_CMD) = MAC_CSR_BUSY | reg;
    (void)wait_clear(MAC_CSR_CMD, MAC_CSR_BUSY);
}

/* A register of the internal PHY (address 1): MII_ACC's busy bit is bit 0. */
static uint32_t phy_read(uint32_t reg)
{
    mac_write(MAC_MII_ACC, (1u << 11) | (reg << 6) | 1u);
    while (mac_read(MAC_MII_ACC) & 1u)
        continue;
    return mac_read(MAC_MII_DATA) & 0xffffu;
}

static err_t link_output(struct netif *netif, struct pbuf *p)
{
    struct pbuf *q, *first = NULL, *last = NULL;
    uint32_t len;
    (void)netif;
#if ETH_PAD_SIZE
    pbuf_remove_header(p, ETH_PAD_SIZE);
#endif
    len = p->tot_len;
    /* Empty pbufs carry no buffer: a buffer of 0 bytes would take the next command word as
     * its data. */
    for (q = p; q; q = q->next)
        if (q->len) {
            if (!first)
                first = q;
            last = q;
        }
    if (!first || len > FRAME_MAX || (LAN(TX_FIFO_INF) & 0xffffu) < len + 64u) {
        LINK_STATS_INC(link.drop);
#if ETH_PAD_SIZE
        pbuf_add_header(p, ETH_PAD_SIZE);
#endif
        return ERR_BUF;
    }
    for (q = first; q; q = q->next) {
        uintptr_t at = (uintptr_t)q->payload;
        uint32_t off = (uint32_t)(at & 3u), words = (off + q->len + 3u) / 4u;
        const uint32_t *w = (const uint32_t *)(at - off);
        if (!q->len)
            continue;
        LAN(TX_DATA_FIFO) = q->len | (off << 16) | (q == first ? TX_CMD_A_FIRST : 0u) | (q == last ? TX_CMD_A_LAST : 0u);
        LAN(TX_DATA_FIFO) = len;
        while (words--)
            LAN(TX_DATA_FIFO) = *w++;
        if (q == last)
            break;
    }
#if ETH_PAD_SIZE
    pbuf_add_header(p, ETH_PAD_SIZE);
#endif
    LINK_STATS_INC(link.xmit);
    return ERR_OK;
}

int nc_lan9118_poll(struct netif *netif)
{
    int n;
    uint32_t inf = LAN(RX_FIFO_INF);
    /* The controller drops a frame that finds no room in its FIFOs, and QEMU's model counts
     * none (its RX_DROP reads 0). A frame can only have been dropped since the last poll if
     * this one finds the FIFO within one frame of full: counted, such a poll says that the
     * figures of the time around it may miss frames. */
    if ((inf & 0xffffu) + 4u + FRAME_MAX + 4u > RX_DATA_FIFO_BYTES || (inf >> 16 & 0xffu) + 1u >= RX_STATUS_FIFO_WORDS)
        nc_lan9118_rx_near_full++;
    if (!(inf >> 16 & 0xffu))
        return 0;
    for (n = 0; n < RX_FRAMES_PER_POLL && (LAN(RX_FIFO_INF) >> 16 & 0xffu); n++) {
        uint32_t status = LAN(RX_STATUS_FIFO), bytes = status >> 16 & 0x3fffu;
        uint32_t words = (ETH_PAD_SIZE + bytes + 3u) / 4u, len = bytes >= 4u ? bytes - 4u : 0u;
        struct pbuf *p = NULL;
        if (!(status & RX_STATUS_ERROR) && len >= 14u && len <= FRAME_MAX)
            p = pbuf_alloc(PBUF_RAW, (u16_t)(len + ETH_PAD_SIZE), PBUF_POOL);
        if (p && !p->next) {
            uint32_t *w = (uint32_t *)p->payload, k, mine = (ETH_PAD_SIZE + len + 3u) / 4u;
            for (k = 0; k < mine; k++)
                w[k] = LAN(RX_DATA_FIFO);
            words -= mine;
            while (words--)
                (void)LAN(RX_DATA_FIFO);
            LINK_STATS_INC(link.recv);
            if (netif->input(p, netif) != ERR_OK)
                pbuf_free(p);
            continue;
        }
        /* No pbuf (the pool is empty), an error or an odd length: the frame is read out of the
         * FIFO and dropped. */
        if (p)
            pbuf_free(p);
        while (words--)
            (void)LAN(RX_DATA_FIFO);
        nc_lan9118_rx_dropped++;
        if (!p)
            LINK_STATS_INC(link.memerr);
        LINK_STATS_INC(link.drop);
    }
    return n;
}

int8_t nc_lan9118_netif_init(struct netif *netif)
{
    uint32_t lo, hi;
    if (LAN(BYTE_TEST) != BYTE_TEST_VALUE)
        return ERR_IF;
    LAN(HW_CFG) = HW_CFG_SRST;
    if (wait_clear(HW_CFG, HW_CFG_SRST) != 0)
        return ERR_IF;
    while (!(LAN(PMT_CTRL) & PMT_CTRL_READY))
        continue;
    LAN(INT_EN) = 0;
    LAN(IRQ_CFG) = 0;
    LAN(INT_STS) = 0xffffffffu;
    /* The address the controller loaded from its EEPROM (QEMU: -nic ...,mac=). */
    lo = mac_read(MAC_ADDRL);
    hi = mac_read(MAC_ADDRH);
    netif->hwaddr[0] = (u8_t)lo;
    netif->hwaddr[1] = (u8_t)(lo >> 8);
    netif->hwaddr[2] = (u8_t)(lo >> 16);
    netif->hwaddr[3] = (u8_t)(lo >> 24);
    netif->hwaddr[4] = (u8_t)hi;
    netif->hwaddr[5] = (u8_t)(hi >> 8);
    netif->hwaddr_len = ETH_HWADDR_LEN;
    LAN(TX_CFG) = TX_CFG_ON | TX_CFG_SAO;
    LAN(RX_CFG) = (uint32_t)ETH_PAD_SIZE << 8;
    /* Its own address and broadcast only (the reset value is promiscuous); with IPv6, multicast
     * too: neighbour solicitations come to each address's solicited-node group (lwIP, without
     * MLD, keeps those of its own addresses and the all-nodes group and drops the rest). */
#if LWIP_IPV6
    mac_write(MAC_CR, MAC_CR_TXEN | MAC_CR_RXEN | MAC_CR_FDPX | MAC_CR_MCPAS);
#else
    mac_write(MAC_CR, MAC_CR_TXEN | MAC_CR_RXEN | MAC_CR_FDPX);
#endif
    netif->name[0] = 'e';
    netif->name[1] = 'n';
    netif->mtu = 1500;
    netif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET;
    if (phy_read(PHY_BSR) & PHY_BSR_LINK)
        netif->flags |= NETIF_FLAG_LINK_UP;
    netif->output = etharp_output;
#if LWIP_IPV6
    netif->output_ip6 = ethip6_output;
#endif
    netif->linkoutput = link_output;
    return ERR_OK;
}
