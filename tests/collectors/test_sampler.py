"""The sampling loop on a fake clock against a real store: cadence, flushes, stop reasons, faults."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from gpuscope.collectors.base import Sampler
from gpuscope.collectors.sampler import FLUSH_EVERY_S, SamplingLoop, Tick
from gpuscope.collectors.stacks import StackBatch
from gpuscope.model.run import RunMeta
from gpuscope.model.schema import SampleRow
from gpuscope.store import Store
from tests.fakes import FakeClock

S = 1_000_000_000


class Counter:
    """A Sampler giving one row per tick; it can make the clock slow or raise on a given call."""

    name = "counter"

    def __init__(self, clock: FakeClock, *, cost_s: float = 0.0, fail_on: set[int] | None = None) -> None:
        self.clock, self.cost_s, self.fail_on = clock, cost_s, fail_on or set()
        self.calls = 0
        self.closed = False

    def sample(self, now_ns: int) -> list[SampleRow]:
        self.calls += 1
        self.clock.advance(self.cost_s)
        if self.calls in self.fail_on:
            raise RuntimeError("device fell off the bus")
        return [(now_ns, "replay", 0, -1, "gpu.util", 0.5)]

    def close(self) -> None:
        self.closed = True


class FakeStacks:
    name = "stacks"

    def __init__(self) -> None:
        self.closed = False

    def sample(self, now_ns: int) -> StackBatch:
        return StackBatch(rows=[(now_ns, 10, 10, "active", 1)], stacks={1: ("main (t.py:1)",)})

    def close(self) -> None:
        self.closed = True


class SpyStore(Store):
    """The real store, noting the heartbeat of every flush."""

    flushes: list[int]

    def add_samples(self, run_id: str, rows: Any, *, heartbeat_ns: int | None = None) -> int:
        self.flushes.append(heartbeat_ns or 0)
        return super().add_samples(run_id, rows, heartbeat_ns=heartbeat_ns)


@pytest.fixture
def store(tmp_path: Path) -> SpyStore:
    s = SpyStore(tmp_path / "home")
    s.flushes = []
    return s


def new_run(store: Store, clock: FakeClock) -> str:
    store.create_run(RunMeta(id="run1", name="t", kind="attach", status="running", started_ns=clock.now_ns(), pid=10))
    return "run1"


def test_ticks_flushes_and_a_complete_run(store: SpyStore) -> None:
    clock = FakeClock()
    run_id = new_run(store, clock)
    counter = Counter(clock)
    stacks = FakeStacks()
    ticks: list[Tick] = []
    loop = SamplingLoop(store, run_id, [counter], stacks=stacks, interval_s=0.25,  # type: ignore[arg-type]
                        duration_s=10.0, clock=clock, on_tick=ticks.append)
    result = loop.run()
    assert result.status == "complete"
    assert result.ticks == 41 == counter.calls  # t = 0, 0.25, ..., 10.0
    assert result.ended_ns == clock.now_ns()
    assert result.rows == 41
    samples = store.samples(run_id)
    assert len(samples) == 41 and samples["ts_ns"].is_monotonic_increasing
    assert [t.ts_ns for t in ticks] == list(samples["ts_ns"])
    gaps = [b - a for a, b in zip(store.flushes, store.flushes[1:])]
    assert gaps and max(gaps) <= FLUSH_EVERY_S * S  # at least one flush a second
    meta = store.get_meta(run_id)
    assert meta.status == "complete" and meta.ended_ns == result.ended_ns
    stored = store.stacks(run_id)
    assert stored is not None and len(stored.samples) == 41 and stored.stacks == {1: ("main (t.py:1)",)}
    assert counter.closed and stacks.closed


def test_the_target_exiting_ends_the_run(store: SpyStore) -> None:
    clock = FakeClock()
    run_id = new_run(store, clock)
    counter = Counter(clock)
    loop = SamplingLoop(store, run_id, [counter], interval_s=0.5, clock=clock,
                        target_alive=lambda: counter.calls < 5)
    result = loop.run()
    assert result.status == "target_exited" and result.ticks == 5
    assert store.get_meta(run_id).status == "target_exited"
    assert len(store.samples(run_id)) == 5  # the last tick's rows are flushed too


def test_stop_from_the_live_view_ends_a_run_without_duration(store: SpyStore) -> None:
    clock = FakeClock()
    run_id = new_run(store, clock)
    holder: list[SamplingLoop] = []
    loop = SamplingLoop(store, run_id, [Counter(clock)], interval_s=0.5, clock=clock,
                        on_tick=lambda t: holder[0].stop() if len(store.flushes) >= 3 else None)
    holder.append(loop)
    assert loop.run().status == "complete"
    assert store.get_meta(run_id).status == "complete"


def test_ctrl_c_stops_cleanly(store: SpyStore) -> None:
    clock = FakeClock()
    run_id = new_run(store, clock)
    counter = Counter(clock)
    before = signal.getsignal(signal.SIGINT)

    def press_ctrl_c(tick: Tick) -> None:
        if counter.calls == 3:
            os.kill(os.getpid(), signal.SIGINT)

    result = SamplingLoop(store, run_id, [counter], interval_s=0.5, clock=clock, on_tick=press_ctrl_c).run()
    assert result.status == "complete" and result.ticks == 3
    assert len(store.samples(run_id)) == 3
    assert signal.getsignal(signal.SIGINT) is before


def test_a_handler_installed_before_the_loop_still_hears_the_signal(store: SpyStore) -> None:
    """`gpuscope run` installs one that passes SIGTERM on to its command; the loop stops and calls it first."""
    clock = FakeClock()
    run_id = new_run(store, clock)
    counter = Counter(clock)
    heard: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, _frame: heard.append(signum))

    def terminate(tick: Tick) -> None:
        if counter.calls == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    try:
        result = SamplingLoop(store, run_id, [counter], interval_s=0.5, clock=clock, on_tick=terminate).run()
        assert result.status == "complete" and result.ticks == 2 and heard == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_failing_collector_is_reported_once_and_the_others_go_on(store: SpyStore) -> None:
    clock = FakeClock()
    run_id = new_run(store, clock)
    broken, good = Counter(clock, fail_on={2, 3, 4}), Counter(clock)
    broken.name = "nvml"
    errors: list[str] = []
    result = SamplingLoop(store, run_id, [broken, good], interval_s=0.5, duration_s=3.0, clock=clock,
                          on_error=errors.append).run()
    assert result.status == "complete"
    assert errors == ["nvml sampling failed: RuntimeError: device fell off the bus"]
    assert len(store.samples(run_id)) == 2 * result.ticks - 3


def test_a_slow_tick_skips_ahead_instead_of_bursting(store: SpyStore) -> None:
    clock = FakeClock()
    run_id = new_run(store, clock)
    slow = Counter(clock, cost_s=1.3)
    result = SamplingLoop(store, run_id, [slow], interval_s=0.5, duration_s=10.0, clock=clock).run()
    assert all(s > 0 for s in clock.sleeps)
    assert result.ticks <= 10 / 1.3 + 2
    ts = list(store.samples(run_id)["ts_ns"])
    assert min(b - a for a, b in zip(ts, ts[1:])) >= 1.3 * S


def test_a_store_fault_fails_the_run_loudly(store: SpyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    run_id = new_run(store, clock)
    calls = {"n": 0}
    real = Store.add_samples

    def flaky(self: Store, rid: str, rows: Any, *, heartbeat_ns: int | None = None) -> int:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real(self, rid, rows, heartbeat_ns=heartbeat_ns)

    monkeypatch.setattr(SpyStore, "add_samples", flaky)
    with pytest.raises(OSError, match="disk full"):
        SamplingLoop(store, run_id, [Counter(clock)], interval_s=0.5, duration_s=5.0, clock=clock).run()
    assert store.get_meta(run_id).status == "failed"


def test_interval_must_be_positive(store: SpyStore) -> None:
    sampler: Sampler = Counter(FakeClock())
    with pytest.raises(ValueError):
        SamplingLoop(store, "x", [sampler], interval_s=0)
