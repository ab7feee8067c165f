"""benchmarks/fuzz_http_readers.py at a small size: its inputs reach both outcomes of each reader without a crash or a
hang, are made again from their seed alone, a run resumes where it stopped, and a reader that crashes or hangs is
counted as one (so the long run's zeros mean something)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
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


def _broken(*args: object) -> object:
    raise KeyError("gpu")


def _stuck(*args: object) -> object:
    time.sleep(30)
    raise AssertionError("not reached")


@contextmanager
def _parsing_with(parse: Callable[..., object], reader: str, seed: int) -> Iterator[object]:
    """In the worker (a fresh process: nothing of this one's state): the DCGM reader's parser replaced."""
    dcgm._parse = parse
    with fz._session(reader, seed) as run_one:
        yield run_one


def test_a_crash_and_a_hang_are_counted() -> None:
    crashed = fz.fuzzing.fuzz("dcgm", partial(_parsing_with, _broken), fz.Tally(), count=3, seed=1)
    assert crashed.counts["crash"] == 3
    assert crashed.failures[0]["line"].startswith("KeyError: 'gpu' at test_fuzz_http_readers.py:")

    hung = fz.fuzzing.fuzz("dcgm", partial(_parsing_with, _stuck), fz.Tally(), count=1, seed=1, bound_s=1)
    assert hung.counts["hang"] == 1
