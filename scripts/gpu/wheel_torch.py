# A small PyTorch program for scripts/gpu/wheel.sh: a matmul, a reduction and a copy back,
# printed with fixed formatting so that runs with and without seedance-fix compare exactly.
import torch

torch.manual_seed(0)
a = torch.randn(512, 512, device="cuda")
b = torch.randn(512, 512, device="cuda")
c = a @ b
torch.cuda.synchronize()
print("device", torch.cuda.get_device_name(0))
print("sum %.3f" % c.sum().item())
print("first", [round(v, 3) for v in c[0, :4].cpu().tolist()])
