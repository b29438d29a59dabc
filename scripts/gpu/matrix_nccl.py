"""Compatibility matrix: an NCCL all-reduce through torch.distributed, one process per GPU
(spawned, so each rank is a fresh process that inherits LD_PRELOAD and writes its own trace).
NCCL_NVLS_ENABLE=0 comes from the caller's environment (device README)."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world):
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29533", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    t = torch.full((1 << 20,), float(rank + 1), device="cuda")
    for _ in range(5):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    if rank == 0:
        print(f"allreduce_first={t[0].item():.0f} allreduce_sum={t.double().sum().item():.0f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    assert os.environ.get("NCCL_NVLS_ENABLE") == "0", "keep NVLink multicast off"
    world = torch.cuda.device_count()
    print(f"world={world}")
    mp.spawn(rank_main, args=(world,), nprocs=world, join=True)
