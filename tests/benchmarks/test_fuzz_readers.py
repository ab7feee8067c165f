"""benchmarks/fuzz_readers.py: mutated copies of a bundled trace end as a report or one line, never a traceback
or a hang; the harness tells a crash, a hang and a user error apart, and resumes where it stopped.

The default run makes 60 copies in-process and 5 through the real command; the benchmark runs 300 through the
real command (``--copies 300``) and 10,000 per reader (docs/reliability.md).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import load_benchmark

fr = load_benchmark("fuzz_readers")
fi = fr.fi


def test_sixty_mutated_copies_of_a_bundled_trace_end_as_a_report_or_one_line() -> None:
    tally = fr.fuzz("copies", count=60, seed=21, bound_s=60)
    assert tally.counts["crash"] == tally.counts["hang"] == 0, tally.failures
    assert tally.counts["result"] > 0 and tally.counts["user_error"] > 0  # both kinds of input were made
    assert sum(tally.counts.values()) == 60 and tally.next == 60


def test_mutated_copies_through_the_real_command() -> None:
    tally = fr.copies(5, seed=21, bound_s=120)
    assert tally.counts["crash"] == tally.counts["hang"] == 0, tally.failures
    assert tally.counts["result"] + tally.counts["user_error"] == 5


def test_an_input_is_made_again_from_its_seed_alone() -> None:
    assert fr.make_case("trace_gz", 21, 17) == fr.make_case("trace_gz", 21, 17)
    assert fr.make_case("trace_gz", 21, 17) != fr.make_case("trace_gz", 21, 18)


def _outcome(case: object, folder: Path) -> tuple[str, str]:
    index = int(case.args[0])  # type: ignore[attr-defined]
    if index == 1:
        raise ZeroDivisionError("boom")  # an error outside the command: a crash, and the worker goes on
    if index == 2:
        time.sleep(60)
    return ("user_error", "x: bad") if index == 3 else ("result", "")


@contextmanager
def _known_outcomes(reader: str, seed: int) -> Iterator[object]:
    """In the worker (a fresh process: nothing of this one's state): inputs whose outcome is known."""
    fr.make_case = lambda reader, seed, index: fr.Case({}, (str(index),))
    fr.run_in_process = _outcome
    with fr._session(reader, seed) as run_one:
        yield run_one


def test_the_harness_tells_a_crash_a_hang_and_a_user_error_apart() -> None:
    tally = fr.fuzzing.fuzz("prices", _known_outcomes, fr.Tally(), count=5, seed=1, bound_s=3)
    assert tally.counts == {"result": 2, "user_error": 1, "crash": 1, "hang": 1}
    assert [(f["index"], f["outcome"]) for f in tally.failures] == [(1, "crash"), (2, "hang")]
    assert "ZeroDivisionError: boom" in tally.failures[0]["line"] and tally.errors == {"x: bad": 1}


def test_a_run_resumes_where_its_state_stopped() -> None:
    first = fr.fuzz("gate_config", count=4, seed=3, bound_s=60)
    resumed = fr.fuzz("gate_config", count=8, seed=3, bound_s=60, tally=first)
    assert resumed.next == 8 and sum(resumed.counts.values()) == 8
    assert fr.table({"seed": 3, "readers": {"gate_config": resumed.__dict__}}).count("\n") == 2


def test_the_generators_draw_from_the_rng_alone() -> None:
    a = fi.mutated_trace(random.Random(5), base=fi.COPIES_TRACE)
    b = fi.mutated_trace(random.Random(5), base=fi.COPIES_TRACE)
    assert a == b and fi.mutated_toml(random.Random(2), fi.GATE_CONFIG) == fi.mutated_toml(random.Random(2),
                                                                                           fi.GATE_CONFIG)
