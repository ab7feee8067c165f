"""Rank ids are never reassigned in silence: files that claim one rank id (or none) are told apart by host, process
and GPU, each named with the rank it is analysed as, or the read stops naming them; per-rank results are kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.traces import TraceError, load
from tests import builders as b
from tests.cli.helpers import gpuscope, one_clean_error_line


def _write(folder: Path, name: str, *, rank: int | None, pid: int | None, device: int = 0, steps: int = 2) -> Path:
    """``steps`` training steps of one process on one GPU; with ``pid`` None only the GPU's events (no process)."""
    events = b.simple_training(steps)
    for e in events:
        if e["cat"] == "kernel":
            e["pid"] = e["args"]["device"] = device
        else:
            e["pid"] = pid
    kept = [e for e in events if pid is not None or e["cat"] == "kernel"]
    return b.write(folder / name, b.trace(kept, rank=rank))


def test_two_hosts_rank_0_are_two_ranks_named_by_host_with_their_results(tmp_path: Path) -> None:
    # Two jobs' rank 0, each written by torch's trace handler on its own host (same pid inside two containers).
    _write(tmp_path, "node-a_7.1694000000000.pt.trace.json", rank=0, pid=7, steps=2)
    _write(tmp_path, "node-b_7.1694000000001.pt.trace.json", rank=0, pid=7, steps=3)
    loaded = load(tmp_path, jobs=1, per_rank=analyze_rank)
    assert [(Path(f.source).name, f.rank) for f in loaded.ranks] == [
        ("node-a_7.1694000000000.pt.trace.json", 0), ("node-b_7.1694000000001.pt.trace.json", 1)]
    # The per-rank results are kept, under the number each trace is analysed as: 2 and 3 steps, as written.
    assert [(r.rank, r.steps) for r in loaded.per_rank] == [(0, 2), (1, 3)]
    assert list(loaded.per_rank) == [analyze_rank(t) for t in load(tmp_path, jobs=1).traces]
    assert loaded.warnings == ("rank 0 is claimed by 2 files, told apart by host: analysed "
                               "node-a_7.1694000000000.pt.trace.json (host node-a) as rank 0, "
                               "node-b_7.1694000000001.pt.trace.json (host node-b) as rank 1",)


def test_rank_ids_the_files_claim_are_kept_and_a_duplicate_takes_a_free_one(tmp_path: Path) -> None:
    _write(tmp_path, "x.json", rank=3, pid=10)
    _write(tmp_path, "y.json", rank=5, pid=11)
    _write(tmp_path, "z.json", rank=5, pid=12)
    loaded = load(tmp_path, jobs=1)
    assert [(Path(t.source).name, t.rank) for t in loaded.traces] == [("z.json", 0), ("x.json", 3), ("y.json", 5)]
    (line,) = loaded.warnings
    assert line == ("rank 5 is claimed by 2 files, told apart by pid: analysed y.json (pid 11) as rank 5, "
                    "z.json (pid 12) as rank 0")


def test_files_without_a_rank_are_told_apart_by_their_gpu(tmp_path: Path) -> None:
    _write(tmp_path, "a.json", rank=None, pid=10, device=1)
    _write(tmp_path, "b.json", rank=None, pid=10, device=0)
    loaded = load(tmp_path, jobs=1)
    assert [(Path(t.source).name, t.rank, t.main_device) for t in loaded.traces] == [("b.json", 0, 0),
                                                                                    ("a.json", 1, 1)]
    assert "told apart by GPU: analysed b.json (GPU 0) as rank 0, a.json (GPU 1) as rank 1" in loaded.warnings[0]


def test_a_file_without_a_rank_beside_ranked_ones_is_named(tmp_path: Path) -> None:
    _write(tmp_path, "r0.json", rank=0, pid=10)
    _write(tmp_path, "r1.json", rank=1, pid=11)
    _write(tmp_path, "extra.json", rank=None, pid=12)
    loaded = load(tmp_path, jobs=1)
    assert [(Path(t.source).name, t.rank) for t in loaded.traces] == [("r0.json", 0), ("r1.json", 1),
                                                                      ("extra.json", 2)]
    assert loaded.warnings == ("extra.json says no rank (no distributedInfo, none in its name): analysed as rank 2",)


def test_one_file_without_a_rank_is_rank_0_without_a_word(tmp_path: Path) -> None:
    _write(tmp_path, "only.json", rank=None, pid=10)
    loaded = load(tmp_path)
    assert [t.rank for t in loaded.traces] == [0] and loaded.warnings == ()


def test_two_files_of_one_rank_that_nothing_tells_apart_stop_with_both_named(tmp_path: Path) -> None:
    _write(tmp_path, "rank0_a.json", rank=None, pid=10)  # rank 0 from the name, like distributedInfo's
    _write(tmp_path, "b.json", rank=0, pid=None, steps=3)  # GPU events only: no process id to tell
    with pytest.raises(TraceError) as caught:
        load(tmp_path, jobs=1)
    assert "b.json and rank0_a.json both claim rank 0, and nothing in them (host, process id, GPU) tells them " \
           "apart" in str(caught.value)
    result = gpuscope("analyze", str(tmp_path), "--no-save", home=tmp_path / "home")
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert "b.json" in line and "rank0_a.json" in line and "both claim rank 0" in line
