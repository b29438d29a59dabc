// Launch and allocation faults against the real driver, for scripts/gpu/launch.sh.
//
// Built twice from this one file:
//   nvcc -cubin -arch=sm_90 -maxrregcount=255 -DLAUNCH_FAULTS_KERNELS -o faults.cubin launch_faults.cu
//   nvcc -O2 -arch=sm_90 -o launch_faults launch_faults.cu -lcuda
// and run as `launch_faults faults.cubin`. Driver API only (cuModuleLoad), so every launch
// and allocation goes through the driver entry points the shim hooks.
//
// For each case it makes the call that breaks a limit, prints what the driver returned, then
// makes the same call at the legal limit (read from the device and the kernel, not assumed)
// and prints that result, which must be CUDA_SUCCESS. stdout is unbuffered so that the
// shim's stderr line for a case lands right after the case's own line when both go to one
// file. Exit status: the number of legal calls that failed.

#ifdef LAUNCH_FAULTS_KERNELS

// An ordinary kernel: few registers, no shared memory of its own.
// Reads no dynamic shared memory: it is launched with and without any, and a read of dyn[0]
// with 0 bytes is out of bounds (CUDA_ERROR_ILLEGAL_ADDRESS, sticky; seen on an H200).
extern "C" __global__ void plain(float *out) {
    if (out && threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) out[0] = 0.0f;
}

// A register-heavy kernel: 160 live accumulators per thread; with -maxrregcount=255 the
// compiler keeps them in registers, so the kernel cannot run 1024 threads per block
// (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK drops to 256 or 384). The program reads the
// real limit and reports it either way.
#define ACC 160
extern "C" __global__ void heavy(float *out, int n) {
    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; i++) acc[i] = (float)(threadIdx.x * (i + 1)) / (float)(n + i + 1);
#pragma unroll
    for (int k = 0; k < 4; k++) {
#pragma unroll
        for (int i = 0; i < ACC; i++) acc[i] = acc[i] * acc[(i + 7) % ACC] + (float)k;
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < ACC; i++) s += acc[i];
    if (out) out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// A kernel bounded at compile time: __launch_bounds__(256) caps its threads per block.
extern "C" __global__ void __launch_bounds__(256) bounded(float *out) {
    if (out) out[threadIdx.x] = 1.0f;
}

#else

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int failures;

static const char *name(CUresult r) {
    const char *s = nullptr;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "?";
}

static void show(const char *what, CUresult r) { printf("  %-58s -> %d %s\n", what, (int)r, name(r)); }

static void legal(const char *what, CUresult r) {
    printf("  legal: %-51s -> %d %s\n", what, (int)r, name(r));
    if (r != CUDA_SUCCESS) failures++;
}

static int attr(CUdevice d, CUdevice_attribute a) {
    int v = -1;
    cuDeviceGetAttribute(&v, a, d);
    return v;
}

static int fattr(CUfunction f, CUfunction_attribute a) {
    int v = -1;
    cuFuncGetAttribute(&v, a, f);
    return v;
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shmem, CUstream s, CUdeviceptr *buf) {
    void *args[] = {buf, nullptr};
    int n = 1;
    args[1] = &n;
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, args, nullptr);
}

static CUresult cluster_launch(CUfunction f, unsigned gx, unsigned cx, CUdeviceptr *buf) {
    CUlaunchAttribute a;
    memset(&a, 0, sizeof a);
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = cx;
    a.value.clusterDim.y = 1;
    a.value.clusterDim.z = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = gx;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 128;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.attrs = &a;
    cfg.numAttrs = 1;
    void *args[] = {buf};
    return cuLaunchKernelEx(&cfg, f, args, nullptr);
}

// cuCtxCreate is the 4-argument _v4 in CUDA 13 headers, the 3-argument _v2 before.
static CUresult ctx_create(CUcontext *c, CUdevice d) {
#if CUDA_VERSION >= 13000
    return cuCtxCreate(c, nullptr, 0, d);
#else
    return cuCtxCreate(c, 0, d);
#endif
}

struct ThreadCase {
    CUfunction f;
    CUdeviceptr *buf;
    CUresult r;
};

static void *no_context_thread(void *p) {
    ThreadCase *t = (ThreadCase *)p;
    t->r = launch(t->f, 1, 1, 1, 32, 1, 1, 0, nullptr, t->buf);
    return nullptr;
}

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IONBF, 0);
    if (argc < 2) { fprintf(stderr, "usage: launch_faults faults.cubin\n"); return 2; }
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction plain_f, heavy_f, bounded_f;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuModuleLoad(&mod, argv[1]) || cuModuleGetFunction(&plain_f, mod, "plain") ||
        cuModuleGetFunction(&heavy_f, mod, "heavy") || cuModuleGetFunction(&bounded_f, mod, "bounded")) {
        printf("setup failed\n");
        return 100;
    }
    CUdeviceptr buf;
    if (cuMemAlloc(&buf, 1 << 20)) { printf("setup alloc failed\n"); return 100; }
    int max_threads = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    int max_grid_y = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    int optin = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    int sms = attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    printf("device 0: max threads/block %d, max grid y %d, opt-in shared %d B, %d SMs\n", max_threads,
           max_grid_y, optin, sms);
    char what[128];

    printf("case block_33: block (32,33,1)\n");
    show("cuLaunchKernel block (32,33,1)", launch(plain_f, 1, 1, 1, 32, 33, 1, 0, nullptr, &buf));
    legal("cuLaunchKernel block (32,32,1)", launch(plain_f, 1, 1, 1, 32, 32, 1, 0, nullptr, &buf));

    printf("case grid_y: grid (1,%d,1)\n", max_grid_y + 1);
    snprintf(what, sizeof what, "cuLaunchKernel grid (1,%d,1)", max_grid_y + 1);
    show(what, launch(plain_f, 1, (unsigned)max_grid_y + 1, 1, 32, 1, 1, 0, nullptr, &buf));
    snprintf(what, sizeof what, "cuLaunchKernel grid (1,%d,1)", max_grid_y);
    legal(what, launch(plain_f, 1, (unsigned)max_grid_y, 1, 32, 1, 1, 0, nullptr, &buf));

    printf("case shared_64k: 65536 B dynamic shared memory\n");
    show("cuLaunchKernel shmem 65536 (no opt-in)", launch(plain_f, 1, 1, 1, 32, 1, 1, 65536, nullptr, &buf));
    show("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536)",
         cuFuncSetAttribute(plain_f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    legal("cuLaunchKernel shmem 65536 (after opt-in)", launch(plain_f, 1, 1, 1, 32, 1, 1, 65536, nullptr, &buf));
    int static_shared = fattr(plain_f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    snprintf(what, sizeof what, "cuLaunchKernel shmem %d (over opt-in max)", optin - static_shared + 1024);
    show(what, launch(plain_f, 1, 1, 1, 32, 1, 1, (unsigned)(optin - static_shared + 1024), nullptr, &buf));

    int heavy_max = fattr(heavy_f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    printf("case regs: heavy kernel, %d registers, max %d threads/block\n",
           fattr(heavy_f, CU_FUNC_ATTRIBUTE_NUM_REGS), heavy_max);
    if (heavy_max < max_threads) {
        snprintf(what, sizeof what, "cuLaunchKernel heavy block (%d,1,1)", heavy_max + 32);
        show(what, launch(heavy_f, 1, 1, 1, (unsigned)heavy_max + 32, 1, 1, 0, nullptr, &buf));
        snprintf(what, sizeof what, "cuLaunchKernel heavy block (%d,1,1)", heavy_max);
        legal(what, launch(heavy_f, 1, 1, 1, (unsigned)heavy_max, 1, 1, 0, nullptr, &buf));
    } else {
        printf("  (not register-limited in this build; the bounded kernel covers the case)\n");
    }
    int bounded_max = fattr(bounded_f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    printf("case launch_bounds: __launch_bounds__(256) kernel, max %d threads/block\n", bounded_max);
    show("cuLaunchKernel bounded block (512,1,1)", launch(bounded_f, 1, 1, 1, 512, 1, 1, 0, nullptr, &buf));
    snprintf(what, sizeof what, "cuLaunchKernel bounded block (%d,1,1)", bounded_max);
    legal(what, launch(bounded_f, 1, 1, 1, (unsigned)bounded_max, 1, 1, 0, nullptr, &buf));

    printf("case zero_grid: grid (0,1,1)\n");
    show("cuLaunchKernel grid (0,1,1)", launch(plain_f, 0, 1, 1, 32, 1, 1, 0, nullptr, &buf));
    legal("cuLaunchKernel grid (1,1,1)", launch(plain_f, 1, 1, 1, 32, 1, 1, 0, nullptr, &buf));

    int per_sm = 0;
    cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, plain_f, 1024, 0);
    unsigned coop = (unsigned)(per_sm * sms);
    printf("case cooperative: %d blocks/SM x %d SMs = %u co-resident blocks of 1024 threads\n", per_sm, sms, coop);
    void *cargs[] = {&buf};
    snprintf(what, sizeof what, "cuLaunchCooperativeKernel grid (%u,1,1)", coop + 1);
    show(what, cuLaunchCooperativeKernel(plain_f, coop + 1, 1, 1, 1024, 1, 1, 0, nullptr, cargs));
    snprintf(what, sizeof what, "cuLaunchCooperativeKernel grid (%u,1,1)", coop);
    legal(what, cuLaunchCooperativeKernel(plain_f, coop, 1, 1, 1024, 1, 1, 0, nullptr, cargs));

    printf("case cluster: grid 8 in clusters of 3, then of 16 (non-portable), then of 2\n");
    show("cuLaunchKernelEx grid (8,1,1) cluster (3,1,1)", cluster_launch(plain_f, 8, 3, &buf));
    show("cuLaunchKernelEx grid (16,1,1) cluster (16,1,1)", cluster_launch(plain_f, 16, 16, &buf));
    legal("cuLaunchKernelEx grid (8,1,1) cluster (2,1,1)", cluster_launch(plain_f, 8, 2, &buf));

    printf("case stream_context: a stream of context A launched from context B (same device)\n");
    CUcontext a, b;
    CUstream sa;
    if (ctx_create(&a, dev) || cuStreamCreate(&sa, 0) || ctx_create(&b, dev)) {
        printf("  setup failed\n");
        failures++;
    } else {
        CUmodule mb;
        CUfunction fb;
        CUdeviceptr bb;
        cuModuleLoad(&mb, argv[1]);
        cuModuleGetFunction(&fb, mb, "plain");
        cuMemAlloc(&bb, 4096);
        show("cuLaunchKernel in B on A's stream", launch(fb, 1, 1, 1, 32, 1, 1, 0, sa, &bb));
        cuCtxSetCurrent(a);
        CUmodule ma;
        CUfunction fa;
        CUdeviceptr ba;
        cuModuleLoad(&ma, argv[1]);
        cuModuleGetFunction(&fa, ma, "plain");
        cuMemAlloc(&ba, 4096);
        legal("cuLaunchKernel in A on A's stream", launch(fa, 1, 1, 1, 32, 1, 1, 0, sa, &ba));
        cuStreamSynchronize(sa);
        cuStreamDestroy(sa);
        cuCtxDestroy(b);
        cuCtxDestroy(a);
        cuCtxSetCurrent(ctx);
    }

    printf("case no_context: a thread with no current context\n");
    ThreadCase t = {plain_f, &buf, CUDA_SUCCESS};
    pthread_t th;
    pthread_create(&th, nullptr, no_context_thread, &t);
    pthread_join(th, nullptr);
    show("cuLaunchKernel on a thread without a context", t.r);
    legal("cuLaunchKernel on the main thread", launch(plain_f, 1, 1, 1, 32, 1, 1, 0, nullptr, &buf));

    printf("case alloc_zero\n");
    CUdeviceptr p = 0;
    show("cuMemAlloc 0 bytes", cuMemAlloc(&p, 0));
    legal("cuMemAlloc 4096 bytes", cuMemAlloc(&p, 4096));
    cuMemFree(p);

    printf("case alloc_negative: (size_t)-4096\n");
    long long neg = -4096;
    show("cuMemAlloc (size_t)-4096", cuMemAlloc(&p, (size_t)neg));
    legal("cuMemAlloc 4096 bytes", cuMemAlloc(&p, 4096));
    cuMemFree(p);

    size_t free_b = 0, total_b = 0;
    cuMemGetInfo(&free_b, &total_b);
    printf("case alloc_oom: %zu bytes free of %zu\n", free_b, total_b);
    CUdeviceptr held = 0;
    size_t hold = free_b / 2;
    cuMemAlloc(&held, hold);
    snprintf(what, sizeof what, "cuMemAlloc %zu bytes (more than free)", free_b - hold / 2);
    show(what, cuMemAlloc(&p, free_b - hold / 2));
    snprintf(what, sizeof what, "cuMemAlloc %zu bytes (a quarter of the rest)", hold / 4);
    legal(what, cuMemAlloc(&p, hold / 4));
    cuMemFree(p);
    cuMemFree(held);

    printf("case mem_create_granularity: 3 MiB\n");
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    CUmemGenericAllocationHandle h = 0;
    show("cuMemCreate 3 MiB", cuMemCreate(&h, 3u << 20, &prop, 0));
    size_t up = ((3u << 20) + gran - 1) / gran * gran;
    snprintf(what, sizeof what, "cuMemCreate %zu bytes (granularity %zu)", up, gran);
    legal(what, cuMemCreate(&h, up, &prop, 0));
    cuMemRelease(h);

    printf("case destroyed_context: primary context reset while current\n");
    CUcontext pc;
    cuDevicePrimaryCtxRetain(&pc, dev);
    cuCtxSetCurrent(pc);
    cuDevicePrimaryCtxReset(dev);
    show("cuLaunchKernel in the reset primary context", launch(plain_f, 1, 1, 1, 32, 1, 1, 0, nullptr, &buf));

    printf("legal calls failed: %d\n", failures);
    return failures;
}

#endif
