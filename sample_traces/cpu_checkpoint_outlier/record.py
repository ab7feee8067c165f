"""Record one profiler trace of a small MLP trained on the CPU, saving a checkpoint in one of the profiled steps.

    python sample_traces/cpu_checkpoint_outlier/record.py OUT_DIR [--hidden 1200] [--copies 7] [--checkpoint-step 18]

12 steps are profiled (ProfilerStep#12 to #23, after 10 skipped and 2 warm-up steps). In the step numbered
``--checkpoint-step`` the loop saves the model and optimizer state to a file inside a
``record_function("save_checkpoint")`` range, with torch.save and an fsync, as a training loop does every N steps.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
from torch.profiler import record_function
from torch.utils.data import DataLoader, Dataset

import gpuscope.torch

SKIP_FIRST, WARMUP, ACTIVE = 10, 2, 12


class Batches(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Whole batches of random features with a little augmentation, so loading costs some CPU per step."""

    def __init__(self, batches: int, batch: int = 64, features: int = 512) -> None:
        self.x = torch.randn(batches, batch, features)
        self.y = torch.randint(0, 10, (batches, batch))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i] + 0.1 * torch.randn_like(self.x[i]), self.y[i]


def save_checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: Path, copies: int) -> None:
    """The model and optimizer state, written ``copies`` times (a sharded checkpoint's files) and synced to disk."""
    for i in range(copies):
        path = folder / f"checkpoint-{i}.pt"
        with path.open("wb") as f:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, f)
            f.flush()
            os.fsync(f.fileno())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--hidden", type=int, default=1200)
    parser.add_argument("--checkpoint-step", type=int, default=18)
    parser.add_argument("--copies", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    steps = SKIP_FIRST + WARMUP + ACTIVE
    loader = DataLoader(Batches(steps), batch_size=None, shuffle=False, num_workers=0)
    model = torch.nn.Sequential(torch.nn.Linear(512, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    with tempfile.TemporaryDirectory() as scratch:
        batches = gpuscope.torch.profile_steps(loader, skip_first=SKIP_FIRST, warmup=WARMUP, active=ACTIVE,
                                               path=args.out_dir, profile_memory=False)
        for step, (x, y) in enumerate(batches):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            if step == args.checkpoint_step:
                with record_function("save_checkpoint"):
                    save_checkpoint(model, optimizer, Path(scratch), args.copies)


if __name__ == "__main__":
    main()
