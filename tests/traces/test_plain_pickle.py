"""Plain-data unpickling of a whole pickle (a flight-recorder dump): it reads what PyTorch's flight recorder pickles,
in this process (a small pickle) and in a child process (the C unpickler); anything that would import or call code
is refused before it runs; each budget, spent, is one line."""

from __future__ import annotations

import pickle
import pickletools
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.traces import plain_pickle
from gpuscope.traces.limits import PickleBudget
from gpuscope.traces.plain_pickle import BudgetSpent, NotPlainData, loads_plain
from tests.conftest import SAMPLES

IMPORT_OR_CALL = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2",
                  "EXT4"}
OUTSIDE_THE_FILE = {"PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER"}
BUDGET = PickleBudget(inflated_bytes=2**30, inflation=100, memory_bytes=2**30)
IN_A_CHILD = replace(BUDGET, in_process_bytes=0)
"""Every pickle read by the C unpickler in a child process."""
READERS = {"here": BUDGET, "child": IN_A_CHILD}


def test_the_allowed_opcodes_are_all_but_those_that_import_call_or_fetch() -> None:
    """(BYTEARRAY8 is plain data: a bytearray.)"""
    assert {op.name for op in pickletools.opcodes} - plain_pickle.PLAIN_OPCODES == IMPORT_OR_CALL | OUTSIDE_THE_FILE


@pytest.mark.parametrize("reader", READERS)
def test_the_flight_recorders_own_pickles_read_as_the_standard_unpickler_reads_them(reader: str) -> None:
    for dump in sorted((SAMPLES / "gloo_4rank" / "hang" / "pickle").iterdir()):
        data = dump.read_bytes()
        assert loads_plain(data, budget=READERS[reader]) == pickle.loads(data)  # recorded here: trusted


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(), inner,
                                                                                          max_size=4)
    | st.frozensets(st.integers(), max_size=3),
    max_leaves=20)


@given(plain, st.integers(min_value=4, max_value=pickle.HIGHEST_PROTOCOL))
def test_plain_data_round_trips(value: object, protocol: int) -> None:
    """(Protocols 0 to 3 pickle bytes or sets through a call: refused.)"""
    assert loads_plain(pickle.dumps(value, protocol=protocol), budget=BUDGET) == value


@pytest.mark.parametrize("reader", READERS)
def test_every_kind_of_plain_data_reads_back_through_either_reader(reader: str) -> None:
    """(A bytearray is plain data from protocol 5 on: BYTEARRAY8.)"""
    value = {"a": [1, (2, 3), {4}, frozenset({5}), b"x", 1.5, None, True, -(2**100), "s\u202e"]}
    for protocol in range(4, pickle.HIGHEST_PROTOCOL + 1):
        assert loads_plain(pickle.dumps(value, protocol=protocol), budget=READERS[reader]) == value
    found = loads_plain(pickle.dumps([bytearray(b"y")], protocol=5), budget=READERS[reader])
    assert found == [bytearray(b"y")] and type(found[0]) is bytearray


class _Marker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return Path.touch, (str(self.path),)  # type: ignore[return-value]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_global_is_refused_before_it_is_imported(tmp_path: Path, reader: str, protocol: int) -> None:
    marker = tmp_path / "touched"
    with pytest.raises(NotPlainData, match=r"it names the global \S+[.]\S+(,| \(pickle opcode \w+\),) which "
                                           "imports code; only plain data is read") as caught:
        loads_plain(pickle.dumps([1, _Marker(marker)], protocol=protocol), budget=READERS[reader])
    assert caught.value.refused and "\n" not in str(caught.value)
    assert not marker.exists()


@pytest.mark.parametrize("reader", READERS)
def test_what_lies_outside_the_file_is_refused_as_what_it_is(reader: str) -> None:
    buffered = pickle.dumps(pickle.PickleBuffer(b"abc"), protocol=5, buffer_callback=lambda _: False)
    persistent = b"\x80\x04Pabc\n."
    for data, words in ((buffered, "a buffer outside the file"), (persistent, "an object outside the file")):
        with pytest.raises(NotPlainData, match=words) as caught:
            loads_plain(data, budget=READERS[reader])
        assert caught.value.refused and "imports" not in str(caught.value)


MEMO_9_BYTES = b"\x80\x04Nr\x00\x00\x00\x04."
"""A memo index of 2**26: the standard unpickler makes room for 2**27 slots (1 GiB) for it."""
MEMO_JUMPS = b"\x80\x04N" + b"".join(b"r" + (i << 20).to_bytes(4, "little") for i in range(1, 81)) + b"."
"""404 bytes, each memo index 2**20 slots past the last."""


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("data", "words"), [
    (MEMO_9_BYTES, "memo slot per byte|more memory than the reader's limit of 256 MiB"),
    (MEMO_JUMPS, "memo slot per byte|more memory than the reader's limit of 256 MiB"),
    (b"\x80\x04" + b"]" * 1200 + b"a" * 1199 + b".", "nested deeper than 1,000 levels"),
])
def test_a_small_pickle_that_would_take_much_is_one_line(reader: str, data: bytes, words: str) -> None:
    with pytest.raises(BudgetSpent, match=words) as caught:
        loads_plain(data, budget=READERS[reader])
    assert "\n" not in str(caught.value) and not caught.value.refused


def test_the_memory_of_the_c_unpickler_is_limited() -> None:
    """2 MB of empty sets (216 bytes each: 430 MB in all) past a limit of 8 MiB and 1 byte per byte. (The child's
    address space is capped at its parent's and the limit: the free memory its parent's heap already holds can be
    reused under the cap, and a test worker's can hold tens of MB, so the sets need far more than that.)"""
    data = b"\x80\x04](" + b"\x8f" * 2_000_000 + b"e."
    with pytest.raises(BudgetSpent, match=r"more memory than the reader's limit of 9.91 MiB"):
        loads_plain(data, budget=replace(IN_A_CHILD, memory_per_byte=1, memory_floor_bytes=8 * 2**20))


def test_the_cpu_time_of_the_c_unpickler_is_limited() -> None:
    """Integer keys that all hash alike: the dict's inserts take quadratic time, stopped at one CPU second."""
    keys = b"".join(b"\x8a\x0c" + (k * (2**61 - 1) + 7).to_bytes(12, "little", signed=True) + b"N"
                    for k in range(1, 40_000))
    data = b"\x80\x04}(" + keys + b"u."
    with pytest.raises(BudgetSpent, match="more than the reader's limit of 1 CPU seconds"):
        loads_plain(data, budget=replace(IN_A_CHILD, cpu_s_base=1, cpu_s_per_mib=0))


@pytest.mark.parametrize("reader", READERS)
def test_a_pickle_cut_short_says_so(reader: str) -> None:
    whole = pickle.dumps({"entries": [{"a": i, "b": "x" * 30} for i in range(3_000)]}, protocol=4)
    for cut in (len(whole) - 1, len(whole) // 2, 5):
        with pytest.raises(NotPlainData, match=r"cut short\?") as caught:
            loads_plain(whole[:cut], budget=READERS[reader])
        assert "unpack_from" not in str(caught.value)


@given(st.binary(max_size=200))
@settings(max_examples=30, deadline=None)
def test_any_bytes_through_the_c_unpickler_are_a_value_or_one_line(data: bytes) -> None:
    try:
        loads_plain(b"\x80\x04" + data, budget=IN_A_CHILD)
    except NotPlainData as exc:
        assert "\n" not in str(exc)
