"""The new-bottleneck metric: a stall stage that newly leads the verdict, judged as a cost, not as a name.

A run's primary stage changes for good reasons: remove the largest stall and the next one leads, in a run that is
faster and cheaper. So a new primary stage fails the gate only when both hold:

1. the stage grew beyond noise: its share of the step grew by at least the threshold (points), and the one-sided
   permutation test over its per-step share (``gpuscope.gate.samples``) puts the growth beyond step-to-step noise;
2. the step or its cost got worse beyond noise: the step time's (or cost per step's) change is for the worse and
   its own test is significant at ``alpha``, past its threshold or not.

A faster or cheaper run, or one whose step moved within noise, never fails on a new bottleneck. Where the steps
cannot test either condition the change is weak, and a weak change for the worse fails (``judgement``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from gpuscope.gate import stats
from gpuscope.gate.config import GateConfig
from gpuscope.gate.judgement import Judgement, too_few_steps, untestable
from gpuscope.gate.metrics import BOTTLENECK_DEFINITION, Side
from gpuscope.gate.result import MetricResult
from gpuscope.gate.text import change as change_text
from gpuscope.model.diagnosis import Stage

STALL_STAGES: tuple[Stage, ...] = ("data_loading", "host_overhead", "communication", "memory", "idle")

Worse = Literal["worse", "not_worse", "cannot_tell"]


def new_bottleneck(config: GateConfig, base: Side, cand: Side, step: MetricResult,
                   cost: MetricResult) -> MetricResult:
    """The new-bottleneck row of the gate, judged from the two verdicts, the new stage's per-step shares and the
    step time's and cost's results."""
    threshold = config.metric("new_bottleneck").threshold
    b, c = base.report.verdict.primary, cand.report.verdict.primary
    share_b = base.report.stage_shares.get(c) if c else None
    share_c = cand.report.stage_shares.get(c) if c else None
    growth = None if share_b is None or share_c is None else share_c - share_b
    head = MetricResult(key="new_bottleneck", title="New bottleneck", unit="stage", baseline=b, candidate=c,
                        change=growth, change_kind="points", threshold=threshold, higher_is_better=False,
                        p_value=None, test="verdict's primary stage", status="unknown", reason="", fails=False,
                        definition=BOTTLENECK_DEFINITION)
    if b is None or c is None:
        return _as(head, Judgement("unknown", "a verdict names no primary stage"))
    if c == b:
        return _as(head, Judgement("pass", f"still {c}"))
    if c not in STALL_STAGES:
        return _as(head, Judgement("pass", f"now {c}: not a stall"))
    worse = _worse(step, cost)
    if worse == "not_worse":
        return _as(head, Judgement("pass", f"{c} leads now (was {b}), but the step and its cost did not get worse "
                                   f"beyond noise (step {change_text(step)})"))
    if growth is None:
        return _as(head, Judgement("unknown", f"{c} leads now (was {b}); its share is not known in both runs"))
    if growth < threshold:
        return _as(head, Judgement("pass", f"{c} leads now (was {b}) but its share grew {growth * 100:.1f} points "
                                   f"(threshold {threshold * 100:.1f})"))
    head, grew = _growth_test(head, config, base, cand, c)
    recs = tuple(r.title for r in cand.report.recommendations if r.stage == c)
    what = (f"new bottleneck {c} (was {b}), {share_c:.1%} of the step ({growth * 100:+.1f} points), with the step "
            f"{change_text(step)}")
    if grew == "not_worse":
        return _as(head, Judgement("pass", f"{c} leads now (was {b}) but its growth is within step-to-step noise "
                                   f"(p = {head.p_value:.3f})"))
    if worse == "cannot_tell" or grew == "cannot_tell":
        weak_test = head.test if grew == "cannot_tell" else step.test
        return _as(head, too_few_steps(f"{what} but only {weak_test.removeprefix('weak: ')}", config, worse=True),
                   recs)
    advice = f"; {recs[0]}" if recs else ""
    return _as(head, Judgement("regression", f"{what}{advice}", fails=True), recs)


def _worse(step: MetricResult, cost: MetricResult) -> Worse:
    """Whether the step or its cost got worse beyond noise (cost in dollars per step, where the run is priced)."""
    found: list[Worse] = []
    for m in (step, cost):
        if m.change is None or m.change <= 0:
            continue
        found.append("worse" if m.significant else "not_worse" if m.significant is False else "cannot_tell")
    if "worse" in found:
        return "worse"
    return "cannot_tell" if "cannot_tell" in found else "not_worse"


def _growth_test(head: MetricResult, config: GateConfig, base: Side, cand: Side,
                 stage: Stage) -> tuple[MetricResult, Worse]:
    """The one-sided test that the stage's per-step share grew; by the threshold alone where steps do not record
    the stage (idle, measured over the window)."""
    sb, sc = base.steps.share(stage), cand.steps.share(stage)
    if sb is None or sc is None:
        return replace(head, test="its share: one value per run"), "worse"
    test = stats.greater(sb, sc) if len(sb) and len(sc) else None
    n_text = f"{len(sb)} vs {len(sc)} steps"
    if test is None or untestable(test, len(sb), len(sc), config):
        return replace(head, test=f"weak: {n_text}", p_value=None if test is None else test.p_value), "cannot_tell"
    significant = test.p_value < config.alpha
    tested = replace(head, p_value=test.p_value, significant=significant,
                     test=f"its share: permutation ({test.method}), {n_text}")
    return tested, "worse" if significant else "not_worse"


def _as(m: MetricResult, j: Judgement, recs: tuple[str, ...] = ()) -> MetricResult:
    return replace(m, status=j.status, reason=j.reason, fails=j.fails, recommendations=recs)
