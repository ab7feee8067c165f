"""Fleet mode at scale: 1,000 GPUs x 24 h of 15 s dcgm-exporter samples, through `gpuscope fleet` over loopback HTTP.

A loopback HTTP server answers ``/api/v1/query_range`` as Prometheus answers gpuscope's aggregated queries: one
series per GPU and metric, one point per step (``avg_over_time`` of the 15 s samples in each step, computed
here with numpy from the generated samples, as Prometheus computes it from its TSDB). Utilisation comes from the
real per-pod duty cycle of a production Stable-Diffusion serving fleet (sample_traces/timeseries, 143 pods,
about one sample a minute), spread over the GPUs with shifts, with its gaps kept as gaps; power, memory and
energy follow it. The server's answers are built before timing starts, so what is timed is the client: the
queries, decoding, joining, the analysis, saving the fleet run and printing. Two measurements:

- ``cli``: the real `gpuscope fleet ... --json` as a subprocess (wall time, peak RSS of the process);
- ``stages``: the same path in this process, timed by stage (fetch, analyse, save).

With ``--prometheus``, the same samples (utilisation and power) are also written as OpenMetrics, turned into TSDB
blocks by ``promtool tsdb create-blocks-from openmetrics``, and served by a real Prometheus on loopback, so the
server's own aggregation is timed too (``prometheus``: the same command against it).

    .venv/bin/python benchmarks/bench_fleet.py [--gpus 1000] [--hours 24] [--scrape-s 15] [--repeat 3] [--prometheus]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd

from gpuscope.cli.fleet import fleet_prices
from gpuscope.fleet import Prometheus, analyze_fleet, choose_step_s, fetch_fleet, plan_window
from gpuscope.fleet.query import QUERIES
from gpuscope.fleet.saved import save_fleet_run
from gpuscope.store import Store

ROOT = Path(__file__).resolve().parents[1]
DUTY = ROOT / "sample_traces" / "timeseries" / "pod_gpu_duty_cycle_anon.tar.gz"
MODEL = "NVIDIA H100 80GB HBM3"


def duty_cycles(scrape_s: float, samples: int) -> np.ndarray:
    """(pods x samples) utilisation % at ``scrape_s`` spacing, from the real trace (NaN where it has no sample)."""
    with tarfile.open(DUTY) as tar:
        member = tar.getmembers()[0]
        raw = tar.extractfile(member)
        assert raw is not None
        frame = pd.read_csv(io.BytesIO(raw.read()))
    frame["slot"] = ((frame["timestamp_anon"] - frame["timestamp_anon"].min()) // scrape_s).astype(int)
    table = frame.pivot_table(index="container_ip", columns="slot", values="value", aggfunc="mean")
    table = table.reindex(columns=range(int(table.columns.max()) + 1)).ffill(axis=1, limit=int(60 // scrape_s))
    values = table.to_numpy(dtype=np.float64)
    reps = -(-samples // values.shape[1])
    return np.tile(values, (1, reps))[:, :samples]


def fleet_samples(gpus: int, hours: float, scrape_s: float) -> np.ndarray:
    """(gpus x samples) utilisation % of a fleet at ``scrape_s``, each GPU a real pod's series, shifted."""
    samples = int(hours * 3600 / scrape_s)
    pods = duty_cycles(scrape_s, samples)
    rng = np.random.default_rng(7)
    out = np.empty((gpus, samples))
    for g in range(gpus):
        out[g] = np.roll(pods[g % len(pods)], int(rng.integers(samples)))
    return np.clip(out, 0, 100)


def answers(util: np.ndarray, start_s: float, step_s: float, buckets: int, scrape_s: float) -> dict[str, bytes]:
    """The JSON Prometheus would give for each of gpuscope's queries, by the query's first metric name."""
    per = int(round(step_s / scrape_s))
    usable = util[:, : buckets * per].reshape(len(util), buckets, per)
    with warnings.catch_warnings():  # a step with no sample has no mean: a gap
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_util = np.nanmean(usable, axis=2)
    power = 70 + 6.3 * mean_util
    series = {
        "DCGM_FI_DEV_GPU_UTIL": mean_util,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": mean_util / 100 * 0.97,
        "DCGM_FI_PROF_SM_ACTIVE": mean_util / 100 * 0.6,
        "DCGM_FI_PROF_DRAM_ACTIVE": mean_util / 100 * 0.3,
        "DCGM_FI_DEV_FB_USED": np.where(np.isnan(mean_util), np.nan, 20000 + 300 * mean_util),
        "DCGM_FI_DEV_POWER_USAGE": power,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": power * step_s * 1000,
    }
    times = [f"{start_s + (i + 1) * step_s:.3f}".rstrip("0").rstrip(".") for i in range(buckets)]
    out = {}
    for name, values in series.items():
        parts = []
        for g, row in enumerate(values):
            node, index = divmod(g, 8)
            labels = {"DCGM_FI_DRIVER_VERSION": "550.54.15", "Hostname": f"gpu-node-{node:03d}",
                      "UUID": f"GPU-{g:08x}-5f1e-4a7b-9c3d-2e8f6a1b0c9d", "container": "main",
                      "device": f"nvidia{index}", "gpu": str(index),
                      "instance": f"10.0.{node // 250}.{node % 250}:9400",
                      "job": "dcgm-exporter", "modelName": MODEL, "namespace": f"team-{g // 16 % 7}",
                      "pci_bus_id": f"00000000:{index + 0x18:02X}:00.0", "pod": f"job-{g // 16}-worker-{g % 16}"}
            points = ",".join(f'[{t},"{v:.6g}"]' for t, v in zip(times, row.tolist()) if v == v)
            parts.append(f'{{"metric":{json.dumps(labels)},"values":[{points}]}}')
        out[name] = ('{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(parts)
                     + "]}}").encode()
    return out


def serve(bodies: dict[str, bytes]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            query = form["query"][0]
            name = query.split("(", 1)[1].split("{", 1)[0]
            body = bodies.get(name, b'{"status":"success","data":{"resultType":"matrix","result":[]}}')
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_cli(url: str, start_s: float, end_s: float, home: str) -> tuple[float, float, int, str]:
    """Wall seconds, peak RSS MB (of that process alone), JSON bytes out, and what it found, of `gpuscope fleet`."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "fleet", "--prometheus", url, "--start",
                                 f"{start_s}", "--end", f"{end_s}", "--group-by", "job", "--json"], stdout=out,
                                env={**os.environ, "GPUSCOPE_HOME": home})
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"gpuscope fleet failed with exit code {proc.returncode}")
        out.seek(0)
        body = out.read()
    report = json.loads(body)
    found = f"{report['gpus']} GPUs, busy {report['busy']:.4f}, {len(report['idle_gpus'])} idle"
    return wall, usage.ru_maxrss / 1024, len(body), found


def stages(url: str, start_s: float, end_s: float, step_s: float, home: str) -> dict[str, float]:
    t0 = time.perf_counter()
    data = fetch_fleet(Prometheus(url), plan_window(start_s, end_s, step_s))
    t1 = time.perf_counter()
    report = analyze_fleet(data, group_by="job", prices=fleet_prices(data, None))
    t2 = time.perf_counter()
    with Store(home) as store:
        save_fleet_run(store, data, report)
    t3 = time.perf_counter()
    return {"fetch_s": t1 - t0, "analyse_s": t2 - t1, "save_s": t3 - t2, "gpus": len(data.gpus),
            "groups": len(report.groups), "idle_gpus": len(report.idle_gpus), "busy": report.busy or 0.0}


def openmetrics(util: np.ndarray, start_s: float, scrape_s: float, path: Path) -> int:
    """Write utilisation and power samples as OpenMetrics (a gap is no sample); returns the number of samples."""
    times = [f"{start_s + (i + 1) * scrape_s:.0f}" for i in range(util.shape[1])]
    count = 0
    with path.open("w") as out:
        for name, scale, offset in (("DCGM_FI_DEV_GPU_UTIL", 1.0, 0.0), ("DCGM_FI_DEV_POWER_USAGE", 6.3, 70.0)):
            out.write(f"# TYPE {name} gauge\n")
            for g, row in enumerate(util):
                node, index = divmod(g, 8)
                labels = (f'{name}{{Hostname="gpu-node-{node:03d}",UUID="GPU-{g:08x}-5f1e-4a7b-9c3d-2e8f6a1b0c9d",'
                          f'gpu="{index}",modelName="{MODEL}",namespace="team-{g // 16 % 7}",'
                          f'pod="job-{g // 16}-worker-{g % 16}"}}')
                values = (row * scale + offset).tolist()
                lines = [f"{labels} {v:.4g} {t}\n" for t, v in zip(times, values) if v == v]
                count += len(lines)
                out.writelines(lines)
        out.write("# EOF\n")
    return count


def real_prometheus(util: np.ndarray, start_s: float, end_s: float, scrape_s: float, repeat: int) -> None:
    """Backfill a real Prometheus with the samples and time `gpuscope fleet` against it."""
    binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if binary is None or promtool is None:
        print("prometheus: skipped, no prometheus/promtool binary (Debian: apt-get install prometheus)")
        return
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        t0 = time.perf_counter()
        samples = openmetrics(util, start_s - scrape_s, scrape_s, root / "samples.om")
        t1 = time.perf_counter()
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(root / "samples.om"),
                        str(root / "data")], check=True, capture_output=True)
        (root / "samples.om").unlink()
        t2 = time.perf_counter()
        print(f"prometheus: {samples / 1e6:.1f} M samples written in {t1 - t0:.1f} s, blocks built by promtool in "
              f"{t2 - t1:.1f} s")
        (root / "prometheus.yml").write_text("global: {scrape_interval: 15s}\n")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        proc = subprocess.Popen([binary, f"--config.file={root / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={root / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                                 "--storage.tsdb.retention.time=30d"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url)
            with tempfile.TemporaryDirectory() as home:
                runs = [run_cli(url, start_s, end_s, home) for _ in range(repeat)]
            print(f"prometheus: gpuscope fleet --json against it: best {min(runs)[0]:.2f} s of {repeat} "
                  f"({', '.join(f'{r[0]:.2f}' for r in runs)}), client peak RSS {max(r[1] for r in runs):.0f} MB; "
                  f"found {min(runs)[3]}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("prometheus did not become ready within 120 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--scrape-s", type=float, default=15.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--prometheus", action="store_true", help="also time it against a backfilled Prometheus")
    args = parser.parse_args()
    window_s = args.hours * 3600
    step_s = choose_step_s(window_s)
    end_s = float(int(time.time()) // 60 * 60)
    window = plan_window(end_s - window_s, end_s, step_s)
    start_s = window.start_ns / 1e9
    t0 = time.perf_counter()
    util = fleet_samples(args.gpus, args.hours, args.scrape_s)
    bodies = answers(util, start_s, step_s, window.buckets, args.scrape_s)
    print(f"{args.gpus} GPUs x {args.hours:g} h at {args.scrape_s:g} s = {util.size / 1e6:.1f} M samples a metric "
          f"({len(QUERIES)} metrics); step {step_s:g} s, {window.buckets} points a series; answers "
          f"{sum(len(b) for b in bodies.values()) / 1e6:.0f} MB of JSON (built in {time.perf_counter() - t0:.1f} s)")
    server = serve(bodies)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as home:
        runs = [run_cli(url, start_s, end_s, home) for _ in range(args.repeat)]
        best = min(runs)
        print(f"cli: gpuscope fleet --json: best {best[0]:.2f} s of {args.repeat} "
              f"({', '.join(f'{r[0]:.2f}' for r in runs)}), peak RSS {max(r[1] for r in runs):.0f} MB, "
              f"{best[2] / 1e6:.2f} MB of JSON out; found {best[3]}")
        timed = min((stages(url, start_s, end_s, step_s, home) for _ in range(args.repeat)),
                    key=lambda s: s["fetch_s"] + s["analyse_s"] + s["save_s"])
        print("stages: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                     for k, v in timed.items()))
    server.shutdown()
    server.server_close()
    if args.prometheus:
        real_prometheus(util, start_s, end_s, args.scrape_s, args.repeat)


if __name__ == "__main__":
    main()
