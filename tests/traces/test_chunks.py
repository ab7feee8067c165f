"""Chunks of raw events cut out of the text in place decode to the same events as joined copies."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest

from gpuscope.traces.chunks import chunks

_Top = msgspec.defstruct("Top", [("traceEvents", list[msgspec.Raw])])


@pytest.mark.parametrize("separator", [",", " ,\n  ", ",\n"])
@pytest.mark.parametrize("size", [1, 2, 3, 100])
def test_in_place_chunks_match_joined_ones(separator: str, size: int) -> None:
    events = [{"ph": "X", "name": f"k{i} [{i}], {{x}}", "args": {"v": [i, {"w": i}]}} for i in range(7)]
    text = ('{"a": [1], "traceEvents": [ ' + separator.join(json.dumps(e) for e in events) + " ]}").encode()
    writable = np.frombuffer(bytearray(text), dtype=np.uint8)
    readonly = bytes(text)
    decoded = []
    for buffer in (writable, readonly):
        raws = msgspec.json.decode(buffer.data if isinstance(buffer, np.ndarray) else buffer, type=_Top).traceEvents
        got = [(msgspec.json.decode(part_text), len(part)) for part_text, part in chunks(buffer, raws, size)]
        decoded.append(got)
    assert decoded[0] == decoded[1]
    assert [e for part, _ in decoded[0] for e in part] == events
    assert [n for _, n in decoded[0]] == [min(size, 7 - s) for s in range(0, 7, size)]


def test_no_events_no_chunks() -> None:
    text = np.frombuffer(bytearray(b'{"traceEvents": []}'), dtype=np.uint8)
    assert list(chunks(text, msgspec.json.decode(text.data, type=_Top).traceEvents, 5)) == []
