/* lwIP's compiler header for arm-none-eabi-gcc with newlib (size-check build). */
#ifndef LWIP_ARCH_CC_H
#define LWIP_ARCH_CC_H

#include <sys/time.h>

#define BYTE_ORDER LITTLE_ENDIAN
#define LWIP_PLATFORM_DIAG(x) do { } while (0)
#define LWIP_PLATFORM_ASSERT(x) do { for (;;) { } } while (0)
#define LWIP_RAND() ((u32_t)nc_port_rand())
unsigned long nc_port_rand(void);

#endif
