"""What a gate run decided, metric by metric: the record every output (table, JSON, JUnit, Markdown) renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuscope.model.diff import Diff

SCHEMA = "gpuscope.gate/1"

Status = Literal["pass", "regression", "improvement", "weak", "unknown"]
"""regression fails the gate; weak is a change past its threshold that too few steps cannot test (a weak change for
the worse fails, "profile at least N steady steps", unless ``--allow-weak`` or ``weak = "pass"``); unknown is a
metric one of the two runs cannot tell."""
Unit = Literal["us", "share", "usd", "bytes", "stage"]
ChangeKind = Literal["relative", "points"]
MismatchCode = Literal["report_schema", "unreadable_rank", "missing_ranks", "ranks_differ", "gpu_model", "gpu_count",
                       "workload", "no_steady_steps", "inconsistent_report"]
Which = Literal["baseline", "candidate", "both"]


@dataclass(frozen=True)
class Mismatch:
    """Why the two runs cannot be compared metric by metric (``gpuscope.gate.comparable``)."""

    code: MismatchCode
    side: Which
    reason: str
    """One sentence, naming the run, what differs and what it would do to the numbers."""
    partial: bool
    """A rank missing from one run: ``--allow-partial`` compares the ranks both runs have instead of failing."""


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
    definition: str = ""
    """What the value is: the one statistic it is taken with, from which part of the report."""
    significant: bool | None = None
    """The per-step test put the change beyond step-to-step noise (p below alpha); None where it could not test
    (too few steps, or one value per run)."""
    baseline_stage_us: float | None = None
    """For a stage share: the stage's time per typical step in the baseline (the share's numerator, µs)."""
    candidate_stage_us: float | None = None
    """For a stage share: the stage's time per typical step in the candidate (µs)."""

    @property
    def within_threshold(self) -> bool:
        """The change is no larger than the threshold either way: it passes whatever the steps say."""
        return self.change is not None and abs(self.change) <= self.threshold


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
    """Empty when a mismatch kept the runs from being compared."""
    notes: tuple[str, ...] = ()
    schema: str = SCHEMA
    comparable: bool = True
    """False when a mismatch kept the runs from being compared: the gate fails, and ``metrics`` is empty."""
    mismatches: tuple[Mismatch, ...] = ()
    """Every difference found between the runs, allowed ones (``partial``) included."""
    allow_partial: bool = False
    """``--allow-partial`` was given: a rank missing from a run does not block the comparison."""
    partial: bool = False
    """Compared on ``ranks`` only, the ranks both runs have, because a run misses some and that was allowed."""
    ranks: tuple[int, ...] = ()
    """The rank numbers whose steps were compared."""
    allow_weak: bool = False
    """``--allow-weak`` (or ``weak = "pass"``): a change for the worse that too few steps cannot test passes,
    reported as weak, instead of failing."""
    steps_needed: int = 0
    """The fewest steady steps on each side at which the per-step test can reach ``alpha`` (whole periods of
    ``block`` steps)."""
    block: int = 1
    """Steps per tested sample: 1, or the period at which a run's slow steps recur (``JobFacts.recurring``), whose
    periods the tests then compare."""
    explanation: Diff | None = None
    """When the gate fails: what changed from the baseline and what it costs (``gpuscope diff``); the terminal,
    JUnit and Markdown outputs show its top lines."""

    @property
    def failures(self) -> tuple[MetricResult, ...]:
        return tuple(m for m in self.metrics if m.fails)

    @property
    def blocking(self) -> tuple[Mismatch, ...]:
        """The mismatches that kept the runs from being compared (none when the comparison went ahead)."""
        if self.comparable:
            return ()
        return tuple(m for m in self.mismatches if not (self.allow_partial and m.partial))
