"""20 SGD steps of a small MLP on the device named on the command line (e.g. cuda:1);
prints the loss (compare with the same run on a valid device) and the current device."""
import sys

import torch

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda:0"
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(64, 256, device=dev)
y = torch.randint(0, 10, (64,), device=dev)
for _ in range(20):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"loss={loss.item():.4f} current_device={torch.cuda.current_device()}")
