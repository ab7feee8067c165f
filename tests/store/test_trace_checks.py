"""A saved columnar trace whose bytes decode but whose values no reader makes (a negative or week-long duration, a
time past 2116, events out of order, a kind or precision with no meaning, a float where an integer belongs) is
damage: one line naming the file, in every command and page that reads it, as a file cut short is."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuscope.dashboards import create_app
from gpuscope.model.trace import DUR_MAX_NS, TS_MAX_NS
from gpuscope.store import RecordDamaged, Store
from tests import builders as b
from tests.cli.helpers import gpuscope, one_clean_error_line

Arrays = dict[str, Any]


def _set(name: str, index: int, value: Any) -> Callable[[Arrays], None]:
    def damage(arrays: Arrays) -> None:
        arrays[name] = arrays[name].copy()
        arrays[name][index] = value
    return damage


def _header(key: str, value: Any) -> Callable[[Arrays], None]:
    def damage(arrays: Arrays) -> None:
        header = json.loads(arrays["header"].tobytes())
        header[key] = value
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    return damage


def _as(name: str, dtype: type[np.generic]) -> Callable[[Arrays], None]:
    def damage(arrays: Arrays) -> None:
        arrays[name] = arrays[name].astype(dtype)
    return damage


def _shift_all_durations(arrays: Arrays) -> None:
    arrays["e_dur_ns"] = arrays["e_dur_ns"] - 337_000_000_000


def _swap_first_two(arrays: Arrays) -> None:
    ts = arrays["e_ts_ns"].copy()
    ts[0], ts[-1] = ts[-1], ts[0]
    arrays["e_ts_ns"] = ts


DAMAGE: dict[str, tuple[Callable[[Arrays], None], str]] = {
    "negative durations": (_shift_all_durations, "an event's duration is -33"),
    "a duration past 7 days": (_set("e_dur_ns", 0, DUR_MAX_NS + 1), f"an event's duration is {DUR_MAX_NS + 1} ns"),
    "a time past 2116": (_set("e_ts_ns", -1, TS_MAX_NS + 1), "an event's time is outside"),
    "events out of order": (_swap_first_two, "its events are not in time order"),
    "a kind with no meaning": (_set("e_kind", 0, 200), "an event's kind is outside 0 to 9"),
    "a precision with no meaning": (_set("e_precision", 0, 99), "an event's precision is outside"),
    "a name id past the table": (_set("e_name_id", 0, 10**6), "an event's name id"),
    "floats for times": (_as("e_ts_ns", np.float64), "its e column ts_ns holds float64, not int64"),
    "a memory event's time": (_set("m_ts_ns", 0, -(2**62)), "a memory event's time is outside"),
    "a header field of another type": (_header("attrs", ["not", "a", "mapping"]), "ValidationError"),
}


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, str, Path]:
    """A store with one analysed trace run: (home, run id, its rank file)."""
    home = tmp_path / "home"
    trace = b.trace(b.simple_training(3))
    trace["traceEvents"].append(b.memory(10, 1024, 4096))
    path = b.write(tmp_path / "t.json", trace)
    assert gpuscope("analyze", str(path), home=home).returncode == 0
    (rank_file,) = (home / "runs").glob("*/rank00000.npz")
    return home, rank_file.parent.name, rank_file


def damaged(rank_file: Path, damage: Callable[[Arrays], None]) -> None:
    with np.load(rank_file) as data:
        arrays = dict(data)
    damage(arrays)
    with rank_file.open("wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize("kind", DAMAGE)
def test_values_no_reader_makes_are_damage_named_in_one_line(saved: tuple[Path, str, Path], kind: str) -> None:
    home, run_id, rank_file = saved
    damage, words = DAMAGE[kind]
    damaged(rank_file, damage)
    with Store(home) as store, pytest.raises(RecordDamaged) as caught:
        store.load_traces(run_id)
    message = str(caught.value)
    assert message.startswith(f"the saved trace {rank_file} cannot be read (") and words in message, message


def test_every_reader_of_the_saved_trace_says_so(saved: tuple[Path, str, Path]) -> None:
    home, run_id, rank_file = saved
    damaged(rank_file, _shift_all_durations)
    for argv in (("ops", run_id), ("timeline", run_id, "-o", str(home / "steps")), ("show", run_id, "--reanalyze")):
        result = gpuscope(*argv, home=home)
        line = one_clean_error_line(result)
        assert result.returncode == 2 and f"the saved trace {rank_file} cannot be read" in line, (argv, line)
        assert "-337000000000 µs" not in result.stdout
    assert gpuscope("show", run_id, home=home).returncode == 0  # the report saved with it still shows
    with Store(home) as store:
        client = create_app(store).server.test_client()
        download = client.get(f"/runs/{run_id}/timeline/slowest.json.gz")
        assert download.status_code == 404 and download.mimetype == "text/plain"
        assert download.text.count("\n") == 1 and f"the saved trace {rank_file} cannot be read" in download.text
