"""Small Kineto traces built in code: each helper returns one Chrome-trace event as Kineto writes it."""

from __future__ import annotations

import gzip
import json
from itertools import count
from pathlib import Path
from typing import Any

Event = dict[str, Any]
_ids = count(1)


def cpu_op(name: str, ts: float, dur: float, *, tid: int = 1, ext: int | None = None, cat: str = "cpu_op") -> Event:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur,
            "args": {"External id": ext if ext is not None else next(_ids)}}


def step(n: int, ts: float, dur: float) -> Event:
    return cpu_op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")


def launch(ts: float, dur: float, corr: int, *, name: str = "cudaLaunchKernel", ext: int | None = None) -> Event:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 100, "tid": 1, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "External id": ext if ext is not None else corr}}


def kernel(name: str, ts: float, dur: float, corr: int, *, stream: int = 7, device: int = 0,
           ext: int | None = None, cat: str = "kernel") -> Event:
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": device, "stream": stream, "correlation": corr,
                     "External id": ext if ext is not None else corr, "blocks per SM": 1.5, "warps per SM": 8.0}}


def memcpy(ts: float, dur: float, corr: int, *, kind: str = "HtoD (Pageable -> Device)") -> Event:
    return {"ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy {kind}", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": 1024}}


def memory(ts: float, nbytes: int, total: int, *, device_type: int = 1, device_id: int = 0) -> Event:
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 100, "tid": 1, "ts": ts,
            "args": {"Device Type": device_type, "Device Id": device_id, "Bytes": nbytes, "Total Allocated": total}}


def trace(events: list[Event], *, rank: int | None = None, device_memory: int | None = 16 * 2**30,
          **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events, **extra}
    if device_memory is not None:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": device_memory,
                                    "computeMajor": 9, "computeMinor": 0, "numSms": 132}]
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    return doc


def write(path: Path, doc: Any, *, gz: bool = False) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def simple_training(steps: int = 3, *, step_us: float = 1000.0, kernel_us: float = 400.0,
                    loader_us: float = 300.0) -> list[Event]:
    """A step loop: DataLoader wait, then one launch per step of a kernel on the GPU."""
    events: list[Event] = []
    for i in range(steps):
        t0 = i * step_us
        events.append(step(i, t0, step_us))
        events.append(cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0, loader_us))
        events.append(cpu_op("aten::conv2d", t0 + loader_us, 50))
        corr = 1000 + i
        events.append(launch(t0 + loader_us + 10, 20, corr))
        events.append(kernel("volta_sgemm_128x64_nn", t0 + loader_us + 40, kernel_us, corr))
    return events
