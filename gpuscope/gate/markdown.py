"""The gate as Markdown, for a CI job summary (``$GITHUB_STEP_SUMMARY``) or a merge-request comment.

Run names, file paths, reasons and recommendation text come from traces, baseline files and command lines, and a
summary is rendered as GitHub-flavoured Markdown with some HTML: every such string goes in through
``format.markdown_text``, so it reads as its own characters and can start no link, image, tag, emphasis, mention or
table cell. The table's own numbers go in as they are.
"""

from __future__ import annotations

from gpuscope.format import markdown_text as _cell
from gpuscope.gate import text
from gpuscope.gate.result import GateResult, MetricResult


def to_markdown(result: GateResult) -> str:
    head = "PASS" if result.passed else "FAIL"
    lines = [f"### gpuscope gate: {head}", "",
             f"{_cell(result.candidate)} against baseline {_cell(result.baseline)}: "
             f"{result.candidate_steps} vs {result.baseline_steps} steady steps, "
             f"one-sided permutation test at alpha {result.alpha:g}.", ""]
    if not result.comparable:
        lines += ["**The runs are not comparable**: no metric was compared.", ""]
    lines += [f"- {_cell(line)}" for line in text.mismatch_lines(result)]
    if result.mismatches:
        lines.append("")
    if result.metrics:
        lines += _table(result)
    explained = [m for m in result.metrics if m.status not in ("pass", "unknown") or m.fails]
    if explained or result.notes:
        lines.append("")
    for m in explained:
        lines.append(f"- **{_cell(m.title)}**: {_cell(m.reason)}")
        lines += [f"  - recommendation: {_cell(r)}" for r in m.recommendations]
    lines += [f"- {_cell(n)}" for n in result.notes]
    lines += ["", f"**{_cell(text.verdict_line(result))}**"]
    changed = text.explanation_lines(result)
    if changed:
        lines += ["", "#### What changed (gpuscope diff)", ""] + [f"- {_cell(line)}" for line in changed]
    return "\n".join(lines) + "\n"


def _table(result: GateResult) -> list[str]:
    lines = ["| metric | baseline | candidate | change | threshold | p | verdict | measured as |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for m in result.metrics:
        word = "**FAIL**" if m.fails else text.status(m)
        lines.append(f"| {_cell(m.title)} | {_value(m, m.baseline)} | {_value(m, m.candidate)} | "
                     f"{text.change(m)} | {text.threshold(m)} | {text.p_value(m)} | {word} | {_cell(m.definition)} |")
    return lines


def _value(m: MetricResult, which: float | str | None) -> str:
    """A number as the table prints it; a string (a stage read from a saved report) escaped."""
    return _cell(text.value(m, which)) if isinstance(which, str) else text.value(m, which)
