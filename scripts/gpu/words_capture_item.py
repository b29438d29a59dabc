# .item() inside torch.cuda.graph: the synchronisation is not allowed while the stream is
# captured (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); exits 1 with PyTorch's error.
import torch

x = torch.ones(4, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = x * 2
    y.sum().item()
