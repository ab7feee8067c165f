"""What every diagnosis rule sees (a Context) and what it gives back (a RuleOutput).

Rules are plain functions ``apply(ctx) -> RuleOutput``, one module per stage in ``rules/`` (data, host,
comm, memory, gpu; trace for what the trace says of itself, serving for inference). A rule reports a Finding
with the numbers behind it (units in the evidence keys) and the Recommendations it implies; the verdict
module weighs stages and caps savings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from gpuscope.analyzers.advice.vendor import Words, job_vendor, words
from gpuscope.analyzers.diagnosis.evidence import TraceEvidence
from gpuscope.analyzers.diagnosis.stages import StageShares
from gpuscope.analyzers.diagnosis.stragglers import Straggler
from gpuscope.model.diagnosis import Finding, JobFacts, Recommendation, Severity, Stage
from gpuscope.model.gpu import Vendor
from gpuscope.model.live import LiveSummary
from gpuscope.model.rank import RankReport
from gpuscope.model.run import Run


@dataclass(frozen=True)
class RuleOutput:
    findings: tuple[Finding, ...] = ()
    recommendations: tuple[Recommendation, ...] = ()

    def __add__(self, other: RuleOutput) -> RuleOutput:
        return RuleOutput(tuple(self.findings) + tuple(other.findings),
                          tuple(self.recommendations) + tuple(other.recommendations))


@dataclass(frozen=True)
class Context:
    """A run's evidence, gathered once for every rule."""

    run: Run
    ranks: tuple[RankReport, ...]
    evidence: tuple[TraceEvidence, ...]
    """One per rank, in the order of ``ranks`` (empty for a run without traces)."""
    live: LiveSummary | None
    shares: StageShares
    facts: JobFacts = JobFacts()
    """The job-level figures (step time, GPU busy, peak memory, ...) every rule quotes: one value per fact."""
    straggler: Straggler | None = None
    skipped_steps: frozenset[str] = frozenset()
    """The job's outlier steps (their numbers): the stage shares and the verdict's support leave them out."""

    @property
    def inference(self) -> bool:
        """Every rank with a known workload is served (and at least one is known): advice in serving terms."""
        kinds = {r.workload for r in self.ranks if r.workload is not None}
        return kinds == {"inference"}

    @property
    def no_gpu(self) -> bool:
        """A live run with no GPU evidence at all (a CPU-only target): GPU advice would be noise."""
        return no_gpu_seen(self.run, self.ranks, self.live)

    def mean(self, f: Callable[[RankReport], float | None]) -> float | None:
        """Mean over ranks of a per-rank figure, ignoring ranks where it is unknown."""
        xs = [v for v in (f(r) for r in self.ranks) if v is not None]
        return sum(xs) / len(xs) if xs else None

    def mean_ev(self, f: Callable[[TraceEvidence], float | None]) -> float | None:
        xs = [v for v in (f(e) for e in self.evidence) if v is not None]
        return sum(xs) / len(xs) if xs else None

    def per_step_share(self, f: Callable[[RankReport, TraceEvidence], float]) -> float:
        """Mean over ranks of (a per-step µs figure / that rank's step time, or steady window without steps)."""
        xs = [f(r, e) / r.span_us for r, e in zip(self.ranks, self.evidence) if r.span_us > 0]
        return sum(xs) / len(xs) if xs else 0.0

    @cached_property
    def vendor(self) -> Vendor | None:
        """The job's GPU vendor, decided once (``advice.vendor.job_vendor``)."""
        return job_vendor(self.ranks, self.run.meta.gpus)

    @cached_property
    def backends(self) -> set[str]:
        """The process groups' backends the ranks' traces name (nccl, gloo, ...); empty where none does."""
        return {e.backend for e in self.evidence if e.backend}

    @property
    def words(self) -> Words:
        """What every advice text calls the vendor's software (NCCL or RCCL, CUDA or HIP graphs, ...)."""
        return words(self.vendor)

    @property
    def step_time_us(self) -> float | None:
        """The job's step time (``JobFacts.step_time_us``: the mean of every steady step)."""
        return self.facts.step_time_us

    @property
    def typical_step_us(self) -> float | None:
        """The typical step the stage shares are of (``JobFacts.typical_step_us``): a share in time is the share
        times this."""
        return self.facts.typical_step_us

    @property
    def compute_capability(self) -> float | None:
        """The CUDA compute capability of the job's GPUs; None when unknown, and on AMD GPUs, whose
        deviceProperties carry the gfx target where it would be (9.0 for an MI210's gfx90a), which no CUDA
        threshold applies to."""
        if self.vendor == "amd":
            return None
        cc = next((e.compute_capability for e in self.evidence if e.compute_capability), None)
        cc = cc or next((g.compute_capability for g in self.run.meta.gpus if g.compute_capability), None)
        try:
            return float(cc) if cc else None
        except ValueError:
            return None


def no_gpu_seen(run: Run, ranks: Sequence[RankReport], live: LiveSummary | None) -> bool:
    """True for a live run that shows no GPU (none in its metadata, no GPU samples, no GPU work in a trace), and
    for a trace-only run whose every rank recorded no GPU activity (a CPU job: ``RankReport.cpu_only``)."""
    if live is None:
        return bool(ranks) and all(r.cpu_only for r in ranks)
    return not run.meta.gpus and not live.gpus and all(r.gpu_busy is None for r in ranks)


def severity(share: float, *, warning: float, critical: float) -> Severity:
    """Severity from a share against two thresholds."""
    return "critical" if share >= critical else "warning" if share >= warning else "info"


def finding(code: str, sev: Severity, title: str, evidence: dict[str, float | int | str | None], *,
            share: float | None = None, recs: Sequence[Recommendation] = (), stage: Stage | None = None,
            rank: int | None = None) -> Finding:
    """A Finding whose recommendation codes are those of ``recs``."""
    return Finding(code=code, severity=sev, title=title, evidence=evidence, time_share=share,
                   recommendations=tuple(r.code for r in recs), stage=stage, rank=rank)
