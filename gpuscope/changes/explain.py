"""Explain and price the change from a baseline Report to a candidate Report: pure, two reports in, a Diff out.

Beyond run-to-run noise is the gate's test (``gpuscope.gate``): the step time is significant when its change
passes the gate's step-time threshold (10% by default) and the one-sided permutation test over the steady steps
agrees at the gate's alpha; a part, when it alone moves the step by more than that threshold (of the baseline's
step time) and the same test over its time in each step agrees. A part that changed less than runs of one job
differ is not called a change, however steady its steps. Fewer steady steps than the gate's ``min_steps`` on
either side: unknown (None).

Whether the two runs are runs of one job is the gate's check too (``gpuscope.gate.comparable``). A rank that one
run lacks (a file that could not be read, say) would read as a GPU saved: the diff then covers the ranks both runs
have, on both sides, priced on those ranks' GPUs, and says which ranks it left out (``Diff.missing_ranks``); with no
rank in both, nothing is compared and the first note says so ("no rank in common: baseline ranks 3, candidate
ranks 1"). Another GPU model, GPU count, world size or workload is a caveat the diff leads with (``Diff.caveats``).

Every table covers the same steps: each run's steady steps, every one (the step time is their mean; the kernel and
operator tables are per steady step). A run's outlier step is in all of them, and a note names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.changes import names, parts, setup
from gpuscope.changes.price import HOURS_PER_MONTH, change_price, step_usd
from gpuscope.gate import stats
from gpuscope.gate.comparable import comparability
from gpuscope.gate.compare import no_common_rank
from gpuscope.gate.config import GateConfig
from gpuscope.gate.metrics import ranks_only
from gpuscope.gate.rhythm import outlier_words
from gpuscope.model.diff import Diff, DiffPart, DiffSide, SetupItem, StepTimes
from gpuscope.model.report import Report

LABELS = {"data_loading": "data wait", "host_overhead": "host / launch", "communication": "exposed communication",
          "memory": "memory copies", "gpu_compute": "compute", "idle": "idle"}
TOP_NAMES = 20


@dataclass(frozen=True)
class DiffOptions:
    """How a diff is priced and judged."""

    usd_per_gpu_hour: float | None = None
    """A price for both runs, over their own."""
    job_steps: int | None = None
    job_hours: float | None = None
    hours_per_month: float = HOURS_PER_MONTH
    config: GateConfig = field(default_factory=GateConfig)
    """The gate's alpha, thresholds and minimum steps."""
    top: int = TOP_NAMES


def explain(baseline: Report, candidate: Report, options: DiffOptions | None = None) -> Diff:
    """What changed from ``baseline`` to ``candidate``, what each stage contributed, and what it costs."""
    options = options or DiffOptions()
    check = comparability(baseline, candidate)
    lost = tuple(m.reason for m in check.mismatches if m.partial)
    items = setup.setup_items(baseline, candidate)  # the set-up as each run states it, lost ranks included
    nothing = (no_common_rank(tuple(sorted(r.rank for r in baseline.ranks)),
                              tuple(sorted(r.rank for r in candidate.ranks))) if lost and not check.common_ranks
               else None)
    outliers = _outlier_notes(baseline, candidate)
    if lost:  # the ranks both runs have, on both sides: a rank lost is not a GPU saved
        baseline, candidate = _common(baseline, check.common_ranks), _common(candidate, check.common_ranks)
    base_side, cand_side = _side(baseline, options, partial=bool(lost)), _side(candidate, options, partial=bool(lost))
    b_steps, c_steps = parts.side_steps(baseline), parts.side_steps(candidate)
    b_kernels, c_kernels = names.pooled(baseline, "kernels"), names.pooled(candidate, "kernels")
    diff_parts, notes = _parts(b_steps, c_steps, b_kernels, c_kernels, options)
    notes = [nothing] if nothing is not None else notes + outliers
    mixed = _profilers_note(items)
    b_step, c_step = base_side.step_time_us, cand_side.step_time_us
    change_us = c_step - b_step if b_step is not None and c_step is not None else None
    significant, p_value, test = _step_test(b_steps, c_steps, b_step, c_step, options.config)
    price = change_price(base_side, cand_side, job_steps=options.job_steps, job_hours=options.job_hours,
                         hours_per_month=options.hours_per_month)
    return Diff(
        baseline=base_side, candidate=cand_side, step_time_us=StepTimes(b_step, c_step), change_us=change_us,
        change=c_step / b_step - 1 if c_step is not None and b_step else None,
        significant=significant, p_value=p_value, test=test,
        parts=tuple(_with_share(p, change_us) for p in diff_parts),
        kernels=names.changes(b_kernels, c_kernels, top=options.top),
        operators=() if mixed is not None else names.changes(names.pooled(baseline, "operators"),
                                                              names.pooled(candidate, "operators"), top=options.top),
        setup=items, setup_changes=tuple(i for i in items if i.changed),
        price=price, usd_per_month=price.usd_per_month, alpha=options.config.alpha,
        notes=tuple(notes) + _table_notes(b_kernels, c_kernels) + ((mixed,) if mixed is not None else ()),
        caveats=tuple(m.reason for m in check.mismatches if not m.partial), missing_ranks=lost,
        ranks=check.common_ranks,
    )


def _outlier_notes(baseline: Report, candidate: Report) -> list[str]:
    """Each run's outlier step, named where every table counts it."""
    return [f"{outlier_words(side, o)}: counted in the step time and in every table (parts, kernels, operators), as "
            "every steady step is"
            for side, report in (("baseline", baseline), ("candidate", candidate)) for o in report.outlier_steps]


def _common(report: Report, ranks: tuple[int, ...]) -> Report:
    """The report of ``ranks`` alone. Its stage shares are dropped: they cover every rank the report read (host
    collective waits and idle gaps are not kept per rank), so the parts are the step breakdown's categories alone,
    the same on both sides."""
    return replace(ranks_only(report, ranks), stage_shares={})


def _side(report: Report, options: DiffOptions, *, partial: bool) -> DiffSide:
    """One run as the diff prices it; ``partial``: its report holds the compared ranks only, priced on their GPUs
    alone (the report's cost covers every rank it read)."""
    facts = facts_of(report)
    cost = report.cost
    eff = None if partial else report.efficiency
    gpus = (sum(r.gpu_count for r in report.ranks) if partial else cost.gpu_count) if cost is not None else None
    price = options.usd_per_gpu_hour if options.usd_per_gpu_hour is not None else (
        cost.usd_per_gpu_hour if cost is not None else None)
    source = "--usd-per-gpu-hour" if options.usd_per_gpu_hour is not None else (
        cost.price_source if cost is not None else None)
    per_step = (cost.per_step_usd if cost is not None and options.usd_per_gpu_hour is None and not partial
                else step_usd(facts.step_time_us, gpus, price))
    return DiffSide(name=report.run.name or report.run.id, run_id=report.run.id, step_time_us=facts.step_time_us,
                    steady_steps=facts.steady_steps, gpu_busy=facts.gpu_busy,
                    peak_memory_bytes=facts.peak_memory_bytes, peak_memory_share=facts.peak_memory_share,
                    gpu_count=gpus, usd_per_gpu_hour=price, price_source=source, usd_per_step=per_step,
                    # The run's efficiency covers every rank it read: none for a diff of some of them.
                    model_flops_per_step=eff.model_flops_per_step if eff is not None else None,
                    mfu=eff.mfu if eff is not None else None, mfu_flag=eff.mfu_flag if eff is not None else None)


def _parts(b: parts.SideSteps, c: parts.SideSteps, bk: names.Pooled, ck: names.Pooled,
           options: DiffOptions) -> tuple[list[DiffPart], list[str]]:
    if not len(b) or not len(c):
        return [], ["the step time cannot be split: " + " and ".join(
            side for side, s in (("the baseline", b), ("the candidate", c)) if not len(s))
            + " recorded no steady profiler steps"]
    b_fam, c_fam = names.compute_families(bk), names.compute_families(ck)
    if not b_fam or not c_fam:
        b_fam = c_fam = {}
    b_parts, c_parts = parts.split_compute(b, b_fam), parts.split_compute(c, c_fam)
    keys = list(dict.fromkeys([*b_parts, *c_parts]))
    zeros_b, zeros_c = np.zeros(len(b)), np.zeros(len(c))
    out = [_part(key, b_parts.get(key, zeros_b), c_parts.get(key, zeros_c), b, c, options.config) for key in keys]
    return out, []


def _part(key: parts.PartKey, b_us: parts.Floats, c_us: parts.Floats, b: parts.SideSteps, c: parts.SideSteps,
          config: GateConfig) -> DiffPart:
    stage, family = key
    b_mean, c_mean = float(b_us.mean()), float(c_us.mean())
    points = c_mean / float(c.step_us.mean()) - b_mean / float(b.step_us.mean())
    p, significant = _part_test(b_us, c_us, float(b.step_us.mean()), config)
    label = LABELS.get(stage, stage) + (f": {family}" if family else "")
    return DiffPart(stage=stage, family=family, label=label, baseline_us=b_mean, candidate_us=c_mean,
                    change_us=c_mean - b_mean, share_of_change=None, points=points, p_value=p,
                    significant=significant)


def _part_test(b: parts.Floats, c: parts.Floats, base_step_us: float,
               config: GateConfig) -> tuple[float | None, bool | None]:
    """The part's time per step, compared like the gate compares steps (on a linear scale: a part may be 0)."""
    if min(len(b), len(c)) < config.min_steps:
        return None, None
    change_us = float(c.mean() - b.mean())
    test = stats.greater(b, c) if change_us >= 0 else stats.greater(c, b)
    if test.min_p_value >= config.alpha:
        return test.p_value, None
    threshold_us = config.metric("step_time").threshold * base_step_us
    return test.p_value, abs(change_us) > threshold_us and test.p_value < config.alpha


def _step_test(b: parts.SideSteps, c: parts.SideSteps, b_step: float | None, c_step: float | None,
               config: GateConfig) -> tuple[bool | None, float | None, str]:
    if b_step is None or c_step is None or not b_step:
        return None, None, "no step times to test"
    if min(len(b), len(c)) < config.min_steps:
        return None, None, f"weak: {len(b)} vs {len(c)} steps, fewer than {config.min_steps}"
    log = bool(np.all(b.step_us > 0) and np.all(c.step_us > 0))
    test = (stats.greater(b.step_us, c.step_us, log=log) if c_step >= b_step
            else stats.greater(c.step_us, b.step_us, log=log))
    text = f"permutation ({test.method}), {len(b)} vs {len(c)} steps"
    if test.min_p_value >= config.alpha:
        return None, test.p_value, f"weak: {text}"
    threshold = config.metric("step_time").threshold
    return abs(c_step / b_step - 1) > threshold and test.p_value < config.alpha, test.p_value, text


def _with_share(part: DiffPart, change_us: float | None) -> DiffPart:
    if not change_us:
        return part
    return DiffPart(**{**part.__dict__, "share_of_change": part.change_us / change_us})


def _profilers_note(items: tuple[SetupItem, ...]) -> str | None:
    """What a diff of a run recorded by one profiler against one recorded by the other cannot compare; None when
    both were recorded alike (or either does not say)."""
    item = next((i for i in items if i.key == "profiler"), None)
    if item is None or not item.changed:
        return None
    return (f"the baseline ({item.baseline}) and the candidate ({item.candidate}) were recorded by different "
            "profilers: operators, their "
            "input shapes and dtypes, the DataLoader and allocator memory are recorded by the PyTorch profiler "
            "alone, so they are not compared (an Nsight Systems profile's NVTX ranges are not operators); kernels, "
            "copies, steps and communication are")


def _table_notes(b: names.Pooled, c: names.Pooled) -> tuple[str, ...]:
    notes = []
    for side, table in (("baseline", b), ("candidate", c)):
        if table.source == "top_kernels":
            notes.append(f"the {side}'s report predates kernel tables: its kernels are each rank's top 15 over "
                         "the whole trace, and it has no operators")
    if b.source != "none" and c.source != "none" and b.per != c.per:
        notes.append("kernel tables not compared: one run has profiler steps and the other does not")
    elif b.per == "second" and b.source != "none":
        notes.append("kernel and operator times are per second of the steady window (no profiler steps)")
    return tuple(notes)
