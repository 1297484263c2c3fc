/* Link-check only (make arm-full): empty stand-ins for the RTOS layer lwIP's sockets run on
 * (an RTOS port provides these: FreeRTOS, eCos, ...), and for a netif driver. They make the
 * whole image (responder + lwIP) link so its size can be read; they are not a port. */
#include "lwip/sys.h"
#include "lwip/tcpip.h"

err_t sys_sem_new(sys_sem_t *sem, u8_t count) { (void)count; *sem = (void *)1; return ERR_OK; }
void sys_sem_free(sys_sem_t *sem) { (void)sem; }
void sys_sem_signal(sys_sem_t *sem) { (void)sem; }
u32_t sys_arch_sem_wait(sys_sem_t *sem, u32_t timeout) { (void)sem; (void)timeout; return 0; }
err_t sys_mutex_new(sys_mutex_t *m) { *m = (void *)1; return ERR_OK; }
void sys_mutex_free(sys_mutex_t *m) { (void)m; }
void sys_mutex_lock(sys_mutex_t *m) { (void)m; }
void sys_mutex_unlock(sys_mutex_t *m) { (void)m; }
err_t sys_mbox_new(sys_mbox_t *mb, int size) { (void)size; *mb = (void *)1; return ERR_OK; }
void sys_mbox_free(sys_mbox_t *mb) { (void)mb; }
void sys_mbox_post(sys_mbox_t *mb, void *msg) { (void)mb; (void)msg; }
err_t sys_mbox_trypost(sys_mbox_t *mb, void *msg) { (void)mb; (void)msg; return ERR_OK; }
err_t sys_mbox_trypost_fromisr(sys_mbox_t *mb, void *msg) { (void)mb; (void)msg; return ERR_OK; }
u32_t sys_arch_mbox_fetch(sys_mbox_t *mb, void **msg, u32_t timeout) { (void)mb; (void)timeout; *msg = NULL; return 0; }
u32_t sys_arch_mbox_tryfetch(sys_mbox_t *mb, void **msg) { (void)mb; *msg = NULL; return SYS_MBOX_EMPTY; }
sys_thread_t sys_thread_new(const char *name, lwip_thread_fn fn, void *arg, int stack, int prio) { (void)name; (void)fn; (void)arg; (void)stack; (void)prio; return NULL; }
void sys_init(void) { }
u32_t sys_now(void) { return 0; }
sys_prot_t sys_arch_protect(void) { return 0; }
void sys_arch_unprotect(sys_prot_t p) { (void)p; }

void netchar_responder_task(void *arg);
int main(void)
{
    tcpip_init(NULL, NULL);
    netchar_responder_task(NULL);
    return 0;
}
