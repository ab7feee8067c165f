"""Write tests/api/expected_reports.json.gz: the `--json` report of every bundled trace, and of every recorded run
saved into a store and loaded back (the live runs of sample_traces/h200/live, the fleet window `gpuscope fleet
--demo` replays), as this checkout computes them.

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
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite")
NOT_TRACES = {"expected", "dcgm", "timeseries", "live", "measured"}
"""Folders of sample_traces/ that hold no profiler traces (expected plugin output, recorded samples, reports,
a loop's own measurements)."""
LIVE = ROOT / "sample_traces" / "h200" / "live"
"""The live runs recorded with real NVML: each ``*.report.json`` (what `gpuscope run --json` printed then) beside
the samples the run saved (``NAME.samples.csv.gz``, NAME the run's name)."""
FLEET_DEMO = "gpuscope/data/fleet_demo.json.gz"
"""The recorded Prometheus answers `gpuscope fleet --demo` replays and saves as a fleet run."""


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


def saved_run_cases() -> list[str]:
    """Each recorded live run, named by its report file, and the fleet demo (paths from the repository root)."""
    return [*(str(p.relative_to(ROOT)) for p in sorted(LIVE.glob("*.report.json"))), FLEET_DEMO]


def save_recorded_run(case: str) -> str:
    """The recorded run of ``case`` saved into the store at ``$GPUSCOPE_HOME``, as the recording saved it: its
    catalog entry from the report it printed, its samples from the CSV beside it; returns its id."""
    import pandas as pd

    from gpuscope.model.run import GpuInfo, RunMeta
    from gpuscope.store import Store

    run = json.loads((ROOT / case).read_text())["run"]
    frame = pd.read_csv(LIVE / f"{run['name']}.samples.csv.gz")
    rows = [(int(t), str(s), int(g), int(p), str(m), float(v)) for t, s, g, p, m, v in frame.itertuples(index=False)]
    gpus = tuple(GpuInfo(index=g["index"], name=g["model"], memory_bytes=g["memory_bytes"]) for g in run["gpus"])
    meta = RunMeta(id=run["id"], name=run["name"], kind=run["kind"], status=run["status"], host="h200",
                   started_ns=run["started_ns"], ended_ns=run["started_ns"] + round(run["duration_s"] * 1e9),
                   gpus=gpus)
    with Store() as store:
        store.create_run(meta)
        store.add_samples(meta.id, rows)
    return meta.id


def fleet_demo_json() -> dict[str, object]:
    """`gpuscope fleet --demo` saved into the store, then its report computed again from the answers saved there
    (`gpuscope show ID --json --reanalyze`); with the saved report beside it, under ``"saved"``."""
    from dataclasses import replace

    from gpuscope.cli.fleet import fleet_prices
    from gpuscope.fleet import Thresholds, analyze_fleet
    from gpuscope.fleet.demo import demo_data
    from gpuscope.fleet.saved import load_fleet_data, load_fleet_report, report_json, save_fleet_run
    from gpuscope.store import Store

    data = demo_data()
    with Store() as store:
        meta, _ = save_fleet_run(store, data, analyze_fleet(data, prices=fleet_prices(data, None)),
                                 command=("gpuscope", "fleet", "--demo", "--json"))
        again = load_fleet_data(store, meta.id)
        report = analyze_fleet(again, prices=fleet_prices(again, None), thresholds=Thresholds())
        saved = load_fleet_report(store, meta.id)
    assert saved is not None
    doc: dict[str, object] = json.loads(report_json(replace(report, run_id=meta.id)))
    return {**doc, "saved": json.loads(report_json(saved))}


def saved_run_json(case: str) -> dict[str, object]:
    """A recorded run saved into the store and loaded back, as `gpuscope show ID --json` prints it (a live run's
    report through ``gpuscope.load``; the fleet demo's as ``fleet_demo_json`` gives it)."""
    import gpuscope
    from gpuscope.model.codec import to_json

    if case == FLEET_DEMO:
        return fleet_demo_json()
    text = to_json(gpuscope.load(save_recorded_run(case)).analysis).decode()
    doc: dict[str, object] = json.loads(text.replace(json.dumps(os.environ["GPUSCOPE_HOME"])[1:-1], "$GPUSCOPE_HOME"))
    return doc


def main() -> int:
    os.chdir(ROOT)
    os.environ["GPUSCOPE_HOME"] = tempfile.mkdtemp(prefix="gpuscope-expected-")
    reports = {path: report_json(path) for path in cases()}
    reports |= {case: saved_run_json(case) for case in saved_run_cases()}
    OUT.write_bytes(gzip.compress(json.dumps(reports, indent=0, sort_keys=True).encode(), mtime=0))
    print(f"wrote {len(reports)} reports to {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
