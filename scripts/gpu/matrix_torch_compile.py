"""Compatibility matrix: torch.compile (Inductor generates Triton kernels, compiled in this
run: the caller gives each run fresh TRITON_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR).
Prints values rounded so that runs with and without the shim compare exactly."""
import torch

torch.manual_seed(0)


def f(x, w):
    return torch.nn.functional.gelu(x @ w) * 2.0 + x.sum(dim=1, keepdim=True).sin()


x = torch.randn(1024, 512, device="cuda")
w = torch.randn(512, 512, device="cuda")
compiled = torch.compile(f)
out = compiled(x, w)
ref = f(x, w)
torch.cuda.synchronize()
print(f"compiled_close_to_eager={torch.allclose(out, ref, rtol=1e-3, atol=1e-3)}")
print(f"compiled_sum={out.double().sum().item():.0f}")
