/* A library whose constructor makes driver calls, loaded with dlopen at run time (as Python
 * loads an extension module): the constructor runs while this thread holds the dynamic
 * loader's lock, and another thread calls the driver at the same moment.
 *
 * Usage: early_dlopen ctor MODE ("ctor" is the stage libearly_ctor.so's constructor looks
 * for in argv). Just before the constructor's calls (early_before_calls, below), a second
 * thread is let go and given 100 ms to get inside the shim:
 *   first: the thread's first driver calls, cuInit and cuDeviceGet(0), race the
 *          constructor's first calls (the shim opens libcuda for whichever comes first);
 *   fault: main called cuInit and the thread cuDeviceGet(0) before dlopen; the thread's
 *          cuDeviceGet(5), a device fault (the shim takes the topology), races the
 *          constructor's.
 * Prints what the constructor's calls and the thread's returned. */
#include "cuda_min.h"
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct early_record {
    const char *stage;
    int init, get, dev, create;
    CUcontext ctx;
};

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxGetDevice(CUdevice *);
CUresult cuDeviceGetPCIBusId(char *, int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);

static sem_t go, ready;
static volatile int calling;
static int fault_mode;
static int t_init = -1, t_get0 = -1, t_get = -1, t_dev = -1;

static void *other(void *arg) {
    (void)arg;
    CUdevice d0;
    /* In fault mode, a first call of this thread's own: the shim sets up its per-thread
     * counters (registering their destructor takes the loader's lock) before the race. */
    if (fault_mode) t_get0 = cuDeviceGet(&d0, 0);
    sem_post(&ready);
    sem_wait(&go);
    calling = 1;
    if (!fault_mode) t_init = cuInit(0);
    t_get = cuDeviceGet(&t_dev, fault_mode ? 5 : 0);
    return NULL;
}

/* Called by libearly_ctor.so's constructor, under the loader's lock, before its calls. */
void early_before_calls(void) {
    sem_post(&go);
    while (!calling) usleep(1000);
    usleep(100000);
}

int main(int argc, char **argv) {
    pthread_t t;
    if (argc < 3) { printf("usage: early_dlopen ctor first|fault\n"); return 2; }
    fault_mode = strcmp(argv[2], "fault") == 0;
    sem_init(&go, 0, 0);
    sem_init(&ready, 0, 0);
    if (fault_mode && cuInit(0)) { printf("cuInit failed\n"); return 2; }
    pthread_create(&t, NULL, other, NULL);
    sem_wait(&ready);
    void *h = dlopen("libearly_ctor.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
    pthread_join(t, NULL);
    struct early_record *r = dlsym(h, "early_record");
    if (!r || !r->stage) { printf("no stage ran\n"); return 2; }
    CUdevice used = -1;
    char bus[32] = "?";
    int cur = r->create ? r->create : cuCtxGetDevice(&used);
    if (!cur) cur = cuDeviceGetPCIBusId(bus, sizeof bus, used);
    printf("dlopen %s: cuInit -> %d, cuDeviceGet(5) -> %d (device %d), cuCtxCreate -> %d, "
           "context on %s\n",
           r->stage, r->init, r->get, r->dev, r->create, bus);
    if (fault_mode)
        printf("thread: cuDeviceGet(0) -> %d, cuDeviceGet(5) -> %d (device %d)\n", t_get0, t_get,
               t_dev);
    else
        printf("thread: cuInit -> %d, cuDeviceGet(0) -> %d (device %d)\n", t_init, t_get, t_dev);
    if (!r->create && cuCtxDestroy_v2(r->ctx)) return 1;
    return r->get || r->create || cur || t_get || (fault_mode && t_get0);
}
