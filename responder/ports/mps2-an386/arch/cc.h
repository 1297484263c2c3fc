/* lwIP's compiler and platform header for the mps2-an386 board (arm-none-eabi-gcc, newlib). */
#ifndef LWIP_ARCH_CC_H
#define LWIP_ARCH_CC_H

#include <stdint.h>

#define BYTE_ORDER LITTLE_ENDIAN
/* No sockets: lwIP's own errno values are not needed, and newlib's struct timeval is not
 * used. */
#define LWIP_TIMEVAL_PRIVATE 0

void nc_board_assert(const char *what, const char *file, int line);
uint32_t nc_board_rand(void);

#define LWIP_PLATFORM_DIAG(x) do { } while (0)
#define LWIP_PLATFORM_ASSERT(x) nc_board_assert((x), __FILE__, __LINE__)
#define LWIP_RAND() ((u32_t)nc_board_rand())

#endif
