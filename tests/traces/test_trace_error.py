"""A rank file that cannot be read is reported, in parallel reads too, and told apart from a JSON file that is no
trace at all (a job's metadata beside its traces)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from gpuscope.traces import TraceError, load
from tests import builders as b


def test_an_error_crosses_a_process_boundary_whole() -> None:
    error = pickle.loads(pickle.dumps(TraceError("rank3.json", "not valid JSON", not_a_trace=False)))
    assert (str(error), error.path, error.problem, error.not_a_trace) == ("rank3.json: not valid JSON",
                                                                          "rank3.json", "not valid JSON", False)
    assert pickle.loads(pickle.dumps(TraceError("meta.json", "no traceEvents", not_a_trace=True))).not_a_trace


def test_a_broken_rank_read_in_parallel_is_an_error_and_no_crash(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for r in range(2):
        b.write(tmp_path / f"rank{r}.json", b.trace(b.simple_training(), rank=r))
    (tmp_path / "rank2.json").write_text('{"traceEvents": [')
    (tmp_path / "meta.json").write_text('{"variant": "a"}')
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)
    loaded = load(tmp_path, jobs=2)
    assert [t.rank for t in loaded.traces] == [0, 1]
    errors = {Path(e.path).name: e.not_a_trace for e in loaded.errors}
    assert errors == {"rank2.json": False, "meta.json": True}
