/* netchar-responder: the transport seam. Every role reaches the network through these calls
 * and nothing else, so the same role code runs on two transports:
 *
 * - BSD sockets and select() (src/nc_transport_sockets.c): Linux and the BSDs, lwIP's socket
 *   API on an RTOS or over TAP. A handle is the socket's descriptor.
 * - lwIP's raw API with NO_SYS=1 (src/nc_transport_raw.c): a bare-metal board without
 *   threads, sockets or select. A handle is a slot of a static table holding the pcb and what
 *   its callbacks queued: received pbufs (the window reopens as they are read), accepted
 *   connections, datagrams with their source.
 *
 * Every call is non-blocking. A turn of a loop says what each handle waits for
 * (nc_tr_watch), waits once (nc_tr_wait), then asks each handle what it is ready for
 * (nc_tr_ready) and does that work. Handles are small non-negative integers; -1 is none, and
 * every call takes it and does nothing (returns NC_TR_FAIL or 0).
 */
#ifndef NC_TRANSPORT_H
#define NC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "../nc_platform.h"

/* What a read or a write returns besides a count. */
#define NC_TR_FAIL (-1)   /* the connection failed (reset, timed out) or the call cannot work */
#define NC_TR_AGAIN (-2)  /* nothing to read, or no room to write: wait for readiness */
#define NC_TR_NOBUFS (-3) /* sendto: the stack is out of buffers now; try again later */

/* Readiness (nc_tr_watch, nc_tr_ready). */
#define NC_TR_RD 1u /* readable: data, end of stream, an error, a connection to accept */
#define NC_TR_WR 2u /* writable: room in the send buffer, or an error */

/* A TCP listener on `*port` of every local address (0: the stack picks; *port gets the number),
 * at most `backlog` connections waiting to be accepted. A handle, or -1. */
int nc_tr_tcp_listen(uint16_t *port, int backlog);

/* A UDP socket bound to `*port` of every local address (0: the stack picks; *port gets the
 * number). A handle, or -1. */
int nc_tr_udp_open(uint16_t *port);

/* A connection waiting on listener `lh` (its peer in *peer): its handle, or -1 when none. */
int nc_tr_accept(int lh, nc_addr *peer);

/* Up to `cap` bytes of connection h into buf: the count (> 0), 0 at the end of the stream
 * (after every byte before it), NC_TR_AGAIN or NC_TR_FAIL. */
long nc_tr_recv(int h, void *buf, size_t cap);

/* The same, the bytes only counted and thrown away: the raw transport frees its pbufs without
 * copying them; the sockets one reads them into `scratch` (cap bytes). */
long nc_tr_drop(int h, void *scratch, size_t cap);

/* Queues up to n bytes of buf on connection h: how many it took (> 0), NC_TR_AGAIN when the
 * send buffer is full, NC_TR_FAIL. */
long nc_tr_send(int h, const void *buf, size_t n);

/* No more sends on h: its end of the stream follows what is queued. Reads go on. */
void nc_tr_shutdown(int h);

/* Sends each write as soon as it can (no Nagle delay): control messages, rr. */
void nc_tr_nodelay(int h);

/* Closes h (a connection, listener or UDP socket); the handle is free for reuse. */
void nc_tr_close(int h);

/* Drops connection h at once, for one that is not worth a graceful close (silent, refused,
 * evicted): the raw transport resets it (tcp_abort), which frees its pcb now, where a close
 * would hold it in FIN_WAIT until the peer closes too and a few such peers would exhaust a
 * board's pool; the sockets transport closes it as nc_tr_close does. */
void nc_tr_abort(int h);

/* The next datagram of UDP socket h: its length (the first `cap` bytes of it are in buf, the
 * rest is lost) and its source in *from; NC_TR_AGAIN when none waits. */
long nc_tr_recvfrom(int h, void *buf, size_t cap, nc_addr *from);

/* One datagram of n bytes to `to`: n, NC_TR_AGAIN (the socket's queue is full: wait for
 * NC_TR_WR), NC_TR_NOBUFS, or NC_TR_FAIL (refused: no route, an ICMP error). */
long nc_tr_sendto(int h, const void *buf, size_t n, const nc_addr *to);

/* This turn, wake for `ev` (NC_TR_RD, NC_TR_WR or both) on h. */
void nc_tr_watch(int h, unsigned ev);

/* Waits until a watched handle is ready or `max_ns` passed, running the stack meanwhile (the
 * raw transport polls the network interface and lwIP's timers here). The watches are then
 * cleared for the next turn. 0, or -1 when the wait failed (the turn does no I/O). */
int nc_tr_wait(uint64_t max_ns);

/* After nc_tr_wait: what h is ready for (NC_TR_RD | NC_TR_WR), of what was watched. */
unsigned nc_tr_ready(int h);

#if NC_TRANSPORT_RAW
/* The raw transport's wait is the board's idle loop. Run it `ms` with nothing to do, once at
 * boot, to learn what its counter counts in a second (nc_plat_idle_per_second). */
void nc_tr_idle_calibrate(uint32_t ms);
/* The time its idle turns took since boot, in the clock's nanoseconds. */
uint64_t nc_tr_idle_ns(void);
#if NC_HAVE_BACKGROUND_LOAD
/* The background load's computation, timed for `ms` at boot: its iterations per ms, which
 * nc_plat_background_load(pct) runs pct% of every NC_TR_LOAD_PERIOD_MS (10) ms of. */
void nc_tr_load_calibrate(uint32_t ms);
uint32_t nc_tr_load_per_ms(void);
#endif
/* Datagrams dropped because their socket's queue (NC_TR_UDP_QUEUE) was full, and
 * connections refused because their listener's backlog or the slot table was. */
extern uint32_t nc_tr_udp_queue_drops, nc_tr_accept_drops;
#endif

#if NC_TASK_PER_CONNECTION
/* A task of its own waits on connection h (blocking, sockets transport only): 1 when it is
 * ready for `ev` within `timeout_ms`, 0 otherwise. */
int nc_tr_wait_one(int h, unsigned ev, uint32_t timeout_ms);
#endif

#endif
