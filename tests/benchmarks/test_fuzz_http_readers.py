"""benchmarks/fuzz_http_readers.py at a small size: its inputs reach both outcomes of each reader without a crash or a
hang, are made again from their seed alone, a run resumes where it stopped, and a reader that crashes or hangs is
counted as one (so the long run's zeros mean something)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuscope.collectors import dcgm
from tests.conftest import load_benchmark

fz = load_benchmark("fuzz_http_readers")


@pytest.mark.parametrize(("reader", "count"), [("dcgm", 60), ("prometheus", 25)])
def test_inputs_reach_results_and_user_errors_and_nothing_else(reader: str, count: int) -> None:
    tally = fz.fuzz(reader, count=count, seed=5, bound_s=60)
    assert tally.failures == [] and tally.counts["crash"] == tally.counts["hang"] == 0
    assert tally.counts["result"] > 0 and tally.counts["user_error"] > 0
    assert sum(tally.counts.values()) == count == tally.next


def test_an_input_is_made_again_from_its_seed_and_a_run_resumes(tmp_path: Path) -> None:
    assert fz.make_case("prometheus", 7, 3) == fz.make_case("prometheus", 7, 3)
    assert fz.make_case("dcgm", 7, 3) != fz.make_case("dcgm", 7, 4)
    whole = fz.fuzz("dcgm", count=20, seed=7)
    part = fz.fuzz("dcgm", count=8, seed=7)
    fz.fuzz("dcgm", count=20, seed=7, tally=part)
    assert part.next == 20 and part.counts == whole.counts


def test_a_crash_and_a_hang_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker is forked from this process (start_method="fork"), so a reader broken here is broken there."""
    def broken(*args: object) -> object:
        raise KeyError("gpu")

    monkeypatch.setattr(dcgm, "_parse", broken)
    crashed = fz.fuzz("dcgm", count=3, seed=1, start_method="fork")
    assert crashed.counts["crash"] > 0
    assert crashed.failures[0]["line"].startswith("KeyError: 'gpu' at test_fuzz_http_readers.py:")

    def stuck(*args: object) -> object:
        time.sleep(30)
        raise AssertionError("not reached")

    monkeypatch.setattr(dcgm, "_parse", stuck)
    hung = fz.fuzz("dcgm", count=1, seed=1, bound_s=1, start_method="fork")
    assert hung.counts["hang"] == 1
