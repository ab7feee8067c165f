"""A memory snapshot in the store: a run of kind "memory" whose folder holds the snapshot as read
(``snapshot.npz``: its columns, frames and stacks, never the pickle) and the report computed from it
(``memory_report.json``), so the dashboard, ``gpuscope show`` and a later re-analysis all read the same."""

from __future__ import annotations

import json
import os
import time
import zipfile
import zlib
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.memory import MemoryReport
from gpuscope.model.redact import redact_text
from gpuscope.model.run import RunMeta
from gpuscope.model.snapshot import (
    Actions,
    Annotation,
    Blocks,
    DeviceSnapshot,
    Frame,
    MemorySnapshot,
    Oom,
    Segments,
)
from gpuscope.store.errors import RecordDamaged, StoreWriteError
from gpuscope.store.sqlite import Store, new_run_id

SNAPSHOT_FILE = "snapshot.npz"
REPORT_FILE = "memory_report.json"


def save_memory_run(store: Store, snapshot: MemorySnapshot, report: MemoryReport, *, name: str,
                    gpu_model: str | None = None) -> tuple[RunMeta, MemoryReport]:
    """Add a complete memory run to the catalog and write its snapshot and report (which gets the run's id). The
    file it was read from is kept as every run's command is (``gpuscope.model.redact``: secrets masked)."""
    snapshot = replace(snapshot, source=redact_text(snapshot.source))
    times = [int(t) for d in snapshot.devices for t in (d.actions.time_us[:1].tolist() + d.actions.time_us[-1:]
                                                       .tolist()) if t > 0]
    started = min(times) * 1000 if times else None
    sizes = {d.device: d.device_bytes for d in report.devices}
    meta = RunMeta(id=new_run_id(started), name=name, kind="memory", status="complete",
                   started_ns=started if started is not None else time.time_ns(),
                   ended_ns=max(times) * 1000 if times else None, command=(snapshot.source,),
                   gpus=tuple(GpuInfo(index=d.device, name=gpu_model, memory_bytes=sizes.get(d.device))
                              for d in snapshot.devices), price_source=report.price_source)
    meta = store.create_run(meta)
    report = replace(report, run_id=meta.id, source=redact_text(report.source))
    folder = store.run_dir(meta.id)
    try:
        save_snapshot(folder / SNAPSHOT_FILE, snapshot)
        save_memory_report(store, meta.id, report)
    except OSError as exc:
        raise StoreWriteError(f"memory run {meta.id} could not be written to {folder} ({exc.strerror or exc}): free "
                              "some space and try again") from None
    return meta, report


def save_memory_report(store: Store, run_id: str, report: MemoryReport) -> None:
    path = store.run_dir(run_id) / REPORT_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.encode(report))
    os.replace(tmp, path)


def load_memory_report(store: Store, run_id: str) -> MemoryReport | None:
    """The saved report; None when there is none or an older version wrote it."""
    try:
        return msgspec.json.decode((store.home / "runs" / run_id / REPORT_FILE).read_bytes(), type=MemoryReport)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def save_snapshot(path: Path, snap: MemorySnapshot) -> None:
    arrays: dict[str, Any] = {}
    for d in snap.devices:
        for prefix, part in (("a", d.actions), ("s", d.segments), ("b", d.blocks)):
            arrays |= {f"d{d.device}_{prefix}_{f.name}": getattr(part, f.name) for f in fields(part)}
    header = {"source": snap.source, "frames": [asdict(f) for f in snap.frames], "stacks": [list(s) for s in
                                                                                           snap.stacks],
              "devices": [{"device": d.device, "ooms": [asdict(o) for o in d.ooms]} for d in snap.devices],
              "expandable_segments": snap.expandable_segments,
              "annotations": [asdict(a) for a in snap.annotations], "warnings": list(snap.warnings)}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("wb") as f:
            np.savez(f, **arrays)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def load_snapshot(store: Store, run_id: str) -> MemorySnapshot:
    """The snapshot a memory run was read from; ``RecordDamaged`` (one line) when its file cannot be read."""
    path = store.home / "runs" / run_id / SNAPSHOT_FILE
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(data["header"].tobytes())
            devices = tuple(_device(data, entry) for entry in header["devices"])
        return MemorySnapshot(
            source=str(header["source"]), frames=tuple(Frame(**f) for f in header["frames"]),
            stacks=tuple(tuple(int(i) for i in s) for s in header["stacks"]), devices=devices,
            expandable_segments=header["expandable_segments"],
            annotations=tuple(Annotation(**a) for a in header["annotations"]),
            warnings=tuple(str(w) for w in header["warnings"]))
    except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile, zlib.error) as exc:
        raise RecordDamaged(f"the saved snapshot {path} cannot be read ({type(exc).__name__}: {exc}); "
                            f"`gpuscope memory` reads the original file again") from None


def _device(data: Any, entry: dict[str, Any]) -> DeviceSnapshot:
    d = int(entry["device"])

    def columns(prefix: str, cls: type[Any]) -> dict[str, Any]:
        return {f.name: data[f"d{d}_{prefix}_{f.name}"] for f in fields(cls)}

    return DeviceSnapshot(device=d, actions=Actions(**columns("a", Actions)),
                          segments=Segments(**columns("s", Segments)), blocks=Blocks(**columns("b", Blocks)),
                          ooms=tuple(Oom(**o) for o in entry["ooms"]))
