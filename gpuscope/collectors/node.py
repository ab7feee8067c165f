"""Every GPU and GPU process of this node, one snapshot at a time, for `gpuscope top`.

The GPUs and their processes come from the NVML sampler every other live view uses (``collectors.nvml``), asked
about every process of the node (each pid this PID namespace sees), so its rules hold here too: a counter a GPU
cannot give is missing, a process holding a context without a fresh SM sample used under 1% of the SMs, a MIG
instance is a GPU of its own, NVML's host pids are read in this namespace. Each process's user and command line
come from psutil, its container or pod from its cgroup (``collectors.container``); one that cannot be read (gone,
another user's without permission) is n/a.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from gpuscope.collectors.container import container_of
from gpuscope.collectors.nvml import NvmlSampler
from gpuscope.model import schema as S
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.node import GpuNow, NodeSnapshot, ProcessNow

PriceOf = Callable[[GpuInfo], tuple[float | None, str | None]]
"""A GPU's price per hour and where it came from."""
_GPU_METRICS = {S.GPU_UTIL: "util", S.GPU_MEMORY_USED_BYTES: "memory_used_bytes",
                S.GPU_MEMORY_TOTAL_BYTES: "memory_total_bytes", S.GPU_POWER_W: "power_w",
                S.GPU_POWER_LIMIT_W: "power_limit_w"}


@dataclass(frozen=True)
class _Who:
    user: str | None
    command: tuple[str, ...]
    container: dict[str, str]


class NodeReader:
    """Snapshots of the node; ``open`` raises ``NvmlUnavailable`` (one line) without a GPU or driver."""

    def __init__(self, sampler: NvmlSampler, price_of: PriceOf) -> None:
        self._sampler = sampler
        self._prices = {g.index: price_of(g) for g in sampler.gpus()}
        self._who: dict[tuple[int, float], _Who] = {}
        self._host = socket.gethostname()

    @classmethod
    def open(cls, price_of: PriceOf) -> NodeReader:
        return cls(NvmlSampler.open(pids=lambda: set(psutil.pids())), price_of)

    def close(self) -> None:
        self._sampler.close()

    def read(self, now_ns: int) -> NodeSnapshot:
        """The node now: each GPU's counters and price, each compute process's memory and SM share."""
        rows = self._sampler.sample(now_ns)
        device: dict[int, dict[str, float]] = {}
        procs: dict[tuple[int, int], dict[str, float]] = {}
        for _ts, _source, gpu, pid, metric, value in rows:
            if pid == S.NO_PID:
                device.setdefault(gpu, {})[metric] = value
            elif metric in (S.PROC_GPU_MEMORY_BYTES, S.PROC_GPU_SM_UTIL):
                procs.setdefault((gpu, pid), {})[metric] = value
        gpus = tuple(self._gpu(info, device.get(info.index, {})) for info in self._sampler.gpus())
        processes = tuple(self._process(gpu, pid, values) for (gpu, pid), values in sorted(procs.items()))
        return NodeSnapshot(ts_ns=now_ns, host=self._host, gpus=gpus, processes=processes,
                            problem=self._sampler.pid_problem)

    def _gpu(self, info: GpuInfo, values: dict[str, float]) -> GpuNow:
        price, source = self._prices.get(info.index, (None, None))
        known: dict[str, Any] = {field: values[metric] for metric, field in _GPU_METRICS.items() if metric in values}
        return GpuNow(index=info.index, name=info.name, uuid=info.uuid, mig_profile=info.mig_profile,
                      usd_per_hour=price, price_source=source, **known)

    def _process(self, gpu: int, pid: int, values: dict[str, float]) -> ProcessNow:
        who = self._whois(pid)
        return ProcessNow(gpu=gpu, pid=pid, user=who.user, command=who.command, container=who.container,
                          memory_bytes=values.get(S.PROC_GPU_MEMORY_BYTES), sm_share=values.get(S.PROC_GPU_SM_UTIL))

    def _whois(self, pid: int) -> _Who:
        """User, command line and container of ``pid``, read once per process (a pid reused later is another)."""
        try:
            process = psutil.Process(pid)
            key = (pid, process.create_time())
        except (psutil.Error, OSError):
            return _Who(None, (), {})
        if key not in self._who:
            self._who[key] = _Who(_quiet(process.username), _command(process), _container(pid))
        return self._who[key]


def _quiet(read: Callable[[], str]) -> str | None:
    try:
        return read() or None
    except (psutil.Error, OSError):
        return None


def _command(process: psutil.Process) -> tuple[str, ...]:
    try:
        words = process.cmdline()
    except (psutil.Error, OSError):
        return ()
    name = _quiet(process.name) if not words else None  # a kernel thread, a zombie: no command line
    return tuple(words) if words else ((name,) if name else ())


def _container(pid: int) -> dict[str, str]:
    found = container_of(pid)
    return found.tags() if found is not None else {}
