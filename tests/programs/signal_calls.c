/* Driver calls from a signal handler (e2e::reentrancy). The SIGUSR1 handler makes failing
 * driver calls: an allocation of 0 bytes (CUDA_ERROR_INVALID_VALUE) and a synchronize of a
 * stream whose context was destroyed (709). The main thread loops over the same failing
 * calls, creates and destroys streams, and asks for its current context (cuCtxGetCurrent):
 * the fake driver raises SIGUSR1 inside chosen entry points (FAKE_CUDA_RAISE), so the
 * handler runs inside whatever the caller was doing there, without the shim the program's
 * own cuCtxGetCurrent, with it possibly the shim's own queries made while it holds its
 * locks. Prints the codes of the main loop and of the handler's calls, and how often the
 * handler ran. The handler does nothing until the set-up is done (armed). Usage:
 * signal_calls [ITERATIONS] (default 50). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_calls.h"

CUresult cuCtxGetCurrent(CUcontext *);

static CUstream dead;
static volatile sig_atomic_t runs, armed;
static volatile int handler_codes[2];
static volatile int handler_bad;

static void on_signal(int sig) {
    CUdeviceptr p;
    int a, b;
    (void)sig;
    if (!armed) return;
    a = cuMemAlloc_v2(&p, 0);
    b = cuStreamSynchronize(dead);
    if (runs > 0 && (a != handler_codes[0] || b != handler_codes[1])) handler_bad = 1;
    handler_codes[0] = a;
    handler_codes[1] = b;
    runs++;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 50;
    CUdevice dev;
    CUcontext a, b, cur;
    CUstream s;
    CUdeviceptr p;
    int alloc_code = 0, sync_code = 0, bad = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate_v2(&a, 0, dev)) return 2;
    if (cuStreamCreate(&dead, 0) || cuCtxDestroy_v2(a) || cuCtxCreate_v2(&b, 0, dev)) return 2;
    armed = 1;
    for (int i = 0; i < n; i++) {
        int r1 = cuMemAlloc_v2(&p, 0);
        int r2 = cuStreamSynchronize(dead);
        if (i > 0 && (r1 != alloc_code || r2 != sync_code)) bad = 1;
        alloc_code = r1;
        sync_code = r2;
        if (cuStreamCreate(&s, 0) || cuStreamDestroy_v2(s)) bad = 1;
        if (cuCtxGetCurrent(&cur) || cur != b) bad = 1;
    }
    armed = 0;
    cuCtxDestroy_v2(b);
    printf("main: %d iterations, cuMemAlloc(0) -> %d, cuStreamSynchronize(dead) -> %d%s\n", n,
           alloc_code, sync_code, bad ? ", INCONSISTENT" : "");
    printf("handler: ran %d times, cuMemAlloc(0) -> %d, cuStreamSynchronize(dead) -> %d%s\n",
           (int)runs, handler_codes[0], handler_codes[1], handler_bad ? ", INCONSISTENT" : "");
    return 0;
}
