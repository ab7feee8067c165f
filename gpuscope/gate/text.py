"""How the gate's numbers read in the table, the Markdown summary and JUnit messages."""

from __future__ import annotations

from gpuscope.format import gib, ms, usd
from gpuscope.gate.result import GateResult, MetricResult
from gpuscope.reports.diff import top_lines

STATUS_WORDS = {"pass": "pass", "regression": "FAIL", "improvement": "improved", "weak": "weak", "unknown": "n/a"}


def value(m: MetricResult, which: float | str | None) -> str:
    if which is None:
        return "n/a"
    if isinstance(which, str):
        return which
    if m.unit == "us":
        return ms(which)
    if m.unit == "share":
        return f"{which * 100:.1f}%"
    if m.unit == "usd":
        return usd(which)
    if m.unit == "bytes":
        return gib(which)
    return f"{which:.3g}"


def change(m: MetricResult) -> str:
    if m.change is None:
        return "n/a"
    shown = round(m.change * 100, 1) + 0.0  # no "-0.0" for a change that rounds to nothing
    return f"{shown:+.1f} pts" if m.change_kind == "points" else f"{shown:+.1f}%"


def threshold(m: MetricResult) -> str:
    sign = "-" if m.higher_is_better else "+"
    if m.change_kind == "points":
        return f"{sign}{m.threshold * 100:.1f} pts"
    return f"{sign}{m.threshold * 100:.0f}%"


def p_value(m: MetricResult) -> str:
    """The p-value where the test decided; "-" where the threshold did (a change within it passes whatever the
    steps say, and a small p beside "pass" would read as an alarm: the JSON keeps it)."""
    if m.p_value is None:
        return "n/a"
    if m.status == "pass" and m.within_threshold:
        return "-"
    return "<0.001" if m.p_value < 0.001 else f"{m.p_value:.3f}"


def status(m: MetricResult) -> str:
    """The verdict in a few words; a pass says why it passed."""
    if m.status == "pass" and m.within_threshold and m.unit != "stage":
        return "pass (within threshold)"
    if m.status == "pass" and m.p_value is not None:
        return "pass (noise)"
    if m.status == "weak" and m.fails:
        return "FAIL (too few steps)"
    return STATUS_WORDS[m.status]


def mismatch_lines(result: GateResult) -> list[str]:
    """Why the runs were not compared, or what a partial comparison let through, one line each."""
    lines = []
    for mm in result.mismatches:
        allowed = result.comparable and mm.partial
        lines.append(f"{'allowed by --allow-partial: ' if allowed else ''}{mm.reason}")
    return lines


def explanation_lines(result: GateResult) -> list[str]:
    """The top of ``gpuscope diff``'s explanation of a failed gate (none when it passed)."""
    return top_lines(result.explanation) if result.explanation is not None else []


def _worse(m: MetricResult) -> bool:
    return m.change is not None and (-m.change if m.higher_is_better else m.change) > 0


def verdict_line(result: GateResult) -> str:
    """PASS or FAIL and why, in one line (the terminal's last line and the Markdown's heading say the same)."""
    if not result.comparable:
        blocking = result.blocking
        hint = (" (--allow-partial compares the ranks both have)"
                if blocking and all(m.partial for m in blocking) else "")
        return f"FAIL: not comparable, {len(blocking)} reason(s): {', '.join(m.code for m in blocking)}{hint}"
    regressions = [m for m in result.failures if m.status != "weak"]
    untested = [m for m in result.failures if m.status == "weak"]
    parts = []
    if regressions:
        parts.append(f"{len(regressions)} regression(s): " + ", ".join(m.title.lower() for m in regressions))
    if untested:
        parts.append(f"too few steps to test {', '.join(m.title.lower() for m in untested)}: profile at least "
                     f"{result.steps_needed} steady steps on each side (or --allow-weak)")
    if parts:
        return "FAIL: " + "; ".join(parts)
    allowed = [m for m in result.metrics if m.status == "weak" and _worse(m)]
    weak = (f"; weak tests allowed (--allow-weak): {', '.join(m.title.lower() for m in allowed)} got worse past "
            "the threshold on too few steps to test" if allowed else "")
    return "PASS: no regression" + (" on the ranks both runs have" if result.partial else "") + weak
