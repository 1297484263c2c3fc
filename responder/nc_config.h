/* netchar-responder: the one configuration header.
 *
 * Every buffer the responder uses is a static array sized here; nothing is allocated after
 * start. Override any value with -D on the compiler's command line or by editing this file.
 * docs/embedded.md explains each one and what it costs in RAM.
 */
#ifndef NC_CONFIG_H
#define NC_CONFIG_H

/* The version the responder reports in `accepted.server_version` ("netchar-responder X.Y"). */
#define NC_RESPONDER_VERSION "0.1"

/* TCP and UDP port (the native protocol uses one number for both). --port overrides it on
 * hosted builds. */
#ifndef NC_DEFAULT_PORT
#define NC_DEFAULT_PORT 5300
#endif

/* Two profiles: a small target on lwIP (NC_PLATFORM_LWIP on its sockets, NC_PLATFORM_LWIP_RAW
 * on its raw API: about 10 KiB of RAM in all) and a host (Linux, BSD: buffers as large as the
 * Rust server's default block). Any value can still be set with -D. */
#if defined(NC_PLATFORM_LWIP) || defined(NC_PLATFORM_LWIP_RAW)
#define NC_PROFILE_SMALL 1
#else
#define NC_PROFILE_SMALL 0
#endif

/* Streams in one test, both directions counted (-P N, and 2N with --bidir). */
#ifndef NC_MAX_STREAMS
#define NC_MAX_STREAMS (NC_PROFILE_SMALL ? 2 : 8)
#endif

/* TCP connections open at once: the control connection, the data connections, and
 * connections still presenting their hello or being turned away. */
#ifndef NC_MAX_CONNS
#define NC_MAX_CONNS (NC_PROFILE_SMALL ? 6 : 24)
#endif

/* Control frames from the client: the largest a request may be. A request of the Rust
 * client is about 500 bytes; a bigger frame drops the connection. */
#ifndef NC_CTRL_RX
#define NC_CTRL_RX (NC_PROFILE_SMALL ? 1024 : 4096)
#endif

/* Control frames to the client: the results of NC_MAX_STREAMS streams fit in this (about
 * 650 bytes per UDP stream, 200 per TCP stream, 400 for the rest). */
#ifndef NC_CTRL_TX
#define NC_CTRL_TX (NC_PROFILE_SMALL ? 2048 : 8192)
#endif

/* The data buffer: TCP reads and writes and UDP datagrams go through it. Its size is the
 * largest TCP read or write the responder makes (the Rust server's default block is
 * 128 KiB). */
#ifndef NC_IO_BUF
#define NC_IO_BUF (NC_PROFILE_SMALL ? 4096 : 131072)
#endif

/* Largest UDP payload (-l) for UDP and UDP rr tests; at most NC_IO_BUF. */
#ifndef NC_UDP_MAX
#define NC_UDP_MAX (NC_PROFILE_SMALL ? 1472 : 65507)
#endif

/* Sequence numbers remembered per receiving UDP stream to tell a late datagram from a
 * duplicate (bits; a multiple of 32). A datagram older than this is counted foreign. */
#ifndef NC_SEQ_WINDOW
#define NC_SEQ_WINDOW (NC_PROFILE_SMALL ? 1024 : 8192)
#endif

/* Datagrams sent per UDP sender per loop turn (bounds one turn's work). */
#ifndef NC_UDP_BATCH
#define NC_UDP_BATCH 32
#endif

/* Limits. */
#ifndef NC_MAX_DURATION_S
#define NC_MAX_DURATION_S 3600 /* longest -t accepted */
#endif
#define NC_HELLO_TIMEOUT_MS 5000    /* the hello must arrive within this of the connect */
#define NC_REQUEST_TIMEOUT_MS 10000 /* the request too */
#define NC_PHASE_TIMEOUT_MS 10000   /* data connections, start, drain */
#define NC_SILENCE_TIMEOUT_MS 10000 /* a running test with a silent client ends */
#define NC_KEEPALIVE_MS 1000        /* keepalive after this much quiet */
#define NC_LINGER_MS 2000           /* a closing connection is read until EOF this long */
#define NC_MAX_CHALLENGES 200       /* UDP challenges per stream */

/* Optional platform hooks (see nc_platform.h). 1 = the platform provides them. */
#ifndef NC_HAVE_CPU_TIMES
#define NC_HAVE_CPU_TIMES 0
#endif
#ifndef NC_HAVE_HOST_CPU
#define NC_HAVE_HOST_CPU 0
#endif
#ifndef NC_HAVE_IDLE_COUNTER
#define NC_HAVE_IDLE_COUNTER 0
#endif
#ifndef NC_HAVE_BACKGROUND_LOAD
#define NC_HAVE_BACKGROUND_LOAD 0
#endif
/* 1 = the port reports counters of its own (a stack's statistics, a driver's drops:
 * nc_plat_counters, nc_platform.h), which the responder reports over each test. */
#ifndef NC_HAVE_TARGET_COUNTERS
#define NC_HAVE_TARGET_COUNTERS 0
#endif
/* 1 = the port counts a TCP receiver's bytes below the socket layer (nc_plat_tcp_sink_*,
 * nc_platform.h): ports/lwip-tap does, in lwIP's own receive callback. */
#ifndef NC_HAVE_TCP_SINK
#define NC_HAVE_TCP_SINK 0
#endif

/* Roles, each built in when 1 (docs/embedded.md): the native netchar protocol, the eCos
 * nc_test slave, the netio server, and RFC 862 echo with RFC 863 discard. By default only the
 * native protocol (the small profile's size budget); a build that wants the others sets them
 * with -D, as the host Makefile targets do (their sources: src/nc_roles.c, nc_peer_proto.c,
 * nc_nctest.c, nc_netio.c, nc_services.c). Each costs what docs/embedded.md's footprint table
 * says. */
#ifndef NC_ROLE_NATIVE
#define NC_ROLE_NATIVE 1
#endif
#ifndef NC_ROLE_NC_TEST
#define NC_ROLE_NC_TEST 0
#endif
#ifndef NC_ROLE_NETIO
#define NC_ROLE_NETIO 0
#endif
#ifndef NC_ROLE_ECHO
#define NC_ROLE_ECHO 0
#endif
#define NC_ROLES_EXTRA (NC_ROLE_NC_TEST || NC_ROLE_NETIO || NC_ROLE_ECHO)

/* The roles' ports (hosted builds: --nc-test-port and so on; 0 picks a free one). */
#ifndef NC_NCTEST_PORT
#define NC_NCTEST_PORT 7777 /* nc_test control, UDP */
#endif
#ifndef NC_NCTEST_DATA_PORT
#define NC_NCTEST_DATA_PORT 8770 /* nc_test data, TCP and UDP */
#endif
#ifndef NC_NETIO_PORT
#define NC_NETIO_PORT 18767 /* netio TCP; its UDP test on this + 1, TCP and UDP */
#endif
#ifndef NC_ECHO_PORT
#define NC_ECHO_PORT 7
#endif
#ifndef NC_DISCARD_PORT
#define NC_DISCARD_PORT 9
#endif

/* echo and discard: TCP connections at once, and each echo connection's buffer (bytes read
 * and not yet written back). */
#ifndef NC_SVC_CONNS
#define NC_SVC_CONNS (NC_PROFILE_SMALL ? 2 : 8)
#endif
#ifndef NC_SVC_BUF
#define NC_SVC_BUF (NC_PROFILE_SMALL ? 1024 : 16384)
#endif
#define NC_SVC_IDLE_MS 30000   /* a silent echo or discard connection is closed */
#define NC_SVC_EVICT_MS 2000   /* ... or when all slots are taken, after this much quiet */

/* The task-per-connection build: each echo and discard TCP connection is served by a task of
 * its own (nc_plat_task_start: a pthread on POSIX, a task of the RTOS on a target) with its own
 * slot and buffer, instead of by the poll loop; everything else stays in the loop. 0: one loop,
 * no tasks (the default). */
#ifndef NC_TASK_PER_CONNECTION
#define NC_TASK_PER_CONNECTION 0
#endif
#define NC_SVC_UDP_QUIET_MS 1000 /* a source quiet this long has its datagrams logged */

/* netio: how long the server sends after S2C (netio's INTERVAL, 6 s). */
#ifndef NC_NETIO_INTERVAL_MS
#define NC_NETIO_INTERVAL_MS 6000
#endif
#define NC_NETIO_IDLE_MS 30000 /* a silent netio connection is closed */

/* nc_test: the most bytes a UDP_SEND request may make the slave send (the request's source
 * could be forged), and the pacing of its UDP sends (one datagram per this many
 * microseconds: a stock master reads one per loop turn and waits 3 s for each it lost). */
#ifndef NC_NCTEST_MAX_UDP_SEND
#define NC_NCTEST_MAX_UDP_SEND (4ul << 20)
#endif
#ifndef NC_NCTEST_UDP_GAP_US
#define NC_NCTEST_UDP_GAP_US 100
#endif

/* The reflection guard (src/nc_guard.h; docs/embedded.md, "Reflection and loops").
 *
 * The networks the responder may send traffic nobody there proved to have asked for (nc_test
 * UDP_SEND) and whose answers are not budgeted: CIDRs or addresses, comma-separated, or
 * "none". Hosted builds: --allow-peers replaces it. By default loopback only, which a datagram
 * from another host cannot claim (the kernel drops it as a martian); a firmware sets its lab's
 * network here, e.g. -DNC_ALLOW_PEERS='"192.168.10.0/24"'. IPv4-only builds skip IPv6 entries. */
#ifndef NC_ALLOW_PEERS
#define NC_ALLOW_PEERS "127.0.0.0/8,::1"
#endif
#ifndef NC_MAX_ALLOW_PEERS
#define NC_MAX_ALLOW_PEERS 8
#endif
/* How a refusal names the setting that lifts it. */
#ifndef NC_ALLOW_HINT
#if NC_PROFILE_SMALL
#define NC_ALLOW_HINT "NC_ALLOW_PEERS"
#else
#define NC_ALLOW_HINT "--allow-peers"
#endif
#endif
/* Answers to addresses outside those networks, all of them together: bytes per second and the
 * bucket's size (the Rust server's per-destination figures, here one bucket for all). */
#ifndef NC_ANSWER_RATE
#define NC_ANSWER_RATE 1250000u
#endif
#ifndef NC_ANSWER_BURST
#define NC_ANSWER_BURST 65536u
#endif
#define NC_GUARD_LOG_MS 10000     /* the guard's counters are logged at most this often */
#define NC_GUARD_LOGGED 8         /* sources whose refusal was logged, remembered ... */
#define NC_GUARD_LOG_PERIOD_S 600 /* ... this long: each source's refusal logged once in it */

#if NC_SVC_BUF > 65535
#error "NC_SVC_BUF must be below 64 KiB"
#endif

#if NC_UDP_MAX > NC_IO_BUF
#error "NC_UDP_MAX must not exceed NC_IO_BUF"
#endif
#if NC_SEQ_WINDOW % 32 != 0
#error "NC_SEQ_WINDOW must be a multiple of 32"
#endif

#endif
