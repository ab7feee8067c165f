"""Reading flight-recorder dumps: both forms give the same entries, and the stated limits hold (one line each)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.traces import TraceError, flight_recorder
from gpuscope.traces.flight_recorder import read_dumps
from tests.conftest import SAMPLES

HANG = SAMPLES / "gloo_4rank" / "hang"


def test_the_json_and_the_pickle_forms_read_alike() -> None:
    """(The JSON form writes 0 where the pickle has None for times not seen, and has no stack frames.)"""
    json_form, pickle_form = read_dumps(HANG / "json"), read_dumps(HANG / "pickle")
    assert [d.rank for d in json_form] == [d.rank for d in pickle_form] == [0, 1, 2, 3]
    for a, b in zip(json_form, pickle_form):
        assert (a.form, b.form) == ("json", "pickle")
        assert a.entries == b.entries and a.group_ranks == b.group_ranks and a.warnings == b.warnings == ()
    assert [len(d.entries) for d in json_form] == [6, 5, 6, 6]


def test_hidden_files_are_skipped_and_a_pipe_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    shutil.copytree(HANG / "json", folder)
    (folder / ".rank_9").write_text("not a dump")
    assert [d.rank for d in read_dumps(folder)] == [0, 1, 2, 3]
    os.mkfifo(folder / "rank_7")
    with pytest.raises(TraceError, match="a named pipe"):
        read_dumps(folder)


@pytest.mark.parametrize(("limit", "value", "words"), [
    ("MAX_DUMP_BYTES", 1000, "over the limit of"),
    ("MAX_ENTRIES", 5, "more than 5 entries, over the limit of 5 per dump"),
    ("MAX_DUMPS", 3, "4 dump files, over the limit of 3"),
])
def test_the_limits(limit: str, value: int, words: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flight_recorder, limit, value)
    with pytest.raises(TraceError, match=words):
        read_dumps(HANG / "json")


def test_a_folder_named_like_a_dump_is_one_line_and_a_subfolder_is_skipped(tmp_path: Path) -> None:
    """A folder where a dump file belongs was an internal error (IsADirectoryError); one inside the dumps' folder
    is not a dump."""
    (tmp_path / "nccl_trace_rank_1").mkdir()
    with pytest.raises(TraceError, match="no flight-recorder dumps here"):
        read_dumps(tmp_path)
    with pytest.raises(TraceError, match="a directory, not a dump file|not a dump file"):
        flight_recorder.read_dump(tmp_path / "nccl_trace_rank_1", 1)


@pytest.mark.parametrize("form", ["json", "pickle"])
def test_past_the_budget_each_dump_keeps_its_newest_entries_and_the_hang_is_still_found(
        form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight entries over four dumps: each keeps its newest two. Of the older ones only what each rank completed
    counts, which is all the hang needs: rank 1 never joined all_reduce #6."""
    from gpuscope.analyzers.across.hang import find_hang

    monkeypatch.setattr(flight_recorder, "KEPT_ENTRIES", 8)
    dumps = read_dumps(HANG / form)
    assert [len(d.entries) for d in dumps] == [2] * 4
    assert [d.completed_before for d in dumps] == [{"0": 4}, {"0": 3}, {"0": 4}, {"0": 4}]
    assert all(len(d.warnings) == 1 and "the newest 2 of its" in d.warnings[0] for d in dumps)
    report = find_hang(dumps)
    assert report.hung_collective is not None and report.hung_collective.seq == 6
    assert report.missing_ranks == (1,) and report.waiting_ranks == (0, 2, 3)
    assert len(report.warnings) == 4


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=8), st.lists(st.integers(-3, 2**64), max_size=3),
                    st.lists(st.lists(st.integers(-3, 3), max_size=2), max_size=2))
_FIELDS = ["process_group", "pg_id", "collective_seq_id", "p2p_seq_id", "profiling_name", "state", "retired",
           "is_p2p", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "time_created_ns"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(_FIELDS), _VALUES), min_size=1, max_size=4),
       form=st.sampled_from(["json", "pickle"]))
def test_any_value_in_any_field_is_a_dump_or_one_error(tmp_path: Path, changes: list[tuple[int, str, object]],
                                                       form: str) -> None:
    """Every field of the real dumps' entries given values of every type and size: each dump reads, or is one
    TraceError naming its file; what reads is analysed without an error."""
    from gpuscope.analyzers.across.hang import find_hang

    folder = tmp_path / f"{form}{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for source in sorted((HANG / "json").iterdir()):
        doc = json.loads(source.read_text())
        if source.name == "rank_2":
            for index, field, value in changes:
                doc["entries"][index][field] = value
        if form == "json":
            (folder / source.name).write_text(json.dumps(doc))
        else:
            (folder / source.name).write_bytes(pickle.dumps(doc, protocol=2))
    try:
        dumps = read_dumps(folder)
    except TraceError as exc:
        assert str(exc).startswith(str(folder / "rank_2")) and "\n" not in str(exc)
        return
    find_hang(dumps)


def test_a_group_listing_no_rank_is_left_out_with_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    shutil.copytree(HANG / "json", folder)
    doc = json.loads((folder / "rank_0").read_text())
    doc["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[0, -1, 2]"}}
    (folder / "rank_0").write_text(json.dumps(doc))
    first, *others = read_dumps(folder)
    assert first.group_ranks == {} and others[0].group_ranks == {"": (0, 1, 2, 3)}
    (warning,) = first.warnings
    assert "rank_0: pg_config's ranks of group '' are not a list of ranks" in warning
