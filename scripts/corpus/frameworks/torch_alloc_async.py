"""PyTorch with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (the driver's stream-ordered pool)."""
import os

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
import _train  # noqa: E402
import torch  # noqa: E402

loss, checksum = _train.train(torch)
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    a = torch.ones(1 << 20, device="cuda") * 3
    b = a.sum()
side.synchronize()
print(f"backend={torch.cuda.get_allocator_backend()} loss={loss} params={checksum} side_sum={int(b)}")
