/* bench/ref/udp_ref.c: the practical limit of this machine's UDP path for small datagrams, the
 * reference netchar's `udp -b 0` is held against (bench/newest.sh builds it with gcc into its
 * work directory; it is not part of netchar and not installed).
 *
 * A sender and a receiver on 127.0.0.1 (or PORT), each pinned to its own CPU, for SECONDS:
 *   sender    sendmmsg() of BATCH messages, each a UDP GSO super-datagram (UDP_SEGMENT = LEN)
 *             of as many LEN-byte segments as fit in 64 KiB (at most 64), as fast as it can;
 *   receiver  recvmmsg() of up to 64 datagrams per call into 64 buffers, counting datagrams
 *             (no GRO: each datagram is delivered to the socket on its own, as netchar's
 *             receiver gets them without --gro).
 * Nothing is checked in the payload and no header is written: it is the kernel's share of the
 * work, the least any sender and receiver must pay.  With -s the receiver also asks the kernel
 * for each datagram's receive time (SO_TIMESTAMPNS, a control message per datagram), as a
 * receiver that measures jitter must, and reads it: the kernel's share for such a receiver.
 * The receiver counts from its first datagram to its last, and prints one line:
 *   udp_ref len=L segments=S sent=N sent_s=T received=M received_s=U stamps=0|1
 *
 *   udp_ref -l LEN -t SECONDS [-s] [-c SENDER_CPU] [-C RECEIVER_CPU] [-p PORT]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define BATCH 8       /* super-datagrams per sendmmsg */
#define RX_BATCH 64   /* datagrams per recvmmsg */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0) perror("sched_setaffinity");
}

static void die(const char *what) {
  perror(what);
  exit(2);
}

/* Shared between the two processes: the sender's totals. */
struct totals {
  volatile uint64_t sent;
  volatile double sent_s;
};

int main(int argc, char **argv) {
  int len = 64, port = 0, ccpu = -1, scpu = -1, stamps = 0, opt;
  double secs = 3;
  while ((opt = getopt(argc, argv, "l:t:c:C:p:s")) != -1) {
    switch (opt) {
      case 'l': len = atoi(optarg); break;
      case 't': secs = atof(optarg); break;
      case 'c': ccpu = atoi(optarg); break;
      case 'C': scpu = atoi(optarg); break;
      case 'p': port = atoi(optarg); break;
      case 's': stamps = 1; break;
      default:
        fprintf(stderr, "usage: udp_ref -l LEN -t SECONDS [-s] [-c SENDER_CPU] [-C RECEIVER_CPU] [-p PORT]\n");
        return 2;
    }
  }
  if (len < 1 || len > 1472 || secs <= 0) {
    fprintf(stderr, "udp_ref: -l 1..1472 and -t > 0\n");
    return 2;
  }
  int segs = 65000 / len;
  if (segs > 64) segs = 64;

  struct totals *tot = mmap(NULL, sizeof *tot, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (tot == MAP_FAILED) die("mmap");

  int rx = socket(AF_INET, SOCK_DGRAM, 0);
  if (rx < 0) die("socket");
  int big = 4 << 20;
  setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(rx, (struct sockaddr *)&a, sizeof a) != 0) die("bind");
  socklen_t al = sizeof a;
  getsockname(rx, (struct sockaddr *)&a, &al);
  struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
  setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (stamps && setsockopt(rx, SOL_SOCKET, SO_TIMESTAMPNS, &stamps, sizeof stamps) != 0) die("SO_TIMESTAMPNS");

  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) { /* the sender */
    pin(ccpu);
    int tx = socket(AF_INET, SOCK_DGRAM, 0);
    if (tx < 0) die("socket");
    setsockopt(tx, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    if (connect(tx, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    if (setsockopt(tx, IPPROTO_UDP, UDP_SEGMENT, &len, sizeof len) != 0) die("UDP_SEGMENT");
    usleep(100000); /* the receiver is waiting in recvmmsg */
    size_t super = (size_t)len * segs;
    char *buf = calloc(1, super);
    struct iovec iov[BATCH];
    struct mmsghdr m[BATCH];
    memset(m, 0, sizeof m);
    for (int i = 0; i < BATCH; i++) {
      iov[i].iov_base = buf;
      iov[i].iov_len = super;
      m[i].msg_hdr.msg_iov = &iov[i];
      m[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t sent = 0;
    double t0 = now_s(), t = t0, end = t0 + secs;
    while (t < end) {
      int n = sendmmsg(tx, m, BATCH, 0);
      if (n > 0) sent += (uint64_t)n * segs;
      else if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR) die("sendmmsg");
      t = now_s();
    }
    tot->sent = sent;
    tot->sent_s = t - t0;
    _exit(0);
  }
  pin(scpu);
  char *bufs = malloc((size_t)RX_BATCH * 2048);
  struct iovec iov[RX_BATCH];
  struct mmsghdr m[RX_BATCH];
  /* One control buffer per datagram, for its SO_TIMESTAMPNS stamp (-s). */
  union {
    char buf[CMSG_SPACE(sizeof(struct timespec))];
    struct cmsghdr align;
  } ctl[RX_BATCH];
  memset(m, 0, sizeof m);
  for (int i = 0; i < RX_BATCH; i++) {
    iov[i].iov_base = bufs + (size_t)i * 2048;
    iov[i].iov_len = 2048;
    m[i].msg_hdr.msg_iov = &iov[i];
    m[i].msg_hdr.msg_iovlen = 1;
  }
  uint64_t got = 0, stamped = 0;
  double first = 0, last = 0, deadline = now_s() + secs + 5;
  for (;;) {
    if (stamps)
      for (int i = 0; i < RX_BATCH; i++) {
        m[i].msg_hdr.msg_control = ctl[i].buf;
        m[i].msg_hdr.msg_controllen = sizeof ctl[i].buf;
      }
    int n = recvmmsg(rx, m, RX_BATCH, MSG_WAITFORONE, NULL);
    double t = now_s();
    if (n > 0) {
      if (!got) first = t;
      got += n;
      last = t;
      for (int i = 0; stamps && i < n; i++) {
        struct cmsghdr *c = CMSG_FIRSTHDR(&m[i].msg_hdr);
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) stamped++;
      }
      continue;
    }
    if (errno == EINTR) continue;
    /* A timeout after data: the sender has stopped (or never started before the deadline). */
    if (got || t > deadline) break;
  }
  int st;
  waitpid(child, &st, 0);
  printf("udp_ref len=%d segments=%d sent=%llu sent_s=%.6f received=%llu received_s=%.6f stamps=%d\n", len, segs,
         (unsigned long long)tot->sent, tot->sent_s, (unsigned long long)got, last - first, stamps);
  /* With -s, every datagram must have come with its stamp, or the figure is not what it says. */
  if (stamps && stamped != got) {
    fprintf(stderr, "udp_ref: %llu of %llu datagrams came without a receive stamp\n",
            (unsigned long long)(got - stamped), (unsigned long long)got);
    return 1;
  }
  return got ? 0 : 1;
}
