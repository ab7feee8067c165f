"""A small torch CPU training loop whose DataLoader can be starved on purpose (a test target).

--starve io: each sample reads a block of a file and waits 10 ms (storage latency);
--starve cpu: each sample burns about 10 ms of pure Python CPU (decode, augmentation);
--starve none: samples are ready at once. Runs for --seconds, then exits 0.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset

BLOCK_BYTES = 64 * 1024


class Samples(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, starve: str, path: str) -> None:
        self.starve, self.path = starve, path

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.starve == "io":
            with open(self.path, "rb") as f:
                f.seek((index * BLOCK_BYTES) % (16 * BLOCK_BYTES))
                f.read(BLOCK_BYTES)
            time.sleep(0.01)
        elif self.starve == "cpu":
            deadline = time.thread_time() + 0.01
            x = 0
            while time.thread_time() < deadline:
                x += sum(i * i for i in range(200))
        g = torch.Generator().manual_seed(index)
        return torch.randn(32, generator=g), torch.randn(1, generator=g)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starve", choices=("io", "cpu", "none"), default="none")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="record a Kineto trace with gpuscope.torch")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.NamedTemporaryFile() as blob:
        blob.write(os.urandom(16 * BLOCK_BYTES))
        blob.flush()
        loader = DataLoader(Samples(args.starve, blob.name), batch_size=8, num_workers=args.workers)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        batches: Iterator[tuple[torch.Tensor, torch.Tensor]]
        if args.profile:
            import gpuscope.torch

            batches = gpuscope.torch.profile_steps(loader, skip_first=2, warmup=1, active=3)
        else:
            batches = iter(loader)
        end = time.monotonic() + args.seconds
        for x, y in batches:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            if time.monotonic() > end:
                break
        print(f"loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
