"""Steps under transformed real traces, and the one step time in every report (docs/relations.md, "Steps, the gate
and diff"): rank files renamed, reordered and their events shuffled change nothing; a stall in one step is that
step's outlier, in the step time by k / (steps) and out of the typical step and the stage shares; a stall every
n-th step is found at that period; and every bundled trace's report states one step time, the mean of its steady
steps, wherever it states one."""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.diagnosis.facts import job_steps
from gpuscope.analyzers.trace.step_stats import periodic_chance
from gpuscope.model.codec import to_builtins
from gpuscope.model.report import Report
from tests import reference
from tests.analyzers.bundled import bundled_report
from tests.conftest import ROOT, SAMPLES
from tests.relations import transforms as tf

PINNED = ROOT / "tests" / "api" / "expected_reports.json.gz"


def steady_names(report: Report) -> list[str]:
    return [records[0].name for records in job_steps(report.ranks)]


def figures(report: Report) -> dict[str, Any]:
    """What a report says of the job, less what names its files and run."""
    doc = to_builtins(report)
    for r in doc["ranks"]:
        r.pop("source", None)
    return {"facts": doc["facts"], "verdict": doc["verdict"], "stage_shares": doc["stage_shares"],
            "outlier_steps": doc["outlier_steps"], "cost": doc["cost"],
            "ranks": sorted(doc["ranks"], key=lambda r: r["rank"])}


def same(a: Any, b: Any, path: str = "") -> None:
    """Equal, numbers to a relative 1e-9 (sums taken in another order round differently)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float | int):
        assert b == pytest.approx(a, rel=1e-9, abs=1e-9), path
    else:
        assert a == b, path


@pytest.mark.parametrize("name", ["cpu_gloo_ddp", "gloo_4rank/delayed", "cpu_checkpoint_outlier", "h200/pageable_h2d"])
def test_renaming_and_reordering_rank_files_and_their_events_changes_nothing(name: str, tmp_path: Path) -> None:
    renamed = tf.copy_ranks(SAMPLES / name, tmp_path / "renamed", seed=7)
    shuffled = tf.transformed(renamed, tmp_path / "shuffled", lambda doc: tf.shuffle(doc, seed=3))
    base = figures(bundled_report(name))
    for path in (renamed, shuffled):
        same(base, figures(tf.analysed(path)))


@pytest.mark.parametrize("name", ["h200/pageable_h2d", "h200/decode_bs4", "cpu_gloo_ddp"])
def test_a_stall_in_one_step_is_its_outlier_in_the_step_time_and_out_of_the_typical_step(
        name: str, tmp_path: Path) -> None:
    base = bundled_report(name)
    steady = steady_names(base)
    assert base.facts is not None and base.facts.step_time_us is not None and not base.outlier_steps
    one = steady[len(steady) // 2]
    k_us = 5 * base.facts.step_time_us
    cand = tf.analysed(tf.transformed(SAMPLES / name, tmp_path / "t", lambda doc: tf.stall(doc, [one], k_us)))
    assert cand.facts is not None and cand.facts.step_time_us is not None
    assert cand.facts.step_time_us - base.facts.step_time_us == pytest.approx(k_us / len(steady), abs=0.01)
    assert [str(o.step) for o in cand.outlier_steps] == [one]
    times = {records[0].name: max(s.duration_us for s in records) for records in job_steps(base.ranks)}
    others = [t for n, t in times.items() if n != one]
    assert cand.facts.typical_step_us == pytest.approx(statistics.fmean(others), rel=1e-6)
    # The stage shares are of the typical steps, the others: one step less moves a share by 1 / (steps - 1) at
    # most, where a step 5 times as long would have moved it by about a third.
    for stage, share in base.stage_shares.items():
        if share is not None:
            assert abs((cand.stage_shares[stage] or 0.0) - share) <= 1 / (len(steady) - 1) + 1e-6, stage
    assert cand.verdict.primary == base.verdict.primary


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(every=st.integers(2, 5), k=st.floats(1.0, 5.0))
def test_a_stall_every_nth_step_is_found_at_that_period(every: int, k: float,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    """gloo_4rank/delayed: 10 steps of 4 ranks, each held back 80 ms by a sleeping rank. A stall every n-th step,
    past the steps' noise, is a period where chance would rarely place that many slow steps so; else slow steps at
    no period (their number and extra time said either way)."""
    name = "gloo_4rank/delayed"
    base = bundled_report(name)
    steady = steady_names(base)
    times = [max(s.duration_us for s in records) for records in job_steps(base.ranks)]
    limit = reference.slow_threshold_us(times)
    assert limit is not None
    k_us = limit - min(times) + k * statistics.median(times)
    hit = steady[every - 1::every]
    cand = tf.analysed(tf.transformed(SAMPLES / name, tmp_path_factory.mktemp("every") / "t",
                                      lambda doc: tf.stall(doc, hit, k_us)))
    rec = cand.facts.recurring if cand.facts is not None else None
    if len(hit) < 2:
        assert rec is None and [str(o.step) for o in cand.outlier_steps] == hit
        return
    assert rec is not None and [str(s) for s in rec.steps] == hit
    found = len(hit) >= 3 and periodic_chance(len(steady), len(hit)) < 0.01 and every * len(hit) == len(steady) \
        - (len(steady) % every)
    assert rec.period == (every if found else None)
    assert rec.per_step_us == pytest.approx(rec.extra_us * len(hit) / len(steady), rel=1e-9)


def pinned() -> dict[str, Any]:
    with gzip.open(PINNED, "rt") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def test_every_bundled_report_states_one_step_time() -> None:
    """Over every bundled trace (their pinned reports, which tests/api/test_expected_reports.py holds to this
    checkout's): the job's step time is the mean of its steady job steps, each the slowest rank's; a one-rank job's
    rank says the same; the cost per step is it on every GPU; the typical step leaves out the one outlier alone."""
    checked = 0
    for case, report in pinned().items():
        facts, ranks = report.get("facts") or {}, report.get("ranks") or []
        groups: dict[str, list[dict[str, Any]]] = {}
        warm: set[str] = set()
        for r in ranks:
            for s in r.get("per_step") or []:
                groups.setdefault(s["name"], []).append(s)
                if s["warmup"]:
                    warm.add(s["name"])
        times = [max(s["duration_us"] for s in steps) for name, steps in groups.items() if name not in warm]
        if not times:
            continue
        checked += 1
        step = facts["step_time_us"]
        assert step == pytest.approx(statistics.fmean(times), rel=1e-9), case
        assert facts["steady_steps"] == len(times), case
        if len(ranks) == 1:
            assert ranks[0]["step_time_us"] == pytest.approx(step, rel=1e-12), case
        outliers = report.get("outlier_steps") or []
        typical = [t for t in times if not any(o["time_us"] == t for o in outliers)]
        assert facts["typical_step_us"] == pytest.approx(statistics.fmean(typical), rel=1e-9), case
        cost = report.get("cost") or {}
        if cost.get("per_step_usd") is not None and cost.get("usd_per_gpu_hour") is not None:
            per_step = step * cost["gpu_count"] / 3.6e9 * cost["usd_per_gpu_hour"]
            assert math.isclose(cost["per_step_usd"], per_step, rel_tol=1e-6), case
    assert checked >= 30
