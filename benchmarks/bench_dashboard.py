"""How fast the dashboard draws a long run's timelines, and how much it sends, against the naive figure.

A temporary store gets one 24-hour run of 8 GPUs sampled at 1 Hz (utilization, DCGM SM active,
memory used, power: 2.76 M GPU rows) plus the host tree (main process, 4 DataLoader workers,
host CPU and iowait). The GPU values carry one-second spikes, so the peak check means something.
Then, each timed as the median of ``--repeat`` runs in this process:

- load: the dashboard's read of the run's timeline samples from the store (cold: first read; warm
  a live top-up with ``since_ns`` when nothing is new).
- build: ``gpu_timelines`` + ``host_timelines`` from the loaded frame (min/max per time bucket).
- serialize: the figures as Dash sends them (plotly's JSON encoder, numpy arrays as base64).
- the run page's sample charts as Dash sends them: the ``run-samples`` callback's HTTP response
  through Flask (GPU and host timelines, stacks), once the app has the samples cached.
- naive: the same two figures with every sample drawn (no downsampling), the reference.

    .venv/bin/python benchmarks/bench_dashboard.py [--hours 24] [--gpus 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np
from plotly.io.json import to_json_plotly

from gpuscope.dashboards import create_app
from gpuscope.dashboards.data import RunReader
from gpuscope.figures import gpu_timelines, host_timelines
from gpuscope.model import schema as m
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.store import Store

RUN_ID = "20261201-000000-b3nch0"
T0_NS = 1_764_547_200_000_000_000
WORKERS = (101, 102, 103, 104)
MAIN = 100


def _gpu_rows(ts: np.ndarray, gpu: int, rng: np.random.Generator) -> list[tuple[int, str, int, int, str, float]]:
    n = len(ts)
    util = np.clip(0.55 + 0.2 * np.sin(np.arange(n) / 600.0 + gpu) + rng.normal(0, 0.05, n), 0, 1)
    util[rng.integers(0, n, 20)] = 0.0  # stalls that a plain average would hide
    util[rng.integers(0, n, 20)] = 1.0
    memory = 60e9 + 5e9 * np.sin(np.arange(n) / 3600.0) + rng.normal(0, 1e8, n)
    power = 250 + 300 * util + rng.normal(0, 5, n)
    rows: list[tuple[int, str, int, int, str, float]] = []
    for metric, source, values in ((m.GPU_UTIL, m.NVML, util), (m.GPU_SM_ACTIVE, m.DCGM, util * 0.8),
                                   (m.GPU_MEMORY_USED_BYTES, m.NVML, memory), (m.GPU_POWER_W, m.NVML, power)):
        rows += zip(ts.tolist(), [source] * n, [gpu] * n, [m.NO_PID] * n, [metric] * n, values.tolist(),
                    strict=True)
    return rows


def _host_rows(ts: np.ndarray, rng: np.random.Generator) -> list[tuple[int, str, int, int, str, float]]:
    n = len(ts)
    rows: list[tuple[int, str, int, int, str, float]] = []
    series = [(MAIN, m.PROC_CPU_CORES, 1.0 + rng.normal(0, 0.05, n)), (m.NO_PID, m.HOST_CPU, rng.uniform(0.3, 0.6, n)),
              (m.NO_PID, m.HOST_IOWAIT, rng.uniform(0.0, 0.1, n))]
    series += [(pid, m.PROC_CPU_CORES, rng.uniform(0.5, 1.0, n)) for pid in WORKERS]
    series += [(pid, m.PROC_IS_WORKER, np.ones(n)) for pid in WORKERS]
    for pid, metric, values in series:
        rows += zip(ts.tolist(), [m.HOST] * n, [m.NO_GPU] * n, [pid] * n, [metric] * n, values.tolist(), strict=True)
    return rows


def build_store(home: Path, *, hours: float, gpus: int) -> int:
    """The long run in a fresh store; returns how many sample rows it holds."""
    store = Store(home)
    seconds = int(hours * 3600)
    store.create_run(RunMeta(id=RUN_ID, name=f"{hours:g} h x {gpus} GPUs at 1 Hz", kind="attach", status="complete",
                             started_ns=T0_NS, ended_ns=T0_NS + seconds * 10**9,
                             gpus=tuple(GpuInfo(index=i, name="NVIDIA H100 80GB HBM3") for i in range(gpus))))
    rng = np.random.default_rng(0)
    ts = T0_NS + np.arange(seconds, dtype=np.int64) * 10**9
    rows = [row for gpu in range(gpus) for row in _gpu_rows(ts, gpu, rng)] + _host_rows(ts, rng)
    rows.sort(key=lambda r: r[0])
    total = 0
    # One flush a second, as the sampling loop writes them.
    for _, flush in groupby(rows, key=lambda r: r[0] // 10**9):
        total += store.add_samples(RUN_ID, list(flush))
    store.close()
    return total


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall seconds of ``repeat`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _samples_request() -> dict[str, Any]:
    """What the browser posts for the run page's sample charts (the ``run-samples`` callback)."""
    return {"output": "run-samples.children", "outputs": {"id": "run-samples", "property": "children"},
            "inputs": [{"id": "run-tick", "property": "n_intervals", "value": None}],
            "state": [{"id": "url", "property": "pathname", "value": f"/runs/{RUN_ID}"}], "changedPropIds": []}


def _points(figs: list[Any]) -> int:
    return sum(len(trace.x) for fig in figs for trace in fig.data)


def run(hours: float, gpus: int, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gpuscope-bench-") as tmp:
        home = Path(tmp) / "home"
        start = time.perf_counter()
        rows = build_store(home, hours=hours, gpus=gpus)
        built_s = time.perf_counter() - start
        store = Store(home)
        reader = RunReader(store)
        start = time.perf_counter()
        samples = reader.samples(RUN_ID, live=False)
        load_cold_s = time.perf_counter() - start
        load_warm_s, _ = timed(lambda: reader.samples(RUN_ID, live=True), repeat)
        build_s, figs = timed(lambda: [gpu_timelines(samples), host_timelines(samples)], repeat)
        ser_s, payload = timed(lambda: "".join(to_json_plotly(f) for f in figs), repeat)
        naive_build_s, naive = timed(lambda: [gpu_timelines(samples, buckets=10**9),
                                              host_timelines(samples, buckets=10**9)], 1)
        naive_ser_s, naive_payload = timed(lambda: "".join(to_json_plotly(f) for f in naive), 1)
        client = create_app(store).server.test_client()
        client.post("/_dash-update-component", json=_samples_request())  # the app's own cache, warmed once
        page_s, response = timed(lambda: client.post("/_dash-update-component", json=_samples_request()), repeat)
        assert response.status_code == 200, response.data[:200]
        store.close()
        peak_kept = max(float(np.nanmax(t.y)) for t in figs[0].data if "util" in (t.hovertemplate or ""))
    return {
        "run": f"{hours:g} h, {gpus} GPUs, 1 Hz", "sample_rows": rows, "store_build_s": round(built_s, 2),
        "load_cold_s": round(load_cold_s, 3), "load_live_topup_s": round(load_warm_s, 4),
        "timelines_build_s": round(build_s, 3), "timelines_serialize_s": round(ser_s, 3),
        "timelines_draw_s": round(build_s + ser_s, 3), "timelines_bytes": len(payload),
        "timelines_points": _points(figs), "run_page_response_s": round(page_s, 3),
        "run_page_bytes": len(response.data), "util_peak_kept": peak_kept,
        "naive_build_s": round(naive_build_s, 3), "naive_serialize_s": round(naive_ser_s, 3),
        "naive_bytes": len(naive_payload), "naive_points": _points(naive),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = parser.parse_args()
    result = run(args.hours, args.gpus, args.repeat)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    mb = 1e6
    print(f"run: {result['run']} ({result['sample_rows']:,} sample rows; store built in {result['store_build_s']} s)")
    print(f"store read, first time (cached afterwards): {result['load_cold_s']:.2f} s;"
          f" live top-up with nothing new: {result['load_live_topup_s'] * 1000:.1f} ms")
    print(f"{'':24}{'downsampled':>14}{'naive (every sample)':>24}")
    print(f"{'figure build':24}{result['timelines_build_s']:>12.3f} s{result['naive_build_s']:>22.3f} s")
    print(f"{'serialize':24}{result['timelines_serialize_s']:>12.3f} s{result['naive_serialize_s']:>22.3f} s")
    print(f"{'points drawn':24}{result['timelines_points']:>14,}{result['naive_points']:>24,}")
    print(f"{'bytes sent':24}{result['timelines_bytes'] / mb:>11.2f} MB{result['naive_bytes'] / mb:>21.2f} MB")
    print(f"run page sample charts as served (Dash callback through Flask): {result['run_page_response_s']:.3f} s,"
          f" {result['run_page_bytes'] / mb:.2f} MB; highest utilization kept: {result['util_peak_kept']:.2f}")


if __name__ == "__main__":
    main()
