"""torch.ones on the device named on the command line (e.g. cuda:1); prints the result and
which physical GPU (nvidia-smi index, via NVML) holds this process's memory."""
import os
import sys

import torch

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda:0"
x = torch.ones(1 << 20, device=dev)
s = (x * 2).sum().item()
torch.cuda.synchronize()
phys = "?"
try:
    import pynvml
    pynvml.nvmlInit()
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        if any(p.pid == os.getpid() for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)):
            phys = f"{i} ({pynvml.nvmlDeviceGetPciInfo(h).busId})"
except Exception as e:  # the check is informative only
    phys = f"unknown ({e})"
print(f"sum={s:.0f} torch_device={x.device} nvidia_smi_gpu={phys}")
