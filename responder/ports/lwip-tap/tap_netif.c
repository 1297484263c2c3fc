/* A TAP device as an lwIP ethernet netif, written against lwIP's netif API.
 *
 * Frames go into PBUF_RAM pbufs, never PBUF_POOL: in Debian's liblwip 2.1.3 a PBUF_POOL pbuf
 * of a full frame reports len 1514 over a 616-byte allocation (apparently the pool's element
 * is sized for lwIP's default TCP_MSS of 536, pbuf_alloc for the library's 1460), and
 * pbuf_take then writes past it (AddressSanitizer: heap-buffer-overflow in pbuf_take). That is
 * the overrun liblwip's own tapif driver hits on the first frames from a Linux TAP device.
 *
 * Output: lwIP calls linkoutput with the core locked (from the tcpip thread, or from a socket
 * call under LWIP_TCPIP_CORE_LOCKING); one write() per frame. Input: one thread reads whole
 * frames into a buffer larger than any frame the device can deliver, copies each into a pbuf
 * and runs the stack on it under the core lock (or, built with NC_TAP_QUEUED_INPUT, queues it
 * for the tcpip thread; when that queue is full it waits and retries rather than drop: the
 * frame then waits in the device's own queue, as it would in a NIC's ring). */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#include "tap_netif.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "lwip/etharp.h"
#include "lwip/pbuf.h"
#include "lwip/sys.h"
#include "lwip/tcpip.h"
#include "netif/ethernet.h"

#define ETH_HEADER 14
#define MTU 1500
#define MAX_FRAME (ETH_HEADER + MTU)

int nc_tap_open(struct nc_tap *tap, const char *name, char *why, size_t cap)
{
    struct ifreq ifr;
    int fd;
    if (strlen(name) >= sizeof ifr.ifr_name) {
        snprintf(why, cap, "TAP device name %s is longer than %u characters", name,
                 (unsigned)sizeof ifr.ifr_name - 1);
        return -1;
    }
    fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "cannot open /dev/net/tun: %s (needs root or CAP_NET_ADMIN)", strerror(errno));
        return -1;
    }
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    memcpy(ifr.ifr_name, name, strlen(name));
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        snprintf(why, cap, "cannot attach to TAP device %s: %s (create it with `ip tuntap add dev %s mode tap`)",
                 name, strerror(errno), name);
        close(fd);
        return -1;
    }
    tap->fd = fd;
    return 0;
}

static err_t tap_linkoutput(struct netif *netif, struct pbuf *p)
{
    struct nc_tap *tap = (struct nc_tap *)netif->state;
    uint8_t frame[MAX_FRAME];
    const void *data = p->payload;
    ssize_t w;
    if (p->tot_len > sizeof frame) {
        tap->tx_dropped++;
        return ERR_IF;
    }
    if (p->len != p->tot_len) {
        /* A chain (headers and payload in separate pbufs): one contiguous frame. */
        if (pbuf_copy_partial(p, frame, p->tot_len, 0) != p->tot_len) {
            tap->tx_dropped++;
            return ERR_IF;
        }
        data = frame;
    }
    do
        w = write(tap->fd, data, p->tot_len);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)p->tot_len) {
        tap->tx_dropped++;
        return ERR_IF;
    }
    tap->tx_frames++;
    return ERR_OK;
}

err_t nc_tap_netif_init(struct netif *netif)
{
    struct nc_tap *tap = (struct nc_tap *)netif->state;
    netif->name[0] = 't';
    netif->name[1] = 'p';
    netif->output = etharp_output;
    netif->linkoutput = tap_linkoutput;
    netif->mtu = MTU;
    netif->hwaddr_len = 6;
    memcpy(netif->hwaddr, tap->mac, 6);
    netif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET | NETIF_FLAG_IGMP;
    return ERR_OK;
}

static void pause_briefly(void)
{
    struct timespec ts = {0, 100000}; /* 0.1 ms: the tcpip thread drains its queue meanwhile */
    nanosleep(&ts, NULL);
}

static void input_thread(void *arg)
{
    struct netif *netif = (struct netif *)arg;
    struct nc_tap *tap = (struct nc_tap *)netif->state;
    /* Larger than any frame: a longer one (a kernel side MTU above 1500) is seen whole and
     * dropped, never truncated into a pbuf. */
    static uint8_t buf[65536 + 64];
    for (;;) {
        struct pbuf *p;
        ssize_t n = read(tap->fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            perror("netchar-responder-lwip: reading the TAP device");
            return;
        }
        if (n < ETH_HEADER || n > MAX_FRAME) {
            tap->rx_dropped++;
            continue;
        }
        while ((p = pbuf_alloc(PBUF_RAW, (u16_t)n, PBUF_RAM)) == NULL)
            pause_briefly();
        if (pbuf_take(p, buf, (u16_t)n) != ERR_OK) {
            pbuf_free(p);
            tap->rx_dropped++;
            continue;
        }
        if (netif->input == ethernet_input) {
            /* Direct input (LWIP_TCPIP_CORE_LOCKING_INPUT done by the driver): this thread
             * runs the stack on the frame under the core lock, one thread hop fewer. */
            err_t err;
            LOCK_TCPIP_CORE();
            err = ethernet_input(p, netif);
            UNLOCK_TCPIP_CORE();
            if (err != ERR_OK)
                pbuf_free(p);
        } else {
            while (netif->input(p, netif) != ERR_OK)
                pause_briefly();
        }
        tap->rx_frames++;
    }
}

void nc_tap_start_input(struct netif *netif)
{
    sys_thread_new("tap-input", input_thread, netif, 0, 0);
}
