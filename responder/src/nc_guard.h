/* netchar-responder: the reflection guard, one for every UDP socket of every role.
 *
 * UDP proves nothing of its source, so a datagram with a forged one aims the answer at a
 * victim. The native protocol proves a return route before it sends a test's traffic (its
 * challenge); the other roles' UDP answers follow the rules below, the ones the Rust server's
 * peer protocols follow too (docs/embedded.md, "Reflection and loops"):
 *
 * 1. A datagram from a source port below 1024 (a service: echo, chargen, DNS, NTP, ...) or
 *    from one of the responder's own UDP ports (another responder's answer) is dropped
 *    unanswered and counted: answering could set two services talking for ever.
 * 2. Traffic nothing asked for from the address it goes to (nc_test UDP_SEND) goes only to
 *    the allowed networks (NC_ALLOW_PEERS, --allow-peers; by default loopback, which a
 *    datagram from another host cannot claim).
 * 3. An answer is never more bytes than the datagram it answers (echo: the same bytes;
 *    nc_test: 24 for a 28-byte request, an echo no longer than its buffer). To an address
 *    outside the allowed networks answers also spend only what that address sent (a test's
 *    results record included), and all of them together at most NC_ANSWER_RATE bytes/s (a
 *    burst of NC_ANSWER_BURST); what does not fit is counted and dropped, never queued.
 *
 * Everything is static and bounded; the counters are logged at most every NC_GUARD_LOG_MS.
 */
#ifndef NC_GUARD_H
#define NC_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "../nc_platform.h"

/* What the guard refused since the start, by reason (an array: the log line walks it). */
enum nc_guard_counter {
    NC_GUARD_SERVICE_PORT,          /* datagrams dropped: source port below 1024 */
    NC_GUARD_OWN_PORT,              /* datagrams dropped: source port one of the responder's */
    NC_GUARD_UNPROMPTED_REFUSED,    /* tests refused: unprompted sending outside the networks */
    NC_GUARD_ANSWERS_WITHHELD,      /* answers not sent: over their credit or the budget */
    NC_GUARD_ANSWER_BYTES_WITHHELD, /* ... and their bytes */
    NC_GUARD_COUNTERS
};
extern uint64_t nc_guard_count[NC_GUARD_COUNTERS];

/* A UDP port the responder listens on (rule 1); called as each socket is bound. */
void nc_guard_own_port(uint16_t port);

/* Rule 1 for a datagram from `from` (or a destination a request names): 0 when it may be
 * handled, 1 when it must be dropped unanswered (counted). `same_port_ok` is a port number
 * the caller accepts as a source although it is its own (netio's UDP test: both ends use
 * one port number, and that socket never answers); 0 for none. */
int nc_guard_check_source(const nc_addr *from, uint16_t same_port_ok);

/* The allowed networks. nc_guard_allow takes one operator argument: CIDRs or addresses,
 * comma-separated, or "none"; the first call replaces the default (NC_ALLOW_PEERS), later ones
 * add to it. 0 on success; -1 for a bad entry (*bad and *bad_len say which), -2 for
 * more than NC_MAX_ALLOW_PEERS networks. */
int nc_guard_allow(const char *list, const char **bad, size_t *bad_len);
/* The i-th allowed network (0 while i < the count): its address (4 or 16 bytes in ip), its
 * prefix length and whether it is IPv6. Returns -1 past the end. */
int nc_guard_network(int i, uint8_t ip[16], unsigned *bits, int *v6);
int nc_guard_allows(const nc_addr *a);

/* Rule 2: may a test send unprompted to `to`? 1 when it is in an allowed network; 0 (counted)
 * otherwise. */
int nc_guard_may_send_unprompted(const nc_addr *to);

/* Rule 3: may the responder answer `to` with `bytes` now, when the datagrams it answers gave
 * it `credit` bytes? Always for an allowed network; otherwise only within the credit and the
 * shared budget, whose bytes it then takes. 0 is counted as withheld. */
int nc_guard_may_answer(const nc_addr *to, size_t bytes, uint64_t credit, uint64_t now);

/* Refusals are logged once per source and kind in NC_GUARD_LOG_PERIOD_S, for at most
 * NC_GUARD_LOGGED sources at a time (beyond them they are only counted): 1 when this one is
 * to be logged. */
enum nc_guard_kind { NC_GUARD_SOURCE, NC_GUARD_UNPROMPTED, NC_GUARD_BUDGET, NC_GUARD_REQUEST };
int nc_guard_first_refusal(const nc_addr *a, enum nc_guard_kind kind, uint64_t now);

/* Once per loop turn: logs the counters when they changed (at most every NC_GUARD_LOG_MS). */
void nc_guard_tick(uint64_t now);

#endif
