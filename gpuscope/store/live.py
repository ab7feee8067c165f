"""A live run's samples and py-spy stack samples in the store: written as a collector flushes them (samples packed
in blocks, ``store.blocks``), read back as the frames the analyzers take. A damaged record is one
``RecordDamaged`` line; the run's saved report stays readable."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import msgspec

from gpuscope.model.run import StackSamples
from gpuscope.model.schema import SAMPLE_COLUMNS, SampleRow, StackRow
from gpuscope.store.database import Database
from gpuscope.store.errors import RecordDamaged

if TYPE_CHECKING:
    import pandas as pd


def add(database: Database, run_id: str, rows: Iterable[SampleRow], *, heartbeat_ns: int | None = None) -> int:
    """Append samples in one transaction (a collector's flush), as one packed block. Returns how many."""
    batch = list(rows)
    what = (f"a block of {len(batch)} samples of run {run_id}, from {_utc(min(r[0] for r in batch))} on,"
            if batch else f"the heartbeat of run {run_id}")
    with database.write(what) as db:
        if batch:
            from gpuscope.store import blocks  # numpy: loaded by a recording, not by listing runs

            block = blocks.pack(batch)
            db.execute("INSERT INTO sample_blocks (run_id, first_ns, last_ns, n, names, data)"
                       " VALUES (?,?,?,?,?,?)", (run_id, block.first_ns, block.last_ns, block.n, block.names,
                                                 block.data))
        db.execute("UPDATE runs SET heartbeat_ns = ? WHERE id = ?", (heartbeat_ns or time.time_ns(), run_id))
    return len(batch)


def read(database: Database, run_id: str, *, metrics: Sequence[str] | None = None,
         since_ns: int | None = None) -> pd.DataFrame:
    """A run's samples in long format (columns of ``schema.SAMPLE_COLUMNS``), in time order."""
    import numpy as np
    import pandas as pd  # only runs with samples pay for pandas

    from gpuscope.store import blocks

    since = since_ns if since_ns is not None else -(2**63)
    what = f"the samples of run {run_id}"
    packed = database.read("SELECT n, names, data FROM sample_blocks WHERE run_id = ? AND last_ns > ?"
                           " ORDER BY first_ns", (run_id, since), what=what)
    legacy = database.read("SELECT ts_ns, source, gpu, pid, metric, value FROM samples"
                           " WHERE run_id = ? AND ts_ns > ?", (run_id, since), what=what)
    try:
        cols = blocks.unpack(packed)
        frame = pd.DataFrame({name: cols[name] for name in SAMPLE_COLUMNS})
        if legacy:  # stores written before samples were packed
            frame = pd.concat([frame, pd.DataFrame(legacy, columns=list(SAMPLE_COLUMNS))], ignore_index=True)
        frame = frame.astype({"ts_ns": "int64", "gpu": "int64", "pid": "int64", "value": "float64"})
    except (ValueError, TypeError, OverflowError) as exc:
        raise RecordDamaged(f"the samples of run {run_id} in {database.path} cannot be read ({exc}); its saved"
                            f" report is still shown by `gpuscope show {run_id}`") from None
    keep = frame["ts_ns"].to_numpy() > since
    if metrics:
        keep &= frame["metric"].isin(list(metrics)).to_numpy()
    if not keep.all():
        frame = frame[keep]
    order = np.argsort(frame["ts_ns"].to_numpy(), kind="stable")
    return frame.iloc[order].reset_index(drop=True)


def counts(database: Database) -> dict[str, int]:
    """Samples per run (a run without any is absent)."""
    counts: dict[str, int] = {}
    for table, count in (("sample_blocks", "SUM(n)"), ("samples", "COUNT(*)")):
        for run_id, n in database.read(f"SELECT run_id, {count} FROM {table} GROUP BY run_id",
                                       what="the sample counts"):
            counts[run_id] = counts.get(run_id, 0) + int(n)
    return counts


def count(database: Database, run_id: str) -> int:
    """One run's samples (through the index: readable when another run's pages are damaged)."""
    blocks_n = database.read("SELECT COALESCE(SUM(n), 0) FROM sample_blocks WHERE run_id = ?", (run_id,),
                             what=f"the samples of run {run_id}")
    legacy_n = database.read("SELECT COUNT(*) FROM samples WHERE run_id = ?", (run_id,),
                             what=f"the samples of run {run_id}")
    return int(blocks_n[0][0]) + int(legacy_n[0][0])


def add_stacks(database: Database, run_id: str, rows: Iterable[StackRow], stacks: dict[int, tuple[str, ...]]) -> None:
    """Append py-spy stack samples; ``stacks`` holds frames of any stack ids not stored yet."""
    batch = list(rows)
    with database.write(f"a batch of {len(batch)} stack samples of run {run_id}") as db:
        db.executemany("INSERT OR IGNORE INTO stacks (run_id, stack_id, frames) VALUES (?,?,?)",
                       [(run_id, sid, json.dumps(list(frames))) for sid, frames in stacks.items()])
        db.executemany("INSERT INTO stack_samples (run_id, ts_ns, pid, tid, state, stack_id)"
                       " VALUES (?,?,?,?,?,?)", [(run_id, *row) for row in batch])


def read_stacks(database: Database, run_id: str) -> StackSamples | None:
    what = f"the stack samples of run {run_id}"
    rows = database.read("SELECT ts_ns, pid, tid, state, stack_id FROM stack_samples"
                         " WHERE run_id = ? ORDER BY ts_ns", (run_id,), what=what)
    frames = database.read("SELECT stack_id, frames FROM stacks WHERE run_id = ?", (run_id,), what=what)
    if not rows:
        return None
    import pandas as pd

    try:
        samples = pd.DataFrame(rows, columns=["ts_ns", "pid", "tid", "state", "stack_id"]).astype(
            {"ts_ns": "int64", "pid": "int64", "tid": "int64", "state": "str", "stack_id": "int64"})
        decoded = {int(sid): tuple(msgspec.json.decode(f, type=list[str])) for sid, f in frames}
    except (ValueError, TypeError, OverflowError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RecordDamaged(f"the stack samples of run {run_id} in {database.path} cannot be read ({exc}); its"
                            f" saved report is still shown by `gpuscope show {run_id}`") from None
    return StackSamples(samples=samples, stacks=decoded)


def _utc(ts_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts_ns / 1e9))
