"""NVTX ranges of an export: push/pop and start/end ranges, with their domains, as host events of the model.

A range's name is its text (``text``, or ``textId`` through ``StringIds``); a range of a named domain (NCCL's own
ranges, say) is ``DOMAIN:text``, so NCCL's ``ncclAllReduce`` reads ``NCCL:ncclAllReduce``, a collective like
PyTorch's ``nccl:all_reduce``. What a range is:

- a profiler step: ``ProfilerStep#N`` (``torch.profiler`` under ``emit_nvtx``); one of a named domain is numbered
  as a profiler step is (``ProfilerStep#0``, ``#1``, ... in each process, in time order), so every view tells its
  steps apart as a Kineto trace's (``--step-range NAME`` takes any other range as the steps, as in a Kineto trace:
  ``analyzers/trace/engine_steps``);
- an operator: what ``torch.autograd.profiler.emit_nvtx`` writes for each op, ``aten::mm, seq = 12[, sizes =
  ...]``, named as Kineto names it (``aten::mm``), and any range of PyTorch's operator namespaces (``aten::``,
  ``c10d::``, ...; not any C++ scope: ``ExpressionEvaluator::evaluate`` is an annotation);
- otherwise an annotation, as ``record_function`` ranges are in a Kineto trace.

Marks (instants) and ranges never ended are not read. A start/end range is the starting thread's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import count

import numpy as np
import numpy.typing as npt

from gpuscope.model.trace import Kind
from gpuscope.traces.nsys.database import Export

I64 = npt.NDArray[np.int64]
TABLE = "NVTX_EVENTS"
DEFAULT_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}
"""``ENUM_NSYS_EVENT_TYPE`` ids as nsys 2022.1 to 2026.3 number them; an export's own enum table, where it has
one, is read instead."""
STEP_PREFIX = "ProfilerStep#"
_EMIT_NVTX_TAIL = re.compile(r", (?:seq|op_id|sizes|input_op_ids) = ")
_OPERATOR = re.compile(r"^(?:aten|prim|c10d|_?c10d_functional|autograd|torch|quantized|_quantized|fbgemm)::")


@dataclass(frozen=True)
class Label:
    """What a distinct range name is."""

    name: str
    kind: Kind
    """Kind.STEP, Kind.CPU_OP or Kind.USER_ANNOTATION."""
    domain: str
    """The NVTX domain's name; "" for the default domain."""


@dataclass(frozen=True)
class Ranges:
    """Ended NVTX ranges, in the table's order."""

    start_ns: I64
    end_ns: I64
    pid: I64
    tid: I64
    label: I64
    """Index into ``labels``."""
    labels: tuple[Label, ...]
    payloads: dict[int, str]
    """Row -> the range's JSON payload (``jsonText``, or ``jsonTextId`` through ``StringIds``), for the rows that
    carry one (NCCL's ranges: communicator, message size, rank)."""

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


def read_ranges(db: Export) -> Ranges:
    """Every ended range of ``NVTX_EVENTS`` (none when the export has no such table)."""
    if not db.has(TABLE, "start", "end", "eventType", "globalTid"):
        z = np.zeros(0, np.int64)
        return Ranges(z, z, z, z, z, (), {})
    types = _event_types(db)
    ranges = f"n.eventType IN ({types['NvtxPushPopRange']}, {types['NvtxStartEndRange']}) AND n.end IS NOT NULL"
    domain = "coalesce(n.domainId, 0)" if db.has(TABLE, "domainId") else "0"
    ranges += " AND n.start IS NOT NULL"
    fields = ("start", "end", "pid", "tid", "domain")
    numbers = dict(zip(fields, db.numbers(
        f"SELECT n.start, n.end, coalesce((n.globalTid >> 24) & 16777215, -1), coalesce(n.globalTid & 16777215, -1), "
        f"{domain} FROM {TABLE} n WHERE {ranges} ORDER BY n.rowid", fields, table=TABLE)))
    texts, payloads = _texts(db, ranges)
    domains = _domains(db, types["NvtxDomainCreate"])
    seen: dict[tuple[str, str], int] = {}
    keys = [(domains.get((int(p), int(d)), ""), t) for p, d, t in zip(numbers["pid"].tolist(),
                                                                       numbers["domain"].tolist(), texts)]
    label = np.fromiter(map(seen.setdefault, keys, count()), dtype=np.int64, count=len(keys))
    # setdefault numbered by row; dense codes in order of first appearance
    order = sorted(seen.items(), key=lambda kv: kv[1])
    remap = np.zeros(max(len(keys), 1), dtype=np.int64)
    remap[[pos for _, pos in order]] = np.arange(len(order))
    labels = tuple(_label(dom, text) for (dom, text), _ in order)
    found = Ranges(start_ns=numbers["start"], end_ns=numbers["end"], pid=numbers["pid"], tid=numbers["tid"],
                   label=remap[label] if len(keys) else label, labels=labels, payloads=payloads)
    return _numbered_steps(found)


def _numbered_steps(r: Ranges) -> Ranges:
    """``r`` with each step range that is not a ``ProfilerStep#N`` already named ``ProfilerStep#k``, k counting
    its process's steps in time order."""
    named = np.fromiter((lab.kind == Kind.STEP and not lab.name.startswith(STEP_PREFIX) for lab in r.labels),
                        dtype=bool, count=len(r.labels))
    rows = np.flatnonzero(named[r.label]) if named.any() else np.zeros(0, np.int64)
    if not rows.size:
        return r
    rows = rows[np.lexsort((r.start_ns[rows], r.pid[rows]))]
    labels, label = list(r.labels), r.label.copy()
    codes: dict[str, int] = {}
    counts: dict[int, int] = {}
    for row, pid in zip(rows.tolist(), r.pid[rows].tolist()):
        k = counts.get(pid, 0)
        counts[pid] = k + 1
        name = f"{STEP_PREFIX}{k}"
        if name not in codes:
            codes[name] = len(labels)
            labels.append(Label(name, Kind.STEP, r.labels[int(label[row])].domain))
        label[row] = codes[name]
    return replace(r, label=label, labels=tuple(labels))


def _label(domain: str, text: str) -> Label:
    qualified = f"{domain}:{text}" if domain else text
    if text.startswith(STEP_PREFIX):
        return Label(qualified, Kind.STEP, domain)
    cut = _EMIT_NVTX_TAIL.search(text)
    if not domain and (cut is not None or _OPERATOR.match(text)):
        return Label(text[:cut.start()] if cut else text, Kind.CPU_OP, domain)
    return Label(qualified, Kind.USER_ANNOTATION, domain)


def _texts(db: Export, ranges: str) -> tuple[list[str], dict[int, str]]:
    """Each range's text (registered strings through ``StringIds``) and the payloads some carry."""
    text = "n.text" if db.has(TABLE, "text") else "NULL"
    text_id = "s.value" if db.has(TABLE, "textId") else "NULL"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if db.has(TABLE, "textId") else ""
    payload = "NULL"
    if db.has(TABLE, "jsonText") and db.has(TABLE, "jsonTextId"):
        payload, join = "coalesce(n.jsonText, j.value)", f"{join} LEFT JOIN StringIds j ON j.id = n.jsonTextId"
    elif db.has(TABLE, "jsonText"):
        payload = "n.jsonText"
    texts: list[str] = []
    payloads: dict[int, str] = {}
    rows = db.rows(f"SELECT coalesce({text}, {text_id}, ''), {payload} FROM {TABLE} n {join} "
                   f"WHERE {ranges} ORDER BY n.rowid")
    for i, (name, body) in enumerate(rows):
        texts.append(str(name))
        if body is not None:
            payloads[i] = str(body)
    return texts, payloads


def _domains(db: Export, create_type: int) -> dict[tuple[int, int], str]:
    """(pid, domain id) -> the domain's name, from the domain-create events."""
    if not db.has(TABLE, "domainId", "text"):
        return {}
    rows = db.rows(f"SELECT coalesce((globalTid >> 24) & 16777215, -1), domainId, text FROM {TABLE} "
                   f"WHERE eventType = ? AND domainId IS NOT NULL AND text IS NOT NULL", (create_type,))
    return {(int(p), int(d)): str(t) for p, d, t in rows}


def _event_types(db: Export) -> dict[str, int]:
    types = dict(DEFAULT_TYPES)
    if db.has("ENUM_NSYS_EVENT_TYPE", "id", "name"):
        marks = ",".join("?" * len(types))
        types.update((str(n), int(i)) for i, n in db.rows(
            f"SELECT id, name FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ({marks})", tuple(types)))
    return types
