// What the CUDA runtime's context costs (cudaFree(0), the usual way to create it), and a
// healthy runtime program (scripts/gpu/contexts.sh). Usage: contexts_runtime MODE
//   measure  NVML's used memory of device 0 and of this process before and after
//            cudaFree(0), and after a tiny kernel
//   healthy  allocate, fill with a kernel, copy back, check: prints "result ok"
// Built with: nvcc -O2 -arch=sm_90 contexts_runtime.cu -ldl
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct nvmlDevice_st *nvmlDevice_t;
struct nvml_memory_info {
    unsigned long long total, free, used;
};
struct nvml_process {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
};

static int (*nvml_memory)(nvmlDevice_t, nvml_memory_info *);
static int (*nvml_procs)(nvmlDevice_t, unsigned int *, nvml_process *);
static nvmlDevice_t nvml_dev;

static void nvml_open() {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    auto init = (int (*)())dlsym(h, "nvmlInit_v2");
    auto handle = (int (*)(unsigned, nvmlDevice_t *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nvml_memory = (int (*)(nvmlDevice_t, nvml_memory_info *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    nvml_procs = (int (*)(nvmlDevice_t, unsigned *, nvml_process *))dlsym(
        h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!init || !handle || !nvml_memory || init() != 0 || handle(0, &nvml_dev) != 0)
        nvml_dev = nullptr;
}

static void stage(const char *name) {
    long long used = -1, mine = -1;
    if (nvml_dev) {
        nvml_memory_info m;
        if (nvml_memory(nvml_dev, &m) == 0) used = (long long)m.used;
        nvml_process p[64];
        unsigned n = 64;
        if (nvml_procs && nvml_procs(nvml_dev, &n, p) == 0)
            for (unsigned i = 0; i < n; i++)
                if (p[i].pid == (unsigned)getpid()) mine = (long long)p[i].used;
    }
    printf("stage %s: device_used %lld this_process %lld\n", name, used, mine);
    fflush(stdout);
}

__global__ void fill(unsigned *p, unsigned v) { p[threadIdx.x] = v; }
__global__ void nothing() {}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "measure";
    bool measure = strcmp(mode, "measure") == 0;
    if (measure) {
        nvml_open();
        printf("pid %d nvml %s\n", (int)getpid(), nvml_dev ? "yes" : "no");
        stage("start");
    }
    if (cudaFree(0) != cudaSuccess) {
        printf("cudaFree(0) failed\n");
        return 1;
    }
    if (measure) stage("cudaFree0");
    nothing<<<1, 32>>>();
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    if (measure) {
        stage("tiny_launch");
        return 0;
    }
    unsigned *p, host[256];
    if (cudaMalloc(&p, 64u << 20) != cudaSuccess) return 1;
    fill<<<1, 256>>>(p, 42);
    if (cudaMemcpy(host, p, sizeof host, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
    bool ok = true;
    for (int i = 0; i < 256; i++) ok &= host[i] == 42;
    printf("result %s\n", ok ? "ok" : "wrong");
    cudaFree(p);
    return 0;
}
