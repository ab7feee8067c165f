"""Record a real 4-rank torch.distributed job (gloo, on the CPU): profiler traces of every rank, and the flight
recorder's dumps of a real hang.

    python sample_traces/gloo_4rank/record.py delayed OUT_DIR    # rank 2 sleeps 80 ms before every all_reduce
    python sample_traces/gloo_4rank/record.py balanced OUT_DIR   # the same job, no delay
    python sample_traces/gloo_4rank/record.py hang OUT_DIR       # rank 1 never joins the sixth all_reduce
    python sample_traces/gloo_4rank/record.py late_once OUT_DIR  # rank 1 sleeps 300 ms before the first of 4

``delayed`` and ``balanced`` write ``rank{N}.<time>.pt.trace.json`` for N = 0..3 with ``gpuscope.torch.profile``
(2 steps skipped, 1 warm-up, 10 profiled). Each step runs a small matmul, then ``all_reduce`` of a 64 Ki-float
tensor.

``late_once`` runs four ``all_reduce`` of that tensor a step instead of one, and rank 1 sleeps 300 ms before the
first of them (2 steps skipped, 1 warm-up, 8 profiled): it is last at one collective in four, and the others wait
for it there most of their step.

``hang`` turns the flight recorder on (``TORCH_FR_BUFFER_SIZE``), runs five all_reduces on every rank, then ranks 0,
2 and 3 start a sixth (``async_op=True``) that rank 1 never joins. With the sixth still in flight, every rank writes
its recorder's state the way the NCCL watchdog names its dumps (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + rank, here
``OUT_DIR/json/rank_N`` from ``torch._C._distributed_c10d._dump_fr_trace_json()`` and ``OUT_DIR/pickle/rank_N`` from
``_dump_fr_trace()``: the CPU build of torch has no watchdog that writes them on its own). Then the waiting ranks
give up when gloo's timeout (3 s) fires.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 4
DELAYED_RANK = 2
DELAY_S = 0.08
MISSING_RANK = 1
HANG_AT = 6
"""The all_reduce (1-based) the missing rank never joins."""
SKIP, WARMUP, ACTIVE = 2, 1, 10
ONCE_RANK = 1
ONCE_DELAY_S = 0.3
ONCE_COLLECTIVES = 4
"""``late_once``: all_reduces a step; ``ONCE_RANK`` sleeps ``ONCE_DELAY_S`` before the first of them."""
ONCE_ACTIVE = 8


def _init(rank: int, port: int, timeout_s: float) -> None:
    os.environ["RANK"] = str(rank)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=timeout_s))


def profiled(rank: int, mode: str, out: str, port: int) -> None:
    import gpuscope.torch

    _init(rank, port, 60)
    weights = torch.randn(256, 256)
    grads = torch.ones(1 << 16)
    active = ONCE_ACTIVE if mode == "late_once" else ACTIVE
    collectives = ONCE_COLLECTIVES if mode == "late_once" else 1
    with gpuscope.torch.profile(skip_first=SKIP, warmup=WARMUP, active=active, path=out,
                                profile_memory=False) as prof:
        for _ in range(SKIP + WARMUP + active):
            (weights @ weights).sum()
            for k in range(collectives):
                if mode == "delayed" and rank == DELAYED_RANK:
                    time.sleep(DELAY_S)
                if mode == "late_once" and rank == ONCE_RANK and k == 0:
                    time.sleep(ONCE_DELAY_S)
                dist.all_reduce(grads)
            prof.step()
    dist.destroy_process_group()


def hang(rank: int, out: str, port: int) -> None:
    import torch._C._distributed_c10d as c10d

    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    _init(rank, port, 3)
    x = torch.ones(1 << 16)
    for _ in range(HANG_AT - 1):
        dist.all_reduce(x)
    work = dist.all_reduce(x, async_op=True) if rank != MISSING_RANK else None
    time.sleep(1.0)  # every joining rank is inside the sixth all_reduce
    for form, dump in (("json", c10d._dump_fr_trace_json), ("pickle", c10d._dump_fr_trace)):
        folder = Path(out) / form
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = str(folder / "rank_")
        Path(os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] + str(rank)).write_bytes(dump())
    if work is not None:
        try:
            work.wait()
        except RuntimeError:
            pass  # gloo's timeout: the collective never completes
    os._exit(0)  # the process group cannot be torn down cleanly with a collective left hanging


def main() -> None:
    mode, out = sys.argv[1], sys.argv[2]
    port = 29500 + os.getpid() % 1000
    Path(out).mkdir(parents=True, exist_ok=True)
    if mode == "hang":
        mp.spawn(hang, args=(out, port), nprocs=WORLD)
    elif mode in ("delayed", "balanced", "late_once"):
        mp.spawn(profiled, args=(mode, out, port), nprocs=WORLD)
    else:
        raise SystemExit(f"unknown mode {mode!r}: delayed, balanced, late_once or hang")


if __name__ == "__main__":
    main()
