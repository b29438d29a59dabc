"""torch.compile (default mode) of a small function and a small module, run a few times."""
import torch


@torch.compile
def f(x, y):
    return (torch.sin(x) * y + x.square()).sum(dim=-1)


mod = torch.compile(torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU()).cuda())
torch.manual_seed(0)
x = torch.arange(4096, device="cuda", dtype=torch.float32).remainder_(11).reshape(128, 32)
y = torch.ones_like(x)
total = 0.0
for _ in range(3):
    total += float(f(x, y).sum())
out = mod(x)
print(f"compiled_sum={round(total, 1)} module_shape={tuple(out.shape)} finite={bool(torch.isfinite(out).all())}")
