"""PyTorch with its caching allocator's defaults: a short training loop, then the cache emptied."""
import _train  # noqa: F401  (sets CUBLAS_WORKSPACE_CONFIG before torch loads)
import torch

loss, checksum = _train.train(torch)
reserved = torch.cuda.memory_reserved() > 0
torch.cuda.empty_cache()
print(f"loss={loss} params={checksum} reserved_before_empty={reserved}")
