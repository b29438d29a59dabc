"""Shared by the multi-process PyTorch programs of scripts/gpu/multi.sh (torch_pair.py,
torch_nccl.py): a launcher that runs one process per rank, and two probes of what a process
holds that do not depend on the shim.

launch(script, variant): runs `python SCRIPT rank VARIANT` once per rank (WORLD_SIZE 2,
RANK, LOCAL_RANK, MASTER_ADDR 127.0.0.1 and a free MASTER_PORT, for env:// initialisation),
concurrently, each inheriting this environment (LD_PRELOAD, SEEDANCE_*: each rank writes its
own trace). The launcher itself never imports torch or touches CUDA, so it writes no trace.
Each rank's stdout is printed after all ranks ended, rank by rank (deterministic order); its
stderr goes straight through. Then "result: ranks exit = C0,C1"; the launcher exits with the
first non-zero code (0 when both were 0).

ctx0_active(): whether device 0's primary context is active in this process
(cuDevicePrimaryCtxGetState through ctypes; "yes", "no", or "error N").

held_gpus(): the CUDA ordinals this process holds memory on, as NVML reports it (nvidia-smi
--query-compute-apps, run without LD_PRELOAD; ordinals mapped by PCI bus id through
cuDeviceGetPCIBusId): ("0,1", "0=612 1=1500" MiB), or ("unknown", why) where nvidia-smi is
missing or does not list this pid (a container with its own PID namespace).
"""
import ctypes
import os
import socket
import subprocess
import sys

WORLD = 2
RANK_TIMEOUT_S = 240


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script, variant):
    port = free_port()
    procs = []
    for r in range(WORLD):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(WORLD),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, script, "rank", variant], env=env,
                                      stdout=subprocess.PIPE, text=True))
    outs, codes = [], []
    for p in procs:
        try:
            o, _ = p.communicate(timeout=RANK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            o, _ = p.communicate()
            o += "rank timed out\n"
        outs.append(o)
        codes.append(p.returncode)
    for o in outs:
        sys.stdout.write(o)
    print(f"result: ranks exit = {','.join(str(c) for c in codes)}")
    sys.stdout.flush()
    return next((c for c in codes if c != 0), 0)


_cuda = None


def _driver():
    global _cuda
    if _cuda is None:
        _cuda = ctypes.CDLL("libcuda.so.1")
        _cuda.cuInit(0)
    return _cuda


def _device(ordinal):
    d = ctypes.c_int(-1)
    r = _driver().cuDeviceGet(ctypes.byref(d), ordinal)
    return d if r == 0 else None


def ctx0_active():
    try:
        d = _device(0)
        if d is None:
            return "error (cuDeviceGet)"
        flags, active = ctypes.c_uint(0), ctypes.c_int(0)
        r = _driver().cuDevicePrimaryCtxGetState(d, ctypes.byref(flags), ctypes.byref(active))
        if r != 0:
            return f"error {r}"
        return "yes" if active.value else "no"
    except OSError as e:
        return f"error ({e})"


def _norm_bus(bus):
    # nvidia-smi: 00000000:07:00.0; the driver: 0000:07:00.0. Compare bus:device.function.
    return bus.strip().lower().split(":", 1)[-1] if bus.count(":") == 2 else bus.strip().lower()


def held_gpus():
    try:
        n = ctypes.c_int(0)
        _driver().cuDeviceGetCount(ctypes.byref(n))
        by_bus = {}
        for i in range(n.value):
            d = _device(i)
            buf = ctypes.create_string_buffer(64)
            if d is not None and _driver().cuDeviceGetPCIBusId(buf, 64, d) == 0:
                by_bus[_norm_bus(buf.value.decode())] = i
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_bus_id,used_memory",
                            "--format=csv,noheader,nounits"], env=env, capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return "unknown", f"no nvidia-smi ({type(e).__name__})"
    mine = {}
    for line in q.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or parts[0] != str(os.getpid()):
            continue
        ordinal = by_bus.get(_norm_bus(parts[1]))
        if ordinal is not None:
            mine[ordinal] = mine.get(ordinal, 0) + (int(parts[2]) if parts[2].isdigit() else 0)
    if not mine:
        return "unknown", "nvidia-smi does not list this pid"
    keys = sorted(mine)
    return ",".join(map(str, keys)), " ".join(f"{k}={mine[k]}" for k in keys)


def report_held(rank):
    gpus, mib = held_gpus()
    print(f"held: rank {rank} gpus={gpus}")
    print(f"heldmib: rank {rank} {mib}")
