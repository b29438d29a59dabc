"""GPU smoke test: PyTorch with torch.cuda.set_device, a matmul and a few MLP training steps.
Prints checksums rounded so that runs with and without the shim compare exactly."""
import torch

torch.use_deterministic_algorithms(True)
torch.cuda.set_device(0)
torch.manual_seed(0)
a = torch.randn(1024, 1024, device="cuda")
b = a @ a
print(f"matmul={b.double().abs().sum().item():.1f}")
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")
for _ in range(20):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"loss={loss.item():.4f} device={torch.cuda.current_device()}")
