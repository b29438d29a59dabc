"""CUDA graphs in PyTorch: a small step captured with torch.cuda.graph and replayed."""
import torch

dev = torch.device("cuda:0")
static_in = torch.zeros(1 << 16, device=dev)
w = torch.arange(1 << 16, device=dev, dtype=torch.float32).remainder_(5)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):  # warm-up on a side stream, as the documentation asks
    for _ in range(3):
        static_out = (static_in * w + 1).sum()
torch.cuda.current_stream().wait_stream(side)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out = (static_in * w + 1).sum()
results = []
for k in range(5):
    static_in.fill_(k)
    g.replay()
    results.append(int(static_out.item()))
print("replays=" + ",".join(map(str, results)))
