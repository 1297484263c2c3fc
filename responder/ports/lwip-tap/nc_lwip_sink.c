/* The responder's TCP receivers counted inside lwIP (nc_plat_tcp_sink_*, nc_platform.h).
 *
 * Through lwIP's sockets every received segment costs a hand-off and a copy: the thread that
 * runs the stack posts the pbuf to the socket's mailbox (a mutex and a condition variable),
 * the responder's thread wakes from lwip_poll, takes it out in lwip_recv, copies it into its
 * buffer and takes the core lock again to open the window. lwIP's own test servers (lwiperf)
 * take the pbufs in the raw API's tcp_recv callback instead, inside the stack. This does the
 * same for a connection the responder accepted and greeted on sockets: under the core lock it
 * replaces the receive callback of the socket's TCP pcb with one that adds each pbuf's length
 * to a counter, opens the window (tcp_recved) and frees the pbuf.
 *
 * The netconn keeps owning the pcb: its argument, error, sent and poll callbacks stay as they
 * are, and the end of the stream (p == NULL) or a receive error is passed on to the netconn's
 * own receive callback, so the socket becomes readable and recv() returns 0 or fails as
 * before. Segments that reached the mailbox before the hand-off stay there for recv(). A pcb
 * this file does not count for (a stopped sink, a socket closing) gets the netconn's callback.
 *
 * Needs LWIP_TCPIP_CORE_LOCKING (the callback runs with the core locked, by the driver's input
 * thread or lwIP's tcpip thread; the responder's thread takes the lock to read the counters)
 * and LWIP_CALLBACK_API; nothing here is specific to the TAP driver. */
#include "../../nc_platform.h"

#include "lwip/priv/sockets_priv.h"
#include "lwip/api.h"
#include "lwip/tcp.h"
#include "lwip/tcpip.h"

#if !LWIP_TCPIP_CORE_LOCKING || !LWIP_CALLBACK_API
#error "the TCP sink needs LWIP_TCPIP_CORE_LOCKING and LWIP_CALLBACK_API"
#endif

struct sink {
    struct tcp_pcb *pcb; /* NULL: free */
    uint64_t bytes;      /* since the last take */
    uint64_t last_ns;
};

static struct sink sinks[NC_MAX_STREAMS];
/* The netconn's receive callback (api_msg.c's recv_tcp), learnt from the first pcb. */
static tcp_recv_fn netconn_recv_cb;

static struct sink *sink_of(const struct tcp_pcb *pcb)
{
    int i;
    for (i = 0; i < NC_MAX_STREAMS; i++)
        if (sinks[i].pcb == pcb)
            return &sinks[i];
    return NULL;
}

static err_t sink_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
    struct sink *k = p && err == ERR_OK ? sink_of(pcb) : NULL;
    if (!k)
        return netconn_recv_cb(arg, pcb, p, err);
    k->bytes += p->tot_len;
    k->last_ns = nc_plat_now_ns();
    tcp_recved(pcb, p->tot_len);
    pbuf_free(p);
    return ERR_OK;
}

int nc_plat_tcp_sink_start(int fd)
{
    struct lwip_sock *sock = lwip_socket_dbg_get_socket(fd);
    struct tcp_pcb *pcb;
    struct sink *k;
    int handle = -1;
    if (!sock || !sock->conn || NETCONNTYPE_GROUP(netconn_type(sock->conn)) != NETCONN_TCP)
        return -1;
    LOCK_TCPIP_CORE();
    pcb = sock->conn->pcb.tcp;
    if (pcb && pcb->recv && (pcb->recv == netconn_recv_cb || !netconn_recv_cb)) {
        /* A pcb freed by lwIP (a reset) may come back at the same address: forget it. */
        while ((k = sink_of(pcb)) != NULL)
            k->pcb = NULL;
        k = sink_of(NULL);
        if (k) {
            netconn_recv_cb = pcb->recv;
            k->pcb = pcb;
            k->bytes = 0;
            k->last_ns = 0;
            tcp_recv(pcb, sink_recv);
            handle = (int)(k - sinks);
        }
    }
    UNLOCK_TCPIP_CORE();
    return handle;
}

uint64_t nc_plat_tcp_sink_take(int handle, uint64_t *last_ns)
{
    struct sink *k = &sinks[handle];
    uint64_t n;
    LOCK_TCPIP_CORE();
    n = k->bytes;
    k->bytes = 0;
    if (n > 0)
        *last_ns = k->last_ns;
    UNLOCK_TCPIP_CORE();
    return n;
}

void nc_plat_tcp_sink_stop(int handle)
{
    struct sink *k = &sinks[handle];
    LOCK_TCPIP_CORE();
    /* The pcb keeps sink_recv, which hands a pcb it does not count for to the netconn (the
     * pcb may be gone already, freed by a reset: it is not touched). */
    k->pcb = NULL;
    UNLOCK_TCPIP_CORE();
}
