/* netchar-responder for Linux and POSIX hosts: `netchar-responder [--port PORT] [--ROLE-port
 * PORT]... [--allow-peers CIDR[,CIDR...]]...`. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../nc_config.h"
#include "../src/nc_guard.h"
#include "../src/nc_responder.h"
#include "../src/nc_roles.h"

#if NC_ROLES_EXTRA
/* The other roles' port options, in enum nc_service order. */
static const char *const role_flags[NC_SVC_COUNT] = {"--nc-test-port", "--nc-test-data-port", "--netio-port",
                                                      "--echo-port", "--discard-port"};
#endif

static void usage(FILE *f)
{
    fprintf(f, "usage: netchar-responder [--port PORT]   (default %d; TCP and UDP)\n", NC_DEFAULT_PORT);
#if NC_ROLES_EXTRA
    fprintf(f, "  roles built in besides the native protocol, each on when its port is given (0 picks a\n"
               "  free one; the default is the classic port, e.g. 7777 for nc_test):\n");
#endif
#if NC_ROLE_NC_TEST
    fprintf(f, "  --nc-test-port PORT       eCos nc_test slave, UDP control (default %d)\n"
               "  --nc-test-data-port PORT  its data, TCP and UDP (default %d)\n",
            NC_NCTEST_PORT, NC_NCTEST_DATA_PORT);
#endif
#if NC_ROLE_NETIO
    fprintf(f, "  --netio-port PORT         netio server, TCP; UDP test on PORT+1 (default %d)\n", NC_NETIO_PORT);
#endif
#if NC_ROLE_ECHO
    fprintf(f, "  --echo-port PORT          RFC 862 echo, TCP and UDP (default %d)\n"
               "  --discard-port PORT       RFC 863 discard, TCP and UDP (default %d)\n",
            NC_ECHO_PORT, NC_DISCARD_PORT);
#endif
    fprintf(f, "  --allow-peers CIDR[,CIDR...]  the networks unprompted UDP may go to (nc_test UDP_SEND) and\n"
               "                            whose answers are not budgeted; repeatable, at most %d in all;\n"
               "                            \"none\" for none; replaces the default, %s\n",
            NC_MAX_ALLOW_PEERS, NC_ALLOW_PEERS);
}

/* Whether a comma-separated list names "none". */
static int names_none(const char *list)
{
    for (;;) {
        size_t n = strcspn(list, ",");
        if (n == 4 && strncmp(list, "none", 4) == 0)
            return 1;
        if (!list[n])
            return 0;
        list += n + 1;
    }
}

/* --allow-peers VALUE; 0 when it parses. "none" stands alone, as with netchar server: a list
 * with it and a network says two things. */
static int allow_peers(const char *value)
{
    static int nones, nets;
    const char *bad = value;
    size_t len = strlen(value);
    int r, none = strcmp(value, "none") == 0;
    if (none ? nets > 0 : nones > 0 || names_none(value)) {
        fprintf(stderr, "netchar-responder: --allow-peers none: takes no networks beside it\n");
        return -1;
    }
    if (none)
        nones++;
    else
        nets++;
    r = nc_guard_allow(value, &bad, &len);
    if (r == -1)
        fprintf(stderr,
                "netchar-responder: --allow-peers %.*s: not an address or network (write e.g. 192.0.2.0/24, "
                "2001:db8::/32, 10.1.2.3)\n",
                (int)len, bad);
    else if (r == -2)
        fprintf(stderr, "netchar-responder: --allow-peers: at most %d networks\n", NC_MAX_ALLOW_PEERS);
    return r;
}

/* The start-up line that says who may get UDP that no handshake proved they asked for. */
static void describe_guard(void)
{
    char nets[NC_MAX_ALLOW_PEERS * 48 + 8] = "";
    uint8_t ip[16];
    unsigned bits;
    int i, v6;
    for (i = 0; nc_guard_network(i, ip, &bits, &v6) == 0; i++) {
        char text[INET6_ADDRSTRLEN];
        size_t at = strlen(nets);
        inet_ntop(v6 ? AF_INET6 : AF_INET, ip, text, sizeof text);
        snprintf(nets + at, sizeof nets - at, "%s%s/%u", i ? ", " : "", text, bits);
    }
    fprintf(stderr,
            "netchar-responder: UDP answers: unprompted test traffic (nc_test UDP_SEND) only to --allow-peers (%s); "
            "to anyone else no more bytes than they sent, at most %u kB/s in all; never to a source port below 1024 "
            "or one of the responder's own\n",
            nets[0] ? nets : "no network", (unsigned)(NC_ANSWER_RATE / 1000));
}

static int parse_port(const char *flag, const char *text, long *port)
{
    char *end;
    *port = strtol(text, &end, 10);
    if (*end || end == text || *port < 0 || *port > 65535) {
        fprintf(stderr, "netchar-responder: %s %s is not a port number (0 to 65535; 0 picks a free one)\n", flag,
                text);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long port = NC_DEFAULT_PORT;
    int i;
#if NC_ROLES_EXTRA
    int s;
    /* On a host the other roles are opt-in (their classic ports may be taken, or privileged). */
    for (s = 0; s < NC_SVC_COUNT; s++)
        nc_roles_disable((enum nc_service)s);
#endif
    for (i = 1; i < argc; i++) {
        int role = -1;
#if NC_ROLES_EXTRA
        for (s = 0; s < NC_SVC_COUNT; s++)
            if (strcmp(argv[i], role_flags[s]) == 0)
                role = s;
#endif
        if ((strcmp(argv[i], "--port") == 0 || strcmp(argv[i], "-p") == 0) && i + 1 < argc) {
            if (parse_port(argv[i], argv[i + 1], &port) != 0)
                return 2;
            i++;
        } else if (role >= 0 && i + 1 < argc) {
            long p;
            if (parse_port(argv[i], argv[i + 1], &p) != 0)
                return 2;
            nc_roles_set_port((enum nc_service)role, (uint16_t)p);
            nc_roles_enable((enum nc_service)role);
            /* nc_test's control and data ports go together. */
            if (role == NC_SVC_NCTEST)
                nc_roles_enable(NC_SVC_NCTEST_DATA);
            if (role == NC_SVC_NCTEST_DATA)
                nc_roles_enable(NC_SVC_NCTEST);
            i++;
        } else if (strcmp(argv[i], "--allow-peers") == 0 && i + 1 < argc) {
            if (allow_peers(argv[++i]) != 0)
                return 2;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("netchar-responder %s\n", NC_RESPONDER_VERSION);
            return 0;
        } else {
            fprintf(stderr, "netchar-responder: unknown argument %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    /* A client that closes early must not kill the responder with SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    if (nc_responder_init((unsigned short)port) != 0) {
        fprintf(stderr, "netchar-responder: cannot listen on port %ld (in use?); pick another with --port\n", port);
        return 1;
    }
    /* The native protocol's line first (callers read its port from the first line), then one
     * line per other role that listens. */
#if NC_ROLE_NATIVE
    fprintf(stderr, "netchar-responder %s listening on TCP and UDP port %u\n", NC_RESPONDER_VERSION,
            (unsigned)nc_responder_port());
#endif
#if NC_ROLE_NC_TEST
    if (nc_roles_port(NC_SVC_NCTEST) && nc_roles_port(NC_SVC_NCTEST_DATA))
        fprintf(stderr, "netchar-responder: nc-test slave on UDP port %u, data on port %u\n",
                (unsigned)nc_roles_port(NC_SVC_NCTEST), (unsigned)nc_roles_port(NC_SVC_NCTEST_DATA));
#endif
#if NC_ROLE_NETIO
    if (nc_roles_port(NC_SVC_NETIO))
        fprintf(stderr, "netchar-responder: netio server on TCP port %u, UDP test on port %u\n",
                (unsigned)nc_roles_port(NC_SVC_NETIO), (unsigned)nc_roles_port(NC_SVC_NETIO) + 1);
#endif
#if NC_ROLE_ECHO
    if (nc_roles_port(NC_SVC_ECHO))
        fprintf(stderr, "netchar-responder: echo on TCP and UDP port %u\n", (unsigned)nc_roles_port(NC_SVC_ECHO));
    if (nc_roles_port(NC_SVC_DISCARD))
        fprintf(stderr, "netchar-responder: discard on TCP and UDP port %u\n",
                (unsigned)nc_roles_port(NC_SVC_DISCARD));
#endif
    describe_guard();
    nc_responder_run();
    return 0;
}
