"""Time ``gpuscope analyze`` against Holistic Trace Analysis (HTA) on the same traces, in one run.

For every case (each bundled sample, gzipped and plain, and a large multi-rank trace built by
make_large_trace.py) three things run, each in its own child process:

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

Only the standard library is imported at the top: the HTA child runs this same file under
HTA's interpreter.
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
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLES = ROOT / "sample_traces"
SAMPLE_CASES = ("resnet50_dataloader_bound", "resnet50_workers4", "dlrm_8rank")
RESULT_MARK = "BENCH_RESULT "
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
"""Decode-only uses worker processes on the same rule as gpuscope's loader, so the ceiling is comparable."""
SAMPLE_INTERVAL_S = 0.05


# --- children: each prints one RESULT_MARK line of JSON on stdout ---------------------------------------------


def _trace_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz")))


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
    files = [str(f) for f in _trace_files(path)]
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


# --- measuring a child ---------------------------------------------------------------------------------------


def _pss_bytes(pid: int) -> int | None:
    """Proportional set size: pages shared after fork() are split among the processes sharing them,
    so a parent and its forked workers add up to what they really hold (RSS would count the shared
    interpreter and libraries once per worker)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class TreeSampler(threading.Thread):
    """Samples the memory of a process and all its descendants every SAMPLE_INTERVAL_S, keeping the peak of
    their sum (PSS where /proc gives it, else RSS). Sampling can miss a spike shorter than the interval, so
    ``measure`` also takes the exact peak RSS of the largest single process from wait4() and reports the larger."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_bytes = 0
        self.processes_seen: set[int] = set()
        self._stop_event = threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop_event.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            total = 0
            for p in procs:
                self.processes_seen.add(p.pid)
                size = _pss_bytes(p.pid)
                if size is None:
                    try:
                        size = p.memory_info().rss
                    except psutil.Error:
                        size = 0
                total += size
            self.peak_bytes = max(self.peak_bytes, total)
            self._stop_event.wait(SAMPLE_INTERVAL_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    """User + system CPU time of the child and every descendant it waited for (its worker processes)."""
    load_avg: float
    """The machine's 1-minute load average when the child started: other work competing for the CPUs."""
    peak_bytes: int
    """max(sampled peak of the tree's summed PSS, exact peak RSS of its largest process)."""
    tree_sampled_bytes: int
    largest_process_rss_bytes: int
    processes: int
    rc: int
    result: dict[str, Any] | None
    error: str | None = None


def measure(cmd: list[str], *, env: dict[str, str] | None = None) -> Measured:
    """Run ``cmd`` with stdout captured to a file (or discarded by the command itself) and measure it."""
    load_avg = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    largest = usage.ru_maxrss * 1024  # Linux reports KiB
    result = next((json.loads(line[len(RESULT_MARK):]) for line in stdout.splitlines()
                   if line.startswith(RESULT_MARK)), None)
    error = None
    if proc.returncode != 0:
        error = (stderr.strip().splitlines() or ["(no message)"])[-1][:300]
    return Measured(wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime, load_avg=load_avg,
                    peak_bytes=max(sampler.peak_bytes, largest), tree_sampled_bytes=sampler.peak_bytes,
                    largest_process_rss_bytes=largest, processes=len(sampler.processes_seen), rc=proc.returncode,
                    result=result, error=error)


# --- cases -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    fmt: str
    """"gz" or "json": how the files on disk are stored."""
    files: int
    json_bytes: int
    """Uncompressed JSON, all files together."""


def _json_bytes(files: list[Path]) -> int:
    total = 0
    for f in files:
        if f.name.endswith(".gz"):
            with gzip.open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
        else:
            total += f.stat().st_size
    return total


def _case(name: str, path: Path, fmt: str) -> Case:
    files = _trace_files(path)
    return Case(name=name, path=path, fmt=fmt, files=len(files), json_bytes=_json_bytes(files))


def _gunzipped_copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in _trace_files(src):
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
    first = _trace_files(ranks_dir)[0]
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


@dataclass
class CaseResult:
    case: Case
    runs: dict[str, Measured] = field(default_factory=dict)


def _child_cmd(python: str, kind: str, path: Path) -> list[str]:
    return [python, str(Path(__file__).resolve()), "_child", kind, str(path)]


def _best(runs: list[Measured]) -> Measured:
    """The shortest wall and CPU times of the runs (other work only ever adds to them), and the largest peak
    memory any run reached."""
    best = min(runs, key=lambda m: m.wall_s)
    best.cpu_s = min(m.cpu_s for m in runs)
    peak = max(runs, key=lambda m: m.peak_bytes)
    best.peak_bytes, best.tree_sampled_bytes = peak.peak_bytes, peak.tree_sampled_bytes
    best.largest_process_rss_bytes = peak.largest_process_rss_bytes
    return best


def run_case(case: Case, tools: Tools, *, repeat: int, env: dict[str, str]) -> CaseResult:
    res = CaseResult(case=case)
    cli = ["sh", "-c", 'exec "$0" analyze "$1" --json --no-save > /dev/null', tools.gpuscope, str(case.path)]
    plan: list[tuple[str, list[str]]] = [
        ("decode", _child_cmd(tools.python, "decode", case.path)),
        ("gpuscope", cli),
        ("gpuscope_phases", _child_cmd(tools.python, "gpuscope", case.path)),
    ]
    if tools.hta_python:
        plan.append(("hta", _child_cmd(tools.hta_python, "hta", case.path)))
    for key, cmd in plan:
        print(f"  {case.name} [{case.fmt}] {key} ...", file=sys.stderr, flush=True)
        res.runs[key] = _best([measure(cmd, env=env) for _ in range(repeat if key != "hta" else 1)])
    return res


def _ok(m: Measured | None) -> bool:
    return m is not None and m.rc == 0 and m.result is not None and "error" not in m.result


def _work_s(m: Measured | None) -> float | None:
    """Time spent on the job itself, from the child's own phase timers (interpreter start and imports left out)."""
    if m is None or m.result is None or not _ok(m):
        return None
    return float(sum(v for k, v in m.result["phases_s"].items() if k != "import"))


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "n/a" if value is None or math.isnan(value) else format(value, spec) + unit


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
        return _div(self.json_mb, seconds)

    def x_json(self, peak_mb: float | None) -> float | None:
        return _div(peak_mb, self.json_mb)

    @property
    def speedup(self) -> float | None:
        return _div(self.hta_s, self.gpuscope_s)

    @property
    def cpu_speedup(self) -> float | None:
        return _div(self.hta_cpu_s, self.gpuscope_cpu_s)

    @property
    def work_speedup(self) -> float | None:
        return _div(self.hta_work_s, self.gpuscope_work_s)

    @property
    def of_ceiling(self) -> float | None:
        return _div(self.mb_s(self.gpuscope_s), self.mb_s(self.decode_s))


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
            f"{_fmt(r.decode_s, '.3f', 's'):>11}{_fmt(r.mb_s(r.decode_s), '.0f'):>6} | ",
            f"{_fmt(r.gpuscope_s, '.2f', 's'):>9}{_fmt(r.gpuscope_cpu_s, '.2f', 's'):>7}",
            f"{_fmt(r.mb_s(r.gpuscope_s), '.0f'):>6}",
            f"{_fmt(r.gpuscope_peak_mb, '.0f'):>8}{_fmt(r.x_json(r.gpuscope_peak_mb), '.2f'):>6} | ",
            f"{_fmt(r.hta_s, '.2f', 's'):>7}{_fmt(r.hta_cpu_s, '.2f', 's'):>7}{_fmt(r.mb_s(r.hta_s), '.0f'):>6}",
            f"{_fmt(r.hta_peak_mb, '.0f'):>8}{_fmt(r.x_json(r.hta_peak_mb), '.2f'):>6} | ",
            f"{_fmt(r.speedup, '.1f', 'x'):>7}{_fmt(r.cpu_speedup, '.1f', 'x'):>7}{_fmt(r.of_ceiling, '.0%'):>11}",
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
        rss_text = "/".join(_fmt(rss.get(k), ".0f") for k in ("after_import", "after_load", "after_report"))
        gs_cols = (("import", 9), ("load", 7), ("report", 7), ("json", 6))
        hta_cols = (("import", 10), ("load", 7), ("temporal", 9), ("idle", 6), ("overlap", 8))
        cells = [
            f"{c.name:<28}{c.fmt:<5}| ",
            "".join(f"{_fmt(gph.get(k), '.3f'):>{w}}" for k, w in gs_cols),
            f"{_fmt(_div(c.json_bytes / 1e6, gph.get('load')), '.0f'):>10}{rss_text:>21} | ",
            "".join(f"{_fmt(hph.get(k), '.3f'):>{w}}" for k, w in hta_cols),
            f"{h.get('ranks', 'n/a')!s:>6} | {_fmt(_div(_work_s(hta), _work_s(gp)), '.1f', 'x'):>12}",
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
        "gpuscope_mb_s": _div(json_mb, gs_total), "hta_mb_s": _div(json_mb, hta_total),
        "speedup_total": _div(hta_total, gs_total), "speedup_geomean": _geomean(speedups),
        "speedup_min": min(speedups, default=None), "work_speedup_geomean": _geomean(work),
        "cpu_speedup_total": _div(sum(r.hta_cpu_s or 0.0 for r in both), sum(r.gpuscope_cpu_s or 0.0 for r in both)),
        "cpu_speedup_geomean": _geomean(cpu),
        "gpuscope_peak_x_json_max": max((x for r in rows if (x := r.x_json(r.gpuscope_peak_mb)) is not None),
                                        default=None),
        "large": {f"{r.case.name} [{r.case.fmt}]": {
            "json_mb": r.json_mb, "speedup": r.speedup, "work_speedup": r.work_speedup, "cpu_speedup": r.cpu_speedup,
            "gpuscope_peak_x_json": r.x_json(r.gpuscope_peak_mb), "hta_peak_x_json": r.x_json(r.hta_peak_mb),
            "peak_of_hta": _div(r.gpuscope_peak_mb, r.hta_peak_mb), "gpuscope_of_ceiling": r.of_ceiling,
        } for r in rows if r.case.name.startswith("large")},
    }


def print_summary(s: dict[str, Any], results: list[CaseResult]) -> None:
    print(f"\nOverall, {s['cases_compared']} of {s['cases']} cases where both tools finished "
          f"({s['json_mb']:.0f} MB of JSON):")
    print(f"  gpuscope {_fmt(s['gpuscope_mb_s'], '.0f')} MB/s, HTA {_fmt(s['hta_mb_s'], '.0f')} MB/s: "
          f"{_fmt(s['speedup_total'], '.1f', 'x')} on total time; per case geometric mean "
          f"{_fmt(s['speedup_geomean'], '.1f', 'x')}, lowest {_fmt(s['speedup_min'], '.1f', 'x')}; "
          f"without start-up and imports {_fmt(s['work_speedup_geomean'], '.1f', 'x')}")
    print(f"  by CPU time: {_fmt(s['cpu_speedup_total'], '.1f', 'x')} in total, per case geometric mean "
          f"{_fmt(s['cpu_speedup_geomean'], '.1f', 'x')}")
    for case, large in s["large"].items():
        print(f"  {case}, {large['json_mb']:.0f} MB: {_fmt(large['speedup'], '.1f', 'x')} faster than HTA "
              f"({_fmt(large['cpu_speedup'], '.1f', 'x')} by CPU time, "
              f"{_fmt(large['work_speedup'], '.1f', 'x')} without start-up); gpuscope peak "
              f"{_fmt(large['gpuscope_peak_x_json'], '.2f', 'x')} JSON, HTA "
              f"{_fmt(large['hta_peak_x_json'], '.2f', 'x')}: {_fmt(large['peak_of_hta'], '.2f')} of HTA's "
              f"(target <= 0.5); gpuscope end to end at "
              f"{_fmt(large['gpuscope_of_ceiling'], '.0%')} of the decode-only rate")
    for r in results:
        for key, m in r.runs.items():
            problem = m.error or (m.result or {}).get("error")
            if m.rc != 0 or problem:
                print(f"  note: {r.case.name} [{r.case.fmt}] {key} failed (exit {m.rc}): {problem}")
        hta = r.runs.get("hta")
        ranks = hta.result.get("ranks") if hta is not None and hta.result else None
        if _ok(hta) and ranks != r.case.files:
            print(f"  note: {r.case.name} [{r.case.fmt}]: HTA analysed {ranks} rank(s) of {r.case.files} files")


# --- scaling in the number of ranks ---------------------------------------------------------------------------


def prepare_scaling(data_dir: Path, ranks: list[int], mb: float) -> list[Case]:
    """One folder of gzipped ranks per count, all built from the same real rank (make_large_trace.py, with
    distributedInfo after the events so that hundreds of ranks share one compression)."""
    cases = []
    for n in ranks:
        out = data_dir / f"scale_{n}x{mb:g}MB_gz"
        if not out.exists():
            print(f"building {n} ranks in {out} ...", file=sys.stderr, flush=True)
            partial = out.with_name(out.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            subprocess.run([sys.executable, str(HERE / "make_large_trace.py"), str(partial), "--ranks", str(n),
                            "--mb", str(mb), "--gzip", "--info-last"], check=True, stdout=subprocess.DEVNULL)
            partial.rename(out)
        files = _trace_files(out)
        # Every rank holds the same events: one file's JSON counted, times the ranks (a few digits apart).
        cases.append(Case(name=f"{n}_ranks_x{mb:g}MB", path=out, fmt="gz", files=len(files),
                          json_bytes=_json_bytes(files[:1]) * len(files)))
    return cases


def run_scaling(cases: list[Case], tools: Tools, *, repeat: int, env: dict[str, str]) -> list[CaseResult]:
    """`gpuscope analyze DIR --json --no-save` on each count, the whole process tree measured."""
    results = []
    for case in cases:
        cli = ["sh", "-c", 'exec "$0" analyze "$1" --json --no-save > /dev/null', tools.gpuscope, str(case.path)]
        print(f"  {case.name} gpuscope ...", file=sys.stderr, flush=True)
        results.append(CaseResult(case=case, runs={"gpuscope": _best([measure(cli, env=env)
                                                                      for _ in range(repeat)])}))
    return results


def print_scaling(results: list[CaseResult]) -> dict[str, Any]:
    """Time and peak memory against the number of ranks, relative to the fewest."""
    print("\nScaling in ranks: `gpuscope analyze DIR --json --no-save`, whole process tree; per rank = wall / ranks;"
          "\nrelative to the fewest ranks (targets: peak <= 1.25x, time per rank <= 1x).")
    head = (f"{'ranks':>6}{'JSON GB':>9} | {'wall':>8}{'cpu':>8}{'peak MB':>9}{'load':>6} | {'s/rank':>7}"
            f"{'peak x':>8}{'s/rank x':>10}")
    print(head + "\n" + "-" * len(head))
    rows: list[dict[str, Any]] = []
    for r in results:
        m = r.runs["gpuscope"]
        ok = m.rc == 0
        rows.append({"ranks": r.case.files, "json_gb": r.case.json_bytes / 1e9, "wall_s": m.wall_s if ok else None,
                     "cpu_s": m.cpu_s if ok else None, "peak_mb": m.peak_bytes / 1e6 if ok else None,
                     "load_avg": m.load_avg, "error": m.error})
    first = rows[0]
    for row in rows:
        row["s_per_rank"] = _div(row["wall_s"], row["ranks"])
        row["peak_x"] = _div(row["peak_mb"], first["peak_mb"])
        row["s_per_rank_x"] = _div(row["s_per_rank"], first["s_per_rank"] if first["wall_s"] else None)
        print(f"{row['ranks']:>6}{row['json_gb']:>9.2f} | {_fmt(row['wall_s'], '.2f', 's'):>8}"
              f"{_fmt(row['cpu_s'], '.2f', 's'):>8}{_fmt(row['peak_mb'], '.0f'):>9}{row['load_avg']:>6.1f} | "
              f"{_fmt(row['s_per_rank'], '.3f'):>7}{_fmt(row['peak_x'], '.2f', 'x'):>8}"
              f"{_fmt(row['s_per_rank_x'], '.2f', 'x'):>10}" + (f"  failed: {row['error']}" if row["error"] else ""))
    return {"scaling": rows}


def _child_env(data_dir: Path) -> dict[str, str]:
    """The children's environment: a store of their own, and compiled bytecode as an installed package has it.

    Where PYTHONDONTWRITEBYTECODE is set (as on the development machine), every run would compile gpuscope's
    modules from source again (about 0.1 s a process); pip compiles them at install, so they are compiled here
    once, into a cache outside the repository."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(GPUSCOPE_HOME=str(data_dir / "home"), PYTHONPYCACHEPREFIX=str(data_dir / "pycache"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "gpuscope"), str(Path(__file__).resolve())],
                   env=env, check=False, stdout=subprocess.DEVNULL)
    return env


def _default_hta_python() -> str | None:
    candidate = os.environ.get("HTA_PYTHON", "/tmp/hta-venv/bin/python")
    return candidate if Path(candidate).exists() else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        print(RESULT_MARK + json.dumps(CHILDREN[argv[1]](Path(argv[2]))), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="two samples and a 4-rank large case, plain JSON only (about a minute)")
    parser.add_argument("--hta-python", default=_default_hta_python(),
                        help="python of a venv with holistictraceanalysis (default $HTA_PYTHON or /tmp/hta-venv)")
    parser.add_argument("--no-hta", action="store_true", help="time gpuscope and the decode ceiling only")
    parser.add_argument("--gpuscope", default=str(ROOT / ".venv" / "bin" / "gpuscope"), help="the gpuscope CLI")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where generated traces go and are reused (default: a temporary directory, removed)")
    parser.add_argument("--large-ranks", type=int, default=None, help="ranks in the large case (8; 4 with --quick)")
    parser.add_argument("--large-mb", type=float, default=50.0, help="about this many MB of JSON per large rank")
    parser.add_argument("--large-only", action="store_true", help="only the large cases (one rank, all ranks)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each gpuscope/decode measurement (best is kept)")
    parser.add_argument("--json-out", type=Path, default=None, help="also write every measurement here as JSON")
    parser.add_argument("--scaling", default=None, metavar="N,N,...",
                        help="instead of the cases: gpuscope alone on folders of N gzipped large ranks each "
                             "(e.g. 8,64,256): time and peak memory against the number of ranks")
    args = parser.parse_args(argv)
    if not Path(args.gpuscope).exists():
        print(f"bench_analyze: {args.gpuscope}: no such gpuscope CLI (pip install -e . first)", file=sys.stderr)
        return 2
    hta_python = None if args.no_hta or args.scaling else args.hta_python
    if not hta_python and not args.no_hta and not args.scaling:
        print("bench_analyze: no HTA venv found; make one with `python3 -m venv /tmp/hta-venv && "
              "/tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0`, or pass --no-hta", file=sys.stderr)
        return 2
    tools = Tools(python=sys.executable, gpuscope=args.gpuscope, hta_python=hta_python)
    ranks = args.large_ranks or (4 if args.quick else 8)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="gpuscope-bench-"))
    env = _child_env(data_dir)
    if args.scaling:
        return _scaling_main(args, tools, data_dir, env)
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


def _scaling_main(args: argparse.Namespace, tools: Tools, data_dir: Path, env: dict[str, str]) -> int:
    counts = [int(n) for n in args.scaling.split(",")]
    try:
        results = run_scaling(prepare_scaling(data_dir, counts, args.large_mb), tools, repeat=max(1, args.repeat),
                              env=env)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)
    print(f"\ngpuscope analyze by number of ranks, {time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}; 1-minute load average shown per measurement")
    summary = print_scaling(results)
    if args.json_out:
        args.json_out.write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
