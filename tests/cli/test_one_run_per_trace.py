"""One run per trace: the same trace files analysed again are saved over their run (unless --new-run), and a trace
run is dated when the trace was recorded."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from gpuscope.store import Store
from gpuscope.store.migrations import MIGRATIONS
from tests import builders as b
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

RESNET = SAMPLES / "resnet50_dataloader_bound"


def _runs(home: Path) -> list[dict[str, object]]:
    result = gpuscope("runs", "--json", home=home)
    assert result.returncode == 0, result.stderr
    runs: list[dict[str, object]] = json.loads(result.stdout)
    return runs


def _analyze(home: Path, path: Path, *args: str) -> dict[str, object]:
    result = gpuscope("analyze", str(path), "--json", *args, home=home)
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


def test_analysing_one_trace_twice_leaves_one_run_brought_up_to_date(tmp_path: Path) -> None:
    first = _analyze(tmp_path, RESNET)
    second = _analyze(tmp_path, RESNET, "--job-hours", "72")
    runs = _runs(tmp_path)
    assert len(runs) == 1
    assert runs[0]["id"] == first["run"]["id"] == second["run"]["id"]  # type: ignore[index]
    shown = gpuscope("show", str(runs[0]["id"]), "--json", home=tmp_path)
    cost = json.loads(shown.stdout)["cost"]
    assert cost["projection_basis"] == "job_hours"  # the second analysis is the one saved


def test_a_copy_of_the_trace_is_the_same_run_and_another_trace_is_not(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(RESNET, copy)
    home = tmp_path / "home"
    _analyze(home, RESNET)
    _analyze(home, copy)
    assert len(_runs(home)) == 1
    _analyze(home, SAMPLES / "resnet50_workers4")
    assert len(_runs(home)) == 2


def test_new_run_keeps_a_separate_run(tmp_path: Path) -> None:
    _analyze(tmp_path, RESNET)
    _analyze(tmp_path, RESNET, "--new-run")
    _analyze(tmp_path, RESNET)
    assert len(_runs(tmp_path)) == 2


def test_a_run_saved_before_the_content_column_is_kept_and_not_matched(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "gpuscope.db")
    for script in MIGRATIONS[:2]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 2")
    db.execute("INSERT INTO runs (id, name, kind, status, started_ns) VALUES ('old-run', 'old', 'trace', "
               "'complete', 1)")
    db.commit()
    db.close()
    _analyze(tmp_path, RESNET)
    assert sorted(str(r["id"]) != "old-run" for r in _runs(tmp_path)) == [False, True]
    with Store(tmp_path) as store:
        assert store.run_with_content("0" * 64) is None


def _started(home: Path) -> int:
    (run,) = _runs(home)
    started = run["started_ns"]
    assert isinstance(started, int)
    return started


def test_kineto_base_time_dates_the_run(tmp_path: Path) -> None:
    base_ns = 1_790_857_026_000_000_000  # 2026-10-01, as a recent PyTorch writes it; ts count from it in µs
    events = [{**e, "ts": e["ts"] + 5_000_000.0} for e in b.simple_training()]
    path = b.write(tmp_path / "rank0.pt.trace.json", b.trace(events, baseTimeNanoseconds=base_ns))
    _analyze(tmp_path / "home", path)
    assert _started(tmp_path / "home") == base_ns + 5_000_000 * 1000


def test_absolute_event_times_date_the_run(tmp_path: Path) -> None:
    first_us = 1_623_143_089_861_000.0  # 2021-06-08, older PyTorch: ts since the epoch
    events = [{**e, "ts": e["ts"] + first_us} for e in b.simple_training()]
    path = b.write(tmp_path / "rank0.pt.trace.json", b.trace(events))
    _analyze(tmp_path / "home", path)
    assert _started(tmp_path / "home") == int(first_us) * 1000


def test_a_trace_without_a_clock_is_dated_by_its_file(tmp_path: Path) -> None:
    events = b.simple_training(steps=3, step_us=1000.0)  # ts from 0: no epoch in the file
    path = b.write(tmp_path / "rank0.pt.trace.json", b.trace(events))
    written = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    os.utime(path, (written.timestamp(), written.timestamp()))
    _analyze(tmp_path / "home", path)
    last_end_us = max(e["ts"] + e.get("dur", 0) for e in events)
    assert _started(tmp_path / "home") == int(written.timestamp()) * 10**9 - int(last_end_us * 1000)


def test_no_bundled_trace_is_dated_1970(tmp_path: Path) -> None:
    for sample in ("h200/decode_bs4", "cpu_mlp_aa/run_a", "torch_compile_cpu", "resnet50_old_schema"):
        report = _analyze(tmp_path, SAMPLES / sample, "--no-save")
        year = datetime.fromtimestamp(report["run"]["started_ns"] / 1e9, tz=UTC).year  # type: ignore[index]
        assert 2020 <= year <= 2030, (sample, year)
