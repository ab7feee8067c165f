"""Record a CPU-only distributed job: 4 processes training a small MLP with DistributedDataParallel over gloo,
each writing its own profiler trace (no GPU anywhere: no kernels, no CUDA runtime calls).

    python sample_traces/cpu_gloo_ddp/record.py OUT_DIR [--ranks 4] [--steps 6]
"""

from __future__ import annotations

import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

import gpuscope.torch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def train(rank: int, world: int, port: int, out_dir: str, steps: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                                        torch.nn.Linear(512, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(steps + 3)]
    for x, y in gpuscope.torch.profile_steps(batches, skip_first=1, warmup=1, active=steps, path=out_dir,
                                             profile_memory=True):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    mp.spawn(train, args=(args.ranks, free_port(), args.out_dir, args.steps), nprocs=args.ranks)


if __name__ == "__main__":
    main()
