"""`gpuscope hang` on the flight recorder's real dumps of a real hang (sample_traces/gloo_4rank/hang: rank 1 never
joins the sixth all_reduce, by construction of its record.py), in both forms PyTorch writes, and on dumps that are
bad or hostile: one line and a non-zero exit, and a pickle that would run code runs nothing."""

from __future__ import annotations

import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

HANG = SAMPLES / "gloo_4rank" / "hang"
MISSING_RANK, HANG_AT, WORLD = 1, 6, 4
"""As sample_traces/gloo_4rank/record.py made the job: rank 1 skips the sixth all_reduce of four ranks."""


@pytest.mark.parametrize("form", ["json", "pickle"])
def test_the_rank_that_never_joined(form: str, tmp_path: Path) -> None:
    result = gpuscope("hang", str(HANG / form), "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["hung_collective"] == {"process_group": "0", "seq": HANG_AT, "op": "all_reduce"}
    assert report["missing_ranks"] == [MISSING_RANK]
    assert report["waiting_ranks"] == [r for r in range(WORLD) if r != MISSING_RANK]
    assert report["forms"] == [form]
    missing = next(r for r in report["ranks"] if r["rank"] == MISSING_RANK)
    assert (missing["entered"], missing["last_completed_seq"], missing["last_completed_op"]) == \
        (False, HANG_AT - 1, "all_reduce")


def test_the_terminal_names_the_rank_and_the_collective(tmp_path: Path) -> None:
    result = gpuscope("hang", str(HANG / "pickle"), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"Rank {MISSING_RANK} never joined all_reduce #{HANG_AT} of process group 0" in " ".join(
        result.stdout.split())


class _RunsCode:
    """A payload whose unpickling calls os.system (what a dump from elsewhere could hold)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(protocol: int, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    folder = tmp_path / "dumps"
    shutil.copytree(HANG / "pickle", folder)
    dump = {"version": "2.10", "entries": [{"collective_seq_id": 1, "frames": [_RunsCode(marker)]}]}
    (folder / "rank_2").write_bytes(pickle.dumps(dump, protocol=protocol))
    result = gpuscope("hang", str(folder), "--json", home=tmp_path)
    assert result.returncode != 0 and result.stdout == ""
    line = one_clean_error_line(result)
    assert "rank_2: refused" in line and "only plain data is read" in line
    assert not marker.exists()


@pytest.mark.parametrize(("name", "content", "words"), [
    ("rank_0", b"", "the file is empty"),
    ("rank_0", b"\x80\x04\x95", "not a valid pickle"),
    ("rank_0", b"{\"entries\": [", "not valid JSON"),
    ("rank_0", b"{\"version\": \"2.10\"}", "not a flight-recorder dump"),
    ("rank_0", b"{\"entries\": [{\"collective_seq_id\": \"six\"}]}", "not a flight-recorder dump"),
    ("rank_0", b"GIF89a", "neither its JSON nor its pickle form"),
    ("notes.txt", b"hello", "no flight-recorder dumps here"),
])
def test_bad_dumps_are_one_line(name: str, content: bytes, words: str, tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / name).write_bytes(content)
    result = gpuscope("hang", str(folder), home=tmp_path)
    assert result.returncode != 0
    assert words in one_clean_error_line(result)


def test_two_dumps_of_one_rank_and_a_missing_path(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    shutil.copytree(HANG / "json", folder)
    shutil.copy(HANG / "pickle" / "rank_1", folder / "rank_1.pkl")
    assert "a second dump for rank 1" in one_clean_error_line(gpuscope("hang", str(folder), home=tmp_path))
    assert "no such file or folder" in one_clean_error_line(gpuscope("hang", str(tmp_path / "nope"), home=tmp_path))


def _with(tmp_path: Path, change: Callable[[dict[str, Any]], None], rank: int = 0) -> Path:
    """The real JSON dumps with one rank's changed."""
    folder = tmp_path / "dumps"
    shutil.copytree(HANG / "json", folder)
    doc = json.loads((folder / f"rank_{rank}").read_text())
    change(doc)
    (folder / f"rank_{rank}").write_text(json.dumps(doc))
    return folder


def test_a_sequence_number_written_as_text_is_an_error_naming_the_field_and_value(tmp_path: Path) -> None:
    folder = _with(tmp_path, lambda doc: doc["entries"][2].update(collective_seq_id="3"))
    result = gpuscope("hang", str(folder), "--json", home=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    line = one_clean_error_line(result)
    assert "rank_0: entry 3: collective_seq_id is '3'" in line and "expected `int`, got `str`" in line


def test_an_impossible_sequence_number_is_dropped_and_counted(tmp_path: Path) -> None:
    """A 2^70 sequence number no 64-bit counter holds: its entry is dropped, one warning names it, and the answer
    stands (it was never shown beside #6)."""
    def add(doc: dict[str, Any]) -> None:
        doc["entries"].append({**doc["entries"][-1], "collective_seq_id": 2**70})
    result = gpuscope("hang", str(_with(tmp_path, add)), "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["hung_collective"]["seq"] == HANG_AT and report["missing_ranks"] == [MISSING_RANK]
    assert str(2**70) not in json.dumps(report["ranks"])
    (warning,) = report["warnings"]
    assert "rank_0: 1 entry dropped" in warning and f"collective_seq_id {2**70} is outside" in warning
    assert result.stderr.count("warning:") == 1 and "1 entry dropped" in result.stderr


@pytest.mark.parametrize(("name", "words"), [("rank_-1", "ends in -1, and a rank is not negative"),
                                             ("rank_99999999999", "past the largest rank")])
def test_a_file_named_after_no_rank_is_refused(name: str, words: str, tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    shutil.copytree(HANG / "json", folder)
    (folder / "rank_1").rename(folder / name)
    result = gpuscope("hang", str(folder), home=tmp_path)
    assert result.returncode == 2 and words in one_clean_error_line(result)
