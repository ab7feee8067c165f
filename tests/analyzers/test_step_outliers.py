"""Outlier steps end to end: a real CPU training loop that saves a checkpoint in one of its profiled steps, and
small traces written as Kineto writes them for the edge cases (no outlier, three steps, two outliers, every step
equal, several ranks). Expected values come from the raw events or from how the traces were built."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.cli.main import app
from gpuscope.model.cost import Price
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.traces import load
from tests import builders as b
from tests import reference
from tests.conftest import SAMPLES

CHECKPOINT = SAMPLES / "cpu_checkpoint_outlier"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
US_PER_HOUR = 3.6e9


def analyse(path: Path, *, price: float | None = None) -> Report:
    loaded = load(path)
    options = AnalysisOptions(price=Price(usd_per_gpu_hour=price, source="test") if price else None)
    return build_report(Run(meta=trace_run_meta(loaded.traces, name="t"), traces=loaded.traces), options)


def raw_steps(path: Path) -> dict[int, tuple[float, float]]:
    """Each ProfilerStep#N of a trace file: N -> (start, duration) in µs, from its raw events."""
    return {int(e["name"].removeprefix("ProfilerStep#")): (float(e["ts"]), float(e["dur"]))
            for e in reference.events(path) if str(e.get("name", "")).startswith("ProfilerStep#")}


# The real loop: 12 profiled steps of a small MLP on the CPU, one saving a checkpoint (sample_traces/README.md).

def test_a_checkpoint_step_is_the_outlier_counted_in_the_step_time_and_left_out_of_the_typical_step() -> None:
    path = next(CHECKPOINT.glob("*.json.gz"))
    steps = raw_steps(path)
    saves = [e for e in reference.events(path) if e.get("name") == "save_checkpoint"]
    assert len(saves) == 1 and len(steps) == 12
    # The step the save ran in, from the raw events.
    saved_in = next(n for n, (ts, dur) in steps.items() if ts <= saves[0]["ts"] < ts + dur)
    durations = [dur for _, dur in sorted(steps.values())]
    typical = reference.typical_steps_us(durations)
    assert len(typical) == 11 and steps[saved_in][1] not in typical

    r = analyse(path)
    assert r.facts is not None
    # One step time: the mean of every steady step, the job's and its one rank's alike (what the loop paid).
    assert r.facts.step_time_us == pytest.approx(statistics.fmean(durations), rel=1e-6)
    assert r.ranks[0].step_time_us == r.facts.step_time_us
    assert r.facts.typical_step_us == pytest.approx(statistics.fmean(typical), rel=1e-6)
    assert r.facts.typical_step_us == pytest.approx(22_000, rel=0.20)  # the loop's steps are about 22 ms
    assert r.facts.steady_steps == 12 and r.facts.typical_steps == 11 and r.facts.outlier_step_count == 1
    assert r.facts.step_time_median_us == pytest.approx(statistics.median(durations), rel=1e-6)
    assert r.facts.recurring is None

    (o,) = r.outlier_steps
    assert o.rank == 0 and o.step == saved_in and o.stage == "host_overhead"
    assert "save_checkpoint" in o.cause and o.ranges[0] == "save_checkpoint"
    assert o.time_us == pytest.approx(steps[saved_in][1], rel=1e-6)
    assert o.extra_us == pytest.approx(steps[saved_in][1] - statistics.fmean(typical), rel=1e-6)
    assert r.facts.outlier_extra_us == pytest.approx(o.extra_us)
    finding = next(f for f in r.findings if f.code == "step_outliers")
    assert "save_checkpoint" in finding.title
    assert [x.code for x in r.recommendations] == ["async_checkpoint"]


def test_the_json_lists_outlier_steps_with_rank_step_time_stage_and_cause(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["analyze", str(CHECKPOINT), "--json", "--no-save"],
                                env={"GPUSCOPE_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (o,) = doc["outlier_steps"]
    assert {"rank", "step", "time_us", "stage", "cause"} <= set(o)
    assert o["rank"] == 0 and isinstance(o["step"], int) and "save_checkpoint" in o["cause"]
    facts = doc["facts"]
    assert facts["outlier_step_count"] == 1 and facts["step_time_p90_us"] >= facts["step_time_median_us"]


# Small traces built in code: a step is a DataLoader wait (300 µs), a conv launching a 600 µs kernel, and
# whatever a case adds; a step lasts what ``durations`` says.

def loop(durations: list[float], *, extra: dict[int, tuple[str, float]] | None = None, first: int = 10,
         rank: int | None = None) -> list[b.Event]:
    events: list[b.Event] = []
    t = 0.0
    for i, d in enumerate(durations):
        n = first + i
        events.append(b.step(n, t, d))
        events.append(b.cpu_op(LOADER, t, 300))
        events.append(b.cpu_op("aten::conv2d", t + 300, 50))
        corr = 1000 * (rank or 0) + n
        events.append(b.launch(t + 310, 20, corr))
        events.append(b.kernel("volta_sgemm_128x64_nn", t + 340, 600, corr))
        if extra and i in extra:
            name, us = extra[i]
            events.append(b.cpu_op(name, t + 950, us, cat="user_annotation"))
        t += d
    return events


def built(tmp_path: Path, events: list[b.Event], *, price: float | None = None, name: str = "t.json") -> Report:
    return analyse(b.write(tmp_path / name, b.trace(events)), price=price)


def test_steps_without_an_outlier_keep_the_mean(tmp_path: Path) -> None:
    durations = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1020.0]
    r = built(tmp_path, loop(durations))
    assert r.outlier_steps == () and r.facts is not None and r.facts.outlier_step_count == 0
    assert r.facts.step_time_us == pytest.approx(statistics.fmean(durations))
    assert r.facts.step_time_us == pytest.approx(r.ranks[0].step_time_us or 0.0)
    assert not any(f.code == "step_outliers" for f in r.findings)


def test_every_step_equal_has_no_spread_and_no_outlier(tmp_path: Path) -> None:
    r = built(tmp_path, loop([1000.0] * 6))
    assert r.facts is not None and r.outlier_steps == ()
    assert r.facts.step_time_spread_us == pytest.approx(0.0, abs=1e-6)
    assert r.facts.step_time_median_us == r.facts.step_time_p90_us == pytest.approx(1000.0)
    assert r.ranks[0].step_time_spread_us == pytest.approx(0.0, abs=1e-6)


def test_three_steps_are_enough_to_tell_one_outlier(tmp_path: Path) -> None:
    r = built(tmp_path, loop([1000.0, 1000.0, 5000.0], extra={2: ("save_checkpoint", 4000.0)}))
    assert r.facts is not None and r.facts.step_time_us == pytest.approx(7000.0 / 3)
    assert r.facts.typical_step_us == pytest.approx(1000.0)
    (o,) = r.outlier_steps
    assert o.step == 12 and o.time_us == pytest.approx(5000.0) and o.extra_us == pytest.approx(4000.0)
    assert o.cause == "save_checkpoint (record_function range)"


def test_two_slow_steps_recur_and_are_no_outliers(tmp_path: Path) -> None:
    durations = [1000.0] * 10
    durations[3] = 4000.0  # a checkpoint save
    durations[7] = 3000.0  # nothing traced in the extra 2 ms: Python, the garbage collector
    r = built(tmp_path, loop(durations, extra={3: ("save_checkpoint", 3000.0)}))
    assert r.facts is not None and r.facts.step_time_us == pytest.approx(1500.0)
    assert r.outlier_steps == () and r.facts.outlier_step_count == 0 and r.facts.typical_step_us == 1500.0
    rec = r.facts.recurring
    assert rec is not None and rec.steps == (13, 17) and rec.period is None and rec.reference_us == 1000.0
    # 3 ms and 2 ms over the other steps' median: 2.5 ms each, 0.5 ms a step over the ten.
    assert rec.extra_us == pytest.approx(2500.0) and rec.per_step_us == pytest.approx(500.0)


def test_the_verdict_and_stage_shares_are_those_of_the_typical_steps(tmp_path: Path) -> None:
    typical = [1000.0] * 8
    with_save = built(tmp_path, loop([*typical[:4], 30_000.0, *typical[4:]],
                                     extra={4: ("save_checkpoint", 29_000.0)}), name="a.json")
    without = built(tmp_path, loop(typical), name="b.json")
    assert without.verdict.primary == "data_loading"  # the DataLoader holds 30% of each typical step
    assert with_save.verdict.primary == "data_loading"
    for stage, share in without.stage_shares.items():
        assert with_save.stage_shares[stage] == pytest.approx(share, abs=1e-9), stage
    assert with_save.facts is not None and without.facts is not None
    assert with_save.facts.typical_step_us == pytest.approx(without.facts.step_time_us or 0.0)
    assert with_save.facts.step_time_us == pytest.approx((8 * 1000.0 + 30_000.0) / 9)  # what the 9 steps cost
    # GPU busy is over the steady window, as each rank's: the save's idle 29 ms in it.
    assert with_save.facts.gpu_busy == pytest.approx(with_save.ranks[0].gpu_busy or 0.0)
    assert with_save.ranks[0].stage_shares == pytest.approx(without.ranks[0].stage_shares)


def test_a_long_idle_gap_in_an_outlier_step_is_not_the_jobs_idle(tmp_path: Path) -> None:
    # Step 14 stalls 700 ms with nothing traced on the host and nothing on the GPU: a GPU gap over 500 ms.
    r = built(tmp_path, loop([1000.0] * 4 + [701_000.0] + [1000.0] * 4))
    assert [o.step for o in r.outlier_steps] == [14]
    assert r.stage_shares["idle"] == pytest.approx(0.0) and r.verdict.primary == "data_loading"


def test_the_slowest_rank_names_the_outlier(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in (0, 1):
        extra = {5: ("save_checkpoint", 5000.0)} if rank == 1 else None
        durations = [1000.0] * 8
        if rank == 1:
            durations[5] = 6000.0
        b.write(folder / f"rank{rank}.json", b.trace(loop(durations, extra=extra, rank=rank), rank=rank))
    r = analyse(folder)
    (o,) = r.outlier_steps
    assert o.rank == 1 and o.step == 15 and "save_checkpoint" in o.cause


def test_an_outlier_is_priced_by_its_extra_time(tmp_path: Path) -> None:
    r = built(tmp_path, loop([1000.0] * 9 + [11_000.0], extra={9: ("save_checkpoint", 10_000.0)}), price=3.0)
    (o,) = r.outlier_steps
    assert o.extra_us == pytest.approx(10_000.0)
    assert o.extra_usd == pytest.approx(10_000.0 / US_PER_HOUR * 3.0)
    c = r.cost
    assert c is not None and c.total_usd is not None and c.wasted_usd is not None
    # The run's 20 ms on one GPU: the outlier's 10 ms over the typical step is half of it, all of it waste.
    assert c.waste_by_cause_usd.outlier_steps == pytest.approx(o.extra_usd)
    assert c.wasted_usd <= c.total_usd
    rec = next(x for x in r.recommendations if x.code == "async_checkpoint")
    assert rec.saving_basis == "run" and rec.stage is None
    assert rec.est_saving_usd == pytest.approx(0.75 * (o.extra_usd or 0.0))
