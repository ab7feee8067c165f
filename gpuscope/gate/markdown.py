"""The gate as Markdown, for a CI job summary (``$GITHUB_STEP_SUMMARY``) or a merge-request comment.

Run names, reasons and recommendations can quote a trace or a baseline file, and a summary is rendered as
GitHub-flavoured Markdown with some HTML: every such string goes in through ``format.markdown_text``, so it
reads as its own characters and can start no link, image, tag, emphasis or table cell."""

from __future__ import annotations

from gpuscope.format import markdown_text as md
from gpuscope.gate import text
from gpuscope.gate.result import GateResult, MetricResult

ICONS = {"pass": "pass", "regression": "**FAIL**", "improvement": "improved", "weak": "weak", "unknown": "n/a"}


def to_markdown(result: GateResult) -> str:
    head = "FAIL" if result.failures else "PASS"
    lines = [f"### gpuscope gate: {head}", "",
             f"{md(result.candidate)} against baseline {md(result.baseline)}: "
             f"{result.candidate_steps} vs {result.baseline_steps} steady steps, "
             f"one-sided permutation test at alpha {result.alpha:g}.", "",
             "| metric | baseline | candidate | change | threshold | p | verdict |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for m in result.metrics:
        word = "**FAIL**" if m.fails else ICONS[m.status]
        lines.append(f"| {md(m.title)} | {_value(m, m.baseline)} | {_value(m, m.candidate)} | "
                     f"{text.change(m)} | {text.threshold(m)} | {text.p_value(m)} | {word} |")
    explained = [m for m in result.metrics if m.status not in ("pass", "unknown") or m.fails]
    if explained:
        lines.append("")
    for m in explained:
        lines.append(f"- **{md(m.title)}**: {md(m.reason)}")
        lines += [f"  - recommendation: {md(r)}" for r in m.recommendations]
    lines += [f"- {md(n)}" for n in result.notes]
    return "\n".join(lines) + "\n"


def _value(m: MetricResult, which: float | str | None) -> str:
    """A number as the table prints it; a string (a stage read from a saved report) escaped."""
    return md(text.value(m, which)) if isinstance(which, str) else text.value(m, which)
