/* netchar-responder on QEMU's mps2-an386: the vector table and the reset handler.
 *
 * At reset the Cortex-M4 loads its stack pointer and first program counter from the table at
 * address 0 (QEMU reads them from the loaded image). The reset handler copies .data's initial
 * values from flash, clears .bss and calls main. Faults print what they can to the console
 * and reset the board (with QEMU's -no-reboot, that ends QEMU, which a test sees). */
#include <stdint.h>
#include <string.h>

#include "board.h"

extern uint32_t __data_start, __data_end, __data_load, __bss_start, __bss_end, __stack_top;
int main(void);
void nc_board_reset(void);

void nc_board_reset(void)
{
    memcpy(&__data_start, &__data_load, (size_t)((char *)&__data_end - (char *)&__data_start));
    memset(&__bss_start, 0, (size_t)((char *)&__bss_end - (char *)&__bss_start));
    (void)main();
    nc_board_puts("netchar-responder: main returned\n");
    SCB_AIRCR = SCB_AIRCR_RESET;
    for (;;)
        continue;
}

/* Every fault and unexpected interrupt: the stacked frame (r0-r3, r12, lr, pc, xpsr) of the
 * main stack, which is the only one, and the exception number. */
__attribute__((naked)) static void fault_entry(void)
{
    __asm volatile("mov r0, sp\n"
                   "mrs r1, ipsr\n"
                   "b nc_board_fault\n");
}

static void systick_entry(void)
{
    nc_board_systick();
}

typedef void (*vector)(void);

__attribute__((section(".vectors"), used)) static const vector vectors[16 + 32] = {
    (vector)(uintptr_t)&__stack_top,
    nc_board_reset,
    fault_entry, /* NMI (the watchdog) */
    fault_entry, /* HardFault */
    fault_entry, /* MemManage */
    fault_entry, /* BusFault */
    fault_entry, /* UsageFault */
    0, 0, 0, 0,
    fault_entry, /* SVCall */
    fault_entry, /* DebugMonitor */
    0,
    fault_entry, /* PendSV */
    systick_entry,
    /* The 32 external interrupts: none is enabled (the port polls). */
    fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry,
    fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry,
    fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry,
    fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry, fault_entry,
};
