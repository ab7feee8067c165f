"""Record a PyTorch profiler (Kineto) trace into the current gpuscope run, in one line.

    for batch in gpuscope.torch.profile_steps(loader):
        train_step(batch)

or, with the profiler in hand:

    with gpuscope.torch.profile() as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

Under ``gpuscope run -- python train.py`` the trace lands in the run's folder (found through
``GPUSCOPE_RUN_ID`` and ``GPUSCOPE_HOME``, which ``gpuscope run`` sets), so the report joins live
samples and the trace. Elsewhere it goes to ``GPUSCOPE_TRACE_DIR`` or ``./gpuscope_traces``, ready
for ``gpuscope analyze``. torch is imported only when a profile starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import torch.profiler

RUN_ID_ENV = "GPUSCOPE_RUN_ID"
HOME_ENV = "GPUSCOPE_HOME"
TRACE_DIR_ENV = "GPUSCOPE_TRACE_DIR"
TRACE_SUFFIX = ".pt.trace.json"

# Skip the first steps (allocator warm-up, cudnn autotuning, torch.compile) and record a few steady
# ones: long enough to average over, short enough that the trace stays small and the job unslowed.
SKIP_FIRST = 10
WARMUP = 2
ACTIVE = 5

T = TypeVar("T")


def trace_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Where traces go: ``path``; else ``GPUSCOPE_TRACE_DIR``; else the folder of the run that
    ``gpuscope run`` started (``GPUSCOPE_HOME``/runs/``GPUSCOPE_RUN_ID``); else ``./gpuscope_traces``."""
    if path is not None:
        return Path(path)
    if os.environ.get(TRACE_DIR_ENV):
        return Path(os.environ[TRACE_DIR_ENV])
    run_id = os.environ.get(RUN_ID_ENV)
    if run_id:
        home = Path(os.environ.get(HOME_ENV) or Path.home() / ".gpuscope")
        return home / "runs" / run_id
    return Path("gpuscope_traces")


def rank() -> int:
    """This process's rank under torchrun (``RANK``), else 0."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


@contextmanager
def profile(*, skip_first: int = SKIP_FIRST, warmup: int = WARMUP, active: int = ACTIVE, repeat: int = 1,
            path: str | os.PathLike[str] | None = None, profile_memory: bool = True,
            record_shapes: bool = False, with_stack: bool = False) -> Iterator[torch.profiler.profile]:
    """A ``torch.profiler.profile`` that skips ``skip_first`` steps, warms up ``warmup`` and records
    ``active`` steps, ``repeat`` times, writing ``rank{N}.<time>.pt.trace.json`` files into
    ``trace_dir(path)``. Call ``.step()`` on it once per training step.

    CUDA activity is recorded when CUDA is available; memory events are on by default so the report
    can tell the peak allocated against the device's memory.
    """
    import torch.profiler as tp

    folder = trace_dir(path)
    folder.mkdir(parents=True, exist_ok=True)
    activities = [tp.ProfilerActivity.CPU]
    if _cuda_available():
        activities.append(tp.ProfilerActivity.CUDA)
    with tp.profile(
        activities=activities,
        schedule=tp.schedule(skip_first=skip_first, wait=0, warmup=warmup, active=active, repeat=repeat),
        on_trace_ready=tp.tensorboard_trace_handler(str(folder), worker_name=f"rank{rank()}"),
        profile_memory=profile_memory, record_shapes=record_shapes, with_stack=with_stack,
    ) as prof:
        yield prof


def profile_steps(steps: Iterable[T], **options: object) -> Iterator[T]:
    """Yield from ``steps`` (a DataLoader, say) under ``profile(**options)``, one profiler step each.

    Each item's step ends when the next item is asked for, so the DataLoader's wait is part of the
    step, as in the trace a hand-placed ``prof.step()`` gives.
    """
    with profile(**options) as prof:  # type: ignore[arg-type]
        for item in steps:
            yield item
            prof.step()


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())
