"""Record one profiler trace of a small MLP trained on the CPU: many steps, for the gate's A/A tests.

    python sample_traces/cpu_mlp_aa/record.py OUT_DIR [--steps 120] [--seed 0]

Run twice with the same arguments for two profiling runs of the same configuration.
"""

from __future__ import annotations

import argparse

import torch
from torch.utils.data import DataLoader, Dataset

import gpuscope.torch


class Batches(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Whole batches of random features with a little augmentation, so loading costs some CPU per step."""

    def __init__(self, batches: int, batch: int = 128) -> None:
        self.x = torch.randn(batches, batch, 512)
        self.y = torch.randint(0, 10, (batches, batch))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i] + 0.1 * torch.randn_like(self.x[i]), self.y[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    loader = DataLoader(Batches(args.steps + 20), batch_size=None, shuffle=True, num_workers=0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in gpuscope.torch.profile_steps(loader, skip_first=10, warmup=2, active=args.steps,
                                             path=args.out_dir, profile_memory=False):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


if __name__ == "__main__":
    main()
