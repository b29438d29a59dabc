"""What PyTorch's CUDA initialisation costs on device 0, and a healthy single-GPU PyTorch
program (scripts/gpu/contexts.sh). Usage: contexts_torch.py MODE
  measure  NVML's used memory of device 0 and of this process before and after
           torch.cuda.init(), and after a one-element tensor and a kernel on it
  healthy  a small matmul on cuda:0 checked against the CPU: prints "result ok"
NVML is read with ctypes (no pynvml needed)."""
import ctypes
import os
import sys

import torch


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class Process(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]


def nvml():
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        dev = ctypes.c_void_p()
        if lib.nvmlInit_v2() != 0 or lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)):
            return None
        return lib, dev
    except OSError:
        return None


def stage(n, name):
    used = mine = -1
    if n:
        lib, dev = n
        m = Memory()
        if lib.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(m)) == 0:
            used = m.used
        procs = (Process * 64)()
        count = ctypes.c_uint(64)
        if lib.nvmlDeviceGetComputeRunningProcesses_v3(dev, ctypes.byref(count), procs) == 0:
            for p in procs[: count.value]:
                if p.pid == os.getpid():
                    mine = p.used
    print(f"stage {name}: device_used {used} this_process {mine}", flush=True)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "measure"
    if mode == "measure":
        n = nvml()
        print(f"pid {os.getpid()} nvml {'yes' if n else 'no'}", flush=True)
        stage(n, "start")
        torch.cuda.init()
        stage(n, "torch_cuda_init")
        x = torch.zeros(1, device="cuda:0")
        x += 1
        torch.cuda.synchronize()
        stage(n, "one_element_tensor")
        return
    a = torch.randn(256, 256)
    b = torch.randn(256, 256)
    c = (a.cuda() @ b.cuda()).cpu()
    print("result", "ok" if torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3) else "wrong")


if __name__ == "__main__":
    main()
