/* lwIP's own iperf 2 server (apps/lwiperf, raw API) on the same stack and TAP driver as the
 * responder: the reference the benchmark (bench/lwip.sh) holds the responder to. Debian's
 * liblwip does not contain lwiperf, so `make lwiperf-tap LWIPERF_C=path/to/lwiperf.c` compiles
 * it from an lwIP 2.1.3 source tree (src/apps/lwiperf/lwiperf.c; never committed here).
 * `lwiperf-tap --tap DEV --ip ADDR/PREFIX` serves `iperf -c ADDR` on port 5001. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lwip/apps/lwiperf.h"
#include "lwip/init.h"
#include "lwip/ip4_addr.h"
#include "lwip/netif.h"
#include "lwip/sys.h"
#include "lwip/tcpip.h"

#include "tap_netif.h"

static void report(void *arg, enum lwiperf_report_type type, const ip_addr_t *local_addr, u16_t local_port,
                   const ip_addr_t *remote_addr, u16_t remote_port, u32_t bytes, u32_t ms, u32_t kbits_per_sec)
{
    (void)arg;
    (void)local_addr;
    (void)local_port;
    (void)remote_addr;
    (void)remote_port;
    fprintf(stderr, "lwiperf: report type %d: %lu bytes in %lu ms, %lu kbit/s\n", (int)type, (unsigned long)bytes,
            (unsigned long)ms, (unsigned long)kbits_per_sec);
}

static void ready(void *arg)
{
    sys_sem_signal((sys_sem_t *)arg);
}

int main(int argc, char **argv)
{
    static struct nc_tap tap;
    static struct netif netif;
    ip4_addr_t addr, mask, gw;
    char text[32], why[256], *slash;
    sys_sem_t sem;
    long prefix;
    if (argc != 5 || strcmp(argv[1], "--tap") != 0 || strcmp(argv[3], "--ip") != 0 ||
        !(slash = strchr(argv[4], '/')) || (size_t)(slash - argv[4]) >= sizeof text) {
        fprintf(stderr, "usage: lwiperf-tap --tap DEV --ip ADDR/PREFIX\n");
        return 2;
    }
    memcpy(text, argv[4], (size_t)(slash - argv[4]));
    text[slash - argv[4]] = 0;
    prefix = strtol(slash + 1, NULL, 10);
    if (!ip4addr_aton(text, &addr) || prefix < 1 || prefix > 30) {
        fprintf(stderr, "lwiperf-tap: --ip %s is not ADDR/PREFIX\n", argv[4]);
        return 2;
    }
    ip4_addr_set_u32(&mask, lwip_htonl(0xffffffffu << (32 - prefix)));
    ip4_addr_set_zero(&gw);
    {
        uint32_t a = lwip_ntohl(ip4_addr_get_u32(&addr));
        const uint8_t m[6] = {0x02, 0x6e, 0x63, (uint8_t)(a >> 16), (uint8_t)(a >> 8), (uint8_t)a};
        memcpy(tap.mac, m, 6);
    }
    if (nc_tap_open(&tap, argv[2], why, sizeof why) != 0) {
        fprintf(stderr, "lwiperf-tap: %s\n", why);
        return 1;
    }
    sys_sem_new(&sem, 0);
    tcpip_init(ready, &sem);
    sys_sem_wait(&sem);
    LOCK_TCPIP_CORE();
    netif_add(&netif, &addr, &mask, &gw, &tap, nc_tap_netif_init, NC_TAP_INPUT);
    netif_set_default(&netif);
    netif_set_link_up(&netif);
    netif_set_up(&netif);
    lwiperf_start_tcp_server_default(report, NULL);
    UNLOCK_TCPIP_CORE();
    nc_tap_start_input(&netif);
    fprintf(stderr, "lwiperf (lwIP %s) on TAP %s, %s, listening on TCP port %d\n", LWIP_VERSION_STRING, argv[2],
            argv[4], LWIPERF_TCP_PORT_DEFAULT);
    for (;;)
        pause();
}
