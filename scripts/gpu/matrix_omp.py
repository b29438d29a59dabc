"""Compatibility matrix, RTLD_NEXT: `import torch` brings an OpenMP runtime;
a probe library preloaded next to the shim (rtld_next_probe.c) resolves symbols with
dlsym(RTLD_NEXT, ...) after the import. It must get the same answers with and without the
shim. A CPU matmul runs on OpenMP threads and a small GPU step gives the trace counts."""
import ctypes
import os

import torch

torch.set_num_threads(8)
a = torch.randn(2048, 2048, generator=torch.Generator().manual_seed(0))
print(f"cpu_matmul={(a @ a).double().abs().sum().item():.0f} threads={torch.get_num_threads()}")
omp = [line.split()[-1] for line in open("/proc/self/maps") if "omp" in os.path.basename(line.split()[-1])]
print(f"openmp_runtimes={sorted(set(os.path.basename(p) for p in omp))}")
probe = ctypes.CDLL(os.environ["RTLD_NEXT_PROBE"])
probe.probe_report.restype = ctypes.c_char_p
print(probe.probe_report().decode())
g = torch.ones(1 << 20, device="cuda") * 3
print(f"gpu_sum={g.sum().item():.0f}")
