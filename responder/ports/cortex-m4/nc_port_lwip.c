/* netchar-responder: the platform layer on lwIP for a Cortex-M (the size-check build's; a
 * board port replaces the clock and entropy with its own).
 *
 * Time: the DWT cycle counter (every Cortex-M3/M4/M7), extended to 64 bits; NC_CPU_HZ is the
 * core clock. Call nc_port_clock_init() once at boot, and nc_plat_now_ns() at least once per
 * 2^32 cycles (the responder's loop does, every 50 ms at most). */
#include "../../nc_platform.h"

#include <string.h>

#ifndef NC_CPU_HZ
#define NC_CPU_HZ 168000000u
#endif

#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)

static uint32_t last_cycles;
static uint64_t high_cycles;

void nc_port_clock_init(void);
void nc_port_clock_init(void)
{
    DEMCR |= 1u << 24; /* TRCENA */
    DWT_CYCCNT = 0;
    DWT_CTRL |= 1u; /* CYCCNTENA */
}

uint64_t nc_plat_now_ns(void)
{
    uint32_t c = DWT_CYCCNT;
    if (c < last_cycles)
        high_cycles += 1ull << 32;
    last_cycles = c;
    return (high_cycles + c) * 1000000000ull / NC_CPU_HZ;
}

static uint64_t rand_state;

unsigned long nc_port_rand(void)
{
    /* xorshift64*, seeded from the cycle counter: a board with an RNG peripheral uses it. */
    if (rand_state == 0)
        rand_state = 0x9E3779B97F4A7C15ull ^ DWT_CYCCNT;
    rand_state ^= rand_state >> 12;
    rand_state ^= rand_state << 25;
    rand_state ^= rand_state >> 27;
    return (unsigned long)((rand_state * 2685821657736338717ull) >> 32);
}

void nc_plat_random(uint8_t *buf, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        rand_state ^= DWT_CYCCNT;
        buf[i] = (uint8_t)nc_port_rand();
    }
}

int nc_plat_set_nonblocking(int fd)
{
    return lwip_fcntl(fd, F_SETFL, O_NONBLOCK);
}

void nc_plat_host_info(char *hostname, char *kernel, char *cpu_model, size_t cap, uint32_t *cores)
{
    static const char *const v[3] = {"target", "lwIP", "Cortex-M4"};
    char *const d[3] = {hostname, kernel, cpu_model};
    int i;
    for (i = 0; i < 3; i++) {
        size_t n = strlen(v[i]);
        if (n >= cap)
            n = cap - 1;
        memcpy(d[i], v[i], n);
        d[i][n] = 0;
    }
    *cores = 1;
}

void nc_plat_tune_udp(int fd)
{
    (void)fd; /* lwIP sizes its queues in lwipopts.h (MEMP_NUM_PBUF, PBUF_POOL_SIZE) */
}

void nc_plat_log(const char *line)
{
    (void)line; /* a board prints to its UART here */
}
