/* bench/ref/pingpong.c: the least a TCP request/response of one byte costs on this machine, and
 * what a process's being multi-threaded adds to it (bench/threads_pair.sh builds it with gcc into
 * its work directory; it is not part of netchar and not installed).
 *
 *   pingpong server PORT [-t] [-d] [-u]     answers each byte with one byte until the end
 *   pingpong client PORT SECONDS [-t] [-d] [-u]
 *                                           sends a byte, reads the answer, for SECONDS, and
 *                                           prints "transactions seconds"
 *   -t  start one more thread, which only waits (pause()), as netchar's control and collector
 *       threads mostly do: the process is multi-threaded
 *   -d  send and receive by syscall(2), not through libc's send()/recv(), which in a
 *       multi-threaded process wrap each call in the cancellation bookkeeping (netchar's
 *       crates/sys/src/direct.rs)
 *   -u  after starting the thread, give the process's thread a descriptor table of its own
 *       (unshare(CLONE_FILES)): a shared table costs a file reference per socket call (netchar's
 *       rr workers do this)
 * Both ends on 127.0.0.1 with TCP_NODELAY; the clock is read once per 1024 transactions.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int direct;

static void *waits(void *unused) {
  (void)unused;
  for (;;)
    pause();
  return NULL;
}

static long one_send(int fd, char *b) {
  return direct ? syscall(SYS_sendto, fd, b, 1, 0, NULL, 0) : send(fd, b, 1, 0);
}

static long one_recv(int fd, char *b) {
  return direct ? syscall(SYS_recvfrom, fd, b, 1, 0, NULL, 0) : recv(fd, b, 1, 0);
}

static double since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 3 || (argv[1][0] != 's' && argv[1][0] != 'c') || (argv[1][0] == 'c' && argc < 4)) {
    fprintf(stderr, "usage: pingpong server PORT [-t] [-d] [-u] | pingpong client PORT SECONDS [-t] [-d] [-u]\n");
    return 2;
  }
  int client = argv[1][0] == 'c', thread = 0, own_table = 0;
  for (int i = client ? 4 : 3; i < argc; i++) {
    if (!strcmp(argv[i], "-t"))
      thread = 1;
    else if (!strcmp(argv[i], "-d"))
      direct = 1;
    else if (!strcmp(argv[i], "-u"))
      own_table = 1;
    else {
      fprintf(stderr, "pingpong: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (thread) {
    pthread_t t;
    if (pthread_create(&t, NULL, waits, NULL)) {
      perror("pingpong: pthread_create");
      return 1;
    }
  }
  if (own_table && unshare(CLONE_FILES)) {
    perror("pingpong: unshare");
    return 1;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int on = 1;
  char b = 'x';
  if (!client) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) {
      perror("pingpong: bind/listen");
      return 1;
    }
    int s = accept(l, NULL, NULL);
    if (s < 0) {
      perror("pingpong: accept");
      return 1;
    }
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    while (one_recv(s, &b) == 1 && one_send(s, &b) == 1) {
    }
    return 0;
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, (struct sockaddr *)&a, sizeof a)) {
    perror("pingpong: connect");
    return 1;
  }
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  double seconds = atof(argv[3]);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long n = 0;
  for (;;) {
    if (one_send(s, &b) != 1 || one_recv(s, &b) != 1) {
      perror("pingpong: send/recv");
      return 1;
    }
    if ((++n & 1023) == 0 && since(&t0) >= seconds)
      break;
  }
  printf("%ld %.6f\n", n, since(&t0));
  return 0;
}
