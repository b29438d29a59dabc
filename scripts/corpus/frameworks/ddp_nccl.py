"""DistributedDataParallel over NCCL with world size 1 (a file:// store), a few training steps."""
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
import _train  # noqa: E402,F401
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

store = os.path.join(os.environ.get("CORPUS_RUN_DIR", "/tmp"), f"ddp_store_{os.getpid()}")
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1)
torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cuda.matmul.allow_tf32 = False
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4)).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
g = torch.Generator().manual_seed(2)
for _ in range(10):
    x = torch.randn(32, 64, generator=g).cuda()
    loss = ddp(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
t = torch.full((1024,), 3.0, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print(f"loss={round(float(loss), 4)} allreduce={int(t.sum())} world={dist.get_world_size()}")
dist.destroy_process_group()
