"""Events whose fields have the wrong type, decoded one at a time and kept where they still mean something.

Kineto's output varies by version and vendor (ROCm writes ``args.bytes`` as a string and a runtime call's
``args.stream`` as hex text, ``"0x0"``, some exporters write
numbers as strings or nulls), so a field of the wrong type costs that field, or the event when the event
means nothing without it, never the whole file. A number outside its field's range (``events``: an integer
past int64, a `dur` of 1e308) counts as the wrong type. Only events that failed the typed decode come here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpuscope.traces.events import NAN, Args, Event

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


Number = tuple[type[int] | type[float], float, float]
"""A numeric field's kind and its inclusive range."""


def _numbers(struct: type[msgspec.Struct]) -> dict[str, Number | None]:
    """Each field's (by its JSON name) kind and range, read from the struct's own constraints so the two checks
    cannot disagree; None for a field that is not a number."""
    out: dict[str, Number | None] = {}
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    for f in info.fields:
        kinds = f.type.types if isinstance(f.type, msgspec.inspect.UnionType) else (f.type,)
        num = next((k for k in kinds if isinstance(k, msgspec.inspect.IntType | msgspec.inspect.FloatType)), None)
        if num is None:
            out[f.encode_name] = None
            continue
        lo = -math.inf if num.ge is None else num.ge
        hi = math.inf if num.le is None else num.le
        out[f.encode_name] = (int if isinstance(num, msgspec.inspect.IntType) else float, lo, hi)
    return out


_typed = msgspec.json.Decoder(Event)
# float_hook: a literal past float64 (1e400) reads as inf, to be dropped with its field, not fail the event.
_loose = msgspec.json.Decoder(LooseEvent, float_hook=float)
_EVENT_NUMBERS = _numbers(Event)
_ARG_NUMBERS = _numbers(Args)
_ARG_FIELDS = tuple((f.encode_name, f.name) for f in msgspec.structs.fields(Args))
_RAW_KEYS = frozenset({"Input Dims", "Input dims", "Concrete Inputs"})


@dataclass
class Tally:
    """What lenient decoding changed, by (field, outcome), and how many events it touched."""

    events: int = 0
    fields: Counter[tuple[str, str]] = field(default_factory=Counter)
    notes: int = 0

    def note(self, name: str, outcome: str) -> None:
        self.fields[(name, outcome)] += 1
        self.notes += 1

    def join(self, later: Tally) -> None:
        """Add what another decoding (of other events) changed."""
        self.events += later.events
        self.fields.update(later.fields)
        self.notes += later.notes

    def summary(self) -> str | None:
        """One line: how many events, and which fields with what outcome; None when nothing was changed."""
        if not self.fields:
            return None
        parts = ", ".join(f"`{name}` in {n} ({outcome})" for (name, outcome), n in sorted(self.fields.items()))
        return (f"{self.events} event{'s' if self.events != 1 else ''} had fields of the wrong type or out of range: "
                f"{parts}")


def decode_each(raws: Iterable[msgspec.Raw], tally: Tally) -> list[Event]:
    """Decode events one by one: typed where they are well formed, else loosely and repaired."""
    out: list[Event] = []
    for raw in raws:
        try:
            out.append(_typed.decode(raw))
            continue
        except msgspec.DecodeError:
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
    except msgspec.DecodeError:  # the only thing a raw event's text can still fail on
        tally.note("event", "text not UTF-8, dropped")
        return None
    for name in ("ph", "cat", "name"):
        if not isinstance(getattr(loose, name), str):
            tally.note(name, EVENT_DROPPED)
            return None
    ts = _number(loose.ts, _EVENT_NUMBERS["ts"], "ts", tally)
    if ts is None:
        tally.note("ts", EVENT_DROPPED)
        return None
    dur = _number(loose.dur, _EVENT_NUMBERS["dur"], "dur", tally)
    if dur is None:
        if loose.ph == "X":
            tally.note("dur", EVENT_DROPPED)
            return None
        tally.note("dur", FIELD_DROPPED)
        dur = 0.0
    tid = loose.tid if isinstance(loose.tid, str) else _number(loose.tid, _EVENT_NUMBERS["tid"], "tid", tally)
    if tid is None:
        tally.note("tid", FIELD_DROPPED)
        tid = -1
    pid = loose.pid if isinstance(loose.pid, str) else _number(loose.pid, _EVENT_NUMBERS["pid"], "pid", tally)
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
    for key, attr in _ARG_FIELDS:
        if key not in args:
            continue
        value = args[key]
        number = _ARG_NUMBERS[key]
        if number is not None:
            value = _number(value, number, f"args.{key}", tally)
        elif key in _RAW_KEYS:  # kept as JSON text, as the typed decoder keeps it
            value = msgspec.Raw(msgspec.json.encode(value)) if isinstance(value, list) else None
        elif key != "Input type":
            value = value if isinstance(value, str) else None
        elif not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            value = None  # Input type: a list of strings
        else:
            value = tuple(value)
        if value is None:
            tally.note(f"args.{key}", FIELD_DROPPED)
        else:
            values[attr] = value
    return Args(**values)


def _number(value: Any, number: Number | None, name: str, tally: Tally) -> Any:
    """``value`` as the field's kind when it is one, or a string or float that reads as one, and in the field's
    range; None when not."""
    assert number is not None
    kind, lo, hi = number
    if isinstance(value, bool):
        return None
    used = False
    if isinstance(value, str):
        try:
            parsed: float | int = (int(value, 16) if kind is int and value.strip()[:2] in ("0x", "0X")
                                   else int(value) if value.strip().lstrip("+-").isdigit() else float(value))
        except ValueError:
            return None
        value, used = parsed, True
    if not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if kind is int and isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if not lo <= value <= hi:
        return None
    if used:
        tally.note(name, USED)
    return kind(value)
