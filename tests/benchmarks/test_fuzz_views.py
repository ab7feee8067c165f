"""Property: `gpuscope ops`, `timeline` and `diff` over mutated traces (some in the 2021 schema), the commands that
read a saved run over a damaged store, and every dashboard route over a damaged store end as an answer or one
line: never a traceback, an internal error or an HTTP 500.

Hypothesis draws the inputs through ``st.randoms()`` from the generators benchmarks/fuzz_readers.py runs thousands
of times (``ops``, ``timeline``, ``diff``, ``store``, ``dashboard``), so a failure here shrinks; each runs as the
fuzzer runs it, in-process through typer's runner and the one-line handling of ``gpuscope.cli.main`` (the dashboard
through its Flask test client).
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import load_benchmark

fr = load_benchmark("fuzz_readers")
fs = fr.fs


def outcome(case: object) -> tuple[str, str]:
    folder = Path(tempfile.mkdtemp(prefix="gpuscope-fuzz-views-"))
    try:
        return fr.run_in_process(case, folder)  # type: ignore[no-any-return]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def ends_well(reader: str, rng: random.Random) -> None:
    done, line = outcome(fr.READERS[reader].make(rng))
    assert done in ("result", "user_error"), line
    assert "\n" not in line.strip()


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCOPE_MAX_TRACE_GIB", str(fr.TRACE_CAP_GIB))


QUICK = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])
SLOW = settings(QUICK, max_examples=10)


@QUICK
@given(rng=st.randoms(use_true_random=False))
def test_ops_over_mutated_traces(rng: random.Random) -> None:
    ends_well("ops", rng)


@QUICK
@given(rng=st.randoms(use_true_random=False))
def test_timeline_over_mutated_traces(rng: random.Random) -> None:
    ends_well("timeline", rng)


@QUICK
@given(rng=st.randoms(use_true_random=False))
def test_diff_over_mutated_traces(rng: random.Random) -> None:
    ends_well("diff", rng)


@QUICK
@given(rng=st.randoms(use_true_random=False))
def test_commands_over_a_damaged_store(rng: random.Random) -> None:
    ends_well("store", rng)


@SLOW
@given(rng=st.randoms(use_true_random=False))
def test_every_dashboard_route_over_a_damaged_store(rng: random.Random) -> None:
    ends_well("dashboard", rng)


def test_the_store_inputs_damage_the_store_and_leave_the_base_as_it_was() -> None:
    base = dict(fs.base_store())
    changed = 0
    for i in range(20):
        files, _, _ = fs.store_case(random.Random(i))
        changed += {k.removeprefix("home/"): v for k, v in files.items()} != base
    assert changed >= 15  # a damage may miss now and then (a field set to what it held, a file already gone)
    assert fs.base_store() == base
    assert fs.store_case(random.Random(3)) == fs.store_case(random.Random(3))


@pytest.mark.parametrize("reader", ["ops", "timeline", "diff", "store", "dashboard"])
def test_each_view_reader_runs_in_the_fuzzers_own_worker(reader: str) -> None:
    """As the benchmark runs them: in a worker started from a forkserver (its session and inputs pickled to it, not
    inherited by a fork), under the address-space limit, each input ending as an answer or one line."""
    tally = fr.fuzz(reader, count=3, seed=5, bound_s=120)
    assert tally.counts["crash"] == tally.counts["hang"] == 0, tally.failures
    assert sum(tally.counts.values()) == 3 and tally.next == 3
