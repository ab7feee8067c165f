"""Training loops built as Kineto traces, small enough to work out each step's breakdown by hand.

Each step of ``step_us``: the DataLoader's next batch [0, loader_us), then ``aten::conv2d`` (50 µs, with its input
shapes and types), inside it a launch (10-30 µs after its start) of ``kernel`` (starting 40 µs after, ``kernel_us``
long), and ``extra`` kernels after it. By the TensorBoard plugin's priority a step of the default loop is: Kernel
``kernel_us`` + extras, Runtime 20, DataLoader ``loader_us``, CPU Exec 20 (the conv's 50 µs less the launch and the
kernel's first 10 µs), Other the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import builders as b

SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
MULTI = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def loop(*, steps: int = 6, step_us: float = 1000.0, loader_us: float = 300.0, kernel: str = "volta_sgemm_128x64_nn",
         kernel_us: float = 400.0, extra: tuple[tuple[str, float], ...] = (), workers: bool = False,
         shapes: list[Any] | None = None, types: tuple[str, ...] = ("float", "float"),
         annotations: tuple[str, ...] = (), **top: Any) -> dict[str, Any]:
    events: list[b.Event] = []
    corr = 5000
    for i in range(steps):
        t0 = i * step_us
        events.append(b.step(i, t0, step_us))
        events.append(b.cpu_op(MULTI if workers else SINGLE, t0, loader_us, cat="user_annotation"))
        conv = b.cpu_op("aten::conv2d", t0 + loader_us, 50)
        conv["args"]["Input Dims"] = shapes if shapes is not None else [[32, 3, 224, 224], [64, 3, 7, 7]]
        conv["args"]["Input type"] = list(types)
        events.append(conv)
        events += [b.cpu_op(name, t0 + loader_us + 1, 2, cat="user_annotation") for name in annotations]
        corr += 1
        events.append(b.launch(t0 + loader_us + 10, 20, corr))
        events.append(b.kernel(kernel, t0 + loader_us + 40, kernel_us, corr))
        start = t0 + loader_us + 40 + kernel_us
        for name, dur in extra:
            corr += 1
            events.append(b.launch(t0 + loader_us + 12, 1, corr))
            events.append(b.kernel(name, start, dur, corr))
            start += dur
    return b.trace(events, **top)


def write_loop(folder: Path, name: str, **kwargs: Any) -> Path:
    path = folder / name
    path.mkdir(parents=True, exist_ok=True)
    b.write(path / "rank0.pt.trace.json", loop(**kwargs))
    return path
