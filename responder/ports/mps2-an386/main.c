/* netchar-responder on QEMU's mps2-an386 (Cortex-M4, LAN9118): boot, lwIP with NO_SYS=1,
 * the responder's loop on the raw transport (src/nc_transport_raw.c).
 *
 * The addresses are the build's (make board BOARD_IP=A.B.C.D BOARD_PREFIX=N BOARD_GW=A.B.C.D
 * BOARD_IP6=X:X::X), with IPv6's link-local one from the MAC;
 * the console (UART 0, QEMU's -nographic stdout) says when the board is ready:
 * "netchar-responder 0.1 on lwIP 2.1.3 ... listening on ...". */
#include "../../src/nc_responder.h"
#include "../../src/nc_roles.h"
#include "../../src/nc_transport.h"
#include "board.h"

#include "lwip/init.h"
#include "lwip/ip4_addr.h"
#include "lwip/netif.h"
#include "lwip/timeouts.h"
#include "netif/ethernet.h"

#ifndef BOARD_IP
#define BOARD_IP 10, 77, 0, 2
#endif
#ifndef BOARD_PREFIX
#define BOARD_PREFIX 24
#endif
#ifndef BOARD_GW
#define BOARD_GW 10, 77, 0, 1
#endif
/* The addresses as text, for the ready line (and for the image: `strings` finds them). */
#ifndef BOARD_IP_TEXT
#define BOARD_IP_TEXT "10.77.0.2"
#endif
#if LWIP_IPV6
#include "lwip/ip6_addr.h"
/* The static IPv6 address (an implied /64 on the link), beside the link-local one. */
#ifndef BOARD_IP6
#define BOARD_IP6 "fd00:77::2"
#endif
#endif
/* The time the idle loop is calibrated for at boot (nc_plat_idle_per_second). */
#ifndef BOARD_BUILD
#define BOARD_BUILD "an unnamed build"
#endif
#ifndef BOARD_IDLE_CALIBRATION_MS
#define BOARD_IDLE_CALIBRATION_MS 100
#endif
#ifndef BOARD_LOAD_CALIBRATION_MS
#define BOARD_LOAD_CALIBRATION_MS 50
#endif

/* IP4_ADDR of a four-number macro: expanded before it is counted. */
#define SET_IP4(dst, quad) SET_IP4_(dst, quad)
#define SET_IP4_(dst, a, b, c, d) IP4_ADDR(dst, a, b, c, d)

static struct netif netif;

int nc_plat_net_poll(void)
{
    return nc_lan9118_poll(&netif);
}

#if LWIP_IPV6
/* An IPv6 address, its groups uncompressed (the link-local one, made from the MAC). */
static void put_ip6(const ip6_addr_t *a)
{
    int i;
    for (i = 0; i < 8; i++) {
        uint32_t w = lwip_ntohl(a->addr[i / 2]);
        uint32_t g = i % 2 ? w & 0xffffu : w >> 16;
        int d = g >= 0x1000u ? 4 : g >= 0x100u ? 3 : g >= 0x10u ? 2 : 1;
        nc_board_put_hex(g, d);
        if (i < 7)
            nc_board_puts(":");
    }
}
#endif

#if NC_ROLES_EXTRA
static void put_role(const char *what, enum nc_service svc)
{
    if (!nc_roles_port(svc))
        return;
    nc_board_puts(what);
    nc_board_put_u64(nc_roles_port(svc));
}
#endif

int main(void)
{
    ip4_addr_t ip, mask, gw;
    int i;
    nc_board_init();
    nc_board_puts("\nnetchar-responder: mps2-an386 booting\n");
    lwip_init();
    SET_IP4(&ip, BOARD_IP);
    SET_IP4(&gw, BOARD_GW);
    ip4_addr_set_u32(&mask, lwip_htonl(0xffffffffu << (32 - BOARD_PREFIX)));
    if (!netif_add(&netif, &ip, &mask, &gw, NULL, nc_lan9118_netif_init, ethernet_input)) {
        nc_board_puts("netchar-responder: no LAN9118 at 0x40200000 (run with -nic ...,model=lan9118)\n");
        return 1;
    }
    netif_set_default(&netif);
#if LWIP_IPV6
    {
        ip6_addr_t ip6;
        s8_t at;
        netif_create_ip6_linklocal_address(&netif, 1);
        if (!ip6addr_aton(BOARD_IP6, &ip6) || netif_add_ip6_address(&netif, &ip6, &at) != ERR_OK) {
            nc_board_puts("netchar-responder: BOARD_IP6 " BOARD_IP6 " is not an IPv6 address lwIP takes\n");
            return 1;
        }
        netif_ip6_addr_set_state(&netif, at, IP6_ADDR_PREFERRED);
    }
#endif
    netif_set_up(&netif);
    /* The idle loop's count per second, with the interface up and nothing to do. */
    nc_tr_idle_calibrate(BOARD_IDLE_CALIBRATION_MS);
#if NC_HAVE_BACKGROUND_LOAD
    /* The background load's computation, timed by the clock (SET_LOAD). */
    nc_tr_load_calibrate(BOARD_LOAD_CALIBRATION_MS);
#endif
    if (nc_responder_init(NC_DEFAULT_PORT) != 0) {
        nc_board_puts("netchar-responder: cannot listen (lwIP's pools too small?)\n");
        return 1;
    }
    nc_board_puts("netchar-responder " NC_RESPONDER_VERSION " on lwIP " LWIP_VERSION_STRING
                  " (raw API, NO_SYS=1), mps2-an386, ");
    nc_board_puts(BOARD_IP_TEXT "/");
    nc_board_put_u64(BOARD_PREFIX);
#if LWIP_IPV6
    nc_board_puts(", " BOARD_IP6 "/64 and ");
    put_ip6(netif_ip6_addr(&netif, 0));
#endif
    nc_board_puts(" MAC ");
    for (i = 0; i < 6; i++) {
        nc_board_put_hex(netif.hwaddr[i], 2);
        if (i < 5)
            nc_board_puts(":");
    }
    nc_board_puts(netif_is_link_up(&netif) ? ", link up" : ", link down");
    nc_board_puts(", idle loop ");
    nc_board_put_u64(nc_plat_idle_per_second());
    nc_board_puts(" counts/s, ");
#if NC_HAVE_BACKGROUND_LOAD
    nc_board_puts("load loop ");
    nc_board_put_u64(nc_tr_load_per_ms());
    nc_board_puts(" iterations/ms, ");
#endif
    nc_board_puts("build " BOARD_BUILD ", listening on");
#if NC_ROLE_NATIVE
    nc_board_puts(" TCP and UDP port ");
    nc_board_put_u64(nc_responder_port());
#endif
#if NC_ROLES_EXTRA
    put_role(" nc-test UDP ", NC_SVC_NCTEST);
    put_role(" data ", NC_SVC_NCTEST_DATA);
    put_role(" netio ", NC_SVC_NETIO);
    put_role(" echo ", NC_SVC_ECHO);
    put_role(" discard ", NC_SVC_DISCARD);
#endif
    nc_board_puts("\n");
    nc_responder_run();
    return 0;
}
