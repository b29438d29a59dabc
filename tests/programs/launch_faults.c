/* Launch faults: each scenario named on the command line makes one or more
 * launches that break a device or kernel limit, then the legal launch, and prints what the
 * driver returned for each. Kernels are fake function handles: 0x1000 is an ordinary kernel,
 * 0x2000 a register-limited one (FAKE_CUDA_FUNC_MAX_THREADS). Exits 0 unless a setup call
 * fails; cleans up first (synchronise, destroy what it made), as a tidy program does. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cuda_calls.h"

/* cuda.h (CUDA 13.0) layouts: the attribute value is a 64-byte union holding pointers. */
typedef struct {
    unsigned int id;
    char pad[4];
    union {
        char pad[64];
        void *align;
        int cooperative;
        struct { unsigned int x, y, z; } clusterDim;
    } value;
} CUlaunchAttribute;

typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void **);
CUresult cuFuncSetAttribute(CUfunction, int, int);

#define HEAVY ((CUfunction)0x2000)
#define SHOW(what, call) printf("%s -> %d\n", what, (int)(call))

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shmem, CUstream s) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, NULL, NULL);
}

static CUresult cluster_launch(unsigned gx, unsigned cx) {
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = 4; /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */
    attr.value.clusterDim.x = cx;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg = {gx, 1, 1, 128, 1, 1, 0, NULL, &attr, 1};
    return cuLaunchKernelEx(&cfg, KERNEL, NULL, NULL);
}

int main(int argc, char **argv) {
    CUcontext ctx, other;
    const char *s = argc > 1 ? argv[1] : "";
    if (cuInit(0)) { printf("cuInit failed\n"); return 1; }
    if (strcmp(s, "no_ctx") == 0) {
        SHOW("launch without a context", launch(KERNEL, 1, 1, 1, 32, 1, 1, 0, NULL));
        return 0;
    }
    if (strcmp(s, "destroyed") == 0) {
        if (cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
        SHOW("reset primary context", cuDevicePrimaryCtxReset_v2(0));
        SHOW("launch in the destroyed context", launch(KERNEL, 1, 1, 1, 32, 1, 1, 0, NULL));
        return 0;
    }
    if (cuCtxCreate_v2(&ctx, 0, 0)) { printf("cuCtxCreate failed\n"); return 1; }
    if (strcmp(s, "block") == 0) {
        for (int i = 0; i < 3; i++)
            SHOW("block 32x33x1", launch(KERNEL, 1, 1, 1, 32, 33, 1, 0, NULL));
        SHOW("block 32x32x1", launch(KERNEL, 1, 1, 1, 32, 32, 1, 0, NULL));
    } else if (strcmp(s, "grid_y") == 0) {
        SHOW("grid 1x65536x1", launch(KERNEL, 1, 65536, 1, 32, 1, 1, 0, NULL));
        SHOW("grid 1x65535x1", launch(KERNEL, 1, 65535, 1, 32, 1, 1, 0, NULL));
    } else if (strcmp(s, "smem") == 0) {
        SHOW("64 KiB dynamic shared memory", launch(KERNEL, 1, 1, 1, 32, 1, 1, 65536, NULL));
        SHOW("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536)",
             cuFuncSetAttribute(KERNEL, 8, 65536));
        SHOW("64 KiB dynamic shared memory", launch(KERNEL, 1, 1, 1, 32, 1, 1, 65536, NULL));
    } else if (strcmp(s, "regs") == 0) {
        SHOW("register-limited kernel, 512 threads", launch(HEAVY, 1, 1, 1, 512, 1, 1, 0, NULL));
        SHOW("register-limited kernel, 256 threads", launch(HEAVY, 1, 1, 1, 256, 1, 1, 0, NULL));
    } else if (strcmp(s, "params_and_extra") == 0) {
        void *params[1] = {NULL}, *extra[1] = {NULL};
        SHOW("kernelParams and extra",
             cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, NULL, params, extra));
        SHOW("kernelParams only", cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    } else if (strcmp(s, "zero") == 0) {
        SHOW("grid 0x1x1", launch(KERNEL, 0, 1, 1, 32, 1, 1, 0, NULL));
    } else if (strcmp(s, "coop") == 0) {
        SHOW("cooperative 300 blocks",
             cuLaunchCooperativeKernel(KERNEL, 300, 1, 1, 1024, 1, 1, 0, NULL, NULL));
        SHOW("cooperative 264 blocks",
             cuLaunchCooperativeKernel(KERNEL, 264, 1, 1, 1024, 1, 1, 0, NULL, NULL));
    } else if (strcmp(s, "cluster") == 0) {
        SHOW("grid 8 in clusters of 3", cluster_launch(8, 3));
        SHOW("grid 8 in clusters of 2", cluster_launch(8, 2));
    } else if (strcmp(s, "stream") == 0) {
        CUstream st;
        if (cuStreamCreate(&st, 0)) return 1;
        if (cuCtxCreate_v2(&other, 0, 1)) return 1;
        SHOW("launch on a stream of another context", launch(KERNEL, 1, 1, 1, 32, 1, 1, 0, st));
        if (cuCtxSetCurrent(ctx)) return 1;
        SHOW("launch on it in its own context", launch(KERNEL, 1, 1, 1, 32, 1, 1, 0, st));
        if (cuCtxSynchronize() || cuStreamDestroy_v2(st) || cuCtxDestroy_v2(other)) return 1;
    } else {
        printf("unknown scenario %s\n", s);
        return 2;
    }
    if (cuCtxSynchronize() || cuCtxDestroy_v2(ctx)) return 1;
    return 0;
}
