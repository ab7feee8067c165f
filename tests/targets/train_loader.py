"""A small torch CPU training loop whose DataLoader can be starved on purpose (a test target).

--starve io: each sample reads a block of a file and waits 10 ms (storage latency);
--starve cpu: each sample burns about 10 ms of pure Python CPU (decode, augmentation);
--starve none: samples are ready at once. Runs for --seconds, then exits 0.
--windows: prints "window START_NS END_NS STEPS CPU_NS" about every 0.25 s, as spin.py does, so a
benchmark can compare training throughput with and without gpuscope attached.
--helpers: also starts two helper children that load no data (a subprocess and a forked process, as a
logging service or a tokenizer pool would). Under torchrun (RANK in the environment) the ranks join a
gloo process group and train with DistributedDataParallel.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
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


def done(end: float) -> bool:
    """Time is up; under DDP every rank stops at the same step, or one would wait on the others forever."""
    if not torch.distributed.is_initialized():
        return time.monotonic() > end
    flag = torch.tensor([float(time.monotonic() > end)])
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    return bool(flag.item())


class Window:
    """Steps per window of about 0.25 s, with the main thread's CPU time in it (spin.py's format)."""

    def __init__(self) -> None:
        self.start_ns, self.cpu_ns, self.steps = time.time_ns(), time.thread_time_ns(), 0

    def step(self) -> None:
        self.steps += 1
        now = time.time_ns()
        if now - self.start_ns >= 250_000_000:
            cpu = time.thread_time_ns()
            print(f"window {self.start_ns} {now} {self.steps} {cpu - self.cpu_ns}", flush=True)
            self.start_ns, self.cpu_ns, self.steps = now, cpu, 0


def nap() -> None:
    time.sleep(600)


def start_helpers() -> list[subprocess.Popen[bytes] | multiprocessing.process.BaseProcess]:
    """A subprocess and a forked child, both idle: they must count as helpers, never as workers."""
    sub = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    forked = multiprocessing.get_context("fork").Process(target=nap, daemon=True)
    forked.start()
    return [sub, forked]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starve", choices=("io", "cpu", "none"), default="none")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="record a Kineto trace with gpuscope.torch")
    parser.add_argument("--helpers", action="store_true", help="start two idle helper children")
    parser.add_argument("--windows", action="store_true", help="print steps per 0.25 s window")
    args = parser.parse_args()
    torch.set_num_threads(1)
    helpers = start_helpers() if args.helpers else []
    if "RANK" in os.environ:
        torch.distributed.init_process_group("gloo")
    with tempfile.NamedTemporaryFile() as blob:
        blob.write(os.urandom(16 * BLOCK_BYTES))
        blob.flush()
        loader = DataLoader(Samples(args.starve, blob.name), batch_size=8, num_workers=args.workers)
        model: torch.nn.Module = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        if torch.distributed.is_initialized():
            model = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        batches: Iterator[tuple[torch.Tensor, torch.Tensor]]
        if args.profile:
            import gpuscope.torch

            batches = gpuscope.torch.profile_steps(loader, skip_first=2, warmup=1, active=3)
        else:
            batches = iter(loader)
        end = time.monotonic() + args.seconds
        window = Window() if args.windows else None
        for x, y in batches:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            if window is not None:
                window.step()
            if done(end):
                break
        print(f"loss {loss.item():.4f}", flush=True)
    for helper in helpers:
        helper.kill()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
