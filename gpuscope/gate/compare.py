"""Compare a candidate Report with a baseline Report, metric by metric, past thresholds and past noise.

Pure: two Reports and a GateConfig in, a GateResult out. First the two runs must be runs of one job, each report
consistent (``gpuscope.gate.comparable``): otherwise the gate fails and names why, without comparing a number.
Then a metric fails only when its change passes its threshold in the worse direction AND a one-sided permutation
test over the steady per-step samples says the candidate's steps are worse than the baseline's at the configured
significance level (an exact permutation test, ``gpuscope.gate.stats``). Peak memory has one value per run, so its
threshold alone decides.

A change for the worse past its threshold that the steps cannot test (fewer than ``min_steps`` steady steps a
side, or too few for any split to reach ``alpha``) fails with "profile at least N steady steps": a gate that
cannot test does not pass, unless ``--allow-weak`` (``weak = "pass"``) says so. With fewer than 3 steady steps on
a side no step can be told typical or slow, so nothing is told at all: every per-step metric fails the same way,
whatever its direction.

Slow steps that recur at a period (``JobFacts.recurring``: every 4th step, say) are not noise a random split
could put anywhere: the tests are then taken over periods (each sample the mean of ``period`` consecutive steps,
``JobSteps.blocked``), which are exchangeable between runs of one job as steps are. A stage share is judged with
its time per typical step (its numerator): it fails only when both grew past the threshold beyond noise.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpuscope.analyzers.trace.step_stats import MIN_STEPS
from gpuscope.format import ms
from gpuscope.gate import judgement, stats
from gpuscope.gate.bottleneck import new_bottleneck
from gpuscope.gate.comparable import comparability, no_steady_steps
from gpuscope.gate.config import GateConfig
from gpuscope.gate.judgement import Judgement, steps_needed
from gpuscope.gate.metrics import SPECS, MetricSpec, Side, ranks_only, side, stage_time_us, typical_step_us
from gpuscope.gate.result import ChangeKind, GateResult, MetricResult, Mismatch
from gpuscope.gate.rhythm import rhythm_words
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
        ranks_b, ranks_c = _rank_numbers(baseline), _rank_numbers(candidate)
        baseline, candidate = ranks_only(baseline, check.common_ranks), ranks_only(candidate, check.common_ranks)
        mismatches += _nothing_left(baseline, candidate, ranks_b, ranks_c)
    base, cand = side(baseline), side(candidate)
    block = cand.steps.period or base.steps.period or 1
    head = GateResult(passed=False, baseline=_name(baseline), candidate=_name(candidate),
                      baseline_steps=len(base.steps), candidate_steps=len(cand.steps), alpha=config.alpha,
                      metrics=(), mismatches=mismatches, allow_partial=allow_partial, partial=partial,
                      ranks=check.common_ranks, allow_weak=config.weak == "pass",
                      steps_needed=steps_needed(config) * block, block=block)
    if any(not (allow_partial and m.partial) for m in mismatches):
        return replace(head, comparable=False)
    results = _metrics(config, base, cand, block)
    notes = _notes(config, base, cand, block) + ((_partial_note(head),) if partial else ())
    return replace(head, passed=not any(r.fails for r in results), metrics=results, notes=notes)


def _nothing_left(baseline: Report, candidate: Report, ranks_b: tuple[int, ...] = (),
                  ranks_c: tuple[int, ...] = ()) -> tuple[Mismatch, ...]:
    """What a partial comparison cannot get past: no rank in both runs, or no steady step on the ranks it keeps."""
    if not baseline.ranks or not candidate.ranks:
        return (Mismatch("ranks_differ", "both", no_common_rank(ranks_b, ranks_c), partial=False),)
    found = (no_steady_steps("baseline", baseline), no_steady_steps("candidate", candidate))
    return tuple(m for m in found if m is not None)


def _rank_numbers(report: Report) -> tuple[int, ...]:
    return tuple(sorted(r.rank for r in report.ranks))


def no_common_rank(ranks_b: tuple[int, ...], ranks_c: tuple[int, ...]) -> str:
    """Why a partial comparison has nothing to compare: "no rank in common: baseline ranks 3, candidate ranks 1"."""
    def listed(ranks: tuple[int, ...]) -> str:
        shown = ", ".join(str(r) for r in ranks[:8]) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
        return f"ranks {shown}" if ranks else "no rank"
    return f"no rank in common: baseline {listed(ranks_b)}, candidate {listed(ranks_c)}"


def _partial_note(result: GateResult) -> str:
    ranks = ", ".join(str(r) for r in result.ranks)
    return (f"partial comparison (--allow-partial): step time, GPU busy, cost and peak memory of rank(s) {ranks} "
            f"only, the ranks both runs have; shares and the verdict as each report gives them")


def _metrics(config: GateConfig, base: Side, cand: Side, block: int) -> tuple[MetricResult, ...]:
    tested = (replace(base, steps=base.steps.blocked(block)), replace(cand, steps=cand.steps.blocked(block)))
    every = {spec.key: _numeric(spec, config, base, cand, tested) for spec in SPECS}
    results = [every[spec.key] for spec in SPECS if config.metric(spec.key).enabled]
    if config.metric("new_bottleneck").enabled:  # judged on the step and its cost, reported or not
        results.append(new_bottleneck(config, *tested, every["step_time"], every["cost_per_1k_steps"]))
    return tuple(results)


def _name(report: Report) -> str:
    return report.run.name or report.run.id


def _relative_or_points(kind: ChangeKind, b: float, c: float) -> float | None:
    if kind == "points":
        return c - b
    return None if b <= 0 else c / b - 1.0


def _numeric(spec: MetricSpec, config: GateConfig, base: Side, cand: Side,
             tested: tuple[Side, Side]) -> MetricResult:
    """One metric: its values, change and judgement; ``tested``: the two sides whose samples the test runs over
    (the steps, or their periods)."""
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
    if spec.stage is not None:
        result, worse_by, opposite = _stage_time(result, spec, base, cand, worse_by)
        if opposite is not None:
            return judgement.judged(result, opposite)
    sb, sc = spec.samples(tested[0]), spec.samples(tested[1])
    if sb is None or sc is None:
        return judgement.judged(replace(result, test="one value per run"), judgement.by_threshold(result, worse_by))
    block = tested[0].steps.block
    n_text = (f"{len(sb)} vs {len(sc)} periods of {block} steps" if block > 1 else f"{len(sb)} vs {len(sc)} steps")
    words = rhythm_words(base.report, cand.report) if spec.unit in ("us", "usd") else ""
    fewest = min(len(base.steps), len(cand.steps))
    if fewest < MIN_STEPS:
        weak = replace(result, test=f"weak: {len(base.steps)} vs {len(cand.steps)} steps")
        return judgement.judged(weak, judgement.cannot_tell(result, config, fewest))
    test = _test(sb, sc, worse=worse_by >= 0, spec=spec)
    if test is None or judgement.untestable(test, len(sb), len(sc), config):
        weak = replace(result, p_value=None if test is None else test.p_value, test=f"weak: {n_text}")
        j = judgement.weak(result, worse_by, config, n_text, block=block)
        return judgement.judged(weak, replace(j, reason=j.reason + words) if j.status == "weak" else j)
    tested_result = replace(result, p_value=test.p_value, test=f"permutation ({test.method}), {n_text}",
                            significant=test.p_value < config.alpha)
    j = judgement.by_test(result, worse_by, test.p_value, config.alpha)
    if words and not result.within_threshold:
        j = replace(j, reason=j.reason + words)
    return judgement.judged(tested_result, j)


def _stage_time(result: MetricResult, spec: MetricSpec, base: Side, cand: Side,
                share_worse: float) -> tuple[MetricResult, float, Judgement | None]:
    """A stage share with its time per typical step: (the result with both times, the change the judgement takes
    (the smaller of the share's growth and the time's, in points of the baseline's typical step), and a pass when
    the two moved apart past the threshold: a share that grew because the rest of the step got faster)."""
    assert isinstance(result.baseline, float) and isinstance(result.candidate, float)
    b_us, c_us = stage_time_us(base.report, result.baseline), stage_time_us(cand.report, result.candidate)
    step = typical_step_us(base.report)
    result = replace(result, baseline_stage_us=b_us, candidate_stage_us=c_us)
    if b_us is None or c_us is None or not step:
        return result, share_worse, None
    time_worse = (c_us - b_us) / step
    time = f"its time {ms(b_us)} -> {ms(c_us)} a typical step"
    points = f"{share_worse * 100:+.1f} points of the step"
    limit = result.threshold
    if share_worse > limit and time_worse <= 0:
        return result, 0.0, Judgement("pass", f"{points}, but {time}: the rest of the step got faster (shown, not "
                                      "failed)")
    if share_worse < -limit and time_worse >= 0:
        return result, 0.0, Judgement("pass", f"{points}, but {time}: the rest of the step got slower")
    if share_worse > 0 and time_worse > 0 and (share_worse > limit) != (time_worse > limit):
        return result, 0.0, Judgement("pass", f"{points} and {time} ({time_worse * 100:+.1f} points of the baseline's "
                                      f"typical step): only one of the two past the {limit * 100:.1f}-point threshold")
    if share_worse > 0 and time_worse > 0:
        return result, min(share_worse, time_worse), None
    if share_worse < 0 and time_worse < 0:
        return result, max(share_worse, time_worse), None
    return result, 0.0, None


def _test(b: Floats, c: Floats, *, worse: bool, spec: MetricSpec) -> stats.PermutationTest | None:
    """The one-sided test for the direction of the change: "candidate worse", or "candidate better"."""
    if not len(b) or not len(c):
        return None
    log = spec.change_kind == "relative" and bool(np.all(b > 0)) and bool(np.all(c > 0))
    candidate_greater = worse != spec.higher_is_better
    return stats.greater(b, c, log=log) if candidate_greater else stats.greater(c, b, log=log)


def _notes(config: GateConfig, base: Side, cand: Side, block: int) -> tuple[str, ...]:
    notes: list[str] = []
    need = steps_needed(config) * block
    for name, run in (("baseline", base), ("candidate", cand)):
        if run.steps.warmup_excluded:
            notes.append(f"{name}: {run.steps.warmup_excluded} warm-up step(s) left out")
        if len(run.steps) < need:
            notes.append(f"{name}: {len(run.steps)} steady steps, fewer than {need}: the per-step "
                         "tests are weak")
    if block > 1:
        notes.append(f"slow steps recur every {block} steps: the per-step tests compare periods of {block} "
                     "steps (each sample a period's mean), not single steps")
    return tuple(notes)
