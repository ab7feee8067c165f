"""What changed from one run to another, and what it costs: the record ``gpuscope diff --json`` prints and every
view of a change (the terminal, the report's ``--compare`` section, the dashboard's compare page, a failing gate)
renders.

Times are µs per step (the job's step, ``JobFacts.step_time_us``); a value one run cannot tell is None (JSON null).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuscope.model.diagnosis import Stage
from gpuscope.model.efficiency import CeilingFlag

SCHEMA = "gpuscope.diff/1"

PartStage = Stage | Literal["unattributed"]
Match = Literal["name", "family", "appeared", "disappeared", "unlisted"]
"""How a name was matched: by name, by family, on one side only (appeared, disappeared), or listed on one side only
where the other's table left names out (it ran there under the ``note``'s bound, if at all)."""


@dataclass(frozen=True)
class DiffSide:
    """One of the two runs, by the facts every view quotes."""

    name: str
    run_id: str
    step_time_us: float | None
    steady_steps: int
    gpu_busy: float | None
    peak_memory_bytes: int | None
    peak_memory_share: float | None
    gpu_count: int | None
    usd_per_gpu_hour: float | None
    price_source: str | None
    usd_per_step: float | None
    model_flops_per_step: float | None = None
    """The run's ``Efficiency.model_flops_per_step`` (None: not counted, or the diff covers only some ranks)."""
    mfu: float | None = None
    """The run's ``Efficiency.mfu``, with its flag where it is above 100%."""
    mfu_flag: CeilingFlag | None = None


@dataclass(frozen=True)
class StepTimes:
    baseline: float | None
    candidate: float | None


@dataclass(frozen=True)
class DiffPart:
    """One stage's (or one compute kernel family's) share of the step-time change.

    The parts' ``change_us`` add up to the step time's change, and each side's parts to its step time."""

    stage: PartStage
    family: str | None
    """For gpu_compute: the kernel family ("gemm", "convolution", ...); None for the other stages."""
    label: str
    baseline_us: float
    candidate_us: float
    change_us: float
    share_of_change: float | None
    """change_us / the step time's change; None when the step time did not change."""
    points: float
    """The change of the part's share of the step (candidate's share less baseline's), 0..1 scale."""
    p_value: float | None
    """One-sided permutation test over the part's time in each steady step, in the direction of the change."""
    significant: bool | None
    """Beyond run-to-run noise: the part alone moved the step by more than the gate's step-time threshold (of the
    baseline's step) and the test agrees at the gate's alpha; None when too few steps were recorded to tell."""


@dataclass(frozen=True)
class NameChange:
    """A kernel or operator whose time per step changed: matched by name, by family, or present on one side only
    (``Match``)."""

    name: str
    """The name; for a family match "old -> new" (one name each side) or "family (n names -> m)"."""
    family: str
    match: Match
    baseline_us: float
    """Time per step (per second of the steady window for runs without profiler steps); 0 for a name that
    appeared."""
    candidate_us: float
    change_us: float
    baseline_count: float
    """Calls per step."""
    candidate_count: float
    names_baseline: tuple[str, ...] = ()
    """For a family match: the baseline's names that had no match by name."""
    names_candidate: tuple[str, ...] = ()
    note: str = ""
    """Why a match is uncertain (a name under the other side's table floor, say)."""


@dataclass(frozen=True)
class SetupItem:
    """One aspect of the set-up on both sides; ``changed`` is None when one side does not say."""

    key: str
    label: str
    baseline: str | None
    candidate: str | None
    changed: bool | None


@dataclass(frozen=True)
class ChangePrice:
    """The price of the change, at each run's own GPU price."""

    usd_per_step: float | None
    """Candidate's cost per step less the baseline's."""
    usd_per_job: float | None
    job_basis: str | None
    """How the job was sized ("--job-steps 100000" ...); None without a job size."""
    usd_per_month: float | None
    hours_per_month: float
    assumption: str
    """The month's assumption in words."""


@dataclass(frozen=True)
class Diff:
    """The change from ``baseline`` to ``candidate``, explained and priced."""

    baseline: DiffSide
    candidate: DiffSide
    step_time_us: StepTimes
    change_us: float | None
    change: float | None
    """Relative: candidate / baseline - 1."""
    significant: bool | None
    """The step time moved past the gate's threshold and its permutation test over the steps agrees; None when
    too few steps were recorded to tell."""
    p_value: float | None
    test: str
    parts: tuple[DiffPart, ...]
    kernels: tuple[NameChange, ...]
    operators: tuple[NameChange, ...]
    setup: tuple[SetupItem, ...]
    """Every aspect, changed or not."""
    setup_changes: tuple[SetupItem, ...]
    """The aspects both sides state and that differ."""
    price: ChangePrice
    usd_per_month: float | None
    alpha: float
    notes: tuple[str, ...] = ()
    schema: str = SCHEMA
    caveats: tuple[str, ...] = ()
    """Why the two runs may be runs of two jobs (another GPU model, GPU count or world size, another workload, no
    steady steps, a report that failed its consistency check), one sentence each, from the gate's comparability
    check: every view of the diff leads with them (``gpuscope diff --strict`` refuses instead)."""
    missing_ranks: tuple[str, ...] = ()
    """Ranks one run lacks (a rank file that could not be read, fewer ranks than the world size, ranks the other
    run has), one sentence each. The diff then covers ``ranks`` alone on both sides, priced on their GPUs only,
    so a lost GPU is never priced as a saving; ``gpuscope diff`` fails on these unless ``--allow-partial``."""
    ranks: tuple[int, ...] = ()
    """The rank numbers compared: those both runs have."""
