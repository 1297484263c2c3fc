/* Link-check only: empty stand-ins for lwIP's socket calls, so `make arm` can link the
 * responder alone and report its own size. A firmware image links the real lwIP instead;
 * these add a few hundred bytes, listed separately by `make arm`. */
#include "lwip/sockets.h"

int lwip_accept(int s, struct sockaddr *addr, socklen_t *addrlen) { (void)s; (void)addr; (void)addrlen; return -1; }
int lwip_bind(int s, const struct sockaddr *name, socklen_t namelen) { (void)s; (void)name; (void)namelen; return -1; }
int lwip_shutdown(int s, int how) { (void)s; (void)how; return -1; }
int lwip_getsockname(int s, struct sockaddr *name, socklen_t *namelen) { (void)s; (void)name; (void)namelen; return -1; }
int lwip_setsockopt(int s, int level, int optname, const void *optval, socklen_t optlen) { (void)s; (void)level; (void)optname; (void)optval; (void)optlen; return -1; }
int lwip_close(int s) { (void)s; return -1; }
int lwip_listen(int s, int backlog) { (void)s; (void)backlog; return -1; }
ssize_t lwip_recv(int s, void *mem, size_t len, int flags) { (void)s; (void)mem; (void)len; (void)flags; return -1; }
ssize_t lwip_recvfrom(int s, void *mem, size_t len, int flags, struct sockaddr *from, socklen_t *fromlen) { (void)s; (void)mem; (void)len; (void)flags; (void)from; (void)fromlen; return -1; }
ssize_t lwip_send(int s, const void *dataptr, size_t size, int flags) { (void)s; (void)dataptr; (void)size; (void)flags; return -1; }
ssize_t lwip_sendto(int s, const void *dataptr, size_t size, int flags, const struct sockaddr *to, socklen_t tolen) { (void)s; (void)dataptr; (void)size; (void)flags; (void)to; (void)tolen; return -1; }
int lwip_socket(int domain, int type, int protocol) { (void)domain; (void)type; (void)protocol; return -1; }
int lwip_select(int maxfdp1, fd_set *readset, fd_set *writeset, fd_set *exceptset, struct timeval *timeout) { (void)maxfdp1; (void)readset; (void)writeset; (void)exceptset; (void)timeout; return -1; }
int lwip_fcntl(int s, int cmd, int val) { (void)s; (void)cmd; (void)val; return -1; }
u16_t lwip_htons(u16_t n) { return (u16_t)((n << 8) | (n >> 8)); }
u32_t lwip_htonl(u32_t n) { return ((n & 0xffu) << 24) | ((n & 0xff00u) << 8) | ((n >> 8) & 0xff00u) | (n >> 24); }
void netchar_responder_task(void *arg);
int main(void) { netchar_responder_task(0); return 0; }
