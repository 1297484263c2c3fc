/* netchar-responder: the roles besides the native protocol (nc_config.h's NC_ROLE_...): the
 * eCos nc_test slave, the netio server, RFC 862 echo and RFC 863 discard. Each role owns its
 * sockets and static state and takes part in the one loop of nc_responder.c through the
 * transport seam (nc_transport.h): it says what its handles wait for before the wait and
 * handles what is ready after it. */
#ifndef NC_ROLES_H
#define NC_ROLES_H

#include <stdint.h>

#include "../nc_platform.h"
#include "nc_transport.h"

/* The services, for nc_roles_set_port and nc_roles_port. */
enum nc_service {
    NC_SVC_NCTEST,      /* nc_test control (UDP) */
    NC_SVC_NCTEST_DATA, /* nc_test data (TCP and UDP) */
    NC_SVC_NETIO,       /* netio TCP test; its UDP test uses this + 1 (TCP and UDP) */
    NC_SVC_ECHO,        /* echo, TCP and UDP */
    NC_SVC_DISCARD,     /* discard, TCP and UDP */
    NC_SVC_COUNT
};

/* Before nc_responder_init: the port a service listens on (0: one the system picks). */
void nc_roles_set_port(enum nc_service svc, uint16_t port);
/* Before nc_responder_init: leaves a service that is built in off. */
void nc_roles_disable(enum nc_service svc);
void nc_roles_enable(enum nc_service svc);
/* After it: the port a service listens on, 0 when it is not built in or could not bind. */
uint16_t nc_roles_port(enum nc_service svc);

/* Called by the loop (nc_responder.c). */
void nc_roles_init(void);
void nc_roles_watch(uint64_t now, uint64_t *wait_ns);
void nc_roles_io(uint64_t now);

/* ---- shared by the roles (nc_roles.c) ---- */

/* The data buffer the roles share with the native protocol (nothing stays in it across
 * turns of the loop); nc_iobuf_used() tells the native sender to refill its pattern. */
extern uint8_t nc_iobuf[NC_IO_BUF];
void nc_iobuf_used(void);

/* A listening TCP socket and/or a UDP socket on `*port` (0: the system picks, the same number
 * for both); *port gets the number. 0 on success. */
int nc_role_listen(uint16_t *port, int *tfd, int *ufd);
/* "WHAT from A.B.C.D:PORT: TEXT" with up to three numbers in TEXT (%u, %lu not available on
 * every target's printf: the numbers are formatted here). */
void nc_role_log(const char *what, const nc_addr *peer, const char *text, const uint64_t *nums,
                 int nnums);
/* "WHAT" followed by TEXT, in which '@' is a's address (no port), '%' its host prefix length
 * (32 or 128) and '#' the number: "nc_test" " UDP_SEND to @ refused: ... (add --allow-peers
 * @/%)". */
void nc_role_log_to(const char *what, const nc_addr *a, const char *text, uint64_t num);

/* Answers a datagram (or a test's datagrams, whose bytes are `credit`) with `len` bytes of
 * buf to `to` through the reflection guard (nc_guard.h, rule 3): `len` when sent, 0 when the
 * guard held it back (counted; the first time for `to` logged with what to allow), or what
 * nc_tr_sendto returned when it failed (NC_TR_AGAIN, NC_TR_NOBUFS, NC_TR_FAIL). */
long nc_role_answer(const char *what, int fd, const void *buf, size_t len, uint64_t credit, const nc_addr *to,
                    uint64_t now);

#endif
