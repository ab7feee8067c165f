"""JSON in and out for the report and the run catalog (msgspec: typed, fast, exact)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

if TYPE_CHECKING:  # loaded to decode a report, not to encode one (`gpuscope hang --json` has no Report)
    from gpuscope.model.report import Report

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


def to_json(obj: Any) -> bytes:
    """Encode a report (or any model dataclass) as compact JSON."""
    return _encoder.encode(obj)


def to_builtins(obj: Any) -> Any:
    """The report as plain dicts and lists, for templates and figures."""
    return msgspec.to_builtins(obj)


def report_from_json(data: bytes | str) -> Report:
    from gpuscope.model.report import Report

    return msgspec.json.decode(data, type=Report)


def from_builtins(obj: Any, type_: type[T]) -> T:
    return msgspec.convert(obj, type=type_)
