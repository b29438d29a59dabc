"""Pinned host memory in PyTorch: pin_memory() tensors with non_blocking copies both ways, and a
pageable tensor registered with cudaHostRegister (torch.cuda.cudart()) then unregistered."""
import torch

dev = torch.device("cuda:0")
n = 4 << 20
host = torch.arange(n, dtype=torch.int32).remainder_(1000).pin_memory()
d = host.to(dev, non_blocking=True)
d.mul_(2)
back = torch.empty(n, dtype=torch.int32).pin_memory()
back.copy_(d, non_blocking=True)
torch.cuda.synchronize()
pinned_sum = int(back.long().sum())

pageable = torch.arange(n, dtype=torch.int32).remainder_(7)
cudart = torch.cuda.cudart()
err = cudart.cudaHostRegister(pageable.data_ptr(), pageable.numel() * pageable.element_size(), 0)
registered = int(err) == 0
d2 = pageable.to(dev, non_blocking=True)
s = int(d2.long().sum())
torch.cuda.synchronize()
err2 = cudart.cudaHostUnregister(pageable.data_ptr())
print(f"pinned_sum={pinned_sum} registered={registered} registered_sum={s} unregister={int(err2)}")
