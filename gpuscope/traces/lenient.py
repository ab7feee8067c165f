"""Events whose fields have the wrong type, decoded one at a time and kept where they still mean something.

Kineto's output varies by version and vendor (ROCm writes ``args.bytes`` as a string, some exporters write
numbers as strings or nulls), so a field of the wrong type costs that field, or the event when the event
means nothing without it, never the whole file. Only events that failed the typed decode come here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpuscope.traces.events import NAN, Args, Event

_INT64 = 2**63
USED = "numbers in strings, used"
FIELD_DROPPED = "left out"
EVENT_DROPPED = "events dropped"


class LooseEvent(msgspec.Struct, gc=False):
    ph: Any = ""
    cat: Any = ""
    name: Any = ""
    pid: Any = -1
    tid: Any = -1
    ts: Any = NAN
    dur: Any = 0.0
    args: Any = None


_typed = msgspec.json.Decoder(Event)
_loose = msgspec.json.Decoder(LooseEvent)
_ARG_FIELDS = tuple((f.encode_name, f.name, f.type, f.default) for f in msgspec.structs.fields(Args))


@dataclass
class Tally:
    """What lenient decoding changed, by (field, outcome), and how many events it touched."""

    events: int = 0
    fields: Counter[tuple[str, str]] = field(default_factory=Counter)
    notes: int = 0

    def note(self, name: str, outcome: str) -> None:
        self.fields[(name, outcome)] += 1
        self.notes += 1

    def summary(self) -> str | None:
        """One line: how many events, and which fields with what outcome; None when nothing was changed."""
        if not self.fields:
            return None
        parts = ", ".join(f"`{name}` in {n} ({outcome})" for (name, outcome), n in sorted(self.fields.items()))
        return f"{self.events} event{'s' if self.events != 1 else ''} had fields of the wrong type: {parts}"


def decode_each(raws: Iterable[msgspec.Raw], tally: Tally) -> list[Event]:
    """Decode events one by one: typed where they are well formed, else loosely and repaired."""
    out: list[Event] = []
    for raw in raws:
        try:
            out.append(_typed.decode(raw))
            continue
        except msgspec.ValidationError:
            pass
        before = tally.notes
        event = _repair(raw, tally)
        if event is not None:
            out.append(event)
        tally.events += tally.notes != before
    return out


def _repair(raw: msgspec.Raw, tally: Tally) -> Event | None:
    try:
        loose = _loose.decode(raw)
    except msgspec.ValidationError:
        tally.note("event", "not an object, dropped")
        return None
    for name in ("ph", "cat", "name"):
        if not isinstance(getattr(loose, name), str):
            tally.note(name, EVENT_DROPPED)
            return None
    ts = _number(loose.ts, float, "ts", tally)
    if ts is None:
        tally.note("ts", EVENT_DROPPED)
        return None
    dur = _number(loose.dur, float, "dur", tally)
    if dur is None:
        if loose.ph == "X":
            tally.note("dur", EVENT_DROPPED)
            return None
        tally.note("dur", FIELD_DROPPED)
        dur = 0.0
    tid = loose.tid if isinstance(loose.tid, str) else _number(loose.tid, int, "tid", tally)
    if tid is None:
        tally.note("tid", FIELD_DROPPED)
        tid = -1
    pid = loose.pid if isinstance(loose.pid, str) else _number(loose.pid, int, "pid", tally)
    if pid is None:
        tally.note("pid", FIELD_DROPPED)
        pid = -1
    return Event(ph=loose.ph, cat=loose.cat, name=loose.name, pid=pid, tid=tid, ts=ts, dur=dur,
                 args=_args(loose.args, tally))


def _args(args: Any, tally: Tally) -> Args | None:
    if args is None:
        return None
    if not isinstance(args, dict):
        tally.note("args", FIELD_DROPPED)
        return None
    values: dict[str, Any] = {}
    for key, attr, typ, _default in _ARG_FIELDS:
        if key not in args:
            continue
        value = args[key]
        if typ is int or typ is float:
            value = _number(value, typ, f"args.{key}", tally)
        elif not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            value = None  # Input type: a list of strings
        else:
            value = tuple(value)
        if value is None:
            tally.note(f"args.{key}", FIELD_DROPPED)
        else:
            values[attr] = value
    return Args(**values)


def _number(value: Any, kind: type[int] | type[float], name: str, tally: Tally) -> Any:
    """``value`` as ``kind`` when it is one, or a string or float that reads as one; None when not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value if abs(value) < _INT64 else None) if kind is int else float(value)
    if isinstance(value, float):
        if kind is float:
            return value
        return int(value) if value.is_integer() and abs(value) < _INT64 else None
    if not isinstance(value, str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number) or (kind is int and not (number.is_integer() and abs(number) < _INT64)):
        return None
    tally.note(name, USED)
    return int(value) if kind is int and value.strip().lstrip("+-").isdigit() else kind(number)
