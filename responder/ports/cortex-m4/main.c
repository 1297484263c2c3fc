/* The responder as a firmware task (size-check build): after lwIP is up (tcpip_init, a netif),
 * one task runs the loop. */
#include "../../src/nc_responder.h"

void nc_port_clock_init(void);
void netchar_responder_task(void *arg);

void netchar_responder_task(void *arg)
{
    (void)arg;
    nc_port_clock_init();
    if (nc_responder_init(5300) != 0)
        return;
    nc_responder_run();
}
