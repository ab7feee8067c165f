"""Repeated profiler cycles of one rank are one rank: the latest cycle is analysed and the others named."""

from __future__ import annotations

from pathlib import Path

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
    assert [t.rank for t in loaded.traces] == [0, 1] and len(loaded.warnings) == 1


def test_the_ranks_of_one_job_stay_ranks() -> None:
    loaded = load(SAMPLES / "dlrm_8rank")
    assert [t.rank for t in loaded.traces] == list(range(8)) and loaded.warnings == ()
