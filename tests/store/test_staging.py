"""What a killed analysis leaves in the store, told from what a live one is writing, with real processes: a staging
folder or a run folder is owned through a lock the kernel lets go of when its owner dies, however it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpuscope.store import Store, staging
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

pytestmark = pytest.mark.skipif(staging.fcntl is None, reason="lock files need fcntl (POSIX)")

# A process that takes a staging folder (and, with "run", makes a run folder in it and renames it into place as
# a save does), says where, and waits to be killed.
OWNER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from gpuscope.store import staging
    home, what = Path(sys.argv[1]), sys.argv[2]
    with staging.entry(home / "staging") as folder:
        if what == "run":
            built = folder / sys.argv[3]
            built.mkdir()
            (built / "rank00000.npz").write_bytes(b"columns")
            with staging.saving_run(built, home / "runs" / sys.argv[3]):
                print("ready", flush=True)
                time.sleep(600)
        (folder / "a.npz").write_bytes(b"columns")
        print("ready", flush=True)
        time.sleep(600)
""")


@contextmanager
def owner(home: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """The owner process, once it holds what it took."""
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(home), *args], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def killed(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_live_owners_staging_folder_is_left_and_a_dead_ones_removed(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    with owner(tmp_path, "staging") as live, owner(tmp_path, "staging") as dead:
        killed(dead)
        assert len(os.listdir(tmp_path / "staging")) == 4  # two folders, two lock files
        assert staging.sweep(tmp_path, lambda run_id: False) == ()
        (left,) = (p for p in (tmp_path / "staging").iterdir() if p.is_dir())
        assert (left / "a.npz").exists() and live.poll() is None
    assert staging.sweep(tmp_path, lambda run_id: False) == ()
    assert os.listdir(tmp_path / "staging") == []


def test_a_folder_from_before_locks_goes_only_once_a_day_old(tmp_path: Path) -> None:
    old, new = tmp_path / "staging" / "tmpold", tmp_path / "staging" / "tmpnew"
    for folder in (old, new):
        folder.mkdir(parents=True)
    os.utime(old, (0, 0))
    staging.sweep(tmp_path, lambda run_id: False)
    assert sorted(os.listdir(tmp_path / "staging")) == ["tmpnew"]


def test_a_save_cut_off_before_the_catalog_leaves_a_run_folder_that_is_removed_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    with owner(tmp_path, "run", "20260101-000000-aaaaaa") as proc:
        folder = tmp_path / "runs" / "20260101-000000-aaaaaa"
        assert (folder / "rank00000.npz").exists()
        assert staging.sweep(tmp_path, lambda run_id: False) == ()  # being saved: left alone
        killed(proc)
    (line,) = staging.sweep(tmp_path, lambda run_id: False)
    assert line.startswith(f"removed {folder}: ") and "cut off" in line
    assert not folder.exists() and os.listdir(tmp_path / "staging") == []


def test_a_save_cut_off_after_the_catalog_keeps_its_run(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    with owner(tmp_path, "run", "20260101-000000-bbbbbb") as proc:
        killed(proc)
    folder = tmp_path / "runs" / "20260101-000000-bbbbbb"
    assert staging.sweep(tmp_path, lambda run_id: run_id == folder.name) == ()
    assert sorted(os.listdir(folder)) == ["rank00000.npz"]  # the run's traces kept, the save's lock file gone


def test_a_save_that_fails_removes_its_run_folder_and_a_folder_already_there_is_kept(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    (runs / "taken").mkdir(parents=True)
    (runs / "taken" / "theirs").write_text("x")
    built = tmp_path / "built"
    built.mkdir()
    with pytest.raises(OSError), staging.saving_run(built, runs / "taken"):
        pass
    assert os.listdir(runs / "taken") == ["theirs"]
    with pytest.raises(KeyError), staging.saving_run(built, runs / "new"):
        raise KeyError("the catalog write failed")
    assert not (runs / "new").exists()


def test_the_store_sweeps_when_an_analysis_saves_and_says_what_it_removed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Store(home).close()
    with owner(home, "run", "20260101-000000-cccccc") as proc:
        killed(proc)
    result = gpuscope("analyze", str(SAMPLES / "dlrm_8rank"), home=home)
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if "removed" in line]
    assert warning == [f"gpuscope: warning: removed {home / 'runs' / '20260101-000000-cccccc'}: the folder of a run "
                       "whose save was cut off (killed) before the run store's catalog listed it"]
    assert os.listdir(home / "staging") == []
    with Store(home) as store:
        assert sorted(os.listdir(home / "runs")) == [m.id for m in store.list_runs()]
