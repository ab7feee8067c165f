"""A flight-recorder dump's entries, checked and reduced one at a time as they are read.

An entry is checked against the types PyTorch writes (a sequence number is an integer, a name a string): a wrong
type is an error naming the file, the entry, the field and the value, because a dump that says "3" where PyTorch
writes 3 did not come from PyTorch as it is. A value of the right type that no recorder can write (a sequence
number past a 64-bit counter, a negative size) drops its entry, counted in one warning naming the first such
value. Each kept entry is reduced to the fields the hang analysis reads (stack frames, thread names and the rest are
left behind), its repeated values shared, and only the newest ``keep`` are held: of the older ones only the last
collective each group completed is remembered, which is all the analysis needs of them.
"""

from __future__ import annotations

import re
import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from gpuscope.model.hang import FrEntry
from gpuscope.traces.errors import TraceError

MAX_COUNTER = 2**63 - 1
"""PyTorch's sequence numbers, ids and times are 64-bit counters."""
_BACKEND = re.compile(r"^[a-z]+:")
_PEER = re.compile(r"^(?:[a-z]+:)?(send|recv) (\d{1,9})(->|<-)(\d{1,9})$")
_VALUE_SHOWN = 60


class _Entry(msgspec.Struct):
    process_group: list[str] = []
    pg_id: int | None = None
    collective_seq_id: int = -1
    p2p_seq_id: int = -1
    profiling_name: str = ""
    state: str = ""
    retired: bool = False
    is_p2p: bool = False
    input_sizes: list[list[int]] = []
    input_dtypes: list[str] = []
    output_sizes: list[list[int]] = []
    output_dtypes: list[str] = []
    time_created_ns: int | None = None


_json_entry = msgspec.json.Decoder(_Entry)


@dataclass
class Fold:
    """One dump's entries as they are read: the newest ``keep`` reduced entries, and what the rest leave behind."""

    path: Path
    keep: int
    max_entries: int
    shared: dict[object, object]
    """Values already seen (sizes, dtypes), shared between entries and dumps."""
    kept: deque[FrEntry] = field(init=False)
    completed_before: dict[str, int] = field(default_factory=dict)
    read: int = 0
    dropped: int = 0
    first_dropped: str = ""
    older: int = 0

    def __post_init__(self) -> None:
        self.kept = deque(maxlen=max(self.keep, 1))

    def add_json(self, raw: msgspec.Raw) -> None:
        """One entry in the JSON form."""
        self._count()
        try:
            entry = _json_entry.decode(raw)
        except msgspec.ValidationError as exc:
            raise TraceError(self.path, self._wrong(exc, msgspec.json.decode(raw))) from None
        except msgspec.DecodeError as exc:
            raise TraceError(self.path, f"not valid JSON ({exc})") from None
        self._add(entry)

    def add_plain(self, item: object) -> None:
        """One entry in the pickle form (plain data)."""
        self._count()
        try:
            entry = msgspec.convert(item, _Entry, strict=True)
        except msgspec.ValidationError as exc:
            raise TraceError(self.path, self._wrong(exc, item)) from None
        self._add(entry)

    def warnings(self) -> tuple[str, ...]:
        out = []
        if self.dropped:
            out.append(f"{self.path}: {self.dropped:,} entr{'ies' if self.dropped != 1 else 'y'} dropped for values "
                       f"no flight recorder writes (the first: {self.first_dropped})")
        if self.older:
            out.append(f"{self.path}: the newest {len(self.kept):,} of its {self.read:,} entries kept (the budget "
                       f"of entries over the dumps read); of the {self.older:,} older ones only the last collective "
                       "each group completed counts")
        return tuple(out)

    def _count(self) -> None:
        self.read += 1
        if self.read > self.max_entries:
            limit = f"{self.max_entries:,}"
            raise TraceError(self.path, f"more than {limit} entries, over the limit of {limit} per dump")

    def _wrong(self, exc: msgspec.ValidationError, item: object) -> str:
        """"entry 4: collective_seq_id is '3', expected `int`, got `str`"."""
        text = str(exc)
        where = re.search(r" - at `\$\.?(.*)`$", text)
        path = where.group(1) if where else ""
        what = text[:where.start()] if where else text
        name = re.match(r"[A-Za-z_]+", path)
        value = item.get(name.group(0), None) if name and isinstance(item, dict) else item
        shown = repr(value)
        shown = shown if len(shown) <= _VALUE_SHOWN else shown[:_VALUE_SHOWN] + "..."
        return f"entry {self.read}: {path or 'the entry'} is {shown} ({what[:1].lower()}{what[1:]}): not a " \
               "flight-recorder dump as PyTorch writes it"

    def _add(self, e: _Entry) -> None:
        impossible = _impossible(e)
        if impossible:
            self.dropped += 1
            self.first_dropped = self.first_dropped or f"entry {self.read}: {impossible}"
            return
        if len(self.kept) == self.kept.maxlen:
            old = self.kept[0]
            self.older += 1
            if old.completed and not old.is_p2p:
                self.completed_before[old.group] = max(self.completed_before.get(old.group, 0), old.seq)
        self.kept.append(self._reduced(e))

    def _reduced(self, e: _Entry) -> FrEntry:
        group = e.process_group
        peer = _PEER.match(e.profiling_name) if e.is_p2p else None
        return FrEntry(
            group=sys.intern(group[0] if group else str(e.pg_id if e.pg_id is not None else "")),
            group_desc=sys.intern(group[1] if len(group) > 1 else ""),
            seq=e.p2p_seq_id if e.is_p2p else e.collective_seq_id,
            op=sys.intern(_BACKEND.sub("", e.profiling_name)), profiling_name=sys.intern(e.profiling_name),
            state=sys.intern(e.state), retired=e.retired, is_p2p=e.is_p2p,
            input_sizes=self._share(tuple(tuple(s) for s in e.input_sizes)),
            input_dtypes=self._share(tuple(e.input_dtypes)),
            output_sizes=self._share(tuple(tuple(s) for s in e.output_sizes)),
            output_dtypes=self._share(tuple(e.output_dtypes)), time_created_ns=e.time_created_ns, pg_id=e.pg_id,
            peer=int(peer.group(4)) if peer else None)  # send: "0->1", recv: "1<-0": the peer is last

    def _share(self, value: Any) -> Any:
        return self.shared.setdefault(value, value)


def _impossible(e: _Entry) -> str:
    """The first value no recorder writes, in words; "" when there is none."""
    counters = (("collective_seq_id", e.collective_seq_id, -1), ("p2p_seq_id", e.p2p_seq_id, -1),
                ("pg_id", e.pg_id, -1), ("time_created_ns", e.time_created_ns, 0))
    for name, value, low in counters:
        if value is not None and not low <= value <= MAX_COUNTER:
            return f"{name} {value} is outside {low} to 2^63 - 1"
    for name, sizes in (("input_sizes", e.input_sizes), ("output_sizes", e.output_sizes)):
        bad = next((n for n in _flat(sizes) if not 0 <= n <= MAX_COUNTER), None)
        if bad is not None:
            return f"{name} holds {bad}, not a tensor size"
    return ""


def _flat(sizes: Iterable[list[int]]) -> Iterable[int]:
    for shape in sizes:
        yield from shape
