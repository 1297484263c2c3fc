/* A TAP device as an lwIP ethernet netif (ports/lwip-tap). */
#ifndef NC_TAP_NETIF_H
#define NC_TAP_NETIF_H

#include <stddef.h>
#include <stdint.h>

#include "lwip/netif.h"
#include "lwip/tcpip.h"
#include "netif/ethernet.h"

struct nc_tap {
    int fd;                 /* /dev/net/tun attached to the device */
    uint8_t mac[6];         /* lwIP's own address on the link (not the kernel side's) */
    uint64_t rx_frames, rx_dropped, tx_frames, tx_dropped;
};

/* Attaches to TAP device `name` (IFF_TAP | IFF_NO_PI); 0, or -1 with `why` filled in. */
int nc_tap_open(struct nc_tap *tap, const char *name, char *why, size_t cap);

/* netif_add's init callback; netif->state is the struct nc_tap. */
err_t nc_tap_netif_init(struct netif *netif);

/* The input function to give netif_add: ethernet_input (the default) has the input thread
 * run the stack on each frame under the core lock; tcpip_input (-DNC_TAP_QUEUED_INPUT) queues
 * each frame for lwIP's tcpip thread, one thread hop more. */
#if defined(NC_TAP_QUEUED_INPUT)
#define NC_TAP_INPUT tcpip_input
#else
#define NC_TAP_INPUT ethernet_input
#endif

/* Starts the thread that reads frames from the device and hands them to the tcpip thread. */
void nc_tap_start_input(struct netif *netif);

#endif
