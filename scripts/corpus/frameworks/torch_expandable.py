"""PyTorch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grown with cuMemMap)."""
import os

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
import _train  # noqa: E402
import torch  # noqa: E402

loss, checksum = _train.train(torch)
# Grow one segment step by step, then free it all.
held = [torch.full((k * (1 << 20),), k, dtype=torch.uint8, device="cuda") for k in range(1, 9)]
total = sum(int(t.sum()) for t in held)
del held
torch.cuda.empty_cache()
print(f"loss={loss} params={checksum} grown_sum={total}")
