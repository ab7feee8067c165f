"""How a metric's change is judged: past its threshold or not, beyond step-to-step noise or not, and what too few
steps to test it mean.

A change within its threshold passes whatever the steps say. A change past it is tested over the steps; when the
steps cannot test it (fewer than ``min_steps`` steady steps on a side, or too few for any split to reach ``alpha``)
it is weak: a weak change for the worse fails with "profile at least N steady steps on each side" unless weak tests
are allowed (``--allow-weak``, ``weak = "pass"``), so a gate that cannot test never passes a regression unseen.
With fewer than 3 steady steps on a side even that cannot be said (a stall every other step hides between two
steps): any change fails so (``cannot_tell``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuscope.gate import stats
from gpuscope.gate.config import GateConfig
from gpuscope.gate.result import MetricResult, Status
from gpuscope.gate.text import change as change_text
from gpuscope.gate.text import threshold as threshold_text


@dataclass(frozen=True)
class Judgement:
    status: Status
    reason: str
    fails: bool = False


def steps_needed(config: GateConfig) -> int:
    """The fewest steady steps on each side at which the per-step test can reach ``alpha``: at least
    ``min_steps``, and enough that the most extreme split alone is below ``alpha`` (5 at 1%: 1/252)."""
    n = config.min_steps
    while stats.min_p_value(n, n) >= config.alpha:
        n += 1
    return n


def untestable(test: stats.PermutationTest | None, n_baseline: int, n_candidate: int, config: GateConfig) -> bool:
    """Too few steps to tell a change from step-to-step noise at ``alpha``."""
    return (test is None or min(n_baseline, n_candidate) < config.min_steps
            or test.min_p_value >= config.alpha)


def too_few_steps(what: str, config: GateConfig, *, worse: bool, block: int = 1) -> Judgement:
    """A change past its threshold that the steps cannot test: for the worse, a failure unless weak tests are
    allowed; for the better, reported. ``block``: the steps per tested sample (a period of recurring slow steps)."""
    need = f"profile at least {steps_needed(config) * block} steady steps on each side"
    if block > 1:
        need += f" ({steps_needed(config)} periods of {block})"
    if not worse:
        return Judgement("weak", f"{what}: too few steps to tell it from step-to-step noise ({need} to confirm it)")
    if config.weak == "pass":
        return Judgement("weak", f"{what}: too few steps to tell it from step-to-step noise ({need}); passed "
                         "because weak tests are allowed (--allow-weak)")
    return Judgement("weak", f"{what}: too few steps to test it: {need} (or pass --allow-weak)", fails=True)


def within(m: MetricResult) -> Judgement:
    """Passed on the threshold alone, whatever the steps say: the words say so, never a bare significance."""
    return Judgement("pass", f"{change_text(m)} is within the {threshold_text(m)} threshold")


def by_threshold(m: MetricResult, worse_by: float) -> Judgement:
    """One value per run: the threshold alone decides."""
    if worse_by > m.threshold:
        return Judgement("regression", f"{change_text(m)} is past the {threshold_text(m)} threshold", fails=True)
    if -worse_by > m.threshold:
        return Judgement("improvement", f"{change_text(m)}: improved")
    return within(m)


def weak(m: MetricResult, worse_by: float, config: GateConfig, n_text: str, *, block: int = 1) -> Judgement:
    if abs(worse_by) <= m.threshold:
        return within(m)
    return too_few_steps(f"{change_text(m)} but only {n_text}", config, worse=worse_by > 0, block=block)


def cannot_tell(m: MetricResult, config: GateConfig, fewest: int) -> Judgement:
    """Fewer than 3 steady steps on a side: no step can be told typical or slow (a lone slow step, a stall every
    other step, a typical one), so no change can be told from them, for the better, the worse or none. The gate
    fails closed, unless weak tests are allowed."""
    what = (f"{change_text(m)} on {fewest} steady step{'s' if fewest != 1 else ''} on a side: too few to tell a "
            "typical step from a slow one")
    need = f"profile at least {steps_needed(config)} steady steps on each side"
    if config.weak == "pass":
        return Judgement("weak", f"{what} ({need}); passed because weak tests are allowed (--allow-weak)")
    return Judgement("weak", f"{what}: {need} (or pass --allow-weak)", fails=True)


def by_test(m: MetricResult, worse_by: float, p: float, alpha: float) -> Judgement:
    if abs(worse_by) <= m.threshold:
        return within(m)
    if p >= alpha:
        return Judgement("pass", f"{change_text(m)} but within step-to-step noise (p = {p:.3f} >= {alpha:g})")
    if worse_by > 0:
        return Judgement("regression", f"{change_text(m)} (past {_threshold_words(m)}), significant over the "
                         f"steps (p = {p:.3g})", fails=True)
    return Judgement("improvement", f"{change_text(m)}, significant over the steps (p = {p:.3g})")


def judged(m: MetricResult, j: Judgement) -> MetricResult:
    return replace(m, status=j.status, reason=j.reason, fails=j.fails)


def _threshold_words(m: MetricResult) -> str:
    if m.change_kind == "points":
        return f"{m.threshold * 100:.1f} points"
    return f"{m.threshold * 100:.0f}%"
