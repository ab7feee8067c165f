"""An export's tables into ranks of the model: the columnar events a Kineto trace gives, one ``RankTrace`` per
process and GPU.

A rank holds its GPU's kernels, copies, memsets and synchronisations; its process's CUDA API calls (in a process
that drives several GPUs, each call goes to the GPU its launched work ran on, and a call that launched nothing to
each of them); and its process's NVTX ranges. Times stay the export's (ns from the session's start), with the
session's epoch start as the base time, as a Kineto trace's ``baseTimeNanoseconds``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from gpuscope.model.profile import PROFILER_ATTR
from gpuscope.model.trace import CollectiveOps, Events, Kind, MemoryEvents, RankTrace
from gpuscope.traces.errors import TraceError
from gpuscope.traces.impossible import refuse_impossible
from gpuscope.traces.nsys import names, nccl, tables
from gpuscope.traces.nsys.database import Export
from gpuscope.traces.nsys.machine import Machine, read_machine
from gpuscope.traces.nsys.nvtx import Ranges, read_ranges
from gpuscope.traces.nsys.ranks import RankKey, number_ranks

I64 = npt.NDArray[np.int64]
WARP_THREADS = 32
_COLUMNS = ("ts", "end", "kind", "name", "pid", "tid", "owner", "stream", "device", "corr", "ext", "bytes", "blocks",
            "threads")


@dataclass(frozen=True)
class FileEvents:
    """Every event of the export, in the model's terms, with the process (``pid``) and GPU (``owner``: -1 for
    every GPU of the process) it belongs to."""

    cols: dict[str, I64]
    names: tuple[str, ...]
    ranges: Ranges
    range_offset: int
    """Where the NVTX ranges start among the events (they are last, in their table's order)."""


def build(db: Export, *, source: str, digest: str) -> tuple[RankTrace, ...]:
    """The export's ranks, by rank. TraceError when it holds no GPU work."""
    gpu = [tables.kernels(db), tables.copies(db), tables.memsets(db)]
    pid, device = np.concatenate([a.pid for a in gpu]), np.concatenate([a.device for a in gpu])
    both = np.unique(np.stack([pid[device >= 0], device[device >= 0]], axis=1), axis=0)
    keys = [(int(p), int(d)) for p, d in both.tolist()]
    if not keys:
        raise TraceError(source, "an Nsight Systems export with no GPU work (no kernel, copy or memset): record "
                                 "with --trace=cuda around the part of the program that runs on the GPU")
    ranges = read_ranges(db)
    machine = read_machine(db, db.version)
    said = nccl.read_nccl(ranges)
    numbered, lines = number_ranks(keys, machine, said.members)
    events = _file_events(db, gpu, ranges, numbered)
    _link_collectives(events, said.collectives)
    lines = tuple(line for line in (db.missing_line(), *lines) if line)
    out = []
    for i, key in enumerate(numbered):
        warnings = tuple(f"{source}: {line}" for line in lines) if i == 0 else ()
        out.append(_rank(events, key, machine, said, source=source, digest=digest, warnings=warnings))
    return tuple(out)


def _file_events(db: Export, gpu: list[tables.Activity], ranges: Ranges, numbered: list[RankKey]) -> FileEvents:
    table = names.NameTable()
    kernels, copies, memsets = gpu
    syncs, calls = _on_context_device(tables.syncs(db), tables.contexts(db)), tables.calls(db)
    strings = tables.names(db, np.concatenate([kernels.name, calls.name]))
    copy_name, memory = names.copy_namer(db), names.memory_kinds(db)
    parts = [
        _activity(kernels, Kind.KERNEL, table.codes(kernels.name, lambda i: strings.get(i, f"kernel {i}"))),
        _activity(copies, Kind.MEMCPY, table.codes(copies.name * 10_000 + (copies.src_kind + 1) * 100
                                                   + copies.dst_kind + 1, lambda k: copy_name(
            k // 10_000, k // 100 % 100 - 1, k % 100 - 1))),
        _activity(memsets, Kind.MEMSET, table.codes(memsets.name, lambda k: f"Memset ({memory.get(k, 'Unknown')})")),
        _activity(syncs, Kind.OTHER, table.codes(syncs.name, lambda k: names.SYNC_KINDS.get(k, "Unknown Sync"))),
        _calls(calls, table.codes(calls.name, lambda i: names.runtime_name(strings.get(i, f"function {i}"))),
               _call_owner(calls, gpu, numbered)),
    ]
    offset = sum(len(p["ts"]) for p in parts)
    parts.append(_ranges(ranges, np.fromiter((table.code(lab.name) for lab in ranges.labels), np.int64,
                                             count=len(ranges.labels))))
    cols = {c: np.concatenate([p[c] for p in parts]) for c in _COLUMNS}
    return FileEvents(cols=cols, names=tuple(table.names), ranges=ranges, range_offset=offset)


def _activity(a: tables.Activity, kind: Kind, name: I64) -> dict[str, I64]:
    n = len(a)
    stream = np.where((a.stream >= 0) & (a.stream <= np.iinfo(np.int32).max), a.stream, -1)
    return {"ts": a.start_ns, "end": a.end_ns, "kind": np.full(n, int(kind), np.int64), "name": name, "pid": a.pid,
            "tid": stream, "owner": np.where(a.device >= 0, a.device, -1), "stream": stream, "device": a.device,
            "corr": a.correlation, "ext": np.full(n, -1, np.int64), "bytes": a.bytes, "blocks": a.blocks,
            "threads": a.threads_per_block}


def _calls(c: tables.Calls, name: I64, owner: I64) -> dict[str, I64]:
    n, none = len(c), np.full(len(c), -1, np.int64)
    return {"ts": c.start_ns, "end": c.end_ns, "kind": np.full(n, int(Kind.RUNTIME), np.int64), "name": name,
            "pid": c.pid, "tid": c.tid, "owner": owner, "stream": none, "device": none, "corr": c.correlation,
            "ext": none, "bytes": none, "blocks": none, "threads": none}


def _ranges(r: Ranges, codes: I64) -> dict[str, I64]:
    n, none = len(r), np.full(len(r), -1, np.int64)
    kinds = np.fromiter((int(lab.kind) for lab in r.labels), np.int64, count=len(r.labels))
    return {"ts": r.start_ns, "end": r.end_ns, "kind": kinds[r.label] if n else none, "name": codes[r.label] if n
            else none, "pid": r.pid, "tid": r.tid, "owner": none, "stream": none, "device": none, "corr": none,
            "ext": none.copy(), "bytes": none, "blocks": none, "threads": none}


def _on_context_device(a: tables.Activity, contexts: dict[tuple[int, int], int]) -> tables.Activity:
    """``a`` with each row's device the one its CUDA context is on: synchronisation rows carry device 0 whatever
    their context (nsys 2026.3), while the context map says where each process's contexts are. A row whose
    context the map lacks belongs to every GPU of its process (-1)."""
    if not len(a):
        return a
    device = np.fromiter((contexts.get(k, -1) for k in zip(a.pid.tolist(), a.context.tolist())), np.int64,
                         count=len(a))
    return replace(a, device=device)


def _call_owner(calls: tables.Calls, gpu: list[tables.Activity], numbered: list[RankKey]) -> I64:
    """The GPU each call's launched work ran on, in a process that drives several GPUs; -1 (every GPU of the
    process) for the other calls."""
    owner = np.full(len(calls), -1, np.int64)
    pids = [k.pid for k in numbered]
    multi = {p for p in pids if pids.count(p) > 1}
    if not multi:
        return owner
    pid = np.concatenate([a.pid for a in gpu])
    corr = np.concatenate([a.correlation for a in gpu])
    device = np.concatenate([a.device for a in gpu])
    for p in multi:
        mine = (pid == p) & (corr >= 0)
        by_corr = dict(zip(corr[mine].tolist(), device[mine].tolist()))
        at = np.flatnonzero(calls.pid == p)
        owner[at] = [by_corr.get(c, -1) for c in calls.correlation[at].tolist()]
    return owner


def _link_collectives(events: FileEvents, found: list[nccl.Collective]) -> None:
    """Each NCCL collective range and the GPU work launched inside it (by a call on its thread) share an id."""
    if not found:
        return
    c, r, base = events.cols, events.ranges, events.range_offset
    rows = np.array([f.row for f in found], dtype=np.int64)
    ids = nccl.EXTERNAL_ID_BASE + rows
    c["ext"][base + rows] = ids
    calls = np.flatnonzero(c["kind"] == int(Kind.RUNTIME))
    call_thread = c["pid"][calls] * (1 << 24) + c["tid"][calls]
    range_thread = r.pid[rows] * (1 << 24) + r.tid[rows]
    linked: dict[tuple[int, int], int] = {}
    for thread in np.unique(range_thread).tolist():
        mine = np.flatnonzero(range_thread == thread)
        mine = mine[np.argsort(r.start_ns[rows[mine]], kind="stable")]
        starts, ends = r.start_ns[rows[mine]], r.end_ns[rows[mine]]
        inside = calls[call_thread == thread]
        at = np.searchsorted(starts, c["ts"][inside], side="right") - 1
        ok = at >= 0
        ok[ok] = c["end"][inside[ok]] <= ends[at[ok]]
        for corr, k in zip(c["corr"][inside[ok]].tolist(), at[ok].tolist()):
            if corr >= 0:
                linked[(thread >> 24, corr)] = int(ids[mine[k]])
    if not linked:
        return
    work = np.flatnonzero(np.isin(c["kind"], (int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET)))
                          & (c["corr"] >= 0))
    # (pid, correlation) as one int64: pids fit 24 bits, CUPTI's correlation ids 32
    known = np.array([p << 32 | k for p, k in linked], dtype=np.int64)
    ids = np.array(list(linked.values()), dtype=np.int64)
    order = np.argsort(known)
    known, ids = known[order], ids[order]
    want = c["pid"][work] << 32 | c["corr"][work]
    at = np.minimum(np.searchsorted(known, want), known.size - 1)
    hit = known[at] == want
    c["ext"][work[hit]] = ids[at[hit]]


def _rank(events: FileEvents, key: RankKey, machine: Machine, said: nccl.Nccl, *, source: str, digest: str,
          warnings: tuple[str, ...]) -> RankTrace:
    c = events.cols
    mine = np.flatnonzero((c["pid"] == key.pid) & ((c["owner"] == key.device) | (c["owner"] < 0)))
    mine = mine[np.argsort(c["ts"][mine], kind="stable")]
    used, name_id = np.unique(c["name"][mine], return_inverse=True)
    gpu = machine.gpu_for(key.pid, key.device)
    sms = gpu.sm_count if gpu is not None and gpu.sm_count else None
    blocks = c["blocks"][mine].astype(np.float64)
    blocks_per_sm = np.where(blocks >= 0, blocks / sms, np.nan) if sms else np.full(mine.size, np.nan)
    threads = c["threads"][mine].astype(np.float64)
    warps_per_sm = np.where(threads > 0, blocks_per_sm * threads / WARP_THREADS, np.nan)
    ev = Events(ts_ns=c["ts"][mine], dur_ns=np.maximum(c["end"][mine] - c["ts"][mine], 0),
                kind=c["kind"][mine].astype(np.uint8), name_id=name_id.reshape(-1).astype(np.int32),
                tid=c["tid"][mine], stream=c["stream"][mine].astype(np.int32),
                device=np.where(c["device"][mine] >= 0, c["device"][mine], -1).astype(np.int32),
                correlation=c["corr"][mine], external_id=c["ext"][mine], bytes=c["bytes"][mine],
                blocks_per_sm=blocks_per_sm.astype(np.float32), warps_per_sm=warps_per_sm.astype(np.float32))
    rank_names = tuple(events.names[i] for i in used.tolist())
    ev, dropped = refuse_impossible(ev, rank_names)
    z = np.zeros(0, np.int64)
    return RankTrace(
        rank=key.rank, source=source, events=ev, memory=MemoryEvents(z, z, z, z.astype(np.int32), z.astype(np.int32)),
        names=rank_names, collectives=_collectives(events, key, said.collectives),
        gpus=(gpu,) if gpu is not None else (), world_size=key.world_size,
        backend="nccl" if said.members.get(key.pid) else None, pid=key.pid,
        attrs={**machine.attrs, PROFILER_ATTR: "nsys"}, rank_given=key.given, warnings=warnings,
        base_time_ns=machine.session_start_ns,
        content_sha256=hashlib.sha256(f"{digest}:{key.pid}:{key.device}".encode()).hexdigest(),
        host_name=machine.host_name, dropped=dropped)


def _collectives(events: FileEvents, key: RankKey, calls_found: list[nccl.Collective]) -> CollectiveOps:
    """The rank's NCCL collectives (its ranges that carry a collective's id), in time order."""
    r, ext = events.ranges, events.cols["ext"][events.range_offset:]
    rows = np.flatnonzero((ext >= 0) & (r.pid == key.pid))
    if not rows.size:
        return CollectiveOps.empty()
    found = {f.row: f for f in calls_found}
    rows = np.array([i for i in rows.tolist() if i in found], dtype=np.int64)
    rows = rows[np.argsort(r.start_ns[rows], kind="stable")]
    calls = [found[i] for i in rows.tolist()]
    return CollectiveOps(ts_ns=r.start_ns[rows], dur_ns=r.end_ns[rows] - r.start_ns[rows], external_id=ext[rows],
                         in_nelems=np.array([f.in_bytes for f in calls], np.int64),
                         out_nelems=np.array([f.out_bytes for f in calls], np.int64),
                         group_size=np.array([f.group_size for f in calls], np.int64),
                         op=tuple(f.op for f in calls), dtype=("Byte",) * len(calls))
