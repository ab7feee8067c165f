"""Time ``gpuscope analyze`` against Holistic Trace Analysis (HTA) on the same traces, in one run.

For every case (each bundled sample, gzipped and plain, and a large multi-rank trace built by
make_large_trace.py) three things run, each in its own child process (``analyze_children.py``, measured by
``measuring.measure``):

- decode-only: read the files, gunzip, and decode them with msgspec into a typed Struct of the
  fields an analysis needs. No analysis: this is the ceiling for any Python reader.
- gpuscope: ``gpuscope analyze PATH --json --no-save > /dev/null`` (the CLI, end to end), and once
  more in-process with a timer per phase (import, gpuscope.traces.load, build_report, to_json).
- HTA: ``TraceAnalysis(trace_dir=...)`` plus temporal breakdown, idle-time breakdown (all ranks)
  and comm/compute overlap, in HTA's own virtual environment (``--hta-python``).

Wall time is the child's whole life (interpreter start and imports included: what a user waits
for). Peak memory is that of the child's whole process tree, since both tools read rank files in
worker processes: see ``TreeSampler``. Sizes and MB/s count uncompressed JSON (1 MB = 1e6 bytes).

    .venv/bin/python benchmarks/bench_analyze.py [--quick] [--hta-python /tmp/hta-venv/bin/python]

Scaling in the number of ranks is ``bench_scaling.py``'s.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import (  # noqa: E402 - a sibling script, not a package
    HERE,
    ROOT,
    Case,
    CaseResult,
    Measured,
    add_common_arguments,
    best,
    child_cmd,
    child_env,
    cli_cmd,
    div,
    figure,
    json_bytes,
    measure,
    trace_files,
)

SAMPLES = ROOT / "sample_traces"
SAMPLE_CASES = ("resnet50_dataloader_bound", "resnet50_workers4", "dlrm_8rank")


# --- cases -----------------------------------------------------------------------------------------------------


def _case(name: str, path: Path, fmt: str) -> Case:
    files = trace_files(path)
    return Case(name=name, path=path, fmt=fmt, files=len(files), json_bytes=json_bytes(files))


def _gunzipped_copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in trace_files(src):
        target = dst / f.name.removesuffix(".gz")
        if not target.exists():
            with gzip.open(f, "rb") as fin, target.open("wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
    return dst


def prepare_cases(data_dir: Path, *, quick: bool, large_ranks: int, large_mb: float,
                  large_only: bool = False) -> list[Case]:
    """The bundled samples as shipped (gz) and gunzipped, and the large case twice: one of its ranks alone
    and all its ranks (plain; gz too unless quick)."""
    cases = []
    names = () if large_only else ("resnet50_dataloader_bound", "dlrm_8rank") if quick else SAMPLE_CASES
    for name in names:
        cases.append(_case(name, SAMPLES / name, "gz"))
        cases.append(_case(name, _gunzipped_copy(SAMPLES / name, data_dir / "plain" / name), "json"))
    label = f"large_{large_ranks}x{large_mb:g}MB"
    for fmt in ("json",) if quick else ("json", "gz"):
        out = data_dir / f"{label}_{fmt}"
        if not out.exists():
            print(f"building {label} ({fmt}) in {out} ...", file=sys.stderr, flush=True)
            partial = out.with_name(out.name + ".partial")  # an interrupted build is never reused
            shutil.rmtree(partial, ignore_errors=True)
            # In a child: Linux hands a parent's peak RSS to every child it starts (ru_maxrss survives
            # fork and exec), so the measuring process must itself stay small.
            subprocess.run([sys.executable, str(HERE / "make_large_trace.py"), str(partial), "--ranks",
                            str(large_ranks), "--mb", str(large_mb), *(["--gzip"] if fmt == "gz" else [])],
                           check=True, stdout=subprocess.DEVNULL)
            partial.rename(out)
        cases.append(_case(f"large_1x{large_mb:g}MB", _one_rank(out, data_dir / f"large_1x{large_mb:g}MB_{fmt}"), fmt))
        cases.append(_case(label, out, fmt))
    return cases


def _one_rank(ranks_dir: Path, dst: Path) -> Path:
    """A directory holding the first rank file of ``ranks_dir`` alone (a hard link where the filesystem allows)."""
    first = trace_files(ranks_dir)[0]
    dst.mkdir(parents=True, exist_ok=True)
    target = dst / first.name
    if not target.exists():
        try:
            os.link(first, target)
        except OSError:
            shutil.copyfile(first, target)
    return dst


# --- running and reporting -------------------------------------------------------------------------------------


@dataclass
class Tools:
    python: str
    gpuscope: str
    hta_python: str | None


def run_case(case: Case, tools: Tools, *, repeat: int, env: dict[str, str]) -> CaseResult:
    res = CaseResult(case=case)
    plan: list[tuple[str, list[str]]] = [
        ("decode", child_cmd(tools.python, "decode", case.path)),
        ("gpuscope", cli_cmd(tools.gpuscope, case.path)),
        ("gpuscope_phases", child_cmd(tools.python, "gpuscope", case.path)),
    ]
    if tools.hta_python:
        plan.append(("hta", child_cmd(tools.hta_python, "hta", case.path)))
    for key, cmd in plan:
        print(f"  {case.name} [{case.fmt}] {key} ...", file=sys.stderr, flush=True)
        res.runs[key] = best([measure(cmd, env=env) for _ in range(repeat if key != "hta" else 1)])
    return res


def _ok(m: Measured | None) -> bool:
    return m is not None and m.rc == 0 and m.result is not None and "error" not in m.result


def _work_s(m: Measured | None) -> float | None:
    """Time spent on the job itself, from the child's own phase timers (interpreter start and imports left out)."""
    if m is None or m.result is None or not _ok(m):
        return None
    return float(sum(v for k, v in m.result["phases_s"].items() if k != "import"))


@dataclass(frozen=True)
class Row:
    """One case's headline figures; None where a tool failed or did not run."""

    case: Case
    decode_s: float | None
    gpuscope_s: float | None
    hta_s: float | None
    gpuscope_peak_mb: float | None
    hta_peak_mb: float | None
    gpuscope_work_s: float | None
    hta_work_s: float | None
    gpuscope_cpu_s: float | None
    hta_cpu_s: float | None

    @classmethod
    def of(cls, r: CaseResult) -> Row:
        gs, hta = r.runs.get("gpuscope"), r.runs.get("hta")
        gs_ok = gs if gs is not None and gs.rc == 0 else None
        hta_ok = hta if _ok(hta) else None
        return cls(case=r.case, decode_s=_work_s(r.runs.get("decode")),
                   gpuscope_s=gs_ok.wall_s if gs_ok else None, hta_s=hta_ok.wall_s if hta_ok else None,
                   gpuscope_peak_mb=gs_ok.peak_bytes / 1e6 if gs_ok else None,
                   hta_peak_mb=hta_ok.peak_bytes / 1e6 if hta_ok else None,
                   gpuscope_work_s=_work_s(r.runs.get("gpuscope_phases")), hta_work_s=_work_s(hta),
                   gpuscope_cpu_s=gs_ok.cpu_s if gs_ok else None, hta_cpu_s=hta_ok.cpu_s if hta_ok else None)

    @property
    def json_mb(self) -> float:
        return self.case.json_bytes / 1e6

    def mb_s(self, seconds: float | None) -> float | None:
        return div(self.json_mb, seconds)

    def x_json(self, peak_mb: float | None) -> float | None:
        return div(peak_mb, self.json_mb)

    @property
    def speedup(self) -> float | None:
        return div(self.hta_s, self.gpuscope_s)

    @property
    def cpu_speedup(self) -> float | None:
        return div(self.hta_cpu_s, self.gpuscope_cpu_s)

    @property
    def work_speedup(self) -> float | None:
        return div(self.hta_work_s, self.gpuscope_work_s)

    @property
    def of_ceiling(self) -> float | None:
        return div(self.mb_s(self.gpuscope_s), self.mb_s(self.decode_s))


def print_cases(rows: list[Row]) -> None:
    print("\nWall time of each tool's whole process; MB = 1e6 bytes of uncompressed JSON; peak = the process tree's"
          " memory;\nxJSON = peak / JSON size; cpu = user+system CPU seconds of the process tree; speedup = HTA /"
          " gpuscope,\nby wall and by CPU time; of ceiling = gpuscope MB/s / decode-only MB/s.")
    head = (f"{'case':<28}{'fmt':<5}{'JSON MB':>8} | {'decode-only':>11}{'MB/s':>6} | {'gpuscope':>9}{'cpu':>7}"
            f"{'MB/s':>6}{'peak MB':>8}{'xJSON':>6} | {'HTA':>7}{'cpu':>7}{'MB/s':>6}{'peak MB':>8}{'xJSON':>6} | "
            f"{'speedup':>7}{'by cpu':>7}{'of ceiling':>11}")
    print(head + "\n" + "-" * len(head))
    for r in rows:
        cells = [
            f"{r.case.name:<28}{r.case.fmt:<5}{r.json_mb:>8.1f} | ",
            f"{figure(r.decode_s, '.3f', 's'):>11}{figure(r.mb_s(r.decode_s), '.0f'):>6} | ",
            f"{figure(r.gpuscope_s, '.2f', 's'):>9}{figure(r.gpuscope_cpu_s, '.2f', 's'):>7}",
            f"{figure(r.mb_s(r.gpuscope_s), '.0f'):>6}",
            f"{figure(r.gpuscope_peak_mb, '.0f'):>8}{figure(r.x_json(r.gpuscope_peak_mb), '.2f'):>6} | ",
            f"{figure(r.hta_s, '.2f', 's'):>7}{figure(r.hta_cpu_s, '.2f', 's'):>7}{figure(r.mb_s(r.hta_s), '.0f'):>6}",
            f"{figure(r.hta_peak_mb, '.0f'):>8}{figure(r.x_json(r.hta_peak_mb), '.2f'):>6} | ",
            f"{figure(r.speedup, '.1f', 'x'):>7}{figure(r.cpu_speedup, '.1f', 'x'):>7}",
            f"{figure(r.of_ceiling, '.0%'):>11}",
        ]
        print("".join(cells))


def print_phases(results: list[CaseResult]) -> None:
    print("\nWhere the time goes (seconds, from timers inside each child; gpuscope run in-process, phase by phase;\n"
          "work speedup = HTA / gpuscope time without interpreter start and imports):")
    head = (f"{'case':<28}{'fmt':<5}| {'gs import':>9}{'load':>7}{'report':>7}{'json':>6}{'load MB/s':>10}"
            f"{'RSS imp/load/rep MB':>21} | {'HTA import':>10}{'load':>7}{'temporal':>9}{'idle':>6}{'overlap':>8}"
            f"{'ranks':>6} | {'work speedup':>12}")
    print(head + "\n" + "-" * len(head))
    for r in results:
        c = r.case
        gp, hta = r.runs.get("gpuscope_phases"), r.runs.get("hta")
        g = gp.result if gp is not None and gp.result and _ok(gp) else {}
        h = hta.result if hta is not None and hta.result else {}
        gph, hph, rss = g.get("phases_s", {}), h.get("phases_s", {}), g.get("rss_mb", {})
        rss_text = "/".join(figure(rss.get(k), ".0f") for k in ("after_import", "after_load", "after_report"))
        gs_cols = (("import", 9), ("load", 7), ("report", 7), ("json", 6))
        hta_cols = (("import", 10), ("load", 7), ("temporal", 9), ("idle", 6), ("overlap", 8))
        cells = [
            f"{c.name:<28}{c.fmt:<5}| ",
            "".join(f"{figure(gph.get(k), '.3f'):>{w}}" for k, w in gs_cols),
            f"{figure(div(c.json_bytes / 1e6, gph.get('load')), '.0f'):>10}{rss_text:>21} | ",
            "".join(f"{figure(hph.get(k), '.3f'):>{w}}" for k, w in hta_cols),
            f"{h.get('ranks', 'n/a')!s:>6} | {figure(div(_work_s(hta), _work_s(gp)), '.1f', 'x'):>12}",
        ]
        print("".join(cells))


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summarize(rows: list[Row]) -> dict[str, Any]:
    """Overall figures over the cases where both tools finished."""
    both = [r for r in rows if r.speedup is not None]
    json_mb = sum(r.json_mb for r in both)
    gs_total = sum(r.gpuscope_s or 0.0 for r in both)
    hta_total = sum(r.hta_s or 0.0 for r in both)
    speedups = [r.speedup for r in both if r.speedup is not None]
    cpu = [r.cpu_speedup for r in both if r.cpu_speedup is not None]
    work = [r.work_speedup for r in both if r.work_speedup is not None]
    return {
        "cases": len(rows), "cases_compared": len(both), "json_mb": json_mb,
        "gpuscope_mb_s": div(json_mb, gs_total), "hta_mb_s": div(json_mb, hta_total),
        "speedup_total": div(hta_total, gs_total), "speedup_geomean": _geomean(speedups),
        "speedup_min": min(speedups, default=None), "work_speedup_geomean": _geomean(work),
        "cpu_speedup_total": div(sum(r.hta_cpu_s or 0.0 for r in both), sum(r.gpuscope_cpu_s or 0.0 for r in both)),
        "cpu_speedup_geomean": _geomean(cpu),
        "gpuscope_peak_x_json_max": max((x for r in rows if (x := r.x_json(r.gpuscope_peak_mb)) is not None),
                                        default=None),
        "large": {f"{r.case.name} [{r.case.fmt}]": {
            "json_mb": r.json_mb, "speedup": r.speedup, "work_speedup": r.work_speedup, "cpu_speedup": r.cpu_speedup,
            "gpuscope_peak_x_json": r.x_json(r.gpuscope_peak_mb), "hta_peak_x_json": r.x_json(r.hta_peak_mb),
            "peak_of_hta": div(r.gpuscope_peak_mb, r.hta_peak_mb), "gpuscope_of_ceiling": r.of_ceiling,
        } for r in rows if r.case.name.startswith("large")},
    }


def print_summary(s: dict[str, Any], results: list[CaseResult]) -> None:
    print(f"\nOverall, {s['cases_compared']} of {s['cases']} cases where both tools finished "
          f"({s['json_mb']:.0f} MB of JSON):")
    print(f"  gpuscope {figure(s['gpuscope_mb_s'], '.0f')} MB/s, HTA {figure(s['hta_mb_s'], '.0f')} MB/s: "
          f"{figure(s['speedup_total'], '.1f', 'x')} on total time; per case geometric mean "
          f"{figure(s['speedup_geomean'], '.1f', 'x')}, lowest {figure(s['speedup_min'], '.1f', 'x')}; "
          f"without start-up and imports {figure(s['work_speedup_geomean'], '.1f', 'x')}")
    print(f"  by CPU time: {figure(s['cpu_speedup_total'], '.1f', 'x')} in total, per case geometric mean "
          f"{figure(s['cpu_speedup_geomean'], '.1f', 'x')}")
    for case, large in s["large"].items():
        print(f"  {case}, {large['json_mb']:.0f} MB: {figure(large['speedup'], '.1f', 'x')} faster than HTA "
              f"({figure(large['cpu_speedup'], '.1f', 'x')} by CPU time, "
              f"{figure(large['work_speedup'], '.1f', 'x')} without start-up); gpuscope peak "
              f"{figure(large['gpuscope_peak_x_json'], '.2f', 'x')} JSON, HTA "
              f"{figure(large['hta_peak_x_json'], '.2f', 'x')}: {figure(large['peak_of_hta'], '.2f')} of HTA's "
              f"(target <= 0.5); gpuscope end to end at "
              f"{figure(large['gpuscope_of_ceiling'], '.0%')} of the decode-only rate")
    for r in results:
        for key, m in r.runs.items():
            problem = m.error or (m.result or {}).get("error")
            if m.rc != 0 or problem:
                print(f"  note: {r.case.name} [{r.case.fmt}] {key} failed (exit {m.rc}): {problem}")
        hta = r.runs.get("hta")
        ranks = hta.result.get("ranks") if hta is not None and hta.result else None
        if _ok(hta) and ranks != r.case.files:
            print(f"  note: {r.case.name} [{r.case.fmt}]: HTA analysed {ranks} rank(s) of {r.case.files} files")


def _default_hta_python() -> str | None:
    candidate = os.environ.get("HTA_PYTHON", "/tmp/hta-venv/bin/python")
    return candidate if Path(candidate).exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="two samples and a 4-rank large case, plain JSON only (about a minute)")
    parser.add_argument("--hta-python", default=_default_hta_python(),
                        help="python of a venv with holistictraceanalysis (default $HTA_PYTHON or /tmp/hta-venv)")
    parser.add_argument("--no-hta", action="store_true", help="time gpuscope and the decode ceiling only")
    parser.add_argument("--large-ranks", type=int, default=None, help="ranks in the large case (8; 4 with --quick)")
    parser.add_argument("--large-only", action="store_true", help="only the large cases (one rank, all ranks)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if not Path(args.gpuscope).exists():
        print(f"bench_analyze: {args.gpuscope}: no such gpuscope CLI (pip install -e . first)", file=sys.stderr)
        return 2
    hta_python = None if args.no_hta else args.hta_python
    if not hta_python and not args.no_hta:
        print("bench_analyze: no HTA venv found; make one with `python3 -m venv /tmp/hta-venv && "
              "/tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0`, or pass --no-hta", file=sys.stderr)
        return 2
    tools = Tools(python=sys.executable, gpuscope=args.gpuscope, hta_python=hta_python)
    ranks = args.large_ranks or (4 if args.quick else 8)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="gpuscope-bench-"))
    env = child_env(data_dir)
    try:
        cases = prepare_cases(data_dir, quick=args.quick, large_ranks=ranks, large_mb=args.large_mb,
                              large_only=args.large_only)
        results = [run_case(c, tools, repeat=max(1, args.repeat), env=env) for c in cases]
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)
    import resource

    own_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\ngpuscope analyze vs Holistic Trace Analysis, {time.strftime('%Y-%m-%d %H:%M %Z')}, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; measuring process peak {own_mb:.0f} MB "
          f"(a floor under each child's own peak RSS)")
    loads = [m.load_avg for r in results for m in r.runs.values()]
    print(f"1-minute load average at the start of each measurement: {min(loads):.1f} to {max(loads):.1f} "
          f"({os.cpu_count()} CPUs; above that, other work shared the CPUs and wall times stretch)")
    rows = [Row.of(r) for r in results]
    print_cases(rows)
    print_phases(results)
    summary = summarize(rows)
    print_summary(summary, results)
    if args.json_out:
        payload = {"summary": summary, "cases": [{"case": {**asdict(r.case), "path": str(r.case.path)},
                                                  "runs": {k: asdict(m) for k, m in r.runs.items()}} for r in results]}
        args.json_out.write_text(json.dumps(payload, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
