"""The job's outlier step: the one slow step that did not recur (``trace.step_stats``), which rank made it long,
which stage the extra time went to, and what took it. Slow steps that recur are not outliers: they are the job's
rhythm (``JobFacts.recurring``).

A job's step ends when its slowest rank's does, so an outlier step is named by that rank. Its stage is the one
whose time grew most over the rank's typical step (the TensorBoard plugin's categories, regrouped as the stage
shares regroup them); its cause is the ranges that were long in that step and not in the others, as the rank's
trace showed them (``RankReport.slow_steps``), or, when no traced range took the time, the stage in words.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.analyzers.diagnosis.typical import outlier_names, typical_rank
from gpuscope.model.diagnosis import OutlierStep, Stage
from gpuscope.model.rank import LongRange, RangeKind, RankReport, StepBreakdown, StepRecord

CATEGORY_STAGE: dict[str, Stage] = {
    "kernel": "gpu_compute", "memcpy": "memory", "memset": "memory", "communication": "communication",
    "runtime": "host_overhead", "cpu_exec": "host_overhead", "other": "host_overhead", "dataloader": "data_loading",
}
KIND_WORDS: dict[RangeKind, str] = {
    "record_function": "record_function range", "operator": "operator", "python": "Python function",
    "runtime": "runtime call", "sync": "host-device sync", "kernel": "GPU kernel",
    "collective": "collective: waiting for other ranks", "memcpy": "copy", "memset": "memset",
    "dataloader": "data stall in the DataLoader",
}
UNTRACED: dict[Stage, str] = {
    "data_loading": "a data stall: the DataLoader took longer",
    "communication": "a wait in collectives: a sync with slower ranks",
    "memory": "longer host-device copies",
    "gpu_compute": "longer GPU kernels",
    "idle": "the GPU idle with nothing traced on the host",
    "host_overhead": "untraced host time: no operator or record_function range took it (Python between "
                     "operators, the garbage collector, I/O, the OS)",
}


def outlier_steps(ranks: Sequence[RankReport], typical_step_us: float | None) -> tuple[OutlierStep, ...]:
    """The job's outlier step (none or one); ``typical_step_us``: the job's typical step
    (``JobFacts.typical_step_us``), which its extra time is measured from."""
    names = outlier_names(ranks)
    if not names or typical_step_us is None:
        return ()
    found: dict[str, tuple[RankReport, StepRecord]] = {}
    for r in ranks:
        for s in r.per_step:
            if s.name in names and (s.name not in found or s.duration_us > found[s.name][1].duration_us):
                found[s.name] = (r, s)
    rows = sorted(found.values(), key=lambda pair: pair[1].start_us)
    return tuple(_outlier(r, s, typical_step_us, names) for r, s in rows)


def _outlier(r: RankReport, s: StepRecord, typical_step_us: float, names: frozenset[str]) -> OutlierStep:
    stage = grown_stage(s.breakdown_us, typical_rank(r, names).step_breakdown_us)
    slow = next((x for x in r.slow_steps if x.step == s.name), None)
    ranges = slow.ranges if slow is not None else ()
    return OutlierStep(rank=r.rank, step=int(s.name) if s.name.isdigit() else s.name, time_us=s.duration_us,
                       extra_us=s.duration_us - typical_step_us, stage=stage, cause=cause(ranges, stage),
                       ranges=tuple(x.name for x in ranges))


def grown_stage(step: StepBreakdown, typical: StepBreakdown) -> Stage:
    """The stage whose time grew most from ``typical`` to ``step``."""
    grown: dict[Stage, float] = {}
    for category, stage in CATEGORY_STAGE.items():
        grown[stage] = grown.get(stage, 0.0) + getattr(step, category) - getattr(typical, category)
    return max(grown, key=lambda st: grown[st])


def cause(ranges: Sequence[LongRange], stage: Stage) -> str:
    """What took a step's extra time, in words: its long ranges with what each is, else the stage's words."""
    if not ranges:
        return UNTRACED[stage]
    return "; ".join(f"{x.name} ({KIND_WORDS[x.kind]})" for x in ranges)
