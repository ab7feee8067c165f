"""The programs the analyze benchmark measures, each run in a child process of its own, each printing one line of
JSON (``measuring.RESULT_MARK``) on stdout:

- decode: read the files, gunzip, and decode them with msgspec into a typed Struct of the fields an analysis needs
  (the ceiling for any Python reader);
- gpuscope: ``gpuscope analyze`` in-process, with a timer per phase (import, gpuscope.traces.load, build_report,
  to_json);
- hta: Holistic Trace Analysis' ``TraceAnalysis`` plus temporal breakdown, idle-time breakdown (all ranks) and
  comm/compute overlap, under HTA's own interpreter.

    python benchmarks/analyze_children.py {decode,gpuscope,hta} PATH

Only the standard library is imported at the top: the HTA child runs this file under HTA's interpreter.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import RESULT_MARK, trace_files  # noqa: E402 - a sibling script, not a package

PARALLEL_MIN_BYTES = 16 * 1024 * 1024
"""Decode-only uses worker processes on the same rule as gpuscope's loader, so the ceiling is comparable."""


def _decode_one(path_str: str) -> int:
    import msgspec

    args = msgspec.defstruct("Args", [
        ("correlation", int | None, None), ("external_id", int | None, msgspec.field(name="External id", default=None)),
        ("stream", int | None, None), ("device", int | None, None)], gc=False)
    event = msgspec.defstruct("Event", [
        ("ph", str, ""), ("cat", str | None, None), ("name", str, ""), ("pid", int | str | None, None),
        ("tid", int | str | None, None), ("ts", float | None, None), ("dur", float | None, None),
        ("args", args | None, None)], gc=False)
    trace = msgspec.defstruct("Trace", [("traceEvents", list[event])])  # type: ignore[valid-type]
    data = Path(path_str).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    msgspec.json.Decoder(trace).decode(data)
    return len(data)


def child_decode(path: Path) -> dict[str, Any]:
    files = [str(f) for f in trace_files(path)]
    t0 = time.perf_counter()
    workers = min(os.cpu_count() or 1, len(files))
    if workers > 1 and sum(os.path.getsize(f) for f in files) >= PARALLEL_MIN_BYTES:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            sizes = pool.map(_decode_one, files, chunksize=1)
    else:
        sizes = [_decode_one(f) for f in files]
    return {"phases_s": {"decode": time.perf_counter() - t0}, "json_bytes": sum(sizes)}


def child_gpuscope(path: Path) -> dict[str, Any]:
    import resource

    t0 = time.perf_counter()
    from gpuscope.analyzers.ranks import renumbered, summarize_rank
    from gpuscope.analyzers.report import build_report
    from gpuscope.api.analysis import trace_run_meta
    from gpuscope.model.codec import to_json
    from gpuscope.model.run import Run
    from gpuscope.traces import load

    def rss_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    t1 = time.perf_counter()
    rss_import = rss_mb()
    loaded = load(path, per_rank=summarize_rank)  # read and reduced where read, as `gpuscope analyze` does
    summaries = tuple(renumbered(s, f.rank) for f, s in zip(loaded.ranks, loaded.per_rank))
    t2 = time.perf_counter()
    rss_load = rss_mb()
    report = build_report(Run(meta=trace_run_meta(summaries, name=path.name)), ranks=summaries)
    t3 = time.perf_counter()
    text = to_json(report)
    t4 = time.perf_counter()
    return {
        "phases_s": {"import": t1 - t0, "load": t2 - t1, "report": t3 - t2, "json": t4 - t3},
        "rss_mb": {"after_import": rss_import, "after_load": rss_load, "after_report": rss_mb()},
        "ranks": len(summaries), "errors": len(loaded.errors), "report_bytes": len(text),
        "steps": [r.steps for r in report.ranks],
    }


def child_hta(path: Path) -> dict[str, Any]:
    import logging

    phases: dict[str, float] = {}
    out: dict[str, Any] = {"phases_s": phases}
    t = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    phases["import"] = time.perf_counter() - t
    steps = (
        ("load", lambda: TraceAnalysis(trace_dir=str(path))),
        ("temporal", lambda: analysis.get_temporal_breakdown(visualize=False)),
        ("idle", lambda: analysis.get_idle_time_breakdown(ranks=sorted(analysis.t.traces), visualize=False)),
        ("overlap", lambda: analysis.get_comm_comp_overlap(visualize=False)),
    )
    analysis: Any = None
    for name, step in steps:
        t = time.perf_counter()
        try:
            result = step()  # type: ignore[no-untyped-call]
        except Exception as exc:  # noqa: BLE001 - what HTA does with a trace is the finding
            out["error"] = f"{name}: {type(exc).__name__}: {exc}"[:300]
            break
        phases[name] = time.perf_counter() - t
        if name == "load":
            analysis = result
            out["ranks"] = len(analysis.t.traces)
    return out


CHILDREN = {"decode": child_decode, "gpuscope": child_gpuscope, "hta": child_hta}


def main(argv: list[str] | None = None) -> int:
    kind, path = sys.argv[1:] if argv is None else argv
    print(RESULT_MARK + json.dumps(CHILDREN[kind](Path(path))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
