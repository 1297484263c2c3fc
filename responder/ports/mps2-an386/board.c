/* netchar-responder on QEMU's mps2-an386: the time base, the console, and the platform
 * functions the responder needs (nc_platform.h) and lwIP's sys_now.
 *
 * Time: SysTick on the 25 MHz processor clock, reloaded every millisecond; its exception
 * counts milliseconds, and a reading adds the cycles of the current one (40 ns each). Under
 * QEMU's -icount the clock follows the instructions executed, so a time on this board is an
 * instruction count (docs/embedded.md). */
#include <string.h>

#include "../../nc_platform.h"
#include "board.h"
#include "lwip/arch.h"
#include "lwip/init.h"

#ifndef BOARD_BUILD
#define BOARD_BUILD "an unnamed build"
#endif

#define RELOAD (BOARD_CPU_HZ / 1000u - 1u)

static volatile uint64_t ms_ticks;

void nc_board_systick(void)
{
    ms_ticks++;
}

static void console_init(void)
{
    UART0_BAUDDIV = BOARD_CPU_HZ / 115200u;
    UART0_CTRL = UART_CTRL_TXEN;
}

void nc_board_init(void)
{
    console_init();
    SYST_RVR = RELOAD;
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
}

uint64_t nc_plat_now_ns(void)
{
    uint64_t ms;
    uint32_t cycles;
    /* With interrupts off, a reload whose exception has not run yet shows as SysTick pending:
     * that millisecond is counted here, and the count read after it. */
    __asm volatile("cpsid i" ::: "memory");
    ms = ms_ticks;
    cycles = SYST_CVR;
    if (SCB_ICSR & SCB_ICSR_PENDSTSET) {
        cycles = SYST_CVR;
        ms++;
    }
    __asm volatile("cpsie i" ::: "memory");
    return ms * 1000000u + (uint64_t)(RELOAD - cycles) * BOARD_NS_PER_CYCLE;
}

/* lwIP's timers need milliseconds only: the count the exception keeps, no device read. */
u32_t sys_now(void)
{
    return (u32_t)ms_ticks;
}

/* ---------------------------------------------------------------- console */

static void put_char(char c)
{
    while (UART0_STATE & UART_STATE_TXFULL)
        continue;
    UART0_DATA = (uint8_t)c;
}

void nc_board_puts(const char *s)
{
    while (*s)
        put_char(*s++);
}

void nc_board_put_u64(uint64_t v)
{
    char b[21];
    int n = 0;
    do {
        b[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    while (n > 0)
        put_char(b[--n]);
}

void nc_board_put_hex(uint32_t v, int digits)
{
    while (digits-- > 0)
        put_char("0123456789abcdef"[(v >> (4 * digits)) & 15u]);
}

void nc_plat_log(const char *line)
{
    nc_board_puts("netchar-responder: ");
    nc_board_puts(line);
    put_char('\n');
}

/* ---------------------------------------------------------------- faults */

void nc_board_fault(const uint32_t *frame, uint32_t exc)
{
    nc_board_puts("\nnetchar-responder: fault: exception ");
    nc_board_put_u64(exc & 0x1ffu);
    nc_board_puts(" pc 0x");
    nc_board_put_hex(frame[6], 8);
    nc_board_puts(" lr 0x");
    nc_board_put_hex(frame[5], 8);
    nc_board_puts(" cfsr 0x");
    nc_board_put_hex(SCB_CFSR, 8);
    nc_board_puts(" hfsr 0x");
    nc_board_put_hex(SCB_HFSR, 8);
    nc_board_puts(": resetting\n");
    SCB_AIRCR = SCB_AIRCR_RESET;
    for (;;)
        continue;
}

void nc_board_assert(const char *what, const char *file, int line)
{
    nc_board_puts("\nnetchar-responder: lwIP assertion failed: ");
    nc_board_puts(what);
    nc_board_puts(" (");
    nc_board_puts(file);
    nc_board_puts(":");
    nc_board_put_u64((uint64_t)line);
    nc_board_puts("): resetting\n");
    SCB_AIRCR = SCB_AIRCR_RESET;
    for (;;)
        continue;
}

/* ---------------------------------------------------------------- the responder's platform */

static uint64_t rand_state;

uint32_t nc_board_rand(void)
{
    /* xorshift64*, stirred with the clock's low bits at each call. This board model has no
     * entropy source; a real board seeds from its TRNG. */
    rand_state ^= nc_plat_now_ns() | 1u;
    rand_state ^= rand_state >> 12;
    rand_state ^= rand_state << 25;
    rand_state ^= rand_state >> 27;
    return (uint32_t)((rand_state * 2685821657736338717ull) >> 32);
}

void nc_plat_random(uint8_t *buf, size_t n)
{
    while (n-- > 0)
        *buf++ = (uint8_t)nc_board_rand();
}

void nc_plat_host_info(char *hostname, char *kernel, char *cpu_model, size_t cap, uint32_t *cores)
{
    /* The build's identity rides in the kernel's place (the Makefile's BOARD_ID). */
    static const char *const v[3] = {"mps2-an386", "lwIP " LWIP_VERSION_STRING " NO_SYS=1, " BOARD_BUILD,
                                     "Cortex-M4 (QEMU mps2-an386)"};
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
