"""Write tests/api/expected_reports.json.gz: the `--json` report of every bundled trace, as this checkout computes it.

The file pins the reports so that a change in how ranks are read and reduced (worker processes, Dask, object
storage) is checked against what the analysis gave before it: `test_expected_reports.py` compares each report
with the saved one, apart from the run id (random in part); the store's folder is written `$GPUSCOPE_HOME`.
Regenerate it only on purpose, when an analysis is meant to change, and say why in the commit:

    PYTHONPATH=. python tests/api/make_expected_reports.py
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().with_name("expected_reports.json.gz")
TRACE_SUFFIXES = (".json", ".json.gz")
NOT_TRACES = {"expected", "dcgm", "timeseries", "live", "measured"}
"""Folders of sample_traces/ that hold no profiler traces (expected plugin output, recorded samples, reports,
a loop's own measurements)."""


def cases() -> list[str]:
    """Each folder of sample_traces/ with trace files in it (analysed as a folder of ranks), and each trace file
    of a folder holding several (analysed alone); paths relative to the repository root, as a user types them."""
    out: list[str] = []
    for folder in sorted(p for p in (ROOT / "sample_traces").rglob("*") if p.is_dir()):
        if NOT_TRACES & set(folder.relative_to(ROOT).parts):
            continue
        files = sorted(f for f in folder.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES)
                       and f.name != "meta.json")
        if not files:
            continue
        out.append(str(folder.relative_to(ROOT)))
        if len(files) > 1:
            out += [str(f.relative_to(ROOT)) for f in files]
    return out


def report_json(path: str) -> dict[str, object]:
    import gpuscope
    from gpuscope.model.codec import to_json

    text = to_json(gpuscope.analyze(path, save=False).analysis).decode()
    # The store's folder shows in the advice on setting a price: the same text wherever the store is.
    doc: dict[str, object] = json.loads(text.replace(json.dumps(os.environ["GPUSCOPE_HOME"])[1:-1], "$GPUSCOPE_HOME"))
    return doc


def main() -> int:
    os.chdir(ROOT)
    os.environ["GPUSCOPE_HOME"] = tempfile.mkdtemp(prefix="gpuscope-expected-")
    reports = {path: report_json(path) for path in cases()}
    OUT.write_bytes(gzip.compress(json.dumps(reports, indent=0, sort_keys=True).encode(), mtime=0))
    print(f"wrote {len(reports)} reports to {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
