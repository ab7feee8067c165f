"""The Nsight Systems benchmark's inputs: the scaled-up export is the sample's job repeated, and its Kineto twin
holds the same events."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from gpuscope.model.trace import Kind
from gpuscope.traces import load
from gpuscope.traces.loader import read_traces
from tests.conftest import load_benchmark

bench = load_benchmark("bench_nsys")


def test_the_scaled_export_repeats_the_job_and_its_kineto_twin_holds_the_same_events(tmp_path: Path) -> None:
    export = tmp_path / "big.sqlite"
    copies = bench.make_export(export, mb=3.0)
    assert copies >= 2 and export.stat().st_size >= 3e6
    with sqlite3.connect(export) as conn:
        kernels = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        distinct = conn.execute("SELECT count(DISTINCT correlationId || ':' || globalPid) "
                                "FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert kernels == 4652 * copies and distinct == kernels  # each copy's launches are its own
    ranks = read_traces(str(export))
    assert [t.rank for t in ranks] == [0, 1]
    bench.make_kineto(export, tmp_path / "kineto")
    twins = load(tmp_path / "kineto").traces
    for a, b in zip(ranks, twins):
        assert a.rank == b.rank
        for kind in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.RUNTIME):
            mine, theirs = a.events.kind == kind, b.events.kind == kind
            assert (a.events.dur_ns[mine] == b.events.dur_ns[theirs]).all()
            names_a = np.array(a.names)[a.events.name_id[mine]]
            assert np.array_equal(names_a, np.array(b.names)[b.events.name_id[theirs]])
