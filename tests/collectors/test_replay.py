"""ReplaySampler: recorded samples played back on the loop's clock."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pandas as pd
import pytest

from gpuscope.collectors.base import Sampler
from gpuscope.collectors.replay import ReplaySampler
from gpuscope.collectors.sampler import SamplingLoop
from gpuscope.model import schema as S
from gpuscope.model.run import RunMeta
from gpuscope.model.schema import SampleRow
from gpuscope.store import Store
from tests.conftest import SAMPLES
from tests.fakes import FakeClock

DUTY_CYCLE = SAMPLES / "timeseries" / "pod_gpu_duty_cycle_anon.tar.gz"
T0 = 1_900_000_000_000_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
# The series' distinct timestamps (s) within its first hour, read here independently of the replay.
with tarfile.open(DUTY_CYCLE) as _archive:
    _csv = _archive.extractfile("pod_gpu_duty_cycle_anon.csv")
    _stamps = sorted(set(pd.read_csv(_csv, usecols=["timestamp_anon"])["timestamp_anon"]))
DUTY_STAMPS_FIRST_HOUR = [t for t in _stamps if t - _stamps[0] <= 3600]


@pytest.fixture(scope="module")
def duty_rows() -> list[SampleRow]:
    """The whole duty-cycle series, replayed at once (a tick 23 hours after the start)."""
    replay = ReplaySampler.from_duty_cycle_csv(DUTY_CYCLE)
    rows = replay.sample(T0) + replay.sample(T0 + 24 * 3600 * SECOND)
    assert replay.done and replay.sample(T0 + 48 * 3600 * SECOND) == []
    return rows


def test_duty_cycle_series_replays_every_pod_as_a_gpu(duty_rows: list[SampleRow]) -> None:
    replay = ReplaySampler.from_duty_cycle_csv(DUTY_CYCLE)
    assert isinstance(replay, Sampler) and replay.name == S.REPLAY
    assert [g.index for g in replay.gpus()] == list(range(143))
    assert len(replay.pods) == 143 and all(len(pod) == 32 for pod in replay.pods.values())
    assert replay.duration_ns == (1662940800 - 1662858720) * SECOND  # 22.8 hours

    assert len(duty_rows) == 157_417
    assert {row[2] for row in duty_rows} == set(range(143))
    assert {(r[1], r[3], r[4]) for r in duty_rows} == {(S.REPLAY, S.NO_PID, S.GPU_UTIL)}
    values = [row[5] for row in duty_rows]
    assert min(values) == 0.0 and max(values) == pytest.approx(0.9966666, abs=1e-6)
    assert 0.06 < sum(values) / len(values) < 0.08, "the series' mean duty cycle is about 7%"
    stamps = [row[0] for row in duty_rows]
    assert stamps == sorted(stamps) and stamps[0] == T0 and stamps[-1] == T0 + (1662940800 - 1662858720) * SECOND


def test_duty_cycle_ticks_hand_out_each_row_once_when_its_time_comes() -> None:
    replay = ReplaySampler.from_duty_cycle_csv(DUTY_CYCLE, speed=60.0)  # an hour a minute
    first = replay.sample(T0)
    assert first and {row[0] for row in first} == {T0}, "the first tick gets the rows recorded at the start"
    assert replay.sample(T0) == [], "nothing twice"
    hour = replay.sample(T0 + MINUTE)
    assert all(T0 < row[0] <= T0 + MINUTE for row in hour)
    recorded = sorted({round(row[0] - T0) for row in first + hour})
    assert len(recorded) == len(DUTY_STAMPS_FIRST_HOUR), "every recording instant of the first hour, none after"
    assert recorded == [round((t - DUTY_STAMPS_FIRST_HOUR[0]) * SECOND / 60) for t in DUTY_STAMPS_FIRST_HOUR]
    assert not replay.done
    rest = replay.sample(T0 + 23 * MINUTE)
    assert replay.done and len(first) + len(hour) + len(rest) == 157_417


def test_frame_from_an_earlier_run_replays_with_its_sources(tmp_path: Path) -> None:
    recorded_at = 1_700_000_000_000_000_000
    rows: list[SampleRow] = [
        (recorded_at + 2 * SECOND, S.NVML, 0, S.NO_PID, S.GPU_UTIL, 0.5),
        (recorded_at, S.NVML, 0, S.NO_PID, S.GPU_UTIL, 0.25),
        (recorded_at, S.HOST, S.NO_GPU, 4242, S.PROC_CPU_CORES, 1.5),
        (recorded_at + 4 * SECOND, S.DCGM, 1, S.NO_PID, S.GPU_SM_ACTIVE, 0.75),
    ]
    with Store(tmp_path) as store:
        store.create_run(RunMeta(id="r1", name="earlier", kind="attach", status="complete", started_ns=recorded_at))
        store.add_samples("r1", rows)
        frame = store.samples("r1")

    replay = ReplaySampler.from_frame(frame, speed=2.0)
    assert [g.index for g in replay.gpus()] == [0, 1]
    start = replay.sample(T0)
    assert sorted(start) == sorted([(T0, S.NVML, 0, S.NO_PID, S.GPU_UTIL, 0.25),
                                    (T0, S.HOST, S.NO_GPU, 4242, S.PROC_CPU_CORES, 1.5)])
    assert replay.sample(T0 + SECOND - 1) == [], "2 s recorded is 1 s at speed 2"
    assert replay.sample(T0 + SECOND) == [(T0 + SECOND, S.NVML, 0, S.NO_PID, S.GPU_UTIL, 0.5)]
    assert not replay.done
    assert replay.sample(T0 + 5 * SECOND) == [(T0 + 2 * SECOND, S.DCGM, 1, S.NO_PID, S.GPU_SM_ACTIVE, 0.75)]
    assert replay.done


def test_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    empty = ReplaySampler.from_frame(pd.DataFrame(columns=list(S.SAMPLE_COLUMNS)))
    assert empty.done and empty.sample(T0) == [] and empty.duration_ns == 0
    with pytest.raises(ValueError, match="lack the column"):
        ReplaySampler.from_frame(pd.DataFrame({"ts_ns": [1], "value": [0.5]}))
    with pytest.raises(ValueError, match="positive"):
        ReplaySampler.from_frame(pd.DataFrame(columns=list(S.SAMPLE_COLUMNS)), speed=0)
    not_duty = tmp_path / "other.csv"
    not_duty.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a duty-cycle series"):
        ReplaySampler.from_duty_cycle_csv(not_duty)


def test_unknown_values_are_left_out() -> None:
    frame = pd.DataFrame({"ts_ns": [0, 1], "source": S.NVML, "gpu": 0, "pid": S.NO_PID,
                          "metric": S.GPU_POWER_W, "value": [float("nan"), 300.0]})
    replay = ReplaySampler.from_frame(frame)
    assert replay.sample(T0) == [], "the recording starts at its NaN row, which is not handed out"
    assert replay.sample(T0 + SECOND) == [(T0 + 1, S.NVML, 0, S.NO_PID, S.GPU_POWER_W, 300.0)]


def test_duty_cycle_replays_through_the_sampling_loop_into_the_store(tmp_path: Path,
                                                                      duty_rows: list[SampleRow]) -> None:
    """Two recorded hours at speed 60: two minutes of the loop's (fake) clock, ticking every 10 s."""
    replay = ReplaySampler.from_duty_cycle_csv(DUTY_CYCLE, speed=60.0)
    with Store(tmp_path) as store:
        store.create_run(RunMeta(id="demo", name="duty cycle", kind="run", status="running", started_ns=T0))
        loop = SamplingLoop(store, "demo", [replay], interval_s=10.0, duration_s=120.0, clock=FakeClock(T0),
                            target_alive=lambda: not replay.done)
        result = loop.run()
        saved = store.samples("demo")
        status = {meta.id: meta.status for meta in store.list_runs()}["demo"]
    first_hours = [row for row in duty_rows if row[0] - T0 <= 2 * 3600 * SECOND]
    assert result.status == status == "complete" and not replay.done
    assert result.rows == len(saved) == len(first_hours) > 143 * 90
    assert saved["ts_ns"].is_monotonic_increasing and saved["ts_ns"].iloc[0] == T0
    assert saved["ts_ns"].iloc[-1] == T0 + (first_hours[-1][0] - T0) // 60
    assert set(saved["gpu"]) == {row[2] for row in first_hours} and saved["value"].between(0, 1).all()
    assert sorted(saved["value"]) == sorted(row[5] for row in first_hours), "the values replayed directly"
