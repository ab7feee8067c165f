"""What an analysis writes before its run exists, who owns it, and what is left when the writer was killed.

A saving analysis writes each rank's columnar trace into a folder of its own under ``staging/`` (``entry``), then
builds the run's folder there and renames it into ``runs/`` whole (``saving_run``), then writes the catalog. A
``kill -9`` at any point leaves something behind: a staging folder, or a run folder the catalog does not list.

Each is owned through a lock file the writer holds open (``flock``): the kernel lets go of it when the process and
every worker forked from it are gone, however they ended, so a later process can tell what a live analysis is
still writing from what a dead one left. ``sweep`` (run as a saving analysis starts) removes the staging folders
no live process owns, and the run folders of saves that were cut off before their catalog entry was written; a
cut-off save whose entry was written keeps its folder. Where ``fcntl`` is missing (Windows), a staging folder is
taken for abandoned once it is a day old, and a run folder is never removed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK = ".lock"
"""A staging folder NAME is owned through the lock file NAME.lock beside it (made first, removed last)."""
SAVING = ".saving"
"""A run folder being saved holds this lock file until its catalog entry is written."""
UNLOCKED_MAX_AGE_S = 24 * 3600
"""Without locks (no fcntl), or for a folder made before they were used: abandoned once this old."""


class Owned:
    """A lock file held by this process (and the processes it forks) until ``release``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._fd: int | None = fd
        if fcntl is None:  # a marker alone: an open file would keep its folder from being renamed (Windows)
            os.close(fd)
            self._fd = None
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._held = True

    def release(self) -> None:
        """Remove the lock file, then let go of it (in that order: a file that exists is held until gone)."""
        if not self._held:
            return
        self.path.unlink(missing_ok=True)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._held = None, False


def held(lock: Path) -> bool | None:
    """Whether a live process holds ``lock``; None when that cannot be told (no file, no fcntl)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing lets go of a lock taken here
    return False


@contextmanager
def entry(root: Path) -> Iterator[Path]:
    """A new folder under ``root``, owned by this process until the block ends, then removed."""
    root.mkdir(exist_ok=True)
    name = secrets.token_hex(8)
    owner = Owned(root / f"{name}{LOCK}")
    folder = root / name
    try:
        folder.mkdir()
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        owner.release()


@contextmanager
def saving_run(built: Path, folder: Path) -> Iterator[None]:
    """``built`` (a run's folder made in a staging folder) renamed into its place ``folder``, marked as being saved
    for as long as the block runs (the catalog entry is written in it); removed again when the block fails."""
    owner = Owned(built / SAVING)
    try:
        os.rename(built, folder)  # a folder already there and not empty is refused, and left as it was
    except BaseException:
        owner.release()
        raise
    owner.path = folder / SAVING  # the same file, held all along
    try:
        yield
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        owner.release()


def sweep(home: Path, listed: Callable[[str], bool]) -> tuple[str, ...]:
    """Remove what killed analyses left in ``home``'s ``staging/`` and ``runs/``; one line for each run folder
    removed or kept (``listed(run_id)``: whether the catalog lists the run)."""
    _sweep_staging(home / "staging")
    return tuple(line for line in (_sweep_run(folder, listed) for folder in _saving(home / "runs")) if line)


def _sweep_staging(root: Path) -> None:
    try:
        names = {p.name for p in root.iterdir()}
    except OSError:
        return
    for name in sorted(names):
        path = root / name
        if name.endswith(LOCK):
            if name.removesuffix(LOCK) not in names and held(path) is False:
                path.unlink(missing_ok=True)  # its folder was removed by an owner cut off before the lock
            continue
        owned = held(root / f"{name}{LOCK}")
        if owned is False or (owned is None and _age_s(path) > UNLOCKED_MAX_AGE_S):
            _remove(path)
            (root / f"{name}{LOCK}").unlink(missing_ok=True)


def _saving(runs: Path) -> list[Path]:
    """Run folders that hold a save's lock file."""
    try:
        return sorted(p.parent for p in runs.glob(f"*/{SAVING}"))
    except OSError:
        return []


def _sweep_run(folder: Path, listed: Callable[[str], bool]) -> str | None:
    if held(folder / SAVING) is not False:
        return None  # being saved now, or it cannot be told: left alone
    if listed(folder.name):  # cut off after its catalog entry was written: the run is whole
        (folder / SAVING).unlink(missing_ok=True)
        return None
    _remove(folder)
    return (f"removed {folder}: the folder of a run whose save was cut off (killed) before the run store's catalog "
            "listed it")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.lstat().st_mtime
    except OSError:
        return 0.0
