"""Chunks of a trace's raw events as JSON arrays, cut out of the file's own text where it can be written.

``msgspec.Raw`` values are views into the decoded buffer, and consecutive events of ``traceEvents`` are
separated by at least one byte (a comma, or the array's brackets). Writing ``[`` just before a chunk's first
event and ``]`` just after its last turns that stretch of the text into an array of the chunk's events, so
no bytes are copied; chunks are cut in order, so a separator one chunk ended on is free to start the next.
Text that is not a writable array is joined into a new array instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import msgspec
import numpy as np

from gpuscope.traces.gunzip import Buffer

_OPEN, _CLOSE = ord("["), ord("]")


def chunks(text: Buffer, raws: Sequence[msgspec.Raw],
           size: int) -> Iterator[tuple[bytes | memoryview, Sequence[msgspec.Raw]]]:
    """Each run of ``size`` events of ``raws`` (views into ``text``) as (JSON array text, those events)."""
    base = _address(text)
    for start in range(0, len(raws), size):
        part = raws[start:start + size]
        lo = _address(part[0]) - base - 1
        hi = _address(part[-1]) - base + len(part[-1])
        if isinstance(text, np.ndarray) and text.flags.writeable and 0 <= lo < hi < len(text):  # views into it
            text[lo] = _OPEN
            text[hi] = _CLOSE
            yield text.data[lo:hi + 1], part
        else:
            yield b"[" + b",".join(part) + b"]", part


def _address(buffer: Buffer | msgspec.Raw) -> int:
    return int(np.frombuffer(buffer, dtype=np.uint8).ctypes.data) if len(buffer) else 0
