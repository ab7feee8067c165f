"""Compare a candidate Report with a baseline Report, metric by metric, past thresholds and past noise.

Pure: two Reports and a GateConfig in, a GateResult out. First the two runs must be runs of one job
(``gpuscope.gate.comparable``): otherwise the gate fails and names why, without comparing a number. Then a metric
fails only when its change passes its threshold in the worse direction AND a one-sided permutation test over the
steady per-step samples says the candidate's steps are worse than the baseline's at the configured significance
level (an exact permutation test, ``gpuscope.gate.stats``). Peak memory has one value per run, so its threshold
alone decides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpuscope.gate import stats
from gpuscope.gate.comparable import comparability, no_steady_steps
from gpuscope.gate.config import GateConfig
from gpuscope.gate.metrics import BOTTLENECK_DEFINITION, SPECS, MetricSpec, Side, ranks_only, side
from gpuscope.gate.result import ChangeKind, GateResult, MetricResult, Mismatch, Status
from gpuscope.gate.samples import Floats
from gpuscope.gate.text import change as change_text
from gpuscope.gate.text import threshold as threshold_text
from gpuscope.model.diagnosis import Stage
from gpuscope.model.report import Report

STALL_STAGES: tuple[Stage, ...] = ("data_loading", "host_overhead", "communication", "memory", "idle")


def compare(baseline: Report, candidate: Report, config: GateConfig | None = None, *,
            allow_partial: bool = False) -> GateResult:
    """Gate ``candidate`` against ``baseline``. Runs that are not runs of one job fail the gate with their reasons
    (``gpuscope.gate.comparable``); with ``allow_partial`` a rank missing from either is compared on the ranks
    both have instead."""
    config = config or GateConfig()
    check = comparability(baseline, candidate)
    mismatches = check.mismatches
    partial = bool(mismatches) and not check.blocking(allow_partial=allow_partial)
    if partial:
        baseline, candidate = ranks_only(baseline, check.common_ranks), ranks_only(candidate, check.common_ranks)
        mismatches += _nothing_left(baseline, candidate)
    base, cand = side(baseline), side(candidate)
    head = GateResult(passed=False, baseline=_name(baseline), candidate=_name(candidate),
                      baseline_steps=len(base.steps), candidate_steps=len(cand.steps), alpha=config.alpha,
                      metrics=(), mismatches=mismatches, allow_partial=allow_partial, partial=partial,
                      ranks=check.common_ranks)
    if any(not (allow_partial and m.partial) for m in mismatches):
        return replace(head, comparable=False)
    results = _metrics(config, base, cand)
    notes = _notes(config, base, cand) + ((_partial_note(head),) if partial else ())
    return replace(head, passed=not any(r.fails for r in results), metrics=results, notes=notes)


def _nothing_left(baseline: Report, candidate: Report) -> tuple[Mismatch, ...]:
    """What a partial comparison cannot get past: no rank in both runs, or no steady step on the ranks it keeps."""
    if not baseline.ranks:
        return (Mismatch("ranks_differ", "both", "no rank is in both runs: a partial comparison has nothing to "
                         "compare", partial=False),)
    found = (no_steady_steps("baseline", baseline), no_steady_steps("candidate", candidate))
    return tuple(m for m in found if m is not None)


def _partial_note(result: GateResult) -> str:
    ranks = ", ".join(str(r) for r in result.ranks)
    return (f"partial comparison (--allow-partial): step time, GPU busy, cost and peak memory of rank(s) {ranks} "
            f"only, the ranks both runs have; shares and the verdict as each report gives them")


def _metrics(config: GateConfig, base: Side, cand: Side) -> tuple[MetricResult, ...]:
    results = [_numeric(spec, config, base, cand) for spec in SPECS if config.metric(spec.key).enabled]
    if config.metric("new_bottleneck").enabled:
        step = next((r for r in results if r.key == "step_time"), None)
        results.append(_bottleneck(config, base, cand, step))
    return tuple(results)


def _name(report: Report) -> str:
    return report.run.name or report.run.id


def _relative_or_points(kind: ChangeKind, b: float, c: float) -> float | None:
    if kind == "points":
        return c - b
    return None if b <= 0 else c / b - 1.0


def _numeric(spec: MetricSpec, config: GateConfig, base: Side, cand: Side) -> MetricResult:
    threshold = config.metric(spec.key).threshold
    b, c = spec.value(base.report), spec.value(cand.report)
    change = None if b is None or c is None else _relative_or_points(spec.change_kind, b, c)
    result = MetricResult(key=spec.key, title=spec.title, unit=spec.unit, baseline=b, candidate=c, change=change,
                          change_kind=spec.change_kind, threshold=threshold, higher_is_better=spec.higher_is_better,
                          p_value=None, test="", status="unknown", reason="", fails=False,
                          definition=spec.definition)
    if b is None or c is None:
        missing = "either run" if b is None and c is None else "the baseline" if b is None else "the candidate"
        return replace(result, reason=f"not known in {missing}")
    if change is None:
        return replace(result, reason="the baseline's value is 0: no relative change")
    worse_by = -change if spec.higher_is_better else change
    sb, sc = spec.samples(base), spec.samples(cand)
    if sb is None or sc is None:
        return _judged(replace(result, test="one value per run"), _by_threshold(result, worse_by))
    test = _test(sb, sc, worse=worse_by >= 0, spec=spec)
    n_text = f"{len(sb)} vs {len(sc)} steps"
    if test is None or min(len(sb), len(sc)) < config.min_steps or test.min_p_value >= config.alpha:
        weak = replace(result, p_value=None if test is None else test.p_value, test=f"weak: {n_text}")
        return _judged(weak, _weak(result, worse_by, config, n_text))
    tested = replace(result, p_value=test.p_value, test=f"permutation ({test.method}), {n_text}")
    return _judged(tested, _by_test(result, spec, worse_by, test.p_value, config.alpha))


@dataclass(frozen=True)
class Judgement:
    status: Status
    reason: str
    fails: bool = False


def _within(m: MetricResult) -> Judgement:
    """Passed on the threshold alone, whatever the steps say: the words say so, never a bare significance."""
    return Judgement("pass", f"{change_text(m)} is within the {threshold_text(m)} threshold")


def _by_threshold(m: MetricResult, worse_by: float) -> Judgement:
    if worse_by > m.threshold:
        return Judgement("regression", f"{change_text(m)} is past the {threshold_text(m)} threshold", fails=True)
    if -worse_by > m.threshold:
        return Judgement("improvement", f"{change_text(m)}: improved")
    return _within(m)


def _weak(m: MetricResult, worse_by: float, config: GateConfig, n_text: str) -> Judgement:
    if abs(worse_by) <= m.threshold:
        return _within(m)
    return Judgement("weak", f"{change_text(m)} but only {n_text}: too few to tell it from step-to-step noise "
                     f"(record at least {config.min_steps} steady steps each)",
                     fails=worse_by > 0 and config.weak == "fail")


def _by_test(m: MetricResult, spec: MetricSpec, worse_by: float, p: float, alpha: float) -> Judgement:
    if abs(worse_by) <= m.threshold:
        return _within(m)
    if p >= alpha:
        return Judgement("pass", f"{change_text(m)} but within step-to-step noise (p = {p:.3f} >= {alpha:g})")
    if worse_by > 0:
        return Judgement("regression", f"{change_text(m)} (past {_threshold_words(spec, m.threshold)}), "
                         f"significant over the steps (p = {p:.3g})", fails=True)
    return Judgement("improvement", f"{change_text(m)}, significant over the steps (p = {p:.3g})")


def _judged(m: MetricResult, j: Judgement) -> MetricResult:
    return replace(m, status=j.status, reason=j.reason, fails=j.fails)


def _threshold_words(spec: MetricSpec, threshold: float) -> str:
    if spec.change_kind == "points":
        return f"{threshold * 100:.1f} points"
    return f"{threshold * 100:.0f}%"


def _test(b: Floats, c: Floats, *, worse: bool, spec: MetricSpec) -> stats.PermutationTest | None:
    """The one-sided test for the direction of the change: "candidate worse", or "candidate better"."""
    if not len(b) or not len(c):
        return None
    log = spec.change_kind == "relative" and bool(np.all(b > 0)) and bool(np.all(c > 0))
    candidate_greater = worse != spec.higher_is_better
    return stats.greater(b, c, log=log) if candidate_greater else stats.greater(c, b, log=log)


def _bottleneck(config: GateConfig, base: Side, cand: Side, step: MetricResult | None) -> MetricResult:
    threshold = config.metric("new_bottleneck").threshold
    b, c = base.report.verdict.primary, cand.report.verdict.primary
    share_b = base.report.stage_shares.get(c) if c else None
    share_c = cand.report.stage_shares.get(c) if c else None
    growth = None if share_b is None or share_c is None else share_c - share_b

    def result(status: Status, reason: str, *, fails: bool = False, recs: tuple[str, ...] = ()) -> MetricResult:
        return MetricResult(key="new_bottleneck", title="New bottleneck", unit="stage", baseline=b, candidate=c,
                            change=growth, change_kind="points", threshold=threshold, higher_is_better=False,
                            p_value=None, test="verdict's primary stage", status=status,
                            reason=reason, fails=fails, recommendations=recs, definition=BOTTLENECK_DEFINITION)

    if b is None or c is None:
        return result("unknown", "a verdict names no primary stage")
    if c == b:
        return result("pass", f"still {c}")
    if c not in STALL_STAGES:
        return result("pass", f"now {c}: not a stall")
    if step is not None and step.status == "improvement":
        return result("pass", f"{c} is what is left now that the step is faster ({change_text(step)}); was {b}")
    if growth is not None and growth < threshold:
        return result("pass", f"{c} leads now but its share grew {growth * 100:.1f} points (threshold "
                      f"{threshold * 100:.1f})")
    recs = tuple(r.title for r in cand.report.recommendations if r.stage == c)
    share = "" if share_c is None else f", {share_c:.1%}"
    grown = "" if growth is None else f" ({growth * 100:+.1f} points)"
    advice = f"; {recs[0]}" if recs else ""
    return result("regression", f"new bottleneck {c} (was {b}){share} of the step{grown}{advice}", fails=True,
                  recs=recs)


def _notes(config: GateConfig, base: Side, cand: Side) -> tuple[str, ...]:
    notes: list[str] = []
    for name, run in (("baseline", base), ("candidate", cand)):
        if run.steps.warmup_excluded:
            notes.append(f"{name}: {run.steps.warmup_excluded} warm-up step(s) left out")
        if len(run.steps) < config.min_steps:
            notes.append(f"{name}: {len(run.steps)} steady steps, fewer than {config.min_steps}: the per-step "
                         f"tests are weak")
    return tuple(notes)
