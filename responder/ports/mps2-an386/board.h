/* netchar-responder on QEMU's mps2-an386: the board's registers and the board support the
 * port's files share (startup.c, board.c, lan9118.c, main.c).
 *
 * Addresses are those QEMU 7.2 gives the machine (hw/arm/mps2.c: UART0 at 0x40004000 on
 * serial 0, the LAN9118 at 0x40200000 on IRQ 13, a 25 MHz system clock that also drives
 * SysTick's processor-clock source) and the Cortex-M4's own System Control Space. */
#ifndef NC_BOARD_H
#define NC_BOARD_H

#include <stdint.h>

#define NC_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

#define BOARD_CPU_HZ 25000000u /* SYSCLK */
#define BOARD_NS_PER_CYCLE 40u

/* SysTick and the System Control Block (ARMv7-M). */
#define SYST_CSR NC_REG(0xE000E010u)
#define SYST_RVR NC_REG(0xE000E014u)
#define SYST_CVR NC_REG(0xE000E018u)
#define SYST_CSR_ENABLE 1u
#define SYST_CSR_TICKINT 2u
#define SYST_CSR_CLKSOURCE 4u /* the processor clock, not the 1 MHz reference */
#define SCB_ICSR NC_REG(0xE000ED04u)
#define SCB_ICSR_PENDSTSET (1u << 26)
#define SCB_AIRCR NC_REG(0xE000ED0Cu)
#define SCB_AIRCR_RESET 0x05FA0004u /* VECTKEY and SYSRESETREQ */
#define SCB_CFSR NC_REG(0xE000ED28u)
#define SCB_HFSR NC_REG(0xE000ED2Cu)

/* The CMSDK APB UART 0: the console. */
#define UART0_DATA NC_REG(0x40004000u)
#define UART0_STATE NC_REG(0x40004004u)
#define UART0_CTRL NC_REG(0x40004008u)
#define UART0_BAUDDIV NC_REG(0x40004010u)
#define UART_STATE_TXFULL 1u
#define UART_CTRL_TXEN 1u

/* board.c */
void nc_board_init(void);                /* SysTick at 1 kHz, the console */
void nc_board_puts(const char *s);       /* to the console */
void nc_board_put_u64(uint64_t v);       /* in decimal */
void nc_board_put_hex(uint32_t v, int digits);
void nc_board_systick(void);             /* the SysTick exception */
void nc_board_fault(const uint32_t *frame, uint32_t exc); /* a fault: reported, then a reset */
void nc_board_assert(const char *what, const char *file, int line);

/* lan9118.c */
struct netif;
int8_t nc_lan9118_netif_init(struct netif *netif); /* an err_t: netif_add's init function */
int nc_lan9118_poll(struct netif *netif);           /* received frames to netif->input; how many */
/* Frames the driver dropped (no pbuf, a bad status, too long), and polls that found the
 * receive FIFO within one frame of full (the controller may have dropped a frame unseen). */
extern uint32_t nc_lan9118_rx_dropped, nc_lan9118_rx_near_full;

#endif
