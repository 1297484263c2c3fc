/* netchar-responder for Linux and POSIX hosts: `netchar-responder [--port PORT]`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../nc_config.h"
#include "../src/nc_responder.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: netchar-responder [--port PORT]   (default %d; TCP and UDP)\n", NC_DEFAULT_PORT);
}

int main(int argc, char **argv)
{
    long port = NC_DEFAULT_PORT;
    int i;
    for (i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--port") == 0 || strcmp(argv[i], "-p") == 0) && i + 1 < argc) {
            char *end;
            port = strtol(argv[++i], &end, 10);
            if (*end || port < 0 || port > 65535) {
                fprintf(stderr, "netchar-responder: --port %s is not a port number (0 to 65535; 0 picks a free one)\n", argv[i]);
                return 2;
            }
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
    fprintf(stderr, "netchar-responder %s listening on TCP and UDP port %u\n", NC_RESPONDER_VERSION,
            (unsigned)nc_responder_port());
    nc_responder_run();
    return 0;
}
