/* Finds cuInit through the global scope (a weak reference: no -lcuda, no dlopen of the
 * driver) and calls it from 8 threads at once. Without the shim there is no cuInit; with
 * it, the reference binds to the shim's wrapper, which cannot load libcuda.so.1 when none is
 * installed, and every call returns CUDA_ERROR_NOT_FOUND (500). (A dlsym(RTLD_DEFAULT)
 * look-up finds nothing in either case, as without the shim: e2e::reopen.) Prints one line
 * per distinct result. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

typedef int (*init_fn)(unsigned int);
extern int cuInit(unsigned int) __attribute__((weak));
static init_fn init;
static int results[8];

static void *call(void *arg) {
    int *r = arg;
    *r = init(0);
    return NULL;
}

int main(void) {
    init = cuInit;
    if (!init) {
        printf("no cuInit in the process\n");
        return 0;
    }
    pthread_t t[8];
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, call, &results[i]);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    int same = 1;
    for (int i = 1; i < 8; i++) same &= results[i] == results[0];
    printf("cuInit x8 -> %d%s\n", results[0], same ? " (all threads)" : " (threads differ)");
    return 0;
}
