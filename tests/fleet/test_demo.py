"""`gpuscope fleet --demo`: the bundled recording replayed through the fleet code, its figures checked against a
computation of their own from the raw duty-cycle series in sample_traces/ (pandas, not the fleet code)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpuscope.fleet.demo import DEMO_STEP_S, SOURCE
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

DUTY = SAMPLES / "timeseries" / "pod_gpu_duty_cycle_anon.tar.gz"
IDLE_BELOW, IDLE_SHARE = 0.05, 0.8  # the fleet defaults (docs/fleet.md)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    home = tmp_path_factory.mktemp("home")
    result = gpuscope("fleet", "--demo", "--json", home=home)
    assert result.returncode == 0, result.stderr
    return home, json.loads(result.stdout)


def expected() -> pd.DataFrame:
    """Per pod and 5-minute bucket (ending at the last sample), the mean duty cycle as a fraction."""
    with tarfile.open(DUTY) as tar:
        raw = tar.extractfile("pod_gpu_duty_cycle_anon.csv")
        assert raw is not None
        frame = pd.read_csv(raw)
    end = pd.to_datetime(frame["timestamp_anon"].max(), unit="s")
    at = pd.to_datetime(frame["timestamp_anon"], unit="s")
    # Bucket k back from the end is (end - (k+1)*step, end - k*step]: k whole steps between the sample and the end.
    frame["bucket"] = (end - at) // pd.Timedelta(seconds=DEMO_STEP_S)
    return frame.groupby(["container_ip", "bucket"])["value"].mean().div(100).rename("busy").reset_index()


def test_the_demo_figures_match_the_raw_series(demo: tuple[Path, dict[str, Any]]) -> None:
    _, report = demo
    buckets = expected()
    step_h = DEMO_STEP_S / 3600
    assert report["prometheus_url"] == SOURCE
    assert report["gpus"] == buckets["container_ip"].nunique() == 143
    assert report["gpu_hours"] == pytest.approx(len(buckets) * step_h)
    assert len(buckets) * step_h == pytest.approx(2558.33, abs=0.01), "as docs/fleet.md says"
    assert report["busy"] == pytest.approx(buckets["busy"].mean(), abs=1e-6)
    assert round(buckets["busy"].mean() * 100, 1) == 7.1, "as docs/fleet.md says"
    per_pod = buckets.groupby("container_ip").agg(hours=("busy", lambda b: len(b) * step_h), busy=("busy", "mean"),
                                                  idle=("busy", lambda b: (b < IDLE_BELOW).mean()))
    groups = {g["name"]: g for g in report["groups"]}
    assert set(groups) == set(per_pod.index)
    for pod, row in per_pod.iterrows():
        assert groups[pod]["gpu_hours"] == pytest.approx(row["hours"]), pod
        assert groups[pod]["busy"] == pytest.approx(row["busy"], abs=1e-6), pod
    idle = set(per_pod.index[per_pod["idle"] >= IDLE_SHARE])
    assert {i["group"] for i in report["idle_gpus"]} == idle and len(idle) == 23, "as docs/fleet.md says"
    assert report["cost_usd"] is None, "the recording names no GPU model: no price, not $0"


def test_the_demo_is_a_saved_fleet_run_and_takes_a_price(demo: tuple[Path, dict[str, Any]]) -> None:
    home, report = demo
    listed = json.loads(gpuscope("runs", "--json", home=home).stdout)
    assert [(r["id"], r["kind"]) for r in listed] == [(report["run_id"], "fleet")]
    priced = gpuscope("fleet", "--demo", "--json", "--usd-per-gpu-hour", "2", home=home)
    assert priced.returncode == 0, priced.stderr
    assert json.loads(priced.stdout)["cost_usd"] == pytest.approx(2 * report["gpu_hours"])
    text = gpuscope("fleet", "--demo", home=home, COLUMNS="100")
    assert text.returncode == 0 and "recorded: alibaba/clusterdata" in text.stdout and "idle GPUs: " in text.stdout


@pytest.mark.parametrize(("args", "words"), [
    ([], "give --prometheus URL (the Prometheus that scrapes dcgm-exporter), or try --demo"),
    (["--demo", "--prometheus", "http://127.0.0.1:9"], "--demo replays a recorded window: --prometheus does not"),
    (["--demo", "--since", "1h"], "--since does not apply"),
])
def test_demo_and_prometheus_errors_are_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    result = gpuscope("fleet", *args, home=tmp_path)
    assert result.returncode == 2
    assert words in one_clean_error_line(result)
