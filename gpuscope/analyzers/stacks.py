"""What a stack sample says a thread was doing: the rules that sort py-spy samples of the main thread and of
DataLoader workers. Pure functions of the frames (outermost first, "function (file:line)") and the thread state;
the collector (collectors/stacks.py) records them, the live summary (analyzers/live.py) counts them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from gpuscope.model.schema import NATIVE_FILE, NON_BLOCKING_COPY, STATE_ACTIVE, STATE_DISK

MainActivity = Literal["dataloader", "nccl", "sync", "launch", "python", "idle", "startup"]
WorkerActivity = Literal["cpu", "io", "idle"]

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*):(?P<line>-?\d+)\)$")
_SYNC_FUNCS = {"synchronize", "Event.synchronize", "Stream.synchronize",
               "Tensor.item", "Tensor.cpu", "Tensor.tolist", "Tensor.numpy", "Tensor.to", "Tensor.cuda"}
_NCCL_FILES = ("torch/distributed/distributed_c10d.py", "torch/distributed/c10d_logger.py")
_NCCL_WORDS = ("all_reduce", "allreduce", "all_gather", "reduce_scatter", "broadcast", "barrier", "all_to_all",
               "send", "recv", "wait")


def split_frame(frame: str) -> tuple[str, str]:
    """("function", "file") of a frame string; the file is "" if the frame has another form."""
    m = _FRAME.match(frame)
    return (m.group("func"), m.group("file")) if m else (frame, "")


def classify_main(frames: Sequence[str], state: str) -> MainActivity:
    """What the main thread was doing in one sample. Checked in this order, so a sync inside a
    forward pass counts as a sync, and anything under the DataLoader's ``__next__`` as data loading:

    - ``dataloader``: inside torch.utils.data (waiting on workers, or loading in-process);
    - ``nccl``: inside a torch.distributed collective or its wait;
    - ``sync``: a host-device sync (``.item()``, ``.cpu()``, ``.to()``, ``torch.cuda.synchronize``;
      a ``.to(..., non_blocking=True)`` on that line is a queued copy: ``launch``);
    - ``launch``: inside other torch code (forward, backward, optimizer): launching device work;
    - ``python``: on CPU in other code; ``idle``: off CPU in other code (sleeping, waiting on a lock).

    Before all of these, ``startup``: importing modules (torch takes seconds to import), whatever
    the imported code runs; the summary leaves it out of the shares of the training loop's time.
    """
    parts = [split_frame(f) for f in frames]
    if any(file.startswith("<frozen importlib") for _, file in parts):
        return "startup"
    return _torch_activity(parts) or ("python" if state == STATE_ACTIVE else "idle")


def _torch_activity(parts: Sequence[tuple[str, str]]) -> MainActivity | None:
    if any("torch/utils/data/" in file for _, file in parts):
        return "dataloader"
    if any(file in _NCCL_FILES or ("torch/distributed/" in file and any(w in func.lower() for w in _NCCL_WORDS))
           for func, file in parts):
        return "nccl"
    if any(func in _SYNC_FUNCS and (file == NATIVE_FILE or file.startswith("torch/")) for func, file in parts):
        return "sync"
    if any(file.startswith("torch/") or (file == NATIVE_FILE and func in ("Tensor.backward", NON_BLOCKING_COPY))
           for func, file in parts):
        return "launch"
    return None


def is_loader_worker(frames: Sequence[str]) -> bool:
    """A DataLoader worker's thread: it runs torch's ``_worker_loop``."""
    return any(split_frame(f)[0] == "_worker_loop" for f in frames)


def classify_worker(frames: Sequence[str], state: str) -> WorkerActivity:
    """A loader worker in one sample: ``cpu`` when on CPU; ``io`` when blocked while fetching a batch
    (in the dataset's ``__getitem__``: a read, a network round trip) or in disk wait; ``idle`` when
    waiting for the next batch's indices (the loader is ahead of the training loop)."""
    if state == STATE_ACTIVE:
        return "cpu"
    if state == STATE_DISK:
        return "io"
    fetching = any("torch/utils/data/_utils/fetch.py" in file or func.endswith(("__getitem__", "__getitems__"))
                   for func, file in (split_frame(f) for f in frames))
    return "io" if fetching else "idle"
