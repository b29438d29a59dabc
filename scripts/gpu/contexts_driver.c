/* What a primary context costs in device memory, and a healthy single-GPU driver-API
 * program (scripts/gpu/contexts.sh). Usage: contexts_driver MODE
 *   measure  NVML's used memory of device 0 and of this process (and the driver's free
 *            memory) at each stage: before cuInit, after cuInit, after
 *            cuDevicePrimaryCtxRetain + cuCtxSetCurrent, after one tiny kernel launch (PTX
 *            loaded with cuModuleLoadData), after a 64 MiB allocation; then nvidia-smi's
 *            process list as seen from here, and this process's pid
 *   healthy  retain, allocate, launch, copy back, check, free, release: prints "result ok"
 *   oom      after the context, ask for more than the device's free memory: prints the code
 * Built with: gcc -O2 contexts_driver.c -I$CUDA_HOME/include -L$CUDA_HOME/lib64/stubs -lcuda
 * -ldl (NVML is opened with dlopen, so no NVML headers or library are needed to build). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* nvml.h (NVML 12): the few types used here, by their documented layout. */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

static int (*nvml_init)(void);
static int (*nvml_handle)(unsigned int, nvmlDevice_t *);
static int (*nvml_memory)(nvmlDevice_t, nvmlMemory_t *);
static int (*nvml_procs)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
static nvmlDevice_t nvml_dev;

static void nvml_open(void) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    nvml_init = (int (*)(void))dlsym(h, "nvmlInit_v2");
    nvml_handle = (int (*)(unsigned int, nvmlDevice_t *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nvml_memory = (int (*)(nvmlDevice_t, nvmlMemory_t *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    nvml_procs = (int (*)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *))dlsym(
        h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!nvml_init || !nvml_handle || !nvml_memory || nvml_init() != 0 ||
        nvml_handle(0, &nvml_dev) != 0)
        nvml_dev = NULL;
}

/* One line: device used memory, this process's used memory (NVML), driver free memory. */
static void stage(const char *name, int have_ctx) {
    long long used = -1, mine = -1;
    if (nvml_dev) {
        nvmlMemory_t m;
        if (nvml_memory(nvml_dev, &m) == 0) used = (long long)m.used;
        if (nvml_procs) {
            nvmlProcessInfo_t p[64];
            unsigned int n = 64;
            if (nvml_procs(nvml_dev, &n, p) == 0)
                for (unsigned int i = 0; i < n; i++)
                    if (p[i].pid == (unsigned int)getpid()) mine = (long long)p[i].usedGpuMemory;
        }
    }
    size_t free_b = 0, total_b = 0;
    if (have_ctx) cuMemGetInfo(&free_b, &total_b);
    printf("stage %s: device_used %lld this_process %lld driver_free %lld\n", name, used, mine,
           have_ctx ? (long long)free_b : -1LL);
    fflush(stdout);
}

/* An empty kernel and one that writes its argument, as PTX (no nvcc needed at run time). */
static const char *ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry nothing() { ret; }\n"
    ".visible .entry fill(.param .u64 p, .param .u32 v) {\n"
    "  .reg .u64 %a; .reg .u32 %x; .reg .u32 %t; .reg .u64 %o;\n"
    "  ld.param.u64 %a, [p]; ld.param.u32 %x, [v]; mov.u32 %t, %tid.x;\n"
    "  mul.wide.u32 %o, %t, 4; add.u64 %a, %a, %o; cvta.to.global.u64 %a, %a;\n"
    "  st.global.u32 [%a], %x; ret; }\n";

#define CHECK(call)                                                              \
    do {                                                                         \
        CUresult r_ = (call);                                                    \
        if (r_ != CUDA_SUCCESS) {                                                \
            printf("%s -> %d\n", #call, (int)r_);                                \
            return 1;                                                            \
        }                                                                        \
    } while (0)

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "measure";
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction nothing, fill;
    int measure = strcmp(mode, "measure") == 0;
    if (measure) {
        nvml_open();
        printf("pid %d nvml %s\n", (int)getpid(), nvml_dev ? "yes" : "no");
        stage("start", 0);
    }
    CHECK(cuInit(0));
    if (measure) stage("cuInit", 0);
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    if (measure) stage("primary_retain", 1);
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&nothing, mod, "nothing"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill"));
    CHECK(cuLaunchKernel(nothing, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxSynchronize());
    if (measure) stage("tiny_launch", 1);
    if (strcmp(mode, "oom") == 0) {
        /* Half the free memory first, so that free + 1 GiB is still less than the total:
         * an out-of-memory failure, not a request larger than the device. */
        size_t free_b, total_b;
        CUdeviceptr half, big;
        CHECK(cuMemGetInfo(&free_b, &total_b));
        CHECK(cuMemAlloc(&half, free_b / 2));
        CHECK(cuMemGetInfo(&free_b, &total_b));
        printf("cuMemAlloc(free + 1 GiB) -> %d\n",
               (int)cuMemAlloc(&big, free_b + ((size_t)1 << 30)));
        CHECK(cuMemFree(half));
    } else {
        CUdeviceptr p;
        unsigned int host[256], v = 42;
        CHECK(cuMemAlloc(&p, 64u << 20));
        if (measure) stage("alloc_64MiB", 1);
        void *args[] = {&p, &v};
        CHECK(cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
        CHECK(cuMemcpyDtoH(host, p, sizeof host));
        int ok = 1;
        for (int i = 0; i < 256; i++) ok &= host[i] == 42;
        printf("result %s\n", ok ? "ok" : "wrong");
        CHECK(cuMemFree(p));
    }
    if (measure) {
        fflush(stdout);
        printf("nvidia-smi compute apps (pid, used MiB) while this process (pid %d) holds its "
               "context:\n", (int)getpid());
        fflush(stdout);
        if (system("nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits"))
            printf("nvidia-smi failed\n");
    }
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
