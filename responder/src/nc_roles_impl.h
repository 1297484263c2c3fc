/* netchar-responder: the roles' entry points, for the dispatch in nc_roles.c only. */
#ifndef NC_ROLES_IMPL_H
#define NC_ROLES_IMPL_H

#include "nc_roles.h"

uint16_t nc_roles_wanted(enum nc_service svc);
int nc_roles_enabled(enum nc_service svc);
void nc_roles_bound(enum nc_service svc, uint16_t port);

void nc_nctest_init(void);
void nc_nctest_watch(uint64_t now, uint64_t *wait_ns);
void nc_nctest_io(uint64_t now);
void nc_netio_init(void);
void nc_netio_watch(uint64_t now, uint64_t *wait_ns);
void nc_netio_io(uint64_t now);
void nc_svc_init(void);
void nc_svc_watch(uint64_t now, uint64_t *wait_ns);
void nc_svc_io(uint64_t now);

#define NC_MS 1000000ull

#endif
