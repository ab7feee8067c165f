"""Plain-data unpickling: it reads what PyTorch's flight recorder pickles, and anything that would import or call
code is refused before it runs, by the opcode check and again by the unpickler."""

from __future__ import annotations

import pickle
import pickletools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscope.traces import plain_pickle
from gpuscope.traces.plain_pickle import NotPlainData, loads_plain
from tests.conftest import SAMPLES

CALLS_OR_IMPORTS = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2",
                    "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER", "BYTEARRAY8"}
"""Every pickle opcode that names, calls or fetches something outside the stream (or builds a mutable buffer)."""


def test_the_allowed_opcodes_are_all_but_those_that_import_or_call() -> None:
    assert {op.name for op in pickletools.opcodes} - plain_pickle.PLAIN_OPCODES == CALLS_OR_IMPORTS


def test_the_flight_recorders_own_pickles_read_as_the_standard_unpickler_reads_them() -> None:
    for dump in sorted((SAMPLES / "gloo_4rank" / "hang" / "pickle").iterdir()):
        data = dump.read_bytes()
        assert loads_plain(data) == pickle.loads(data)  # a file recorded here: trusted for the comparison


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(), inner,
                                                                                          max_size=4),
    max_leaves=20)


@given(plain, st.integers(min_value=0, max_value=pickle.HIGHEST_PROTOCOL))
def test_plain_data_round_trips(value: object, protocol: int) -> None:
    assert loads_plain(pickle.dumps(value, protocol=protocol)) == value


@given(st.binary(), st.integers(min_value=3, max_value=pickle.HIGHEST_PROTOCOL))
def test_bytes_round_trip_from_protocol_3(value: bytes, protocol: int) -> None:
    """(Protocols 0 to 2 pickle bytes through a call to ``codecs.encode``: refused.)"""
    assert loads_plain(pickle.dumps(value, protocol=protocol)) == value


class _Marker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return Path.touch, (str(self.path),)  # type: ignore[return-value]


def test_the_unpickler_refuses_globals_even_past_the_opcode_check(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "touched"
    data = pickle.dumps([1, _Marker(marker)])
    with pytest.raises(NotPlainData, match="REDUCE|GLOBAL"):
        loads_plain(data)
    monkeypatch.setattr(plain_pickle, "PLAIN_OPCODES", frozenset(op.name for op in pickletools.opcodes))
    with pytest.raises(NotPlainData, match="names pathlib"):
        loads_plain(data)
    assert not marker.exists()
