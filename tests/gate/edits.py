"""Real traces from sample_traces/ copied to a temporary folder and broken the ways a CI job breaks them: a rank
file cut short, a rank file gone, another world size, no profiler steps."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import SAMPLES


def copy(name: str, to: Path) -> Path:
    """sample_traces/``name`` copied to ``to`` (a new folder)."""
    shutil.copytree(SAMPLES / name, to)
    return to


def rank_file(folder: Path, rank: int) -> Path:
    """The dlrm_8rank file of ``rank`` (``worker<rank>_step_12...``)."""
    (found,) = folder.glob(f"worker{rank}_*")
    return found


def cut_short(path: Path) -> None:
    """Keep the first third of the file: a gzip stream that ends before its end, as a killed writer leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _edit(path: Path, change: Any) -> None:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    change(doc)
    with opener(path, "wt") as f:
        json.dump(doc, f)


def set_world_size(folder: Path, world_size: int) -> None:
    """Keep ranks 0 .. world_size-1 of a multi-rank folder and make their traces say so: a smaller job."""
    for path in sorted(folder.iterdir()):
        rank = int(path.name.removeprefix("worker").split("_")[0])
        if rank >= world_size:
            path.unlink()
        else:
            _edit(path, lambda doc: doc["distributedInfo"].update(world_size=world_size))


def drop_profiler_steps(folder: Path) -> int:
    """Remove every ProfilerStep#N event from the traces in ``folder``; the number removed."""
    removed = 0

    def change(doc: dict[str, Any]) -> None:
        nonlocal removed
        kept = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
        removed += len(doc["traceEvents"]) - len(kept)
        doc["traceEvents"] = kept

    for path in sorted(folder.glob("*.json*")):
        _edit(path, change)
    return removed
