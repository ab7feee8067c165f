"""A damaged store through the real command line: each kind of damage is one line naming the file and what to do,
every other run is still listed and readable, and nothing more is written into a store known to be damaged."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpuscope as gpuscope_api
from gpuscope.store import RecordDamaged, Store, StoreDamaged, StoreError
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES
from tests.store import damage
from tests.store.damage import DAMAGE, SYNTHETIC, db_file, synthetic_id

FATAL = {"emptied", "header overwritten", "cut after its header", "database deleted"}
"""Damage that leaves nothing readable: every command is refused."""
CATALOG = {"cut in half", "a catalog page", "the catalog's root page"}
"""Damage that hides catalog entries: the listing holds what a plain reader still finds."""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    home = tmp_path_factory.mktemp("base") / "home"
    trace_id = damage.build(home)
    yield home, trace_id


def everyone(trace_id: str) -> set[str]:
    return {trace_id, *(synthetic_id(i) for i in range(SYNTHETIC))}


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and all(line.startswith("gpuscope: error: ") for line in lines), result.stderr
    return lines


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_file_damage_is_one_line_and_the_rest_is_read(kind: str, base: tuple[Path, str], tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    DAMAGE[kind](home)
    listed = gpuscope("runs", "--json", home=home)
    assert listed.returncode == 2
    first = error_lines(listed)[0]
    named = str(home / "runs") if kind == "database deleted" else str(db_file(home))
    assert named in first and ("restore it from a backup" in first or "move" in first), first
    if kind in FATAL:
        assert listed.stdout == "" and len(error_lines(listed)) == 1
        assert not db_file(home).exists() if kind == "database deleted" else db_file(home).stat().st_size >= 0
        if kind == "emptied":
            assert db_file(home).stat().st_size == 0  # never started afresh over the lost runs
        return
    ids = {row["id"] for row in json.loads(listed.stdout)}
    expected = damage.readable_ids(home) if kind in CATALOG else everyone(base[1])
    assert ids == expected, (kind, len(ids))
    if kind in CATALOG:  # the entries lost are counted, from the id index where it survived
        lost = len(everyone(base[1]) - ids)
        assert any(f"the catalog entries of {lost} runs" in line for line in error_lines(listed)), listed.stderr
    if ids:
        assert_each_listed_run_reads(home, ids)


def assert_each_listed_run_reads(home: Path, ids: set[str]) -> None:
    """Every listed run's catalog entry, report and samples: read, or one StoreError line naming the file."""
    with Store(home) as store:
        assert store.damage is not None and str(db_file(home)) in store.damage
        readable = 0
        for run_id in sorted(ids):
            assert store.get_meta(run_id).id == run_id
            try:
                store.load_report(run_id)
                store.samples(run_id)
                readable += 1
            except StoreError as exc:
                assert "\n" not in str(exc) and str(db_file(home)) in str(exc)
        assert readable > 0


@pytest.mark.parametrize("kind", ["a catalog page", "a report page", "a samples page", "cut in half"])
def test_no_writes_into_a_store_known_to_be_damaged(kind: str, base: tuple[Path, str], tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    DAMAGE[kind](home)
    assert gpuscope("runs", home=home).returncode == 2  # finds the damage, and leaves a note for other processes
    before = damage.digest(db_file(home))
    analysed = gpuscope("analyze", str(SAMPLES / "resnet50_dataloader_bound"), home=home)
    (line,) = error_lines(analysed)
    assert analysed.returncode == 2 and str(db_file(home)) in line and "was not saved" in line
    assert damage.digest(db_file(home)) == before
    assert not (db_file(home).parent / "gpuscope.db-wal").exists() or \
        (db_file(home).parent / "gpuscope.db-wal").stat().st_size == 0
    with pytest.raises(StoreDamaged, match="was not saved"), Store(home) as store:
        store.heartbeat(synthetic_id(0))


def test_a_store_restored_in_place_is_written_again(base: tuple[Path, str], tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    good = db_file(home).read_bytes()
    DAMAGE["a report page"](home)
    assert gpuscope("runs", home=home).returncode == 2
    db_file(home).write_bytes(good)  # `cp backup gpuscope.db`: the same file, whole again
    assert gpuscope("analyze", str(SAMPLES / "resnet50_dataloader_bound"), "--new-run",
                    home=home).returncode == 0
    listed = gpuscope("runs", "--json", home=home)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == SYNTHETIC + 2


def test_a_store_moved_aside_starts_a_new_one(base: tuple[Path, str], tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    DAMAGE["emptied"](home)
    db_file(home).rename(home / "gpuscope.db.bad")  # what the line says to do
    (home / "runs").rename(home / "runs.bad")
    assert gpuscope("analyze", str(SAMPLES / "resnet50_dataloader_bound"), home=home).returncode == 0
    assert len(json.loads(gpuscope("runs", "--json", home=home).stdout)) == 1


@pytest.mark.parametrize("command", ["show", "report", "gate"])
def test_commands_on_a_damaged_store_read_what_they_can(command: str, base: tuple[Path, str],
                                                        tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    DAMAGE["a report page"](home)
    with Store(home) as store:
        unreadable = [i for i in range(SYNTHETIC) if _fails(store, synthetic_id(i))]
    assert unreadable and len(unreadable) < SYNTHETIC
    good = next(i for i in range(SYNTHETIC) if i not in unreadable)
    lost = synthetic_id(unreadable[0])
    for run_id, ok in ((synthetic_id(good), True), (lost, False)):
        args = {"show": [run_id], "report": [run_id, "-o", str(tmp_path / "r.html")],
                "gate": [run_id, "--baseline", run_id]}[command]
        result = gpuscope(command, *args, home=home)
        if ok:
            assert result.returncode == 0, result.stderr
        else:
            (line,) = error_lines(result)
            assert result.returncode == 2 and str(db_file(home)) in line and f"the report of run {lost}" in line


def _fails(store: Store, run_id: str) -> bool:
    try:
        store.load_report(run_id)
    except StoreDamaged:
        return True
    return False


def test_a_damaged_report_row(base: tuple[Path, str], tmp_path: Path) -> None:
    home, trace_id = damage.copy(base[0], tmp_path / "home"), base[1]
    damage.execute(home, "UPDATE reports SET report = ? WHERE run_id = ?", b'{"schema": "gpuscope.report/1", "run"',
                   trace_id)
    listed = gpuscope("runs", "--json", home=home)
    (line,) = error_lines(listed)
    assert listed.returncode == 2 and trace_id in line and str(db_file(home)) in line and "--reanalyze" in line
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == everyone(trace_id) and rows[trace_id]["verdict"] is None
    shown = gpuscope("show", trace_id, home=home)
    assert shown.returncode == 2 and "--reanalyze" in error_lines(shown)[0]
    gated = gpuscope("gate", synthetic_id(1), "--baseline", trace_id, home=home)
    assert gated.returncode == 2 and trace_id in error_lines(gated)[0]  # fails closed, in one line
    assert gpuscope("show", trace_id, "--reanalyze", home=home).returncode == 0  # what the line says to do
    assert gpuscope("runs", home=home).returncode == 0


def test_a_damaged_catalog_row(base: tuple[Path, str], tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    bad = synthetic_id(5)
    damage.execute(home, "UPDATE runs SET gpus = 'not json', status = 'exploded' WHERE id = ?", bad)
    listed = gpuscope("runs", "--json", home=home)
    (line,) = error_lines(listed)
    assert listed.returncode == 2 and bad in line and str(db_file(home)) in line
    assert {r["id"] for r in json.loads(listed.stdout)} == everyone(base[1]) - {bad}
    shown = gpuscope("show", bad, home=home)
    assert shown.returncode == 2 and bad in error_lines(shown)[0]
    assert gpuscope("show", synthetic_id(6), home=home).returncode == 0


def test_a_damaged_block_of_samples(base: tuple[Path, str], tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    bad = synthetic_id(7)
    damage.execute(home, "UPDATE sample_blocks SET data = substr(data, 1, 50) WHERE run_id = ?", bad)
    shown = gpuscope("show", bad, "--reanalyze", home=home)
    (line,) = error_lines(shown)
    assert shown.returncode == 2 and f"the samples of run {bad}" in line and str(db_file(home)) in line
    assert gpuscope("show", bad, home=home).returncode == 0  # its saved report, as the line says
    assert gpuscope("show", synthetic_id(8), "--reanalyze", home=home).returncode == 0


def test_a_damaged_saved_trace(base: tuple[Path, str], tmp_path: Path) -> None:
    home, trace_id = damage.copy(base[0], tmp_path / "home"), base[1]
    (npz,) = (home / "runs" / trace_id).glob("rank*.npz")
    npz.write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])
    shown = gpuscope("show", trace_id, "--reanalyze", home=home)
    (line,) = error_lines(shown)
    assert shown.returncode == 2 and str(npz) in line and f"gpuscope show {trace_id}`" in line
    assert gpuscope("show", trace_id, home=home).returncode == 0
    reported = gpuscope("report", trace_id, "--usd-per-gpu-hour", "2", "-o", str(tmp_path / "r.html"), home=home)
    assert reported.returncode == 2 and str(npz) in error_lines(reported)[0]
    with Store(home) as store, pytest.raises(RecordDamaged):
        store.load_run(trace_id)


def test_a_gate_against_a_damaged_catalog_fails_closed(base: tuple[Path, str], tmp_path: Path) -> None:
    home, trace_id = damage.copy(base[0], tmp_path / "home"), base[1]
    name = "resnet50_dataloader_bound"
    assert gpuscope("gate", trace_id, "--baseline-from-store", name, home=home).returncode == 0
    DAMAGE["a catalog page"](home)  # the newest run of a name could be among the entries lost
    gated = gpuscope("gate", trace_id, "--baseline-from-store", name, home=home)
    (line,) = error_lines(gated)
    assert gated.returncode == 2 and str(db_file(home)) in line


def test_nothing_is_launched_to_record_into_a_damaged_store(base: tuple[Path, str], tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    DAMAGE["a report page"](home)
    assert gpuscope("runs", home=home).returncode == 2
    ran = tmp_path / "ran"
    result = gpuscope("run", "--no-stacks", "--", sys.executable, "-c", f"open({str(ran)!r}, 'w')", home=home)
    (line,) = error_lines(result)
    assert result.returncode == 2 and "would not be saved" in line and not ran.exists()


def test_the_api_lists_what_it_can_and_warns_of_the_rest(base: tuple[Path, str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    DAMAGE["a catalog page"](home)
    monkeypatch.setenv("GPUSCOPE_HOME", str(home))
    with pytest.warns(UserWarning) as warned:
        listed = gpuscope_api.runs()
    assert {r.id for r in listed} == damage.readable_ids(home)
    lines = [str(w.message) for w in warned]
    lost = SYNTHETIC + 1 - len(listed)
    assert len(lines) == 2 and "is damaged" in lines[0] and f"the catalog entries of {lost} runs" in lines[1]
