"""A short deterministic training loop the PyTorch programs of the corpus share (not a program
of its own: run.sh runs only the files whose name does not start with '_')."""
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def train(torch, steps=30, width=256, batch=64):
    """An MLP trained on fixed data; returns the last loss, rounded, and a parameter checksum."""
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")
    model = torch.nn.Sequential(
        torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(steps, batch, 64, generator=g).to(dev)
    ys = torch.randint(0, 10, (steps, batch), generator=g).to(dev)
    loss = None
    for i in range(steps):
        # Temporaries of changing sizes, so the allocator splits, caches and reuses blocks.
        scratch = torch.empty((i % 7 + 1) * 1024 * 1024, dtype=torch.uint8, device=dev)
        scratch.fill_(i % 251)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(xs[i]), ys[i])
        loss.backward()
        opt.step()
        del scratch
    torch.cuda.synchronize()
    checksum = sum(float(p.double().abs().sum()) for p in model.parameters())
    return round(float(loss), 4), round(checksum, 2)
