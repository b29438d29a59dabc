"""PyTorch pinned-memory patterns, for scripts/gpu/pinned.sh.

Usage:
  torch_pinned.py loop [copies]   copy-bound loop: `copies` non_blocking host-to-device
                                  copies of a 1 MiB pinned tensor (pin_memory()), each
                                  into a fresh device slot, synchronised every 64; prints
                                  "copies per second: X"
  torch_pinned.py dataloader      a DataLoader with pin_memory=True and 2 workers, batches
                                  moved with .cuda(non_blocking=True) and summed on the GPU;
                                  prints the checksum (must equal the one without the shim)
"""
import sys
import time

import torch


def loop(copies):
    src = torch.arange(256 * 1024, dtype=torch.float32).pin_memory()
    dst = torch.empty((64, src.numel()), device="cuda")
    for i in range(256):
        dst[i % 64].copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(copies):
        dst[i % 64].copy_(src, non_blocking=True)
        if i % 64 == 63:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"copies per second: {copies / (time.perf_counter() - t0):.1f}")


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((4096,), float(i))


def dataloader():
    dl = torch.utils.data.DataLoader(Data(), batch_size=8, num_workers=2, pin_memory=True)
    total = torch.zeros((), device="cuda", dtype=torch.float64)
    for _ in range(3):
        for batch in dl:
            total += batch.cuda(non_blocking=True).double().sum()
    torch.cuda.synchronize()
    print(f"checksum: {total.item():.1f}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "loop"
    if what == "loop":
        loop(int(sys.argv[2]) if len(sys.argv) > 2 else 10000)
    else:
        dataloader()
