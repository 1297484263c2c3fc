/* lwIP's OS types for the size-check build: an RTOS port defines these (FreeRTOS, eCos...). */
#ifndef LWIP_ARCH_SYS_ARCH_H
#define LWIP_ARCH_SYS_ARCH_H

typedef void *sys_sem_t;
typedef void *sys_mutex_t;
typedef void *sys_mbox_t;
typedef void *sys_thread_t;
typedef int sys_prot_t;
#define SYS_MBOX_NULL NULL
#define SYS_SEM_NULL NULL
#define sys_mbox_valid(m) (*(m) != NULL)
#define sys_mbox_set_invalid(m) (*(m) = NULL)
#define sys_sem_valid(s) (*(s) != NULL)
#define sys_sem_set_invalid(s) (*(s) = NULL)

#endif
