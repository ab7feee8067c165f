"""Compare a candidate Report with a baseline Report, metric by metric, past thresholds and past noise.

Pure: two Reports and a GateConfig in, a GateResult out. First the two runs must be runs of one job, each report
consistent (``gpuscope.gate.comparable``): otherwise the gate fails and names why, without comparing a number.
Then a metric fails only when its change passes its threshold in the worse direction AND a one-sided permutation
test over the steady per-step samples says the candidate's steps are worse than the baseline's at the configured
significance level (an exact permutation test, ``gpuscope.gate.stats``). Peak memory has one value per run, so its
threshold alone decides.

A change for the worse past its threshold that the steps cannot test (fewer than ``min_steps`` steady steps a
side, or too few for any split to reach ``alpha``) fails with "profile at least N steady steps": a gate that
cannot test does not pass, unless ``--allow-weak`` (``weak = "pass"``) says so.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpuscope.gate import judgement, stats
from gpuscope.gate.bottleneck import new_bottleneck
from gpuscope.gate.comparable import comparability, no_steady_steps
from gpuscope.gate.config import GateConfig
from gpuscope.gate.judgement import steps_needed
from gpuscope.gate.metrics import SPECS, MetricSpec, Side, ranks_only, side
from gpuscope.gate.result import ChangeKind, GateResult, MetricResult, Mismatch
from gpuscope.gate.samples import Floats
from gpuscope.model.report import Report


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
                      ranks=check.common_ranks, allow_weak=config.weak == "pass", steps_needed=steps_needed(config))
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
    every = {spec.key: _numeric(spec, config, base, cand) for spec in SPECS}
    results = [every[spec.key] for spec in SPECS if config.metric(spec.key).enabled]
    if config.metric("new_bottleneck").enabled:  # judged on the step and its cost, reported or not
        results.append(new_bottleneck(config, base, cand, every["step_time"], every["cost_per_1k_steps"]))
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
        return judgement.judged(replace(result, test="one value per run"), judgement.by_threshold(result, worse_by))
    test = _test(sb, sc, worse=worse_by >= 0, spec=spec)
    n_text = f"{len(sb)} vs {len(sc)} steps"
    if test is None or judgement.untestable(test, len(sb), len(sc), config):
        weak = replace(result, p_value=None if test is None else test.p_value, test=f"weak: {n_text}")
        return judgement.judged(weak, judgement.weak(result, worse_by, config, n_text))
    tested = replace(result, p_value=test.p_value, test=f"permutation ({test.method}), {n_text}",
                     significant=test.p_value < config.alpha)
    return judgement.judged(tested, judgement.by_test(result, worse_by, test.p_value, config.alpha))


def _test(b: Floats, c: Floats, *, worse: bool, spec: MetricSpec) -> stats.PermutationTest | None:
    """The one-sided test for the direction of the change: "candidate worse", or "candidate better"."""
    if not len(b) or not len(c):
        return None
    log = spec.change_kind == "relative" and bool(np.all(b > 0)) and bool(np.all(c > 0))
    candidate_greater = worse != spec.higher_is_better
    return stats.greater(b, c, log=log) if candidate_greater else stats.greater(c, b, log=log)


def _notes(config: GateConfig, base: Side, cand: Side) -> tuple[str, ...]:
    notes: list[str] = []
    for name, run in (("baseline", base), ("candidate", cand)):
        if run.steps.warmup_excluded:
            notes.append(f"{name}: {run.steps.warmup_excluded} warm-up step(s) left out")
        if len(run.steps) < steps_needed(config):
            notes.append(f"{name}: {len(run.steps)} steady steps, fewer than {steps_needed(config)}: the per-step "
                         "tests are weak")
    return tuple(notes)
