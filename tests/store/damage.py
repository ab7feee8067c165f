"""A store with many runs, and the ways its files get damaged: cut off, emptied, overwritten page by page (found
through SQLite's own page map, ``dbstat``), one row or one saved trace broken, the database deleted."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests.conftest import SAMPLES
from tests.figures.fixtures import full_report, sample_rows

T0_NS = 1_767_225_600_000_000_000
SYNTHETIC = 60
"""Runs recorded in code: enough that the catalog spans several pages, so a damaged page hides only some."""


def synthetic_id(i: int) -> str:
    return f"20260101-0000{i:02d}-aaaa{i:02d}"


def build(home: Path) -> str:
    """A store holding a real analysed trace (``gpuscope analyze`` of a bundled sample) and ``SYNTHETIC`` live runs
    with samples and reports. Returns the trace run's id."""
    result = subprocess.run([sys.executable, "-m", "gpuscope", "analyze", str(SAMPLES / "resnet50_dataloader_bound"),
                             "--json"], capture_output=True, text=True, env={**os.environ, "GPUSCOPE_HOME": str(home)},
                            timeout=120)
    assert result.returncode == 0, result.stderr
    with Store(home) as store:
        for i in range(SYNTHETIC):
            run_id, t0 = synthetic_id(i), T0_NS + i * 10**9
            # Long names fill the catalog's pages, as real command lines do.
            store.create_run(RunMeta(id=run_id, name=f"train {i} " + "-" * 200, kind="attach", status="complete",
                                     started_ns=t0, ended_ns=t0 + 60 * 10**9, command=("python", "train.py"),
                                     gpus=(GpuInfo(index=0, name="NVIDIA H100 80GB HBM3"),)))
            store.add_samples(run_id, sample_rows(gpus=1, seconds=30, t0_ns=t0))
            report = full_report(run_id)
            store.save_report(run_id, replace(report, run=replace(report.run, kind="attach")))
        return next(m.id for m in store.list_runs() if m.kind == "trace")


def copy(base: Path, to: Path) -> Path:
    shutil.copytree(base, to)
    return to


def db_file(home: Path) -> Path:
    return home / "gpuscope.db"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pages(home: Path, table: str, kind: str) -> list[int]:
    """The page numbers of a table's b-tree pages of one kind (leaf, internal, overflow), from ``dbstat``."""
    db = sqlite3.connect(db_file(home))
    try:
        return [p for (p,) in db.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ? ORDER BY pageno",
                                         (table, kind))]
    finally:
        db.close()


def smash(home: Path, table: str, kind: str, which: int = 0, *, seed: int = 21) -> None:
    """Overwrite one page of ``table`` with random bytes, as a bad sector or a stray write would."""
    page_bytes = 4096
    number = pages(home, table, kind)[which]
    with db_file(home).open("r+b") as f:
        f.seek((number - 1) * page_bytes)
        f.write(random.Random(seed).randbytes(page_bytes))


def execute(home: Path, sql: str, *params: object) -> None:
    db = sqlite3.connect(db_file(home))
    with db:
        db.execute(sql, params)
    db.close()


def readable_ids(home: Path) -> set[str]:
    """The catalog rows a plain SQLite reader can still get one rowid at a time: the reference the listing of a
    damaged store is checked against (a different way of reading it than the store's)."""
    db = sqlite3.connect(f"file:{db_file(home)}?mode=ro", uri=True)
    db.execute("PRAGMA writable_schema=ON")
    found = set()
    for rowid in range(1, SYNTHETIC + 2):
        try:
            found |= {r[0] for r in db.execute("SELECT id FROM runs WHERE rowid = ?", (rowid,))}
        except sqlite3.DatabaseError:
            pass
    db.close()
    return found


def cut(home: Path, size_bytes: int) -> None:
    os.truncate(db_file(home), size_bytes)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "emptied": lambda home: cut(home, 0),
    "header overwritten": lambda home: db_file(home).write_bytes(b"\0" * 100 + db_file(home).read_bytes()[100:]),
    "cut after its header": lambda home: cut(home, 100),
    "cut in half": lambda home: cut(home, db_file(home).stat().st_size // 2),
    "a catalog page": lambda home: smash(home, "runs", "leaf", 3),
    "the catalog's root page": lambda home: smash(home, "runs", "internal"),
    "a report page": lambda home: smash(home, "reports", "leaf", 2),
    "a samples page": lambda home: smash(home, "sample_blocks", "leaf", 4),
    "database deleted": lambda home: db_file(home).unlink(),
}
"""Damage to the database file itself, each as it is done to a copy of the store."""
