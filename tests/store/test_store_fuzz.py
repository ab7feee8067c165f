"""Fuzzing the readers of what the store saved: blocks of samples, report rows, catalog rows and saved traces,
each made by the store's own writers and then damaged (cut, bytes flipped, numbers and names changed, values of
the wrong type). Property: a result that agrees with what was stored, or one ``StoreError`` line naming the
run and the file (the command line prints it as is, the API raises it as ``GpuscopeError``); never another
exception, and never a damaged row that hides the others."""

from __future__ import annotations

import io
import json
import sqlite3
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from gpuscope.api.analysis import user_errors
from gpuscope.api.errors import GpuscopeError
from gpuscope.dashboards.data import RunReader
from gpuscope.model import schema as m
from gpuscope.model.codec import to_json
from gpuscope.model.run import RunMeta
from gpuscope.store import RecordDamaged, Store, StoreError
from gpuscope.store.blocks import BlockError, pack, unpack
from gpuscope.store.tracefile import load_traces, save_traces
from gpuscope.traces import read_trace
from tests import builders as b
from tests.figures.fixtures import full_report

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
METRICS = (m.GPU_UTIL, m.GPU_POWER_W, m.PROC_CPU_CORES, m.HOST_CPU)
GOOD, BAD = "20260101-000000-900d00", "20260101-000001-bad000"

rows = st.lists(st.tuples(st.integers(-(2**62), 2**62), st.sampled_from([m.NVML, m.HOST, m.DCGM]),
                          st.integers(-1, 7), st.integers(-1, 2**31), st.sampled_from(METRICS),
                          st.floats(allow_nan=True, allow_infinity=True)), min_size=1, max_size=20)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                         max_size=3), max_leaves=8)
sql_values = st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=30) | st.binary(max_size=30)


@st.composite
def damaged(draw: st.DrawFn, good: bytes) -> Any:
    """``good`` (bytes a writer made), damaged one way, or left whole."""
    how = draw(st.sampled_from(["whole", "cut", "flip", "splice", "random", "other type"]))
    if how == "cut":
        return good[: draw(st.integers(0, max(len(good) - 1, 0)))]
    if how == "flip" and good:
        data = bytearray(good)
        for at in draw(st.lists(st.integers(0, len(good) - 1), min_size=1, max_size=8)):
            data[at] = draw(st.integers(0, 255))
        return bytes(data)
    if how == "splice":
        at = draw(st.integers(0, len(good)))
        return good[:at] + draw(st.binary(max_size=40)) + good[at:]
    if how == "random":
        return draw(st.binary(max_size=200))
    if how == "other type":
        return draw(sql_values)
    return good


@st.composite
def blocks(draw: st.DrawFn) -> list[tuple[Any, Any, Any]]:
    """Blocks as the store packs them, each with its count, name table or data possibly damaged."""
    out = []
    for batch in draw(st.lists(rows, min_size=1, max_size=4)):
        block = pack(batch)
        n = draw(st.sampled_from([block.n, block.n + 1, block.n - 1, 0]) | sql_values) \
            if draw(st.booleans()) else block.n
        names = draw(damaged(block.names.encode()) | json_values.map(json.dumps))
        names = names.decode("utf-8", "replace") if isinstance(names, bytes) else names
        out.append((n, names if draw(st.booleans()) else block.names, draw(damaged(block.data))))
    return out


@given(blocks())
@FUZZ
def test_unpacking_damaged_blocks_gives_the_samples_or_a_block_error(stored: list[tuple[Any, Any, Any]]) -> None:
    try:
        cols = unpack(stored)
    except BlockError as exc:
        assert str(exc).startswith("block ") and "\n" not in str(exc)
        return
    total = sum(n for n, _, _ in stored)
    assert all(len(col) == total for col in cols.values())
    assert set(cols["metric"]) <= m.METRICS and set(cols["source"]) <= m.SOURCES  # only names a collector writes



def test_every_name_the_schema_defines_unpacks_and_another_is_damage() -> None:
    rows = [(1, source, 0, 1, metric, 0.5) for source in sorted(m.SOURCES)
            for metric in sorted(m.METRICS) + [m.STOPPED_PREFIX + "power"]]
    block = pack(rows)
    cols = unpack([(block.n, block.names, block.data)])
    assert len(cols["metric"]) == len(rows) and set(cols["source"]) == m.SOURCES
    for table in ({"sources": [" nvml"], "metrics": [m.GPU_UTIL]}, {"sources": [m.NVML], "metrics": ["gpu.utli"]},
                  {"sources": [m.NVML], "metrics": [m.STOPPED_PREFIX + "<power>"]}):
        one = pack([(1, m.NVML, 0, 1, m.GPU_UTIL, 0.5)])
        with pytest.raises(BlockError, match="which no collector writes"):
            unpack([(one.n, json.dumps(table), one.data)])

@contextmanager
def store_with(good_rows: list[tuple[Any, ...]]) -> Iterator[Store]:
    """A real store holding a good run (with ``good_rows``) and a second run for the damaged data."""
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp)) as store:
        for run_id in (GOOD, BAD):
            store.create_run(RunMeta(id=run_id, name=run_id, kind="attach", status="complete", started_ns=1))
        store.add_samples(GOOD, good_rows)
        store.save_report(GOOD, full_report(GOOD))
        yield store


def raw(store: Store, sql: str, *params: Any) -> None:
    """Write as a damaged disk or another program would: past the store's own writers."""
    db = sqlite3.connect(store.path)
    with db:
        db.execute(sql, params)
    db.close()


def one_line_about(exc: StoreError, store: Store, run_id: str) -> None:
    assert isinstance(exc, RecordDamaged) and "\n" not in str(exc)
    assert run_id in str(exc) and str(store.path.parent) in str(exc)
    with pytest.raises(GpuscopeError, match=run_id), user_errors():  # the API's one type, same line
        raise exc


@given(blocks(), rows)
@FUZZ
def test_a_run_with_damaged_blocks_reads_or_says_so_and_the_others_read(stored: list[tuple[Any, Any, Any]],
                                                                      good_rows: list[tuple[Any, ...]]) -> None:
    with store_with(good_rows) as store:
        kept = []
        for n, names, data in stored:
            try:
                raw(store, "INSERT INTO sample_blocks (run_id, first_ns, last_ns, n, names, data)"
                    " VALUES (?,?,?,?,?,?)", BAD, 0, 2**62, n, names, data)
                kept.append(n)
            except sqlite3.IntegrityError:
                pass  # a NULL where the table forbids one: SQLite itself refuses that row
        try:
            frame = store.samples(BAD)
            assert len(frame) == sum(kept) and frame["ts_ns"].is_monotonic_increasing
        except StoreError as exc:
            one_line_about(exc, store, BAD)
        assert len(store.samples(GOOD)) == len(good_rows)


@given(st.data())
@FUZZ
def test_a_damaged_report_row_reads_or_says_so_and_the_others_read(data: st.DataObject) -> None:
    good = to_json(full_report(BAD))
    doc = json.loads(good)
    if data.draw(st.booleans()):  # damage inside valid JSON: one field of the wrong shape
        key = data.draw(st.sampled_from(sorted(doc)))
        doc[key] = data.draw(json_values)
        stored: Any = json.dumps(doc).encode()
    else:
        # bytes damage (NULL and NaN, which SQLite stores as NULL, aside: the table refuses them), or nesting
        # past any stack
        stored = data.draw(damaged(good).filter(lambda v: v is not None and v == v) | st.just(b"[" * 100_000))
    with store_with([(1, m.NVML, 0, -1, m.GPU_UTIL, 0.5)]) as store:
        raw(store, "INSERT INTO reports (run_id, created_ns, report) VALUES (?, 1, ?)", BAD, stored)
        try:
            report = store.load_report(BAD)
            assert report is not None
        except StoreError as exc:
            one_line_about(exc, store, BAD)
        view = RunReader(store).runs()  # the dashboard's runs list: every run, and the one line
        assert {meta.id for meta, _ in view.runs} == {GOOD, BAD}
        assert dict((meta.id, s) for meta, s in view.runs)[GOOD] is not None
        assert store.load_report(GOOD) is not None


@given(st.lists(st.tuples(st.sampled_from(["name", "kind", "status", "started_ns", "ended_ns", "host", "command",
                                           "pid", "gpus", "price_source", "tags"]),
                          sql_values | json_values.map(json.dumps)), min_size=1, max_size=4))
@FUZZ
def test_a_damaged_catalog_row_is_named_and_the_others_are_listed(changes: list[tuple[str, Any]]) -> None:
    with store_with([(1, m.NVML, 0, -1, m.GPU_UTIL, 0.5)]) as store:
        for column, value in changes:
            try:
                raw(store, f"UPDATE runs SET {column} = ? WHERE id = ?", value, BAD)
            except sqlite3.IntegrityError:
                pass  # a NOT NULL column keeps its value, as SQLite itself refuses the change
        listing = store.listing()
        ids = {meta.id for meta in listing.runs}
        assert GOOD in ids
        if BAD in ids:
            assert not listing.problems
        else:
            (line,) = listing.problems
            assert BAD in line and str(store.path) in line
            with pytest.raises(RecordDamaged, match=BAD):
                store.get_meta(BAD)


@pytest.fixture(scope="module")
def saved_trace(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("trace")
    path = b.write(folder / "t.json", b.trace(b.simple_training(steps=2)))
    save_traces(folder, [read_trace(path)])
    return (folder / "rank00000.npz").read_bytes()


@given(st.data())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_damaged_saved_trace_loads_or_says_so(saved_trace: bytes, data: st.DataObject) -> None:
    stored = data.draw(damaged(saved_trace).filter(lambda v: isinstance(v, bytes)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank00000.npz"
        path.write_bytes(stored)
        try:
            (trace,) = load_traces(Path(tmp), run_id=BAD)
            assert len(trace.events.name_id) == len(trace.events) and trace.names
        except RecordDamaged as exc:
            assert str(path) in str(exc) and BAD in str(exc) and "\n" not in str(exc)



@pytest.mark.parametrize(("offset", "value", "said"), [(8, 0x0001, "encrypted"),  # the entry's flags
                                                       (10, 99, "compression method")])
def test_a_saved_trace_whose_zip_entry_cannot_be_opened_says_so(saved_trace: bytes, tmp_path: Path, offset: int,
                                                                value: int, said: str) -> None:
    """Found by the fuzzing above: zipfile raises RuntimeError or NotImplementedError for these."""
    central = saved_trace.index(b"PK\x01\x02")  # the first entry's central directory header
    damaged = bytearray(saved_trace)
    damaged[central + offset:central + offset + 2] = value.to_bytes(2, "little")
    (tmp_path / "rank00000.npz").write_bytes(bytes(damaged))
    with pytest.raises(RecordDamaged, match=said):
        load_traces(tmp_path, run_id=BAD)

@given(json_values)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_saved_trace_with_a_damaged_header_loads_or_says_so(saved_trace: bytes, header: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank00000.npz"
        path.write_bytes(saved_trace)
        with np.load(path) as npz:
            arrays = {k: npz[k] for k in npz.files}
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        np.savez(path, **arrays)
        try:
            load_traces(Path(tmp), run_id=BAD)
        except RecordDamaged as exc:
            assert str(path) in str(exc) and "\n" not in str(exc)


def test_a_saved_array_that_claims_a_huge_shape_is_refused_before_it_is_allocated(tmp_path: Path) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<i8", "fortran_order": False, "shape": (10**11,)})
    with zipfile.ZipFile(tmp_path / "rank00000.npz", "w") as archive:  # a valid archive, CRCs and all
        archive.writestr("e_ts_ns.npy", header.getvalue() + bytes(64))
    with pytest.raises(RecordDamaged, match="claims 800000000000 bytes"):
        load_traces(tmp_path, run_id=BAD)
