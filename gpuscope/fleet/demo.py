"""``gpuscope fleet --demo``: a real fleet's recorded Prometheus answers, replayed through the same query, analysis
and report code as a live Prometheus, so fleet mode can be tried without one.

The recording (``gpuscope/data/fleet_demo.json.gz``) is what ``avg_over_time(DCGM_FI_DEV_GPU_UTIL[300s])`` answers
over a real series: the per-pod GPU duty cycle of a production Stable-Diffusion serving fleet (alibaba/clusterdata,
cluster-trace-v2026-GenAI, CC-BY-4.0; ``sample_traces/timeseries``), 143 pods over 22.8 hours, bucketed into
5-minute means by ``record_demo`` below. Each pod is one GPU series; its hashed address is both its ``pod`` and its
scrape ``instance``. The recording has no GPU model, so no price: give one with ``--usd-per-gpu-hour``. Only
utilisation was recorded: the other metrics' queries answer with no series, as a Prometheus without them would.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from gpuscope.fleet.prometheus import Prometheus
from gpuscope.fleet.query import fetch_fleet, plan_window
from gpuscope.model.fleet import FleetData

DEMO_FILE = "data/fleet_demo.json.gz"
DEMO_STEP_S = 300.0
SOURCE = "recorded: alibaba/clusterdata cluster-trace-v2026-GenAI, pod GPU duty cycle (CC-BY-4.0)"
"""What a demo run shows where a real one shows its Prometheus URL."""
_UTIL = "DCGM_FI_DEV_GPU_UTIL"
_EMPTY = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'


class RecordedPrometheus(Prometheus):
    """A Prometheus that answers each range query from a recording: the query's first metric name -> the answer
    body, then decoded and checked as a server's is (``query_range``); a metric not recorded answers with no series."""

    def __init__(self, answers: Mapping[str, bytes], *, source: str) -> None:
        super().__init__("http://recorded.invalid", env={})
        self.url = source
        self._answers = dict(answers)

    def _post(self, path: str, form: Mapping[str, str]) -> bytes:
        return self._answers.get(form["query"].split("(", 1)[1].split("{", 1)[0], _EMPTY)


def demo_data() -> FleetData:
    """The recorded fleet, fetched through ``fetch_fleet`` as a live one is."""
    recording = json.loads(gzip.decompress(resources.files("gpuscope").joinpath(DEMO_FILE).read_bytes()))
    client = RecordedPrometheus({name: msgspec.json.encode(body) for name, body in recording["answers"].items()},
                                source=SOURCE)
    window = plan_window(recording["start_s"], recording["end_s"], recording["step_s"])
    return fetch_fleet(client, window)


def read_duty_cycle(path: Path) -> pd.DataFrame:
    """``value,timestamp_anon,container_ip`` rows of the duty-cycle CSV, or of the .tar.gz that holds it."""
    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith(".csv"))
            raw = tar.extractfile(member)
            if raw is None:
                raise ValueError(f"{path}: {member.name} is not a file")
            return pd.read_csv(io.BytesIO(raw.read()))
    return pd.read_csv(path)


def record_demo(path: Path, *, step_s: float = DEMO_STEP_S) -> dict[str, object]:
    """The recording from the duty-cycle series: per pod, the mean of its samples in each bucket
    (``end - step``, ``end``] that has any, as Prometheus' ``avg_over_time`` answers; the last bucket ends at the
    last sample, and the first starts before the first sample."""
    frame = read_duty_cycle(path)
    frame = frame[frame["value"].between(0, 100)]
    t = frame["timestamp_anon"].to_numpy(dtype=np.float64)
    end_s = float(t.max())
    buckets = int((end_s - t.min()) // step_s) + 1
    start_s = end_s - buckets * step_s
    bucket = np.ceil((t - start_s) / step_s).astype(np.int64)
    means = frame.assign(bucket=bucket).groupby(["container_ip", "bucket"])["value"].mean()
    result = []
    for pod, series in means.groupby(level=0):
        points = [[start_s + int(b) * step_s, f"{v:.6g}"] for (_, b), v in series.items()]
        result.append({"metric": {"__name__": _UTIL, "gpu": "0", "pod": str(pod), "instance": str(pod),
                                  "job": "duty-cycle"}, "values": points})
    return {"start_s": start_s, "end_s": end_s, "step_s": step_s,
            "answers": {_UTIL: {"status": "success", "data": {"resultType": "matrix", "result": result}}}}


if __name__ == "__main__":  # python -m gpuscope.fleet.demo sample_traces/timeseries/pod_gpu_duty_cycle_anon.tar.gz
    import sys

    body = json.dumps(record_demo(Path(sys.argv[1])), separators=(",", ":")).encode()
    Path(__file__).resolve().parents[1].joinpath(DEMO_FILE).write_bytes(gzip.compress(body, 9, mtime=0))
