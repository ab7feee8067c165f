"""The query layer's pieces: PromQL per metric and dialect, the step, buckets, units, sentinels and labels."""

from __future__ import annotations

import json
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from gpuscope.fleet import Prometheus, PrometheusError, fetch_fleet
from gpuscope.fleet.prometheus import Series
from gpuscope.fleet.query import QUERIES, _fill, _identify, choose_step_s, plan_window, promql
from gpuscope.fleet.serving import QUERIES as SERVING_QUERIES
from gpuscope.model.fleet import FleetWindow
from tests.servers import serving

BY_METRIC = {q.metric: q for q in QUERIES}


def test_promql_covers_both_name_dialects_and_the_selector() -> None:
    util = promql(BY_METRIC["util"], '{namespace="ml"}', 120)
    assert util == ('avg_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="ml"}[120000ms]) or '
                    'avg_over_time(dcgm_gpu_utilization{namespace="ml"}[120000ms])')
    assert promql(BY_METRIC["memory_used_bytes"], "", 60).startswith("max_over_time(DCGM_FI_DEV_FB_USED{}[60000ms])")
    assert promql(BY_METRIC["energy_j"], "", 60).startswith("increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{}")


@pytest.mark.parametrize(("window_s", "step_s"), [(600, 60), (6 * 3600, 60), (86400, 120), (30 * 86400, 3600)])
def test_default_step_keeps_points_per_series_near_720(window_s: float, step_s: float) -> None:
    assert choose_step_s(window_s) == step_s
    assert window_s / choose_step_s(window_s) <= 720


def test_window_is_whole_steps_ending_at_the_end() -> None:
    w = plan_window(1000.0, 1250.0, 60.0)
    assert (w.buckets, w.start_ns, w.end_ns) == (4, 1_010 * 10**9, 1_250 * 10**9)
    with pytest.raises(PrometheusError, match="shorter than one step"):
        plan_window(0.0, 30.0, 60.0)
    with pytest.raises(PrometheusError, match="must come after"):
        plan_window(10.0, 10.0, 1.0)


def test_points_land_in_their_buckets_in_gpuscope_units_and_sentinels_are_gaps() -> None:
    window = FleetWindow(start_ns=0, step_ns=60 * 10**9, buckets=5)
    out = np.full(5, np.nan)
    series = Series(labels={}, times_s=np.array([60.0, 120.0, 180.0, 240.0, 300.0, 360.0]),
                    values=np.array([50.0, 9223372036854775794.0, 101.0, np.nan, 100.0, 7.0]))
    _fill(out, series, window, BY_METRIC["util"].field)
    assert out[0] == 0.5 and out[4] == 1.0  # percent to a share; the point past the window is left out
    assert np.isnan(out[1]) and np.isnan(out[2]) and np.isnan(out[3])  # a sentinel, over 100%, NaN: gaps
    mem = np.full(5, np.nan)
    _fill(mem, Series(labels={}, times_s=np.array([60.0]), values=np.array([2048.0])), window,
          BY_METRIC["memory_used_bytes"].field)
    assert mem[0] == 2048 * 2**20


def test_labels_of_each_exporter_dialect_and_of_kubernetes_discovery() -> None:
    _, old = _identify({"__name__": "dcgm_gpu_utilization", "gpu": "3", "uuid": "GPU-x", "hostname": "n1",
                        "pod_name": "p", "pod_namespace": "ns"}, set())
    assert old is not None and (old.host, old.gpu, old.uuid, old.pod, old.namespace) == ("n1", 3, "GPU-x", "p", "ns")
    _, mig = _identify({"gpu": "0", "GPU_I_ID": "3", "GPU_I_PROFILE": "3g.40gb", "instance": "10.0.0.5:9400"}, set())
    assert mig is not None and (mig.gpu, mig.mig_profile, mig.host) == (1003, "3g.40gb", "10.0.0.5")
    exporter = {"gpu": "1", "Hostname": "n2", "pod": "dcgm-exporter-abc", "namespace": "gpu-operator",
                "instance": "n2:9400"}
    _, held = _identify({**exporter, "exported_pod": "train-0", "exported_namespace": "ml"}, {"n2:9400"})
    _, free = _identify(exporter, {"n2:9400"})
    assert held is not None and (held.pod, held.namespace) == ("train-0", "ml")
    assert free is not None and (free.pod, free.namespace) == (None, None)
    assert _identify({"Hostname": "n3"}, set())[1] is None  # no gpu label: not attributable


class _Limited(BaseHTTPRequestHandler):
    """A Prometheus stand-in that refuses (422, as Prometheus words it) any range query over ``MAX_POINTS`` steps,
    and otherwise answers two GPUs' series with the step's time as the value."""

    MAX_POINTS = 3

    def do_POST(self) -> None:  # noqa: N802
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        start, end, step = (float(form[k][0]) for k in ("start", "end", "step"))
        times = np.arange(start, end + step / 2, step)
        self.server.asked.append(len(times))  # type: ignore[attr-defined]
        if len(times) > self.MAX_POINTS:
            code, body = 422, {"status": "error", "errorType": "execution",
                               "error": "query processing would load too many samples into memory in query execution"}
        elif "DCGM_FI_DEV_GPU_UTIL" not in form["query"][0]:
            code, body = 200, {"status": "success", "data": {"resultType": "matrix", "result": []}}
        else:
            code, body = 200, {"status": "success", "data": {"resultType": "matrix", "result": [
                {"metric": {"gpu": str(g), "Hostname": "n1", "pod": f"p{g}"},
                 "values": [[t, str(t % 100)] for t in times.tolist()]} for g in (0, 1)]}}
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


def test_a_query_loading_too_many_samples_is_split_in_time_and_joined() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Limited)
    server.asked = []  # type: ignore[attr-defined]
    with serving(server):
        window = plan_window(1000.0, 1010.0, 1.0)
        data = fetch_fleet(Prometheus(f"http://127.0.0.1:{server.server_address[1]}"), window, workers=1)
    util = data.metric("util")
    assert [g.pod for g in data.gpus] == ["p0", "p1"]
    np.testing.assert_array_equal(util[0], np.arange(1, 11) / 100)  # every step, once, in order
    asked: list[int] = server.asked  # type: ignore[attr-defined]
    assert asked[0] == 10  # the whole window first, refused, then halves until they pass
    # a serving counter is asked series by series from the window's start: one point more
    by_series = sum(q.combine is None for q in SERVING_QUERIES)
    assert sum(n for n in asked if n <= _Limited.MAX_POINTS) == \
        10 * (len(QUERIES) + len(SERVING_QUERIES) - by_series) + 11 * by_series
