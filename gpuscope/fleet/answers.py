"""What the Prometheus HTTP API answers, read: a range query's series as numpy arrays, or one ``PrometheusError``.

The JSON is decoded with msgspec straight into typed structs (a 1,000-GPU answer is tens of MB); each series'
points are checked for their shape in one pass and read by numpy in another, never as a Python object per point.
Whatever the bytes, the result is series or a ``PrometheusError`` whose message is one printable line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec
import numpy as np

from gpuscope.api.errors import GpuscopeError
from gpuscope.net.http import printable

_VALUE = rb'"(?:[-0-9.eE+]++|[-+]?Inf|NaN)"'
_POINTS = re.compile(rb"\[(?:\[[-0-9.eE+]++," + _VALUE + rb"\](?:,\[[-0-9.eE+]++," + _VALUE + rb"\])*+)?\]")
"""A range query's points as the API writes them, [[unix_s,"value"],...]: the shape, checked in one pass (numpy
then reads the numbers, and rejects any that is not one). _SPACED is the same with whitespace between tokens."""
_PAIR = rb"\[\s*[-0-9.eE+]++\s*,\s*" + _VALUE + rb"\s*\]"
_SPACED = re.compile(rb"\[\s*(?:" + _PAIR + rb"(?:\s*,\s*" + _PAIR + rb")*+)?\s*\]")
_STRIPPED = b'[]" \t\r\n'


MAX_SERIES = 100_000
"""The most series one answer may hold. A GPU is one series a query (a MIG instance one more), so this is ten
times a large fleet; it bounds what an answer of tiny series decodes to (a few hundred bytes each, in Python)."""


class PrometheusError(GpuscopeError):
    """A query failed, or its answer cannot be read; the message is one line."""


class QueryTooLarge(PrometheusError):
    """The server would load too many samples for one query (HTTP 422): the same query over less time may pass."""


class PrometheusTimeout(PrometheusError):
    """The client's deadline passed before every answer was in."""


class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: msgspec.Raw = msgspec.Raw(b"[]")
    """[[unix_s, "value"], ...], parsed by numpy in one pass (a Python object per point would cost 10x the memory)."""


class _Data(msgspec.Struct):
    resultType: str  # noqa: N815 - the API's spelling
    result: list[_Series]


class _Answer(msgspec.Struct):
    status: str
    data: _Data | None = None
    errorType: str | None = None  # noqa: N815
    error: str | None = None
    warnings: list[str] = []


_decoder = msgspec.json.Decoder(_Answer)


@dataclass(frozen=True, eq=False)
class Series:
    """One series of a range query: its labels and its points (seconds since the epoch, float values)."""

    labels: dict[str, str]
    times_s: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class RangeAnswer:
    """A range query's series, and the warnings the server attached (partial data from a store gateway, say)."""

    series: list[Series]
    warnings: tuple[str, ...] = ()


def parse_range(raw: bytes, url: str) -> RangeAnswer:
    """An ``/api/v1/query_range`` answer from ``url``; PrometheusError for an error answer or anything malformed,
    and for one of more than ``MAX_SERIES`` series (counted in the bytes, before decoding)."""
    if raw.count(b'"metric"') > MAX_SERIES:  # a label valued "metric" counts too: the cap errs on the safe side
        raise PrometheusError(f"Prometheus at {url} answered more than {MAX_SERIES:,} series to one query; "
                              f"narrow --selector")
    answer = _decode(raw, url)
    if answer.status != "success":
        raise PrometheusError(f"Prometheus at {url}: {printable(answer.errorType or '', 40) or 'error'}: "
                              f"{printable(answer.error or '')}")
    if answer.data is None or answer.data.resultType != "matrix":
        raise PrometheusError(f"{url}: expected a matrix from query_range, got "
                              f"{printable(answer.data.resultType, 40) if answer.data else 'no data'}")
    return RangeAnswer(series=[_series(s, url) for s in answer.data.result],
                       warnings=tuple(printable(w) for w in answer.warnings))


def error_text(raw: bytes) -> str:
    """What an error answer says, in one printable line: the API's ``error``, else its first line."""
    try:
        answer = _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        text = raw.decode("utf-8", errors="replace").strip()
        return printable(text.splitlines()[0]) if text else ""
    return printable((answer.error or "").replace("\n", " "))


def _decode(raw: bytes, url: str) -> _Answer:
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # msgspec's own depth limit
        raise PrometheusError(f"{url} answered, but not with the Prometheus API's JSON "
                              f"(is it a Prometheus server, and is the URL its base?)") from None


def _series(raw: _Series, url: str) -> Series:
    text = bytes(raw.values)
    if _POINTS.fullmatch(text) is None and _SPACED.fullmatch(text) is None:
        raise PrometheusError(f"{url} answered a series with malformed points ({printable(repr(text[:80]), 100)})")
    points = text.count(b"[") - 1
    try:
        flat = np.fromstring(text.translate(None, _STRIPPED), sep=",") if points else np.empty(0)
    except ValueError:
        flat = np.empty(1)  # caught below, with the other shapes that cannot be pairs
    if flat.size != 2 * points or not np.isfinite(flat[::2]).all():
        raise PrometheusError(f"{url} answered a series with malformed points ({printable(repr(text[:80]), 100)})")
    pairs = flat.reshape(-1, 2)
    return Series(labels=raw.metric, times_s=pairs[:, 0].copy(), values=pairs[:, 1].copy())
