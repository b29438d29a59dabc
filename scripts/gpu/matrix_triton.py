"""Compatibility matrix: a Triton kernel written and launched directly (Triton's own launcher
resolves the driver's entry points itself)."""
import torch
import triton
import triton.language as tl


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


n = 1 << 20
x = torch.arange(n, device="cuda", dtype=torch.float32)
y = torch.ones(n, device="cuda", dtype=torch.float32)
out = torch.empty_like(x)
for _ in range(10):
    axpy[(triton.cdiv(n, 1024),)](x, y, out, n, 2.0, BLOCK=1024)
torch.cuda.synchronize()
print(f"triton_sum={out.double().sum().item():.1f} expected={2.0 * (n - 1) * n / 2 + n:.1f}")
