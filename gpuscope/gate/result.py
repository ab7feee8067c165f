"""What a gate run decided, metric by metric: the record every output (table, JSON, JUnit, Markdown) renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SCHEMA = "gpuscope.gate/1"

Status = Literal["pass", "regression", "improvement", "weak", "unknown"]
"""regression fails the gate; weak is a change past its threshold that too few steps cannot confirm
(it fails only with ``weak = "fail"``); unknown is a metric one of the two runs cannot tell."""
Unit = Literal["us", "share", "usd", "bytes", "stage"]
ChangeKind = Literal["relative", "points"]


@dataclass(frozen=True)
class MetricResult:
    """One gated metric. Values are in ``unit`` (shares 0..1); None where a run cannot tell."""

    key: str
    title: str
    unit: Unit
    baseline: float | str | None
    candidate: float | str | None
    change: float | None
    """Candidate against baseline: relative (0.25 = 25% more) or in points of a share (0.05 = 5 points)."""
    change_kind: ChangeKind
    threshold: float
    """The change, in the worse direction, that a regression must pass (same kind as ``change``)."""
    higher_is_better: bool
    p_value: float | None
    """One-sided permutation-test p-value for the direction of the change; None without per-step samples."""
    test: str
    """How the change was judged, e.g. "permutation (exact), 6 vs 6 steps"."""
    status: Status
    reason: str
    """One sentence: why this status."""
    fails: bool
    recommendations: tuple[str, ...] = ()
    """For a new bottleneck: what the candidate's report advises for it."""


@dataclass(frozen=True)
class GateResult:
    """The gate's decision on a candidate against a baseline."""

    passed: bool
    baseline: str
    candidate: str
    baseline_steps: int
    """Steady steps of the baseline (warm-up excluded) the statistics were taken over."""
    candidate_steps: int
    alpha: float
    metrics: tuple[MetricResult, ...]
    notes: tuple[str, ...] = ()
    schema: str = SCHEMA

    @property
    def failures(self) -> tuple[MetricResult, ...]:
        return tuple(m for m in self.metrics if m.fails)
