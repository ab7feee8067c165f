"""Repeated profiler cycles of one rank are one rank: the latest cycle is analysed and the others named."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gpuscope.traces import load
from tests import builders as b
from tests.conftest import SAMPLES


def _cycle(folder: Path, name: str, *, start_us: float, steps: int, rank: int | None = None,
           pid: int = 100) -> Path:
    events = b.simple_training(steps)
    for e in events:
        e["ts"] += start_us
        if e["cat"] != "kernel":
            e["pid"] = pid
    return b.write(folder / name, b.trace(events, rank=rank), gz=name.endswith(".gz"))


def test_two_cycles_of_one_rank_are_one_rank(tmp_path: Path) -> None:
    _cycle(tmp_path, "worker0.1694000000000.pt.trace.json.gz", start_us=0, steps=2)
    _cycle(tmp_path, "worker0.1694000009000.pt.trace.json.gz", start_us=9e6, steps=5)
    loaded = load(tmp_path)
    (trace,) = loaded.traces
    assert trace.source.endswith("worker0.1694000009000.pt.trace.json.gz")
    assert loaded.warnings == ("rank 0: 2 profiler cycles in 2 files; analysed the latest "
                               "(worker0.1694000009000.pt.trace.json.gz), the others skipped",)


def test_latest_cycle_is_the_one_that_started_last_whatever_the_name(tmp_path: Path) -> None:
    _cycle(tmp_path, "a.json", start_us=9e6, steps=5, rank=0)
    _cycle(tmp_path, "b.json", start_us=0, steps=2, rank=0)
    (trace,) = load(tmp_path).traces
    assert trace.source.endswith("a.json")


def test_two_ranks_with_two_cycles_each(tmp_path: Path) -> None:
    for rank in (0, 1):
        for i, start in enumerate((0.0, 5e6)):
            _cycle(tmp_path, f"node_{rank}.{1694 + i}.pt.trace.json", start_us=start, steps=2 + i, rank=rank,
                   pid=200 + rank)
    loaded = load(tmp_path, jobs=1)
    assert [t.rank for t in loaded.traces] == [0, 1]
    assert [Path(t.source).name for t in loaded.traces] == ["node_0.1695.pt.trace.json", "node_1.1695.pt.trace.json"]
    assert [w.split(":")[0] for w in loaded.warnings] == ["rank 0", "rank 1"]
    assert all("2 profiler cycles in 2 files" in w for w in loaded.warnings)


def test_rankless_files_named_host_pid_group_by_process(tmp_path: Path) -> None:
    _cycle(tmp_path, "gpu-node-3_4242.1694000000000.pt.trace.json", start_us=0, steps=2, pid=4242)
    _cycle(tmp_path, "gpu-node-3_4242.1694000005000.pt.trace.json", start_us=5e6, steps=3, pid=4242)
    _cycle(tmp_path, "gpu-node-3_4243.1694000000000.pt.trace.json", start_us=0, steps=2, pid=4243)
    loaded = load(tmp_path, jobs=1)
    assert [Path(t.source).name for t in loaded.traces] == ["gpu-node-3_4242.1694000005000.pt.trace.json",
                                                            "gpu-node-3_4243.1694000000000.pt.trace.json"]
    assert [t.rank for t in loaded.traces] == [0, 1]
    cycles, numbered = loaded.warnings
    assert cycles.startswith("rank 0: 2 profiler cycles in 2 files")
    assert numbered == ("2 trace files say no rank (no distributedInfo, none in the name), told apart by pid: "
                        "analysed gpu-node-3_4242.1694000005000.pt.trace.json (pid 4242) as rank 0, "
                        "gpu-node-3_4243.1694000000000.pt.trace.json (pid 4243) as rank 1")


def test_the_ranks_of_one_job_stay_ranks() -> None:
    loaded = load(SAMPLES / "dlrm_8rank")
    assert [t.rank for t in loaded.traces] == list(range(8)) and loaded.warnings == ()


def _by_analyze(folder: Path, _home: Path) -> list[tuple[int, str]]:
    return [(t.rank, Path(t.source).name) for t in load(folder, jobs=1).traces]


def _by_live_recording(folder: Path, home: Path) -> list[tuple[int, str]]:
    """What a live run keeps of the traces gpuscope.torch wrote into its folder."""
    import shutil

    from gpuscope.api.recording import _import_traces
    from gpuscope.model.run import RunMeta
    from gpuscope.store import Store

    with Store(home) as store:
        store.create_run(RunMeta(id="r", name="r", kind="run", status="complete", started_ns=0))
        for f in folder.iterdir():
            shutil.copy2(f, store.run_dir("r") / f.name)
        assert _import_traces(store, "r")  # the cycles are named, as analyze names them
        return [(t.rank, Path(t.source).name) for t in store.load_run("r").traces]


@pytest.mark.parametrize("path", [_by_analyze, _by_live_recording], ids=["analyze", "live"])
def test_analyze_and_live_recording_keep_the_same_cycle(tmp_path: Path, path: Any) -> None:
    """gpuscope.torch's files (rank<N>.<time>.pt.trace.json), two cycles of rank 0 and one of rank 1; the cycle
    that started last was written first (its file is older), so only its events say it is the latest."""
    folder = tmp_path / "traces"
    folder.mkdir()
    late = _cycle(folder, "rank0.2000.pt.trace.json", start_us=9e6, steps=5, pid=300)
    early = _cycle(folder, "rank0.1000.pt.trace.json", start_us=0, steps=2, pid=300)
    _cycle(folder, "rank1.1000.pt.trace.json", start_us=0, steps=2, pid=301)
    os.utime(late, (1_000, 1_000))
    os.utime(early, (2_000, 2_000))
    assert path(folder, tmp_path / "home") == [(0, "rank0.2000.pt.trace.json"), (1, "rank1.1000.pt.trace.json")]
