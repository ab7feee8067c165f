"""The target's part of one GPU from NVML's per-process answers: its memory, its SM and memory-bandwidth shares,
and its neighbours (other processes on the same GPU: time-slicing, MPS, or just two jobs).

``nvmlDeviceGetProcessUtilization`` returns one sample per process "that had some non-zero utilization during the
last sample period" (nvml.h), and NOT_FOUND when no sample at all is newer than the time asked. So when an answer
holds a sample newer than the previous tick, the driver did sample since then, and a process that holds a context
on the GPU without a sample in it used under 1% (NVML's unit) of the SMs: it is recorded as 0, not left out. A
NOT_FOUND answer says nothing of anybody: no rows. Leaving such a process out is what once lost every SM row of a
light process running beside a busy one (sample_traces/h200/live: the light tenant's run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gpuscope.model.schema import (
    GPU_OTHER_PROCESSES,
    GPU_OTHERS_SM_UTIL,
    NO_PID,
    NVML,
    PROC_GPU_MEM_UTIL,
    PROC_GPU_MEMORY_BYTES,
    PROC_GPU_SM_UTIL,
    SampleRow,
)

LocalPid = Callable[[int], "int | None"]
"""An NVML pid (the host's) as gpuscope's own PID namespace numbers it; None where it cannot be seen from here."""


@dataclass(frozen=True)
class Tenants:
    """One GPU's compute processes at one tick, as the target's tree sees them."""

    memory_bytes: dict[int, float]
    """Target pid -> GPU memory it holds; a pid whose memory NVML cannot tell is left out."""
    holders: frozenset[int]
    """Target pids holding a context on the GPU (their memory known or not)."""
    others: frozenset[int]
    """NVML pids of the other processes holding a context on it."""


def tenants(procs: Iterable[Any], targets: set[int], local: LocalPid) -> Tenants:
    """Sort NVML's compute processes (``nvmlDeviceGetComputeRunningProcesses``) into the target's and the others'."""
    memory: dict[int, float] = {}
    holders: set[int] = set()
    others: set[int] = set()
    for proc in procs:
        pid = local(int(proc.pid))
        if pid is None or pid not in targets:
            others.add(int(proc.pid))
            continue
        holders.add(pid)
        if proc.usedGpuMemory is not None:  # None: NVML_VALUE_NOT_AVAILABLE (WDDM, some containers)
            memory[pid] = memory.get(pid, 0.0) + float(proc.usedGpuMemory)
    return Tenants(memory_bytes=memory, holders=frozenset(holders), others=frozenset(others))


def process_rows(view: Tenants, gpu: int, now_ns: int) -> list[SampleRow]:
    """The target's memory per pid, and how many other processes share the GPU with it."""
    rows: list[SampleRow] = [(now_ns, NVML, gpu, pid, PROC_GPU_MEMORY_BYTES, b) for pid, b in view.memory_bytes.items()]
    if view.holders:
        rows.append((now_ns, NVML, gpu, NO_PID, GPU_OTHER_PROCESSES, float(len(view.others))))
    return rows


def utilization_rows(samples: Iterable[Any] | None, *, since_us: int, targets: set[int], view: Tenants | None,
                     local: LocalPid, gpu: int, now_ns: int) -> list[SampleRow]:
    """Mean SM and memory share of each target pid since the previous tick (``nvidia-smi pmon -s u``, columns sm
    and mem), and the others' SM shares together; ``view`` None when the process list is unknown this tick."""
    # Some drivers return stale samples or out-of-range values; keep only what this tick can vouch for.
    fresh = [s for s in samples or () if s.timeStamp > since_us and 0 <= s.smUtil <= 100 and 0 <= s.memUtil <= 100]
    if not fresh:
        return []
    sm: dict[int, list[float]] = {}
    mem: dict[int, list[float]] = {}
    others: dict[int, list[float]] = {}
    for s in fresh:
        pid = local(int(s.pid))
        if pid is not None and pid in targets:
            sm.setdefault(pid, []).append(s.smUtil / 100.0)
            mem.setdefault(pid, []).append(s.memUtil / 100.0)
        else:
            others.setdefault(int(s.pid), []).append(s.smUtil / 100.0)
    for pid in view.holders if view is not None else ():
        sm.setdefault(pid, [0.0])  # a context but no sample in a fresh answer: under 1% (see the module's note)
        mem.setdefault(pid, [0.0])
    rows: list[SampleRow] = [(now_ns, NVML, gpu, pid, PROC_GPU_SM_UTIL, _mean(v)) for pid, v in sm.items()]
    rows += [(now_ns, NVML, gpu, pid, PROC_GPU_MEM_UTIL, _mean(v)) for pid, v in mem.items()]
    if view is not None and view.holders:
        rows.append((now_ns, NVML, gpu, NO_PID, GPU_OTHERS_SM_UTIL, sum(_mean(v) for v in others.values())))
    return rows


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
