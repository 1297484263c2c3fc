/* netchar-responder: the server loop. One task, one select() loop, static state. */
#ifndef NC_RESPONDER_H
#define NC_RESPONDER_H

#include <stdint.h>

/* Opens the TCP listener and the UDP socket on `port`; 0 on success, -1 (logged) if not. */
int nc_responder_init(uint16_t port);

/* The port it listens on (the one chosen when 0 was asked for). */
uint16_t nc_responder_port(void);

/* Runs one turn of the loop: waits at most `max_wait_ms` for sockets, then does what is due.
 * A firmware task calls it in a loop (or nc_responder_run). */
void nc_responder_poll(uint32_t max_wait_ms);

/* Serves for ever. */
void nc_responder_run(void);

#endif
