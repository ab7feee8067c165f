"""Ranks reduced where they are read: the saved run keeps every rank's columns (written by the workers), and
analysing them again from the store gives the report the reading gave, whether ranks were read in this process or
in worker processes, and when files were renumbered after reading."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import gpuscope
from gpuscope.store import Store
from gpuscope.store.tracefile import load_traces
from gpuscope.traces import read_trace, trace_files
from tests.conftest import SAMPLES

CASES = {
    "serial": (SAMPLES / "dlrm_8rank", False),
    "workers": (SAMPLES / "dlrm_8rank", True),
    # No file says its rank: they are numbered in name order after reading, under numbers the workers never saw.
    "renumbered": (SAMPLES / "dev", True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_saved_run_analysed_again_from_its_columns_gives_the_same_report(
        case: str, gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, parallel = CASES[case]
    if parallel:
        monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)
    first = gpuscope.analyze(path, save=True, jobs=2)
    again = gpuscope.load(first.run.id, reanalyze=True)
    # (What the reader left out of a file is said when it is read, not again on re-analysis.)
    assert {**json.loads(again.to_json()), "warnings": []} == {**json.loads(first.to_json()), "warnings": []}
    assert list((gpuscope_home / "staging").iterdir()) == []  # every staged rank was adopted or removed

    with Store(gpuscope_home) as store:
        saved = load_traces(store.run_dir(first.run.id))
    assert [t.rank for t in saved] == [r.rank for r in first.ranks]
    by_source = {t.source: t for t in saved}
    for rank in first.ranks:
        stored, read = by_source[rank.source], read_trace(rank.source)
        assert stored.names == read.names
        assert np.array_equal(stored.events.ts_ns, read.events.ts_ns)
        assert np.array_equal(stored.events.name_id, read.events.name_id)


def test_the_renumbered_case_is_one_where_ranks_get_new_numbers() -> None:
    files = trace_files(SAMPLES / "dev")
    assert len({read_trace(f).rank for f in files}) < len(files)


def test_an_analysis_stopped_after_reading_leaves_nothing_staged(gpuscope_home: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.api.analysis import analyze_path

    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)

    def stop(_loaded: object) -> None:
        raise SystemExit(2)

    with pytest.raises(SystemExit):
        analyze_path(SAMPLES / "dlrm_8rank", save=True, jobs=2, on_loaded=stop)
    assert list((gpuscope_home / "staging").iterdir()) == []
    assert gpuscope.runs() == []
