"""A DataLoader with pin_memory=True and num_workers=2 (the workers make CPU tensors only; the
main process copies each pinned batch to the GPU with non_blocking=True)."""
import torch
from torch.utils.data import DataLoader, Dataset


class Numbers(Dataset):
    def __len__(self):
        return 512

    def __getitem__(self, i):
        return torch.full((256,), float(i % 17)), i % 10


if __name__ == "__main__":
    loader = DataLoader(Numbers(), batch_size=32, num_workers=2, pin_memory=True)
    total = 0.0
    labels = 0
    pinned = True
    for x, y in loader:
        pinned = pinned and x.is_pinned()
        xd = x.to("cuda", non_blocking=True)
        yd = y.to("cuda", non_blocking=True)
        total += float(xd.sum())
        labels += int(yd.sum())
    torch.cuda.synchronize()
    print(f"sum={total} labels={labels} pinned={pinned}")
