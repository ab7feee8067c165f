"""The streaming plain-data unpickler: it reads what the standard unpickler reads, for every protocol, from any
chunking of the stream; what would import or call code is refused before it runs; a reducer sees each item as it
is added, and what it replaces is replaced in the memo too."""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.traces import pickle_stream
from gpuscope.traces.pickle_stream import DROP, load_stream
from gpuscope.traces.plain_data import BudgetSpent, NotPlainData
from tests import reference
from tests.conftest import SAMPLES

plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(), inner,
                                                                                          max_size=4)
    | st.frozensets(st.integers(), max_size=3) | st.sets(st.text(), max_size=3),
    max_leaves=20)


@given(plain, st.integers(min_value=4, max_value=pickle.HIGHEST_PROTOCOL), st.integers(min_value=1, max_value=64))
@settings(max_examples=300)
def test_plain_data_reads_as_the_standard_unpickler_reads_it(value: object, protocol: int, chunk: int) -> None:
    """Protocols 4 and 5, in any chunking of the stream (earlier protocols pickle sets through a call)."""
    data = pickle.dumps(value, protocol=protocol)
    pickle_stream.CHUNK_BYTES, saved = chunk, pickle_stream.CHUNK_BYTES
    try:
        assert load_stream(io.BytesIO(data)) == pickle.loads(data)
    finally:
        pickle_stream.CHUNK_BYTES = saved


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=15), st.integers(min_value=0, max_value=3))
def test_protocols_0_to_3_read_too(value: object, protocol: int) -> None:
    data = pickle.dumps(value, protocol=protocol)
    assert load_stream(io.BytesIO(data)) == pickle.loads(data)


def test_the_real_snapshots_read_as_the_standard_unpickler_reads_them() -> None:
    for path in sorted((SAMPLES / "memory_snapshots").glob("*.pickle.gz")):
        doc = reference.snapshot(path)
        for protocol in (2, 4, 5):
            data = pickle.dumps(doc, protocol=protocol)
            assert load_stream(io.BytesIO(data)) == doc


class _Runs:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return Path.touch, (str(self.path),)  # type: ignore[return-value]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_code_is_refused_before_it_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "touched"
    data = pickle.dumps({"segments": [], "x": _Runs(marker)}, protocol=protocol)
    with pytest.raises(NotPlainData, match=r"it names the global \S+ \(pickle opcode (STACK_)?GLOBAL\), which imports "
                                           "code; only plain data is read") as caught:
        load_stream(io.BytesIO(data))
    assert caught.value.refused and "\n" not in str(caught.value)
    assert not marker.exists()


@pytest.mark.parametrize("data", [b"", b"\x80\x04", b"\x80\x04]\x94(K\x01", b"\x80\x09N.", b"\x80\x04h\x07.",
                                  b"\x80\x04N\x00.", b"\x80\x04K\x01K\x02.", b"\x80\x04\x8c\x05ab."])
def test_a_damaged_stream_is_one_line_and_not_a_refusal(data: bytes) -> None:
    with pytest.raises(NotPlainData) as caught:
        load_stream(io.BytesIO(data))
    assert not caught.value.refused and "\n" not in str(caught.value)


def test_a_stream_cut_anywhere_says_it_was_cut_short() -> None:
    """Cut in a fixed-size argument read from the buffer (LONG_BINGET, BININT ...) or in a value: never a message
    of the reader's internals (``unpack_from requires a buffer of at least 5 bytes``)."""
    frames = [{"name": f"f{i}", "filename": "a.py", "line": i} for i in range(300)]
    whole = pickle.dumps([[str(i) for i in range(260)], *({"a": 70_000 + i, "f": frames[i * 7 % 20], "s": "x" * i}
                                                          for i in range(40)), -5, 300, 7],
                         protocol=4)  # LONG_BINGET, BININT, BININT2, BININT1, BINGET ... at the cut
    for cut in range(1, len(whole)):
        with pytest.raises(NotPlainData, match=r"cut short\?"):
            load_stream(io.BytesIO(whole[:cut]), size_bytes=cut if cut % 2 else None)  # size known, or not


def test_a_memo_index_past_the_bytes_read_is_refused_before_the_memo_grows() -> None:
    for data in (b"\x80\x04Nr\x00\x00\x00\x04.",  # 9 bytes, index 2**26
                 b"\x80\x04N" + b"".join(b"r" + (i << 20).to_bytes(4, "little") for i in range(1, 81)) + b".",
                 b"\x80\x02Np99999\n."):
        with pytest.raises(BudgetSpent, match="one memo slot per byte read"):
            load_stream(io.BytesIO(data))
    assert load_stream(io.BytesIO(b"\x80\x02Np3\n0g3\n.")) is None  # a gap the bytes read cover: read


def test_a_line_without_its_end_is_read_to_the_end_once() -> None:
    """(Each read used to scan the line again from its start: 2.3 s for 64 MiB.)"""
    calls = []

    class Counting(io.BytesIO):
        def read(self, n: int | None = -1) -> bytes:
            calls.append(n)
            return super().read(n)

    with pytest.raises(NotPlainData, match="a text value without its end of line"):
        load_stream(Counting(b"I" + b"1" * (8 << 20)))
    assert len(calls) < 10


def test_bytearray8_is_plain_data() -> None:
    assert load_stream(io.BytesIO(pickle.dumps(bytearray(b"ab"), protocol=5))) == bytearray(b"ab")


def test_a_reducer_replaces_items_and_their_memo_slots() -> None:
    """A frame dict shared between two lists is made once: replaced on its first use, the later reference (a memo
    lookup) gets the replacement; a dropped item is left out of its list."""
    frame = {"name": "f", "filename": "a.py", "line": 1}
    doc = {"a": [frame, {"drop": 1}], "b": [frame]}
    seen: list[Any] = []

    def reduce(container: Any, key: Any, item: Any) -> Any:
        seen.append(item)
        if isinstance(item, dict) and "drop" in item:
            return DROP
        return ("frame", item["line"]) if isinstance(item, dict) and "filename" in item else item

    out = load_stream(io.BytesIO(pickle.dumps(doc, protocol=4)), reduce=reduce)
    assert out == {"a": [("frame", 1)], "b": [("frame", 1)]}
    assert sum(1 for s in seen if isinstance(s, dict) and "filename" in s) == 1
