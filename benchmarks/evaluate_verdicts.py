"""Evaluate the diagnosis on the labelled cases: a confusion table of stage verdicts, and each case's call.

The labelled cases (tests/analyzers/test_verdict_cases.py, shared with the tests that keep them
right): the four real samples in sample_traces/ (labels from outside: the TensorBoard plugin's expected
output and the samples' provenance, sample_traces/README.md), reported apart from the others: small traces
built in code for the stages no public trace covers (host overhead, memory, GPU compute, idle, a
two-rank straggler), and live summaries for the live-only evidence (an I/O-bound and a CPU-bound
loader, an idle GPU, a DRAM-bound GPU, a busy GPU, host overhead, NCCL waits).

    .venv/bin/python benchmarks/evaluate_verdicts.py [--only samples|built|live]

Exit status 1 when any case is called wrong, so it can gate a change to the rules.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from gpuscope.model.diagnosis import STAGES  # noqa: E402
from tests.analyzers.test_verdict_cases import CASES, Case  # noqa: E402


def kind(case: Case) -> str:
    if case.name.startswith("built:"):
        return "built"
    return "live" if case.name.startswith("live:") else "samples"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("samples", "built", "live"), help="Evaluate one group of cases.")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only is None or kind(c) == args.only]
    console = Console(highlight=False, width=max(Console().width, 110))
    calls = Table(title="Cases", header_style="bold", box=None)
    for col in ("case", "label", "verdict", "resource", "confidence", "ok"):
        calls.add_column(col)
    pairs: Counter[tuple[str, str]] = Counter()
    wrong = 0
    tally: Counter[tuple[bool, bool]] = Counter()  # (labelled from outside, called right)
    for case in cases:
        v = case.diagnosis().verdict
        got = v.primary or "none"
        ok = got == case.stage and (case.resource is None or v.resource == case.resource)
        wrong += not ok
        tally[(kind(case) == "samples", ok)] += 1
        pairs[(case.stage, got)] += 1
        label = case.stage + (f" / {case.resource}" if case.resource else "")
        calls.add_row(case.name, label, got, v.resource, f"{v.confidence:.2f}",
                      "[green]yes[/green]" if ok else "[red]NO[/red]")
    console.print(calls)
    console.print(confusion(pairs))
    right = len(cases) - wrong
    console.print(f"{right} of {len(cases)} cases called right (stage, and resource where labelled)")
    outside = tally[(True, True)], tally[(True, True)] + tally[(True, False)]
    own = tally[(False, True)], tally[(False, True)] + tally[(False, False)]
    console.print(f"  labelled from outside (the TensorBoard plugin's expected output, the samples' provenance in "
                  f"sample_traces/README.md): {outside[0]} of {outside[1]}")
    console.print(f"  labelled with the rules (built traces, live summaries: each rule fires on its evidence; not "
                  f"independent): {own[0]} of {own[1]}")
    return 1 if wrong else 0


def confusion(pairs: Counter[tuple[str, str]]) -> Table:
    """Rows: the label; columns: the verdict. The diagonal is the cases called right."""
    stages = [s for s in STAGES if any(s in p for p in pairs)]
    if any(got == "none" for _, got in pairs):
        stages.append("none")
    table = Table(title="Stage verdicts (rows: label, columns: verdict)", header_style="bold", box=None)
    table.add_column("label \\ verdict")
    for s in stages:
        table.add_column(s.replace("_", " "), justify="right")
    for label in stages:
        if label == "none":
            continue
        cells = []
        for got in stages:
            n = pairs.get((label, got), 0)
            cells.append(f"[bold green]{n}[/bold green]" if label == got and n else (f"[red]{n}[/red]" if n else "."))
        table.add_row(label.replace("_", " "), *cells)
    return table


if __name__ == "__main__":
    sys.exit(main())
