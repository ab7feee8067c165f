"""The gate as Markdown, for a CI job summary (``$GITHUB_STEP_SUMMARY``) or a merge-request comment."""

from __future__ import annotations

from gpuscope.gate import text
from gpuscope.gate.result import GateResult

ICONS = {"pass": "pass", "regression": "**FAIL**", "improvement": "improved", "weak": "weak", "unknown": "n/a"}


def to_markdown(result: GateResult) -> str:
    head = "FAIL" if result.failures else "PASS"
    lines = [f"### gpuscope gate: {head}", "",
             f"`{_cell(result.candidate)}` against baseline `{_cell(result.baseline)}`: "
             f"{result.candidate_steps} vs {result.baseline_steps} steady steps, "
             f"one-sided permutation test at alpha {result.alpha:g}.", "",
             "| metric | baseline | candidate | change | threshold | p | verdict |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for m in result.metrics:
        word = "**FAIL**" if m.fails else ICONS[m.status]
        lines.append(f"| {m.title} | {_cell(text.value(m, m.baseline))} | {_cell(text.value(m, m.candidate))} | "
                     f"{text.change(m)} | {text.threshold(m)} | {text.p_value(m)} | {word} |")
    explained = [m for m in result.metrics if m.status not in ("pass", "unknown") or m.fails]
    if explained:
        lines.append("")
    for m in explained:
        lines.append(f"- **{m.title}**: {_cell(m.reason)}")
        lines += [f"  - recommendation: {_cell(r)}" for r in m.recommendations]
    lines += [f"- {_cell(n)}" for n in result.notes]
    return "\n".join(lines) + "\n"


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")
