/* Driver calls before main: a shared library whose constructors (one of high priority,
 * 101, one of default priority) make the calls of early_calls() when the program's first
 * argument names them; the program's own .preinit_array entry, its constructor and main
 * call the same function (tests/programs/early_main.c). The calls: cuInit, cuDeviceGet of
 * ordinal 5 (on a 2-device host), a context on the device returned, which is kept current. */
#include "cuda_min.h"
#include <string.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);

/* What early_calls() did: the stage that called it and each result. */
struct early_record {
    const char *stage;
    int init, get, dev, create;
    CUcontext ctx;
};
struct early_record early_record;

/* Defined (and exported) by a program that wants to act just before the calls:
 * early_dlopen.c starts another thread's driver calls there. */
void early_before_calls(void) __attribute__((weak));

void early_calls(const char *stage) {
    if (early_before_calls) early_before_calls();
    early_record.stage = stage;
    early_record.dev = -1;
    early_record.init = cuInit(0);
    early_record.get = cuDeviceGet(&early_record.dev, 5);
    early_record.create = cuCtxCreate_v2(&early_record.ctx, 0, early_record.dev);
}

static void maybe(const char *stage, int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], stage) == 0) early_calls(stage);
}

/* glibc passes (argc, argv, envp) to constructors, in shared libraries too. */
__attribute__((constructor(101))) static void ctor_high(int argc, char **argv, char **envp) {
    (void)envp;
    maybe("ctor101", argc, argv);
}

__attribute__((constructor)) static void ctor(int argc, char **argv, char **envp) {
    (void)envp;
    maybe("ctor", argc, argv);
}
