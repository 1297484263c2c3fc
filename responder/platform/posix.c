/* netchar-responder: the platform layer on Linux and other POSIX systems. */
#define _POSIX_C_SOURCE 200809L
#include "../nc_platform.h"

#include <fcntl.h>
#if NC_HAVE_BACKGROUND_LOAD || NC_TASK_PER_CONNECTION
#include <pthread.h>
#endif
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

uint64_t nc_plat_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void nc_plat_random(uint8_t *buf, size_t n)
{
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = 0;
    if (f) {
        got = fread(buf, 1, n, f);
        fclose(f);
    }
    if (got < n) {
        /* No /dev/urandom: a clock mix, still unique per test. */
        uint64_t x = nc_plat_now_ns() ^ ((uint64_t)getpid() << 32);
        size_t i;
        for (i = got; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[i] = (uint8_t)x;
        }
    }
}

int nc_plat_set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void copy(char *dst, const char *src, size_t cap)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

void nc_plat_host_info(char *hostname, char *kernel, char *cpu_model, size_t cap, uint32_t *cores)
{
    struct utsname u;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *f;
    char line[256];
    copy(hostname, "unknown", cap);
    copy(kernel, "unknown", cap);
    copy(cpu_model, "unknown", cap);
    if (uname(&u) == 0) {
        char k[160];
        copy(hostname, u.nodename, cap);
        snprintf(k, sizeof k, "%s %s", u.sysname, u.release);
        copy(kernel, k, cap);
    }
    f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon) {
                char *v = colon + 1, *nl;
                while (*v == ' ')
                    v++;
                nl = strchr(v, '\n');
                if (nl)
                    *nl = 0;
                copy(cpu_model, v, cap);
                break;
            }
        }
        fclose(f);
    }
    *cores = n > 0 ? (uint32_t)n : 1;
}

void nc_plat_tune_udp(int fd)
{
    /* As the Rust server: up to 4 MiB (net.core.rmem_max caps it) so a responder that is
     * not scheduled for a while on a busy host still has every datagram queued. */
    int size = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

void nc_plat_log(const char *line)
{
    fprintf(stderr, "netchar-responder: %s\n", line);
}

#if NC_HAVE_HOST_CPU
void nc_plat_host_cpu(uint64_t *busy, uint64_t *softirq, uint64_t *total)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    *busy = *softirq = *total = 0;
    if (!f)
        return;
    /* cpu  user nice system idle iowait irq softirq steal */
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) >= 7) {
        *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        *softirq = v[6];
        *total = *busy + v[3] + v[4];
    }
    fclose(f);
}
#endif

#if NC_HAVE_CPU_TIMES
void nc_plat_cpu_times(uint64_t *user_us, uint64_t *system_us)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    *user_us = (uint64_t)r.ru_utime.tv_sec * 1000000u + (uint64_t)r.ru_utime.tv_usec;
    *system_us = (uint64_t)r.ru_stime.tv_sec * 1000000u + (uint64_t)r.ru_stime.tv_usec;
}
#endif

#if NC_HAVE_IDLE_COUNTER
/* Idle time the Linux way: the idle and iowait time of every CPU from /proc/stat, counted in
 * microseconds. Where eCos counts loops of an idle-priority thread, the kernel already counts
 * the time no task ran. Microseconds, not the file's USER_HZ ticks: a stock nc_test_master
 * divides the count by the elapsed 10 ms ticks in integers, which ticks would round to 0-2. */
uint64_t nc_plat_idle_count(void)
{
    unsigned long long v[5] = {0};
    uint64_t idle = 0;
    long hz = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5)
        idle = (uint64_t)(v[3] + v[4]) * 1000000u / (uint64_t)(hz > 0 ? hz : 100);
    fclose(f);
    return idle;
}

uint64_t nc_plat_idle_per_second(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return 1000000u * (uint64_t)(n > 0 ? n : 1);
}
#endif

#if NC_HAVE_BACKGROUND_LOAD
/* The eCos nc_test background load: one thread that, in every 10 ms period, spins for `pct`
 * percent of the period, then sleeps to the period's end. It spins on the vDSO clock (a CPU
 * time clock is a system call per reading); what it achieved is its own CPU time over its
 * wall time, so a busy machine that takes the CPU from it shows. */
#define LOAD_PERIOD_NS 10000000ull
static struct {
    pthread_mutex_t lock;
    pthread_t thread;
    int running, stop;
    uint64_t busy_ns; /* per period */
    uint64_t started_ns, cpu_ns;
} L = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0};

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *load_main(void *arg)
{
    uint64_t period = nc_plat_now_ns();
    (void)arg;
    for (;;) {
        uint64_t busy;
        struct timespec until;
        pthread_mutex_lock(&L.lock);
        busy = L.busy_ns;
        if (L.stop) {
            L.cpu_ns = thread_cpu_ns();
            pthread_mutex_unlock(&L.lock);
            return NULL;
        }
        pthread_mutex_unlock(&L.lock);
        while (nc_plat_now_ns() - period < busy) {
        }
        period += LOAD_PERIOD_NS;
        until.tv_sec = (time_t)(period / 1000000000ull);
        until.tv_nsec = (long)(period % 1000000000ull);
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
    }
}

double nc_plat_background_load(double pct)
{
    double achieved = 0;
    uint64_t busy = pct <= 0 ? 0 : pct >= 100 ? LOAD_PERIOD_NS : (uint64_t)(pct / 100.0 * LOAD_PERIOD_NS);
    pthread_mutex_lock(&L.lock);
    L.busy_ns = busy;
    if (busy > 0 && !L.running) {
        L.stop = 0;
        L.started_ns = nc_plat_now_ns();
        L.running = pthread_create(&L.thread, NULL, load_main, NULL) == 0;
        pthread_mutex_unlock(&L.lock);
        return 0;
    }
    if (busy > 0 || !L.running) {
        pthread_mutex_unlock(&L.lock);
        return 0;
    }
    L.stop = 1;
    pthread_mutex_unlock(&L.lock);
    pthread_join(L.thread, NULL);
    L.running = 0;
    {
        uint64_t wall = nc_plat_now_ns() - L.started_ns;
        achieved = wall ? 100.0 * (double)L.cpu_ns / (double)wall : 0;
    }
    return achieved > 100 ? 100 : achieved;
}
#endif

#if NC_TASK_PER_CONNECTION

int nc_plat_task_start(void *(*fn)(void *), void *arg)
{
    pthread_t th;
    pthread_attr_t attr;
    int rc;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&th, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}
#endif
