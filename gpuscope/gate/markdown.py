"""The gate as Markdown, for a CI job summary (``$GITHUB_STEP_SUMMARY``) or a merge-request comment.

Run names, file paths and recommendation text come from traces and command lines: every such string is escaped so
it shows as the text it is (no table break, link, image, HTML or emphasis of its own).
"""

from __future__ import annotations

import html
import re

from gpuscope.gate import text
from gpuscope.gate.result import GateResult

_MARKDOWN = re.compile(r"([\\`*_\[\]|~#!])")


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
        lines.append(f"- **{m.title}**: {_cell(m.reason)}")
        lines += [f"  - recommendation: {_cell(r)}" for r in m.recommendations]
    lines += [f"- {_cell(n)}" for n in result.notes]
    lines += ["", f"**{_cell(text.verdict_line(result))}**"]
    return "\n".join(lines) + "\n"


def _table(result: GateResult) -> list[str]:
    lines = ["| metric | baseline | candidate | change | threshold | p | verdict | measured as |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for m in result.metrics:
        word = "**FAIL**" if m.fails else text.status(m)
        lines.append(f"| {m.title} | {_cell(text.value(m, m.baseline))} | {_cell(text.value(m, m.candidate))} | "
                     f"{text.change(m)} | {text.threshold(m)} | {text.p_value(m)} | {word} | {_cell(m.definition)} |")
    return lines


def _cell(value: str) -> str:
    """Text as itself in a Markdown table cell or list item."""
    return _MARKDOWN.sub(r"\\\1", html.escape(value.replace("\n", " "), quote=False))
