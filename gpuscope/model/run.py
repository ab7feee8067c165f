"""What a run is: its catalog entry, the GPUs it used, and the data recorded into it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from gpuscope.model.gpu import GpuInfo

if TYPE_CHECKING:
    import pandas as pd

    from gpuscope.model.trace import RankTrace

RunKind = Literal["attach", "run", "trace", "fleet", "memory"]
RunStatus = Literal["running", "complete", "target_exited", "interrupted", "failed"]


@dataclass(frozen=True)
class RunMeta:
    """A run's catalog entry in the store."""

    id: str
    name: str
    kind: RunKind
    status: RunStatus
    started_ns: int
    ended_ns: int | None = None
    host: str | None = None
    command: tuple[str, ...] = ()
    pid: int | None = None
    gpus: tuple[GpuInfo, ...] = ()
    price_source: str | None = None
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int | None:
        return None if self.ended_ns is None else self.ended_ns - self.started_ns

    @property
    def gpu_model(self) -> str | None:
        """The GPU model the run is priced and measured by: its first GPU with a name (runs mixing models are
        rare). The price, the spec table's peak and every view take the model from here."""
        return next((g.name for g in self.gpus if g.name), None)


@dataclass(frozen=True)
class StackSamples:
    """py-spy stack samples of a run, in long form.

    ``samples`` columns: ts_ns, pid, tid, state ("active" | "idle" | "gil" ...), stack_id.
    ``stacks`` maps stack_id to its frames, outermost first, each "function (file:line)".
    """

    samples: pd.DataFrame
    stacks: dict[int, tuple[str, ...]]


@dataclass(frozen=True)
class Run:
    """Everything recorded for one run: what every analyzer takes as its only input."""

    meta: RunMeta
    traces: tuple[RankTrace, ...] = ()
    samples: pd.DataFrame | None = None
    """Long format: ts_ns, source, gpu, pid, metric, value (see model.schema). A counter
    a device cannot report is a missing row, never a 0."""
    stacks: StackSamples | None = None
