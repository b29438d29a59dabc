/* Driver calls before the C runtime finished initialising. Usage: early_main STAGE, where
 * STAGE is where early_calls() (libearly_ctor.so) runs: "preinit" (this program's
 * .preinit_array, before any shared library's constructor), "ctor101" or "ctor" (the
 * library's constructors), "exe_ctor" (this program's constructor) or "main". main prints
 * what the calls returned and which device the context is on, then destroys the context. */
#include "cuda_min.h"
#include <stdio.h>
#include <string.h>

struct early_record {
    const char *stage;
    int init, get, dev, create;
    CUcontext ctx;
};
extern struct early_record early_record;
void early_calls(const char *stage);

CUresult cuCtxGetDevice(CUdevice *);
CUresult cuDeviceGetPCIBusId(char *, int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);

static void maybe(const char *stage, int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], stage) == 0) early_calls(stage);
}

static void preinit(int argc, char **argv, char **envp) {
    (void)envp;
    maybe("preinit", argc, argv);
}
__attribute__((section(".preinit_array"), used)) static void (*preinit_entry)(int, char **,
                                                                            char **) = preinit;

__attribute__((constructor)) static void exe_ctor(int argc, char **argv, char **envp) {
    (void)envp;
    maybe("exe_ctor", argc, argv);
}

int main(int argc, char **argv) {
    maybe("main", argc, argv);
    struct early_record *r = &early_record;
    if (!r->stage) { printf("no stage ran\n"); return 2; }
    CUdevice used = -1;
    char bus[32] = "?";
    int cur = r->create ? r->create : cuCtxGetDevice(&used);
    if (!cur) cur = cuDeviceGetPCIBusId(bus, sizeof bus, used);
    printf("%s: cuInit -> %d, cuDeviceGet(5) -> %d (device %d), cuCtxCreate -> %d, "
           "context on %s\n",
           r->stage, r->init, r->get, r->dev, r->create, bus);
    if (!r->create && cuCtxDestroy_v2(r->ctx)) return 1;
    return r->get || r->create || cur;
}
