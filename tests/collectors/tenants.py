"""Two processes on one NVIDIA H200, as NVML answered every 0.5 s (sample_traces/h200/live/tenants.json, recorded by
sample_traces/h200/tenants.py): a busy bf16 matmul loop ("heavy") and a light one that sleeps between small matmuls
("light"). ``TenantReplay`` plays those answers back through the autospec'd fake NVML, tick by tick, so the
per-process code meets the driver's real behaviour: NOT_FOUND when nothing is new, one sample per process that
used the GPU, and none for a process that held a context but used under 1%."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.collectors.nvml_fake import FakeGpu

ROOT = Path(__file__).resolve().parents[2]
TENANTS = ROOT / "sample_traces" / "h200" / "live" / "tenants.json"
FACTS = ROOT / "sample_traces" / "h200" / "live" / "nvml_facts.json"


@dataclass(frozen=True)
class RecordedTick:
    """What NVML answered at one tick."""

    t_us: int
    gpu_util_pct: int
    mem_util_pct: int
    memory_used_bytes: int
    processes: tuple[tuple[int, int], ...]
    """(recorded pid, used GPU memory bytes)."""
    samples: tuple[tuple[int, int, int, int], ...] | None
    """(recorded pid, timeStamp µs, SM %, memory %) of the process-utilization answer; None for NOT_FOUND."""


def recorded() -> tuple[dict[str, int], list[RecordedTick]]:
    """The recorded pids by role ("heavy", "light") and every tick."""
    doc = json.loads(TENANTS.read_text())
    ticks = []
    for t in doc["series"]:
        samples = None if "putil_error" in t else tuple((s["pid"], s["ts"], s["sm"], s["mem"]) for s in t["putil"])
        assert samples is not None or t["putil_error"].startswith("NVMLError_NotFound")
        ticks.append(RecordedTick(t["t_us"], t["gpu_util"], t["mem_util"], t["mem_used"],
                                  tuple((p["pid"], p["used"]) for p in t["procs"]), samples))
    return doc["series"][0]["pids"], ticks


def h200() -> FakeGpu:
    """The H200 as nvml_facts.json describes it (no NVLink on this one: every link NotSupported)."""
    device = json.loads(FACTS.read_text())["devices"][0]
    memory = device["nvmlDeviceGetMemoryInfo"]["ok"]
    return FakeGpu(name=device["nvmlDeviceGetName"]["ok"], uuid=device["nvmlDeviceGetUUID"]["ok"],
                   memory_total_bytes=memory["total"], memory_used_bytes=memory["used"],
                   limit_mw=device["nvmlDeviceGetEnforcedPowerLimit"]["ok"], nvlink_links=0)


def apply(gpu: FakeGpu, tick: RecordedTick, since_us: int, pids: dict[int, int]) -> None:
    """Make ``gpu`` answer as the H200 did at ``tick``; ``pids`` maps a recorded pid to the one to report, and each
    sample keeps its distance from the time the recording asked since (its previous tick)."""
    gpu.util_pct = (tick.gpu_util_pct, tick.mem_util_pct)
    gpu.memory_used_bytes = tick.memory_used_bytes
    gpu.processes = [(pids[pid], used) for pid, used in tick.processes]
    gpu.proc_samples = [] if tick.samples is None else [(pids[pid], ts - since_us, sm, mem)
                                                        for pid, ts, sm, mem in tick.samples]


class TenantReplay:
    """Replays the ticks where both processes ran, over and over, one per tick of whatever samples ``gpu``."""

    def __init__(self, gpu: FakeGpu, pids: dict[str, int]) -> None:
        roles, ticks = recorded()
        self._map = {roles[name]: pid for name, pid in pids.items()}
        both = [i for i, t in enumerate(ticks) if {p for p, _ in t.processes} == set(self._map) and i > 0]
        self._pairs = [(ticks[i], ticks[i - 1].t_us) for i in both]
        self._next = 0
        self.gpu = gpu
        gpu.before_each_tick = self.step

    def step(self) -> None:
        tick, since_us = self._pairs[self._next % len(self._pairs)]
        apply(self.gpu, tick, since_us, self._map)
        self._next += 1
