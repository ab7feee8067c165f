"""The dashboard under load: 500 saved runs, one live run being written, 20 concurrent clients for 60 s.

A temporary store gets ``--runs`` saved runs, each with two minutes of 1 Hz samples (two GPUs and the host) and
a report (the bundled resnet50 sample's own analysis, saved under each run's id). `gpuscope dashboard` serves it
as a user starts it (its own process, on loopback), while a second process records a live run into the same
store (a block of samples every 0.5 s, as a collector flushes). Then ``--clients`` threads, each with its own
HTTP connection, ask for the pages as a browser does (a page is its Dash callbacks, POSTed as dash-renderer
posts them), one after another for ``--seconds``:

- runs list: the router callback for ``/``, every run's row;  runs refresh: the runs table's 5 s tick;
- run page: the router callback for ``/runs/<a saved run>``;  run charts: that run's sample charts callback;
- live page: ``/runs/<the live run>``;  live refresh: the live page's 2 s ticks (its body, then its charts).

Reported per page: requests, errors (any answer but HTTP 200, or none within ``--timeout-s``), p50 and p95
latency. Then, in this process, the runs list as the dashboard builds it: cold (a new reader, every saved report
decoded) against warm (summaries cached by run and by when its report was written): what the cache saves on
each refresh, as a ratio.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_dashboard_load.py [--runs 500] [--clients 20] [--seconds 60]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpuscope.api.analysis import analyze_path
from gpuscope.dashboards.data import RunReader
from gpuscope.model import schema as m
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.store import Store

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "resnet50_dataloader_bound"
T0_NS = 1_764_547_200_000_000_000
LIVE_ID = "20261201-120000-11fe00"
LIVE_WRITER = f"""
import sys, time
from gpuscope.model import schema as m
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
store = Store(sys.argv[1])
store.create_run(RunMeta(id="{LIVE_ID}", name="live training", kind="run", status="running",
                         started_ns=time.time_ns(), command=("python", "train.py")))
print("ready", flush=True)
while True:
    now = time.time_ns()
    rows = [(now, m.NVML, g, m.NO_PID, metric, 0.5 + 0.01 * g) for g in range(2)
            for metric in (m.GPU_UTIL, m.GPU_POWER_W, m.GPU_MEMORY_USED_BYTES)]
    rows += [(now, m.HOST, m.NO_GPU, 100, m.PROC_CPU_CORES, 1.0), (now, m.HOST, m.NO_GPU, m.NO_PID, m.HOST_CPU, 0.4)]
    store.add_samples("{LIVE_ID}", rows, heartbeat_ns=now)
    time.sleep(0.5)
"""


def saved_id(i: int) -> str:
    return f"20261130-{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}-{i:06x}"


def build_store(home: Path, runs: int) -> None:
    """``runs`` finished runs, each with samples and a real report, saved as `gpuscope attach` saves one."""
    report, _ = analyze_path(SAMPLE)
    rng = np.random.default_rng(500)
    with Store(home) as store:
        for i in range(runs):
            run_id, t0 = saved_id(i), T0_NS + i * 600 * 10**9
            store.create_run(RunMeta(id=run_id, name=f"job {i}", kind="attach", status="complete", started_ns=t0,
                                     ended_ns=t0 + 120 * 10**9, command=("python", "train.py", f"--seed={i}"),
                                     gpus=tuple(GpuInfo(index=g, name="NVIDIA H100 80GB HBM3") for g in range(2))))
            store.add_samples(run_id, _rows(t0, rng))
            store.save_report(run_id, replace(report, run=replace(report.run, id=run_id, name=f"job {i}",
                                                                  kind="attach")))


def _rows(t0_ns: int, rng: np.random.Generator) -> list[tuple[int, str, int, int, str, float]]:
    ts = (t0_ns + np.arange(120) * 10**9).tolist()
    rows = []
    for g in range(2):
        util = rng.uniform(0.2, 1.0, len(ts)).tolist()
        rows += [(t, m.NVML, g, m.NO_PID, m.GPU_UTIL, u) for t, u in zip(ts, util, strict=True)]
        rows += [(t, m.NVML, g, m.NO_PID, m.GPU_POWER_W, 200 + 400 * u) for t, u in zip(ts, util, strict=True)]
        rows += [(t, m.NVML, g, m.NO_PID, m.GPU_MEMORY_USED_BYTES, 6e10) for t in ts]
    rows += [(t, m.HOST, m.NO_GPU, 100, m.PROC_CPU_CORES, 1.0) for t in ts]
    rows += [(t, m.HOST, m.NO_GPU, m.NO_PID, m.HOST_CPU, 0.5) for t in ts]
    return rows


# -- what the browser posts --------------------------------------------------------------------------------


def _prop(component: str, prop: str, value: Any = None) -> dict[str, Any]:
    return {"id": component, "property": prop, "value": value}


def _callback(outputs: list[tuple[str, str]], inputs: list[dict[str, Any]],
              state: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Dash callback request as dash-renderer posts it to ``/_dash-update-component``."""
    out: Any = {"id": outputs[0][0], "property": outputs[0][1]}
    name = f"{outputs[0][0]}.{outputs[0][1]}"
    if len(outputs) > 1:
        out = [{"id": c, "property": p} for c, p in outputs]
        name = ".." + "...".join(f"{c}.{p}" for c, p in outputs) + ".."
    return {"output": name, "outputs": out, "inputs": inputs, "state": state or [],
            "changedPropIds": [f"{i['id']}.{i['property']}" for i in inputs[:1]]}


def router(pathname: str, search: str = "") -> dict[str, Any]:
    return _callback([("page", "children")], [_prop("url", "pathname", pathname), _prop("url", "search", search)])


def run_charts(run_id: str) -> dict[str, Any]:
    return _callback([("run-samples", "children")], [_prop("run-tick", "n_intervals", 1)],
                     [_prop("url", "pathname", f"/runs/{run_id}")])


def run_tick(run_id: str) -> dict[str, Any]:
    return _callback([("run-body", "children"), ("run-tick", "disabled")], [_prop("run-tick", "n_intervals", 1)],
                     [_prop("url", "pathname", f"/runs/{run_id}")])


def runs_tick() -> dict[str, Any]:
    return _callback([("runs-table", "rowData"), ("runs-tick", "disabled")], [_prop("runs-tick", "n_intervals", 1)])


def page_requests(page: str, saved: str, live: str) -> list[dict[str, Any]]:
    """The callbacks one view of a page makes."""
    return {"runs list": [router("/")], "runs refresh": [runs_tick()], "run page": [router(f"/runs/{saved}")],
            "run charts": [run_charts(saved)], "live page": [router(f"/runs/{live}")],
            "live refresh": [run_tick(live), run_charts(live)]}[page]


PAGES = ("runs list", "runs refresh", "run page", "run charts", "live page", "live refresh")


# -- the load ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    page: str
    seconds: float
    ok: bool


def post(conn: http.client.HTTPConnection, body: dict[str, Any]) -> int:
    conn.request("POST", "/_dash-update-component", body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    return response.status


def client(port: int, deadline: float, seed: int, runs: int, timeout_s: float, out: list[Sample]) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    turn = seed
    while time.monotonic() < deadline:
        page = PAGES[turn % len(PAGES)]
        turn += 1
        start = time.perf_counter()
        try:
            ok = all(post(conn, body) == 200 for body in page_requests(page, saved_id(rng.randrange(runs)), LIVE_ID))
        except (OSError, http.client.HTTPException):
            ok = False
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        out.append(Sample(page, time.perf_counter() - start, ok))
    conn.close()


def summary(samples: list[Sample]) -> dict[str, dict[str, Any]]:
    table = {}
    for page in PAGES:
        times = np.array([s.seconds for s in samples if s.page == page])
        errors = sum(1 for s in samples if s.page == page and not s.ok)
        table[page] = {"requests": int(len(times)), "errors": errors,
                       "p50_ms": round(float(np.percentile(times, 50)) * 1000, 1) if len(times) else None,
                       "p95_ms": round(float(np.percentile(times, 95)) * 1000, 1) if len(times) else None}
    return table


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(home: Path) -> Iterator[int]:
    """`gpuscope dashboard` and the live writer, each in its own process, for as long as the load runs."""
    env = {**os.environ, "GPUSCOPE_HOME": str(home)}
    env.pop("GPUSCOPE_DASHBOARD_TOKEN", None)
    port = _free_port()
    writer = subprocess.Popen([sys.executable, "-c", LIVE_WRITER, str(home)], env=env, stdout=subprocess.PIPE,
                              text=True)
    dashboard = subprocess.Popen([sys.executable, "-m", "gpuscope", "dashboard", "--port", str(port)], env=env,
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        assert dashboard.stdout is not None and dashboard.stdout.readline().startswith("gpuscope dashboard:")
        yield port
    finally:
        for proc in (dashboard, writer):
            proc.terminate()
            proc.wait(timeout=30)


def load_test(home: Path, *, runs: int, clients: int, seconds: float, timeout_s: float) -> dict[str, Any]:
    with serving(home) as port:
        deadline = time.monotonic() + seconds
        results: list[list[Sample]] = [[] for _ in range(clients)]
        threads = [threading.Thread(target=client, args=(port, deadline, i, runs, timeout_s, results[i]))
                   for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    samples = [s for r in results for s in r]
    return {"pages": summary(samples), "requests": len(samples), "errors": sum(1 for s in samples if not s.ok)}


def runs_list_cache(home: Path, repeat: int) -> dict[str, float]:
    """The runs list's data as the dashboard reads it: a new reader each time (every report decoded) against one
    reader refreshing (only the catalog and the reports' write times read)."""
    with Store(home) as store:
        cold = [_timed(lambda: RunReader(store).runs()) for _ in range(repeat)]
        warm_reader = RunReader(store)
        warm_reader.runs()
        warm = [_timed(warm_reader.runs) for _ in range(repeat)]
    return {"cold_s": round(statistics.median(cold), 4), "warm_s": round(statistics.median(warm), 4),
            "speedup": round(statistics.median(cold) / statistics.median(warm), 1)}


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--timeout-s", type=float, default=30.0, help="A request not answered by then is an error.")
    parser.add_argument("--repeat", type=int, default=5, help="Repeats of the in-process runs list timing.")
    parser.add_argument("--json-out", type=Path, help="Also write the figures here, as JSON.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuscope-load-") as tmp:
        home = Path(tmp) / "home"
        start = time.perf_counter()
        build_store(home, args.runs)
        built_s = time.perf_counter() - start
        load_before = os.getloadavg()[0]
        result = load_test(home, runs=args.runs, clients=args.clients, seconds=args.seconds, timeout_s=args.timeout_s)
        result |= {"runs": args.runs, "clients": args.clients, "seconds": args.seconds, "cpus": os.cpu_count(),
                   "load_average_before": round(load_before, 2), "load_average_after": round(os.getloadavg()[0], 2),
                   "store_build_s": round(built_s, 1), "runs_list_data": runs_list_cache(home, args.repeat)}
    print(f"{args.runs} saved runs + 1 live, {args.clients} clients, {args.seconds:g} s, {os.cpu_count()} CPUs"
          f" (load average {result['load_average_before']} before, {result['load_average_after']} after):"
          f" {result['requests']} page views, {result['errors']} errors")
    print(f"{'page':<14}{'views':>8}{'errors':>8}{'p50 ms':>10}{'p95 ms':>10}")
    for page, row in result["pages"].items():
        p50, p95 = (row[k] if row[k] is not None else "n/a" for k in ("p50_ms", "p95_ms"))
        print(f"{page:<14}{row['requests']:>8}{row['errors']:>8}{p50:>10}{p95:>10}")
    cache = result["runs_list_data"]
    print(f"runs list data in process: cold (every report decoded) {cache['cold_s'] * 1000:.1f} ms, warm (cached)"
          f" {cache['warm_s'] * 1000:.1f} ms: {cache['speedup']}x")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
