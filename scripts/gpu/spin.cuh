// The spin kernel of the GPU lifetime and pinned-memory checks (lifetime.cu, pinned.cu):
// included inside their kernel half (-DLIFETIME_KERNELS, -DPINNED_KERNELS), compiled into
// the cubin they load with cuModuleLoad, which finds the kernel by its name "spin".
#ifndef SEEDANCE_GPU_SPIN_CUH
#define SEEDANCE_GPU_SPIN_CUH

// The GPU's global nanosecond timer (PTX %globaltimer, every architecture since sm_30).
static __device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Spins one thread for `ns` nanoseconds of wall time (independent of the SM clock).
extern "C" __global__ void spin(unsigned long long ns) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long start = globaltimer();
    while (globaltimer() - start < ns) {
    }
}

#endif
