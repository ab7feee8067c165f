"""The live terminal view of `attach` and `run`: GPU utilization, memory, power, host CPU, the top stack."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.collectors.sampler import Tick
from gpuscope.format import gib, pct, printable
from gpuscope.model import schema
from gpuscope.model.schema import PROC_ROLE, ROLES_BY_CODE
from gpuscope.model.schema import ProcessRole as Role

STACK_FRAMES_SHOWN = 6


@dataclass
class LiveView:
    """Keeps the latest value of each counter from the ticks it is fed; rich renders it on refresh."""

    title: str
    pid: int
    trainers: Callable[[], list[int]] | None = None
    """The training processes now (default: the target); their main threads' stacks are shown."""
    ticks: int = 0
    started_s: float = field(default_factory=time.monotonic)
    gpu: dict[int, dict[str, float]] = field(default_factory=dict)
    procs: dict[int, dict[str, float]] = field(default_factory=dict)
    machine: dict[str, float] = field(default_factory=dict)
    roles: dict[int, Role] = field(default_factory=dict)
    frames: dict[int, tuple[str, ...]] = field(default_factory=dict)
    main_stacks: Counter[int] = field(default_factory=Counter)
    last_main_stack: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """The loop updates from its thread while rich renders from its refresh thread."""

    def update(self, tick: Tick) -> None:
        with self._lock:
            self._update(tick)

    def _update(self, tick: Tick) -> None:
        self.ticks += 1
        procs: dict[int, dict[str, float]] = {}
        for _ts, _source, gpu, pid, metric, value in tick.rows:
            if gpu >= 0 and pid == schema.NO_PID:
                self.gpu.setdefault(gpu, {})[metric] = value
            elif gpu < 0 and pid != schema.NO_PID:
                procs.setdefault(pid, {})[metric] = value
                if metric == PROC_ROLE:
                    self.roles[pid] = ROLES_BY_CODE.get(int(value), "helper")
            elif pid == schema.NO_PID:
                self.machine[metric] = value
        if procs:
            self.procs = procs
        self.frames |= tick.stacks.stacks
        trainers = set(self.trainers() if self.trainers is not None else (self.pid,))
        for _ts, pid, tid, _state, stack_id in tick.stacks.rows:
            if pid in trainers and tid == pid:
                self.main_stacks[stack_id] += 1
                self.last_main_stack = stack_id

    def __rich__(self) -> RenderableType:
        with self._lock:
            return self._render()

    def _render(self) -> RenderableType:
        parts: list[RenderableType] = [self._gpus(), self._host()]
        if self.last_main_stack is not None:
            frames = self.frames.get(self.last_main_stack, ())[-STACK_FRAMES_SHOWN:]
            shown = "\n  ".join(printable(f) for f in reversed(frames))
            parts.append(Text("main thread now:\n  " + shown, style="dim"))
        elapsed = time.monotonic() - self.started_s
        title = Text(f"{printable(self.title)} · {elapsed:.0f} s · Ctrl-C to stop and report")  # not markup
        return Panel(Group(*parts), title=title, border_style="cyan")

    def _gpus(self) -> RenderableType:
        if not self.gpu:
            return Text("GPU: no samples (no NVIDIA driver or DCGM endpoint)", style="dim")
        table = Table(box=None, header_style="bold")
        for col in ("GPU", "util", "SM active", "tensor", "memory", "power"):
            table.add_column(col, justify="right", overflow="fold")
        for index, m in sorted(self.gpu.items()):
            used, total = m.get(schema.GPU_MEMORY_USED_BYTES), m.get(schema.GPU_MEMORY_TOTAL_BYTES)
            power, limit = m.get(schema.GPU_POWER_W), m.get(schema.GPU_POWER_LIMIT_W)
            table.add_row(str(index), pct(m.get(schema.GPU_UTIL), 0), pct(m.get(schema.GPU_SM_ACTIVE), 0),
                          pct(m.get(schema.GPU_TENSOR_ACTIVE), 0), f"{gib(used)} / {gib(total)}",
                          "n/a" if power is None else f"{power:.0f} W" + ("" if limit is None else f" / {limit:.0f} W"))
        return table

    def _host(self) -> RenderableType:
        def role(pid: int) -> Role:
            return self.roles.get(pid, "trainer" if pid == self.pid else "loader_worker")

        groups: dict[Role, list[dict[str, float]]] = {}
        for pid, m in self.procs.items():
            groups.setdefault(role(pid), []).append(m)
        trainers = groups.get("trainer", [])
        line = (f"host CPU {pct(self.machine.get(schema.HOST_CPU), 0)}  iowait "
                f"{pct(self.machine.get(schema.HOST_IOWAIT), 0)}"
                f"  ·  {_count(len(trainers), 'trainer')} {_cores(_sum_cpu(trainers))}"
                f"  ·  {_count(len(groups.get('loader_worker', [])), 'worker')}"
                f" {_cores(_sum_cpu(groups.get('loader_worker', [])))}")
        if groups.get("helper"):
            line += f"  ·  {_count(len(groups['helper']), 'helper')} {_cores(_sum_cpu(groups['helper']))}"
        rss = [m[schema.PROC_RSS_BYTES] for m in trainers if schema.PROC_RSS_BYTES in m]
        return Text(line + f"  ·  RSS {gib(sum(rss) if rss else None)}")


def _sum_cpu(procs: list[dict[str, float]]) -> float | None:
    """The processes' CPU together; n/a until every one of them has a rate (a first look has none)."""
    values = [m.get(schema.PROC_CPU_CORES) for m in procs]
    return None if not values or None in values else sum(v for v in values if v is not None)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _cores(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} cores"
