"""How long `gpuscope report` takes on the 8-rank sample (sample_traces/dlrm_8rank), as HTML and as PDF.

Whole processes, as a user runs them, each in a fresh store so the trace is read, analysed and saved
every time: `gpuscope report sample_traces/dlrm_8rank -f html|pdf -o FILE`. The median and the
slowest of ``--repeat`` runs are printed, with the output's size and (for the PDF) its page count;
the goal is under 10 s on a 2-core machine. Then one in-process run split into its parts: read and
analyse, the HTML, the browser's start, and the print.

    .venv/bin/python benchmarks/bench_report.py [--repeat 3] [--trace DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 10.0


def whole_process(trace: Path, fmt: str, repeat: int) -> dict[str, Any]:
    times, size, pages = [], 0, None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-report-") as folder:
            out = Path(folder) / f"report.{fmt}"
            env = {**os.environ, "GPUSCOPE_HOME": str(Path(folder) / "home")}
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gpuscope", "report", str(trace), "-f", fmt, "-o", str(out)],
                           check=True, env=env, capture_output=True)
            times.append(time.perf_counter() - start)
            size = out.stat().st_size
            if fmt == "pdf":
                import pypdf

                pages = len(pypdf.PdfReader(out).pages)
    return {"format": fmt, "median_s": statistics.median(times), "max_s": max(times), "bytes": size, "pages": pages}


def parts(trace: Path) -> dict[str, float]:
    """One in-process report, timed part by part."""
    from gpuscope.cli.report import Pricing, document
    from gpuscope.reports.browser import Browser, find_browser
    from gpuscope.reports.html import render_html, title
    from gpuscope.reports.pdf import render_pdf
    from gpuscope.store import Store

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-report-") as folder:
        os.environ["GPUSCOPE_HOME"] = str(Path(folder) / "home")
        start = time.perf_counter()
        with Store() as store:
            doc = document(store, str(trace), Pricing())
        out["read_analyse_save_s"] = time.perf_counter() - start
        start = time.perf_counter()
        page = render_html(doc)
        out["html_s"] = time.perf_counter() - start
        start = time.perf_counter()
        with Browser(find_browser()) as browser:
            out["browser_start_s"] = time.perf_counter() - start
            start = time.perf_counter()
            render_pdf(page, browser=browser, paper="a4", footer=title(doc))
            out["print_s"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace", type=Path, default=ROOT / "sample_traces" / "dlrm_8rank")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    results = [whole_process(args.trace, fmt, args.repeat) for fmt in ("html", "pdf")]
    print(f"gpuscope report {args.trace.name}, whole process, {args.repeat} runs each, {os.cpu_count()} cores")
    for r in results:
        pages = f", {r['pages']} pages" if r["pages"] else ""
        verdict = "ok" if r["max_s"] < GOAL_S else f"over the {GOAL_S:.0f} s goal"
        print(f"  {r['format']:4}  median {r['median_s']:.2f} s  slowest {r['max_s']:.2f} s  "
              f"{r['bytes'] / 1e6:.1f} MB{pages}  ({verdict})")
    split = parts(args.trace)
    print("  in-process parts: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.2f} s"
                                             for k, v in split.items()))
    if args.json_out:
        args.json_out.write_text(json.dumps({"whole_process": results, "parts": split}, indent=2))


if __name__ == "__main__":
    main()
