"""Transforms of real multi-rank jobs and hang dumps, each the way a known change to the job would move them, for
the relations across ranks (tests/relations/test_across_relations.py). They read and write the raw files with
nothing of gpuscope: a Kineto trace is JSON (gzipped or not), a flight-recorder dump JSON."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Doc = dict[str, Any]
DAY_US = 86_400e6


def load_job(folder: Path) -> dict[str, Doc]:
    """Each rank's trace in the folder, by file name."""
    out = {}
    for path in sorted(folder.iterdir()):
        if ".json" not in path.name:
            continue
        data = path.read_bytes()
        out[path.name] = json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)
    return out


def write_job(docs: dict[str, Doc], folder: Path) -> Path:
    """The traces as plain JSON files named as given (a ``.gz`` ending dropped)."""
    folder.mkdir(parents=True)
    for name, doc in docs.items():
        (folder / name.removesuffix(".gz")).write_text(json.dumps(doc))
    return folder


def rank_of(doc: Doc) -> int:
    return int(doc["distributedInfo"]["rank"])


def _timed(doc: Doc) -> list[Doc]:
    return [e for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]


def _end(e: Doc) -> float:
    return float(e["ts"]) + float(e.get("dur", 0))


def collectives(doc: Doc) -> list[Doc]:
    """The rank's collectives in start order: its NCCL kernels, or where it has none its gloo ops."""
    events = _timed(doc)
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    picked = kernels or [e for e in events if e.get("ph") == "X" and e["name"].startswith("gloo:")]
    return sorted(picked, key=lambda e: e["ts"])


def steps(doc: Doc) -> list[tuple[str, float, float]]:
    """(name, start, end) of its profiler steps, in time order."""
    return sorted(((e["name"], float(e["ts"]), _end(e)) for e in _timed(doc)
                   if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")), key=lambda s: s[1])


def in_step(doc: Doc, name: str) -> list[Doc]:
    """The rank's collectives that start in its step ``name``."""
    spans = [(a, b) for n, a, b in steps(doc) if n == name]
    return [e for e in collectives(doc) if any(a <= e["ts"] < b for a, b in spans)]


def _insert(doc: Doc, at_us: float, k_us: float, *, stretch: Iterable[int] = ()) -> None:
    """``k_us`` more time on the rank from ``at_us``: what starts there or later starts ``k_us`` later, what spans
    it lasts ``k_us`` longer (and so do the events whose ids are in ``stretch``)."""
    longer = set(stretch)
    for e in _timed(doc):
        if e["ts"] >= at_us and id(e) not in longer:
            e["ts"] += k_us
        elif id(e) in longer or (e.get("ph") == "X" and e["ts"] < at_us < _end(e)):
            e["dur"] = e.get("dur", 0) + k_us


def delay_before(docs: dict[str, Doc], rank: int, k_us: float, index: int) -> list[tuple[str, int]]:
    """Rank ``rank`` spends ``k_us`` more, outside any profiled op, before the ``index``-th collective of each step
    every rank has (from 0); the others wait for it there as long, inside that collective, and everything after
    it moves on by as much on every rank. Returns the (step, collective index) pairs delayed."""
    names = set.intersection(*({n for n, _, _ in steps(doc)} for doc in docs.values()))
    order = [n for n, _, _ in steps(next(iter(docs.values()))) if n in names]
    done = []
    for name in order:
        picked = {key: in_step(doc, name) for key, doc in docs.items()}
        if any(len(c) <= index for c in picked.values()):
            continue
        for key, doc in docs.items():
            c = picked[key][index]
            if rank_of(doc) == rank:
                _insert(doc, float(c["ts"]), k_us)
            else:
                _insert(doc, _end(c), k_us, stretch=[id(c)])
        done.append((name, index))
    return done


def shift_clock(docs: dict[str, Doc], rank: int, us: float) -> None:
    """Every time of rank ``rank`` moved by ``us``: its clock set wrong, nothing else."""
    for doc in docs.values():
        if rank_of(doc) == rank:
            for e in _timed(doc):
                e["ts"] += us


def copy_dumps(source: Path, folder: Path, *, keep: Callable[[int], bool] = lambda r: True,
               name: Callable[[int], str] = lambda r: f"rank_{r}",
               change: Callable[[Doc], None] = lambda doc: None) -> Path:
    """Flight-recorder dumps (JSON form, named ``rank_N``) copied: only the ranks ``keep`` says, each named as
    ``name`` says, each changed by ``change``."""
    folder.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        rank = int(path.name.rsplit("_", 1)[1])
        if keep(rank):
            doc = json.loads(path.read_text())
            change(doc)
            (folder / name(rank)).write_text(json.dumps(doc))
    return folder


def renamed(source: Path, folder: Path, name: Callable[[str, int], str]) -> Path:
    """A job's trace files copied under other names (``name(old name, position)``): the rank is in the trace."""
    folder.mkdir(parents=True)
    for i, path in enumerate(sorted(p for p in source.iterdir() if ".json" in p.name)):
        shutil.copy(path, folder / name(path.name, i))
    return folder
