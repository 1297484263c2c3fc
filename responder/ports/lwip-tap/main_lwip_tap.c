/* netchar-responder on lwIP's TCP/IP stack in user space, over a TAP device:
 * `netchar-responder-lwip --tap DEV --ip ADDR/PREFIX [--gw ADDR] [--mac MAC] [--port PORT]`.
 * The kernel side of DEV is an ordinary interface (give it an address in the same subnet);
 * every frame between it and ADDR goes through lwIP: ARP, IPv4, TCP, UDP, sockets. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lwip/init.h"
#include "lwip/ip4_addr.h"
#include "lwip/netif.h"
#include "lwip/sys.h"
#include "lwip/tcpip.h"
#include "netif/ethernet.h"

#include "../../nc_config.h"
#include "../../src/nc_responder.h"
#include "tap_netif.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: netchar-responder-lwip --tap DEV --ip ADDR/PREFIX [--gw ADDR] [--mac MAC] [--port PORT]\n"
            "  runs the responder on lwIP %s over TAP device DEV (create it first:\n"
            "  ip tuntap add dev DEV mode tap; ip addr add <kernel side addr>/PREFIX dev DEV; ip link set DEV up);\n"
            "  ADDR is lwIP's own address, MAC its own (default 02:6e:63:xx:xx:xx from ADDR), PORT the\n"
            "  TCP and UDP port (default %d)\n",
            LWIP_VERSION_STRING, NC_DEFAULT_PORT);
}

static int parse_mac(const char *s, uint8_t mac[6])
{
    unsigned v[6];
    int i, used = 0;
    if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &used) != 6 || s[used])
        return -1;
    for (i = 0; i < 6; i++)
        mac[i] = (uint8_t)v[i];
    return (mac[0] & 1) ? -1 : 0; /* a multicast address cannot be a station's */
}

static void stack_ready(void *arg)
{
    sys_sem_signal((sys_sem_t *)arg);
}

static void fail(const char *what, const char *value, const char *hint)
{
    fprintf(stderr, "netchar-responder-lwip: %s %s; %s\n", what, value, hint);
    exit(2);
}

int main(int argc, char **argv)
{
    static struct nc_tap tap;
    static struct netif netif;
    const char *dev = NULL, *ip = NULL, *gw = NULL, *mac = NULL;
    long port = NC_DEFAULT_PORT, prefix;
    ip4_addr_t addr, mask, gateway;
    char addr_text[32], why[256], *slash, *end;
    sys_sem_t ready;
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("netchar-responder %s (lwIP %s over TAP)\n", NC_RESPONDER_VERSION, LWIP_VERSION_STRING);
            return 0;
        } else if (strcmp(a, "--tap") == 0 && has_value) {
            dev = argv[++i];
        } else if (strcmp(a, "--ip") == 0 && has_value) {
            ip = argv[++i];
        } else if (strcmp(a, "--gw") == 0 && has_value) {
            gw = argv[++i];
        } else if (strcmp(a, "--mac") == 0 && has_value) {
            mac = argv[++i];
        } else if ((strcmp(a, "--port") == 0 || strcmp(a, "-p") == 0) && has_value) {
            port = strtol(argv[++i], &end, 10);
            if (*end || port < 0 || port > 65535)
                fail("--port", argv[i], "give a port number (0 to 65535; 0 picks a free one)");
        } else {
            fprintf(stderr, "netchar-responder-lwip: unknown argument or missing value: %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!dev || !ip) {
        fprintf(stderr, "netchar-responder-lwip: --tap and --ip are required\n");
        usage(stderr);
        return 2;
    }
    slash = strchr(ip, '/');
    if (!slash || (size_t)(slash - ip) >= sizeof addr_text)
        fail("--ip", ip, "give lwIP's address with its prefix length, e.g. 10.77.0.2/24");
    memcpy(addr_text, ip, (size_t)(slash - ip));
    addr_text[slash - ip] = 0;
    prefix = strtol(slash + 1, &end, 10);
    if (!ip4addr_aton(addr_text, &addr) || *end || slash[1] == 0 || prefix < 1 || prefix > 30)
        fail("--ip", ip, "give lwIP's address with its prefix length (1 to 30), e.g. 10.77.0.2/24");
    ip4_addr_set_u32(&mask, lwip_htonl(0xffffffffu << (32 - prefix)));
    ip4_addr_set_zero(&gateway);
    if (gw && !ip4addr_aton(gw, &gateway))
        fail("--gw", gw, "give an IPv4 address");
    if (mac) {
        if (parse_mac(mac, tap.mac) != 0)
            fail("--mac", mac, "give a unicast MAC address, e.g. 02:00:00:00:00:01");
    } else {
        uint32_t a = lwip_ntohl(ip4_addr_get_u32(&addr));
        const uint8_t m[6] = {0x02, 0x6e, 0x63, (uint8_t)(a >> 16), (uint8_t)(a >> 8), (uint8_t)a};
        memcpy(tap.mac, m, 6);
    }
    if (nc_tap_open(&tap, dev, why, sizeof why) != 0) {
        fprintf(stderr, "netchar-responder-lwip: %s\n", why);
        return 1;
    }
    /* A client that closes early must not kill the process (lwIP sends on its own sockets,
     * but a write to the TAP device of a vanished kernel side must not either). */
    signal(SIGPIPE, SIG_IGN);

    if (sys_sem_new(&ready, 0) != ERR_OK) {
        fprintf(stderr, "netchar-responder-lwip: cannot start lwIP (sys_sem_new)\n");
        return 1;
    }
    tcpip_init(stack_ready, &ready);
    sys_sem_wait(&ready);
    sys_sem_free(&ready);

    LOCK_TCPIP_CORE();
    if (!netif_add(&netif, &addr, &mask, &gateway, &tap, nc_tap_netif_init, NC_TAP_INPUT)) {
        UNLOCK_TCPIP_CORE();
        fprintf(stderr, "netchar-responder-lwip: lwIP refused the netif for %s\n", dev);
        return 1;
    }
    netif_set_default(&netif);
    netif_set_link_up(&netif);
    netif_set_up(&netif);
    UNLOCK_TCPIP_CORE();
    nc_tap_start_input(&netif);

    if (nc_responder_init((unsigned short)port) != 0) {
        fprintf(stderr, "netchar-responder-lwip: lwIP cannot listen on port %ld; pick another with --port\n", port);
        return 1;
    }
    fprintf(stderr,
            "netchar-responder %s on lwIP %s, TAP %s, %s/%ld (MAC %02x:%02x:%02x:%02x:%02x:%02x), listening on TCP and "
            "UDP port %u\n",
            NC_RESPONDER_VERSION, LWIP_VERSION_STRING, dev, addr_text, prefix, tap.mac[0], tap.mac[1], tap.mac[2],
            tap.mac[3], tap.mac[4], tap.mac[5], (unsigned)nc_responder_port());
    nc_responder_run();
    return 0;
}
